package schedule

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
)

// Event is something about a run that a schedule's notify block can ask to
// be told of. It is stored and sent as its string ("failed").
type Event string

// Notification events.
const (
	EventFailed    Event = "failed"    // a run ended failed (its target failed, or its heartbeat stopped)
	EventSkipped   Event = "skipped"   // overlap skip recorded a fire time skipped, with its reason
	EventMisfire   Event = "misfire"   // buffer_one collapsed a busy fire time into a misfire run
	EventRecovered Event = "recovered" // a retry succeeded: the attempt before it failed
	EventMissed    Event = "missed"    // fire times nothing decided (ticks stopped) that the catch-up policy does not run
)

// AllEvents lists every notification event, in the order the API's error
// messages name them. It returns a new slice each call.
func AllEvents() []Event {
	return []Event{EventFailed, EventSkipped, EventMisfire, EventRecovered, EventMissed}
}

// Valid reports whether e is one of the events.
func (e Event) Valid() bool { return slices.Contains(AllEvents(), e) }

// Notify says which events of a schedule's runs are sent, and where.
type Notify struct {
	// On lists the events sent; empty sends none.
	On []Event `bson:"on" json:"on"`
	// Webhook is a channel: a signed POST per event (shared/notify).
	Webhook *Webhook `bson:"webhook,omitempty" json:"webhook,omitempty"`
	// PubSub is a channel: one Pub/Sub message per event. With both set,
	// each event goes to both.
	PubSub *PubSubTopic `bson:"pubsub,omitempty" json:"pubsub,omitempty"`
}

// PubSubTopic is a notification channel that publishes each event's JSON
// to a Pub/Sub topic, with the event and its idempotency key as message
// attributes. The publisher's service account needs roles/pubsub.publisher
// on the topic.
type PubSubTopic struct {
	// Topic is the full name, projects/PROJECT/topics/TOPIC.
	Topic string `bson:"topic" json:"topic"`
}

// topicName is what Pub/Sub accepts as a topic's full name: the topic id
// starts with a letter, 3 to 255 characters of letters, digits and
// -_.~+%.
var topicName = regexp.MustCompile(`^projects/[a-z0-9][a-z0-9.:-]{0,62}/topics/[A-Za-z][A-Za-z0-9._~+%-]{2,254}$`)

// CheckTopic validates a Pub/Sub topic name for the field named. Pub/Sub
// also refuses a topic id that starts with "goog"
// (https://cloud.google.com/pubsub/docs/pubsub-basics#resource_names).
func CheckTopic(field, topic string) error {
	if !topicName.MatchString(topic) {
		return fieldErr(field, "%q is not a Pub/Sub topic name; want projects/PROJECT/topics/TOPIC", topic)
	}
	if _, id, _ := strings.Cut(topic, "/topics/"); strings.HasPrefix(strings.ToLower(id), "goog") {
		return fieldErr(field, "topic id %q starts with \"goog\", which Pub/Sub reserves", id)
	}
	return nil
}

// Wants reports whether n sends event e. A nil Notify sends nothing.
func (n *Notify) Wants(e Event) bool {
	return n != nil && (n.Webhook != nil || n.PubSub != nil) && slices.Contains(n.On, e)
}

// Webhook is a notification channel that POSTs signed JSON.
type Webhook struct {
	// URL must be http(s) and on BATON_ALLOWED_TARGETS, as an http
	// target's: the request goes through the same SSRF guard.
	URL string `bson:"url" json:"url"`
	// Secret keys the HMAC-SHA256 signature. The API never returns it.
	Secret Secret `bson:"secret" json:"secret"`
}

// SecretPlaceholder is what the API shows for a webhook secret that is
// set. A schedule written back with it (a merge patch of another field, or
// a GET edited and PUT back) keeps the stored secret (KeepSecret).
const SecretPlaceholder = "[set]"

// MinSecretBytes is the shortest webhook secret accepted: 128 bits.
const MinSecretBytes = 16

// Secret is a webhook secret. It is stored as given, but every way of
// printing it (JSON, slog, %v) shows SecretPlaceholder, so neither the API
// nor a log line carries it.
type Secret string

// MarshalJSON writes SecretPlaceholder for a set secret, "" for none.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// String hides the secret.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return SecretPlaceholder
}

// LogValue hides the secret from slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// Reveal returns the secret itself, for signing.
func (s Secret) Reveal() string { return string(s) }

// KeepSecret gives next the stored webhook secret of cur where next
// carries SecretPlaceholder: the API showed the placeholder, and a client
// that sends it back means "unchanged".
func KeepSecret(next, cur *Schedule) {
	if next.Notify == nil || next.Notify.Webhook == nil || next.Notify.Webhook.Secret != SecretPlaceholder {
		return
	}
	if cur != nil && cur.Notify != nil && cur.Notify.Webhook != nil {
		next.Notify.Webhook.Secret = cur.Notify.Webhook.Secret
	}
}

// Check validates n as a schedule's notify block is validated (the
// allowlist, the events, the secret's length), for a channel that is not
// in a schedule: the deployment's default. Errors are *FieldError naming
// the field under "notify".
func (n *Notify) Check(allowed []string) error { return n.validate(allowed) }

// validate checks a notify block; nil is valid (no notifications).
func (n *Notify) validate(allowed []string) error {
	if n == nil {
		return nil
	}
	if len(n.On) > len(AllEvents()) {
		return fieldErr("notify.on", "has %d events; at most %d", len(n.On), len(AllEvents()))
	}
	names := make([]string, 0, len(AllEvents()))
	for _, e := range AllEvents() {
		names = append(names, string(e))
	}
	for i, e := range n.On {
		if !e.Valid() {
			return fieldErr(httpapiIndex("notify.on", i), "unknown event %q; want %s", e, strings.Join(names, ", "))
		}
		if slices.Index(n.On, e) != i {
			return fieldErr(httpapiIndex("notify.on", i), "%q appears more than once", e)
		}
	}
	if n.PubSub != nil {
		if err := CheckTopic("notify.pubsub.topic", n.PubSub.Topic); err != nil {
			return err
		}
	}
	if n.Webhook == nil {
		if len(n.On) > 0 && n.PubSub == nil {
			return fieldErr("notify.webhook", "is required when notify.on names events (or notify.pubsub)")
		}
		return nil
	}
	if _, err := checkURL("notify.webhook.url", n.Webhook.URL, allowed); err != nil {
		return err
	}
	if n.Webhook.Secret == SecretPlaceholder {
		return fieldErr("notify.webhook.secret", "is %q, the placeholder the API shows for a stored secret, but this schedule has none: send the secret itself", SecretPlaceholder)
	}
	if len(n.Webhook.Secret) < MinSecretBytes {
		return fieldErr("notify.webhook.secret", "is %d bytes; at least %d (it keys an HMAC-SHA256 signature)", len(n.Webhook.Secret), MinSecretBytes)
	}
	if len(n.Webhook.Secret) > MaxHeaderValueLen {
		return fieldErr("notify.webhook.secret", "is %d bytes; at most %d", len(n.Webhook.Secret), MaxHeaderValueLen)
	}
	return nil
}

// httpapiIndex names element i of the array at field, as DecodeSchedule
// names it.
func httpapiIndex(field string, i int) string { return fmt.Sprintf("%s[%d]", field, i) }
