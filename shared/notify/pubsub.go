package notify

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"cloud.google.com/go/pubsub/v2"
	"google.golang.org/api/option"
)

// Publisher publishes one notification to a Pub/Sub topic and returns once
// the server has it (or failed). The scheduler holds one.
type Publisher interface {
	Publish(ctx context.Context, topic string, data []byte, attrs map[string]string) error
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
// delay): an event is one message, and its delivery is settled on the
// answer.
func (p *PubSub) Publish(ctx context.Context, topic string, data []byte, attrs map[string]string) error {
	pub, err := p.publisher(ctx, topic)
	if err != nil {
		return err
	}
	if _, err := pub.Publish(ctx, &pubsub.Message{Data: data, Attributes: attrs}).Get(ctx); err != nil {
		return fmt.Errorf("pubsub: publish to %s: %w", topic, err)
	}
	return nil
}

func (p *PubSub) publisher(ctx context.Context, topic string) (*pubsub.Publisher, error) {
	parts := strings.Split(topic, "/")
	if len(parts) != 4 || parts[0] != "projects" || parts[2] != "topics" {
		return nil, fmt.Errorf("pubsub: %q is not projects/PROJECT/topics/TOPIC", topic)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if pub, ok := p.pubs[topic]; ok {
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
	pub.PublishSettings.CountThreshold = 1 // send each event now
	p.pubs[topic] = pub
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
