package notify

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"google.golang.org/api/option"
)

// Publisher publishes one message to a Pub/Sub topic and returns once the
// server has acknowledged it, with the id the server gave it, or failed.
// The scheduler holds one, for notifications and pubsub targets.
type Publisher interface {
	Publish(ctx context.Context, topic string, m Message) (id string, err error)
}

// Message is what Publisher sends.
type Message struct {
	Data       []byte
	Attributes map[string]string
	// OrderingKey orders the messages that share it, for subscriptions
	// with message ordering on; empty sends the message unordered.
	OrderingKey string
	// Timeout bounds the client's retries of this message, in the
	// background too: a message given up on within the caller's deadline
	// must not land long after it, when the caller has already counted it
	// failed and may have published again. 0 is the client's default.
	Timeout time.Duration
}

// PubSub is the Publisher over Google's Pub/Sub client. It opens one client
// per project and one publisher per topic, on first use, so a deployment
// that never names a topic never dials Pub/Sub. PUBSUB_EMULATOR_HOST, when
// set, points the client at an emulator, as the library documents; opts are
// passed to every client (baton local points them at its in-memory fake).
type PubSub struct {
	opts []option.ClientOption

	mu      sync.Mutex
	clients map[string]*pubsub.Client
	pubs    map[string]*pubsub.Publisher
}

// NewPubSub returns a PubSub whose clients get opts.
func NewPubSub(opts ...option.ClientOption) *PubSub {
	return &PubSub{opts: opts, clients: map[string]*pubsub.Client{}, pubs: map[string]*pubsub.Publisher{}}
}

// Publish implements Publisher. The message is sent at once (no batching
// delay): an event or a run is one message, and its delivery is settled on
// the answer. The client retries what Pub/Sub answers as retryable until
// ctx ends; a message it gave up on, or whose answer ctx cut off, is an
// error, never a success, even though it may have landed.
func (p *PubSub) Publish(ctx context.Context, topic string, m Message) (string, error) {
	pub, err := p.publisher(ctx, topic, m.Timeout)
	if err != nil {
		return "", err
	}
	id, err := pub.Publish(ctx, &pubsub.Message{Data: m.Data, Attributes: m.Attributes, OrderingKey: m.OrderingKey}).Get(ctx)
	if err != nil {
		if m.OrderingKey != "" {
			// An ordered publisher stops the key after a failure until it
			// is resumed; the next run's message must not fail for it.
			pub.ResumePublish(m.OrderingKey)
		}
		return "", fmt.Errorf("pubsub: publish to %s: %w", topic, err)
	}
	return id, nil
}

func (p *PubSub) publisher(ctx context.Context, topic string, timeout time.Duration) (*pubsub.Publisher, error) {
	parts := strings.Split(topic, "/")
	if len(parts) != 4 || parts[0] != "projects" || parts[2] != "topics" {
		return nil, fmt.Errorf("pubsub: %q is not projects/PROJECT/topics/TOPIC", topic)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// One publisher per topic and timeout: the timeout is a publisher's
	// setting, not a message's.
	key := topic + "|" + timeout.String()
	if pub, ok := p.pubs[key]; ok {
		return pub, nil
	}
	c, ok := p.clients[parts[1]]
	if !ok {
		var err error
		// The client lives as long as p, not as long as this request.
		if c, err = pubsub.NewClient(context.WithoutCancel(ctx), parts[1], p.opts...); err != nil {
			return nil, fmt.Errorf("pubsub: client for project %s: %w", parts[1], err)
		}
		p.clients[parts[1]] = c
	}
	pub := c.Publisher(topic)
	pub.PublishSettings.CountThreshold = 1 // send each message now
	// Ordering keys are honoured only by a publisher with ordering on; a
	// message without a key is sent as before.
	pub.EnableMessageOrdering = true
	if timeout > 0 {
		pub.PublishSettings.Timeout = timeout
	}
	p.pubs[key] = pub
	return pub, nil
}

// Close stops the publishers and closes the clients.
func (p *PubSub) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pub := range p.pubs {
		pub.Stop()
	}
	var first error
	for _, c := range p.clients {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	p.pubs, p.clients = map[string]*pubsub.Publisher{}, map[string]*pubsub.Client{}
	return first
}
