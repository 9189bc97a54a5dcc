package schedule

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/baton-cron/baton/shared/httpapi"
)

// PubSubTarget publishes one message to a Pub/Sub topic per run, as
// Cloud Scheduler's Pub/Sub target does. The message also carries the
// run's id, fire time and fencing token as attributes (AttrRunID, …): the
// run id is the idempotency key a subscriber deduplicates on, because a
// publish retried after a lost answer can deliver the message twice.
type PubSubTarget struct {
	// Topic is "projects/PROJECT/topics/TOPIC"; it must match an entry of
	// BATON_ALLOWED_TOPICS.
	Topic string `bson:"topic" json:"topic"`
	// Data is the message's data, sent as these bytes (UTF-8 text: a
	// binary payload is the subscriber's to encode, base64 for example).
	Data string `bson:"data,omitempty" json:"data,omitempty"`
	// Attributes are the message's own attributes, beside baton's.
	Attributes map[string]string `bson:"attributes,omitempty" json:"attributes,omitempty"`
	// OrderingKey orders the messages that share it for subscriptions
	// with message ordering on.
	OrderingKey string `bson:"orderingKey,omitempty" json:"orderingKey,omitempty"`
	// Timeout bounds the publish, its retries included: a publish the
	// server has not acknowledged by then fails the run (and the
	// schedule's retry policy applies). Default DefaultPubSubTimeout.
	Timeout Duration `bson:"timeout,omitempty" json:"timeout,omitempty"`
}

// The attributes baton adds to every message of a pubsub target. The
// prefix is reserved: a target's own attributes may not use it.
const (
	AttrRunID       = "baton-run-id"
	AttrFireTime    = "baton-fire-time"
	AttrFence       = "baton-fence"
	AttrSchedule    = "baton-schedule"
	reservedAttrPfx = "baton-"
)

// Pub/Sub's limits on a message, from
// https://cloud.google.com/pubsub/quotas#resource_limits, less what baton
// adds. Data is capped far below Pub/Sub's 10 MB because it is stored in
// the schedule document, as an http target's body is.
const (
	MaxPubSubAttributes     = 100 - 4 // Pub/Sub: 100 attributes per message; baton adds 4
	MaxPubSubAttrKeyLen     = 256     // Pub/Sub: attribute key size 256 bytes
	MaxPubSubAttrValueLen   = 1024    // Pub/Sub: attribute value size 1024 bytes
	MaxPubSubOrderingKeyLen = 1024    // Pub/Sub: ordering key size 1 KB
	MaxPubSubData           = MaxHTTPBody
	DefaultPubSubTimeout    = 30 * time.Second
	MinPubSubTimeout        = time.Second
)

// IsAllowedTopic reports whether topic matches an entry of allowed: the
// same full name, or "projects/P/topics/*" for every topic of project P.
func IsAllowedTopic(topic string, allowed []string) bool {
	for _, a := range allowed {
		if a == topic {
			return true
		}
		if prefix, ok := strings.CutSuffix(a, "/topics/*"); ok && strings.HasPrefix(topic, prefix+"/topics/") {
			return true
		}
	}
	return false
}

// CheckTopicAllowlist checks BATON_ALLOWED_TOPICS' entries, so that a
// typo refuses to start the process instead of refusing that topic
// forever.
func CheckTopicAllowlist(allowed []string) error {
	for _, a := range allowed {
		t := a
		if p, ok := strings.CutSuffix(a, "/topics/*"); ok {
			t = p + "/topics/any"
		}
		if err := CheckTopic("entry", t); err != nil {
			return fmt.Errorf("%q is neither projects/P/topics/T nor projects/P/topics/*: %w", a, err)
		}
	}
	return nil
}

func (p *PubSubTarget) validate(allowed []string) error {
	if p.Topic == "" {
		return fieldErr("target.pubsub.topic", "is required; want projects/PROJECT/topics/TOPIC")
	}
	if err := CheckTopic("target.pubsub.topic", p.Topic); err != nil {
		return err
	}
	if !IsAllowedTopic(p.Topic, allowed) {
		if len(allowed) == 0 {
			return fieldErr("target.pubsub.topic", "%s is not allowed: BATON_ALLOWED_TOPICS is empty, which refuses every pubsub target (Terraform's pubsub_target_topics sets it, with the publisher grant)", p.Topic)
		}
		return fieldErr("target.pubsub.topic", "%s is not on BATON_ALLOWED_TOPICS (%s)", p.Topic, strings.Join(allowed, ", "))
	}
	if len(p.Data) > MaxPubSubData {
		return fieldErr("target.pubsub.data", "is %d bytes; at most %d", len(p.Data), MaxPubSubData)
	}
	if !utf8.ValidString(p.Data) {
		return fieldErr("target.pubsub.data", "is not valid UTF-8; encode a binary payload (base64) and decode it in the subscriber")
	}
	if len(p.Attributes) > MaxPubSubAttributes {
		return fieldErr("target.pubsub.attributes", "has %d attributes; at most %d (Pub/Sub allows 100 and baton adds 4)", len(p.Attributes), MaxPubSubAttributes)
	}
	keys := make([]string, 0, len(p.Attributes))
	for k := range p.Attributes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		field := httpapi.FieldPath("target.pubsub.attributes", k)
		if err := CheckKey(field, k, MaxPubSubAttrKeyLen); err != nil {
			return err
		}
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "goog") {
			return fieldErr(field, "starts with \"goog\", which Pub/Sub reserves for its own attributes")
		}
		if strings.HasPrefix(lk, reservedAttrPfx) {
			return fieldErr(field, "starts with %q, which baton reserves for the run's id, fire time and fence", reservedAttrPfx)
		}
		if v := p.Attributes[k]; len(v) > MaxPubSubAttrValueLen {
			return fieldErr(field, "value is %d bytes; at most %d", len(v), MaxPubSubAttrValueLen)
		}
	}
	if len(p.OrderingKey) > MaxPubSubOrderingKeyLen {
		return fieldErr("target.pubsub.orderingKey", "is %d bytes; at most %d", len(p.OrderingKey), MaxPubSubOrderingKeyLen)
	}
	if p.Timeout.D() == 0 {
		return nil
	}
	return durationIn("target.pubsub.timeout", p.Timeout, MinPubSubTimeout, MaxHTTPTimeout)
}
