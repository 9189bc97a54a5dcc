package schedule

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/httpapi"
)

// Label bounds and names. The key and value rules are Kubernetes' own
// (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set),
// which platform teams already write selectors against.
const (
	// MaxLabels bounds the labels of one schedule or calendar.
	MaxLabels = 64
	// MaxLabelName bounds a key's name part and a value.
	MaxLabelName = 63
	// MaxLabelPrefix bounds a key's DNS-subdomain prefix.
	MaxLabelPrefix = 253
	// OwnerLabel is the label `baton apply --owner` marks what it applies
	// with, and the only label its --prune selects on.
	OwnerLabel = "baton.dev/owner"
)

var (
	labelName   = regexp.MustCompile(`^[a-zA-Z0-9]([-_.a-zA-Z0-9]*[a-zA-Z0-9])?$`)
	dnsSubdomin = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// Labels are a schedule's or a calendar's key/value labels. In JSON they
// are an object. In the database they are an array of "key=value"
// strings: a key may hold '.' and '/', which a document field name
// cannot carry into a query's dotted path, while an array of pairs is
// matched by plain equality and served by one multikey index (labels,
// _id) for every key. Neither a key nor a value may hold '=', so the
// first '=' splits a pair.
type Labels map[string]string

// Pairs returns the labels as sorted "key=value" strings: the stored
// form, in an order that does not depend on the map's.
func (l Labels) Pairs() []string {
	out := make([]string, 0, len(l))
	for k, v := range l {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// MarshalBSONValue writes the labels as their sorted pairs.
func (l Labels) MarshalBSONValue() (byte, []byte, error) {
	t, b, err := bson.MarshalValue(l.Pairs())
	return byte(t), b, err
}

// UnmarshalBSONValue reads the pairs back into a map.
func (l *Labels) UnmarshalBSONValue(t byte, b []byte) error {
	var pairs []string
	if err := bson.UnmarshalValue(bson.Type(t), b, &pairs); err != nil {
		return err
	}
	if len(pairs) == 0 {
		*l = nil
		return nil
	}
	m := make(Labels, len(pairs))
	for _, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		m[k] = v
	}
	*l = m
	return nil
}

// IsZero lets omitempty drop empty labels from BSON.
func (l Labels) IsZero() bool { return len(l) == 0 }

// ValidateLabelKey reports why k is not a label key, or "" when it is one:
// an optional DNS-subdomain prefix and '/', then a name of at most 63
// letters, digits, '-', '_' and '.', beginning and ending with a letter
// or digit.
func ValidateLabelKey(k string) string {
	name := k
	if prefix, rest, ok := strings.Cut(k, "/"); ok {
		switch {
		case prefix == "":
			return "the prefix before '/' is empty"
		case len(prefix) > MaxLabelPrefix:
			return fmt.Sprintf("the prefix is %d bytes; at most %d", len(prefix), MaxLabelPrefix)
		case !dnsSubdomin.MatchString(prefix):
			return "the prefix must be a DNS subdomain (lower-case letters, digits, '-' and '.')"
		}
		name = rest
	}
	switch {
	case name == "":
		return "the name is empty"
	case len(name) > MaxLabelName:
		return fmt.Sprintf("the name is %d bytes; at most %d", len(name), MaxLabelName)
	case !labelName.MatchString(name):
		return "the name must be letters, digits, '-', '_' and '.', beginning and ending with a letter or digit (an optional prefix ends with '/')"
	}
	return ""
}

// ValidateLabelValue reports why v is not a label value, or "" when it is
// one: empty, or at most 63 of the name's characters, beginning and
// ending with a letter or digit.
func ValidateLabelValue(v string) string {
	switch {
	case v == "":
		return ""
	case len(v) > MaxLabelName:
		return fmt.Sprintf("the value is %d bytes; at most %d", len(v), MaxLabelName)
	case !labelName.MatchString(v):
		return "the value must be empty, or letters, digits, '-', '_' and '.', beginning and ending with a letter or digit"
	}
	return ""
}

// Validate refuses labels that break the key or value rules or are more
// than MaxLabels, with a *FieldError naming the label
// (labels["bad key"]). Keys are checked in order, so the error is the
// same for the same input.
func (l Labels) Validate() error {
	if len(l) > MaxLabels {
		return fieldErr("labels", "has %d labels; at most %d", len(l), MaxLabels)
	}
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		field := httpapi.FieldPath("labels", k)
		if why := ValidateLabelKey(k); why != "" {
			return &FieldError{Field: field, Reason: "invalid label key: " + why}
		}
		if why := ValidateLabelValue(l[k]); why != "" {
			return &FieldError{Field: field, Reason: "invalid label value: " + why}
		}
	}
	return nil
}

// LabelSelector is a list of equality terms, "key=value", all of which a
// labelled object must match. It is the stored form of each term, so the
// store matches it against the pairs as they are.
type LabelSelector []string

// ParseLabelSelector reads a selector as the API and the CLI take it:
// comma-separated "key=value" (or "key==value") terms, ANDed. An empty
// string selects everything. field names the input in the error (the
// query parameter, "labelSelector", or the CLI flag).
func ParseLabelSelector(field, s string) (LabelSelector, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var out LabelSelector
	for term := range strings.SplitSeq(s, ",") {
		term = strings.TrimSpace(term)
		if strings.Contains(term, "!=") {
			return nil, fieldErr(field, "term %q: only equality terms (key=value) are supported", term)
		}
		k, v, ok := strings.Cut(term, "=")
		v = strings.TrimPrefix(v, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok {
			return nil, fieldErr(field, "term %q: want key=value", term)
		}
		if why := ValidateLabelKey(k); why != "" {
			return nil, fieldErr(field, "term %q: invalid label key: %s", term, why)
		}
		if why := ValidateLabelValue(v); why != "" {
			return nil, fieldErr(field, "term %q: invalid label value: %s", term, why)
		}
		if !slices.Contains(out, k+"="+v) {
			out = append(out, k+"="+v)
		}
	}
	if len(out) > MaxLabels {
		return nil, fieldErr(field, "has %d terms; at most %d", len(out), MaxLabels)
	}
	return out, nil
}

// Matches reports whether labels l satisfy every term of sel.
func (sel LabelSelector) Matches(l Labels) bool {
	for _, term := range sel {
		k, v, _ := strings.Cut(term, "=")
		if got, ok := l[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// String is the selector as ParseLabelSelector reads it.
func (sel LabelSelector) String() string { return strings.Join(sel, ",") }
