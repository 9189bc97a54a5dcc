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

// LabelOp is a selector term's operator, as kubectl writes it.
type LabelOp string

// The operators a selector term may use: kubectl's equality-based ones
// and its set-based "in". ("notin" and the existence terms "key" and
// "!key" are not supported.)
const (
	// LabelEquals keeps the objects whose label Key is the one value.
	LabelEquals LabelOp = "="
	// LabelNotEquals keeps the objects whose label Key is not the value,
	// including those without the label, as kubectl's "!=" does.
	LabelNotEquals LabelOp = "!="
	// LabelIn keeps the objects whose label Key is one of the values; an
	// object without the label is not kept.
	LabelIn LabelOp = "in"
)

// LabelTerm is one term of a selector: Key Op Values, with one value for
// = and != and one or more for in.
type LabelTerm struct {
	Key    string
	Op     LabelOp
	Values []string
}

// Pairs are the term's values in the stored form, "key=value", which the
// store matches against the labels array as it is.
func (t LabelTerm) Pairs() []string {
	out := make([]string, len(t.Values))
	for i, v := range t.Values {
		out[i] = t.Key + "=" + v
	}
	return out
}

// Matches reports whether labels l satisfy the term.
func (t LabelTerm) Matches(l Labels) bool {
	got, ok := l[t.Key]
	switch t.Op {
	case LabelEquals:
		return ok && got == t.Values[0]
	case LabelNotEquals:
		return !ok || got != t.Values[0]
	case LabelIn:
		return ok && slices.Contains(t.Values, got)
	}
	return false
}

// String is the term as ParseLabelSelector reads it.
func (t LabelTerm) String() string {
	if t.Op == LabelIn {
		return t.Key + " in (" + strings.Join(t.Values, ",") + ")"
	}
	return t.Key + string(t.Op) + t.Values[0]
}

// Eq is the equality term key=value.
func Eq(key, value string) LabelTerm {
	return LabelTerm{Key: key, Op: LabelEquals, Values: []string{value}}
}

// LabelSelector is a list of terms, all of which a labelled object must
// match.
type LabelSelector []LabelTerm

// MaxSelectorValues bounds the values of a selector's terms together (an
// in term counts each of its values): each is one more clause of the
// store's query.
const MaxSelectorValues = MaxLabels

// ParseLabelSelector reads a selector as the API and the CLI take it,
// kubectl's syntax: comma-separated terms, ANDed, each "key=value" (or
// "key==value"), "key!=value" or "key in (v1,v2,…)". An empty string
// selects everything. field names the input in the error (the query
// parameter, "labelSelector", or the CLI flag).
func ParseLabelSelector(field, s string) (LabelSelector, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	terms, err := splitTerms(s)
	if err != nil {
		return nil, fieldErr(field, "%s", err)
	}
	var out LabelSelector
	values := 0
	for _, raw := range terms {
		t, err := parseTerm(raw)
		if err != nil {
			return nil, fieldErr(field, "term %q: %s", raw, err)
		}
		if !slices.ContainsFunc(out, func(o LabelTerm) bool { return o.String() == t.String() }) {
			out = append(out, t)
			values += len(t.Values)
		}
	}
	if values > MaxSelectorValues {
		return nil, fieldErr(field, "has %d values in its terms; at most %d", values, MaxSelectorValues)
	}
	return out, nil
}

// splitTerms splits s at the commas outside parentheses, so that the
// values of an in term stay in their term.
func splitTerms(s string) ([]string, error) {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(':
			if depth++; depth > 1 {
				return nil, fmt.Errorf("nested '(' at byte %d", i)
			}
		case ')':
			if depth--; depth < 0 {
				return nil, fmt.Errorf("')' without '(' at byte %d", i)
			}
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("'(' without ')'")
	}
	return append(out, strings.TrimSpace(s[start:])), nil
}

// setTerm is "key in (values)" or "key notin (values)".
var setTerm = regexp.MustCompile(`^(\S+)\s+(in|notin)\s*\((.*)\)$`)

// parseTerm reads one term and checks its key and values.
func parseTerm(term string) (LabelTerm, error) {
	var t LabelTerm
	if term == "" {
		return t, fmt.Errorf("empty term (a comma too many?)")
	}
	if m := setTerm.FindStringSubmatch(term); m != nil {
		if m[2] == "notin" {
			return t, fmt.Errorf("notin is not supported; use key!=value terms, one per value")
		}
		t = LabelTerm{Key: m[1], Op: LabelIn}
		if strings.TrimSpace(m[3]) == "" {
			return t, fmt.Errorf("in needs at least one value")
		}
		for v := range strings.SplitSeq(m[3], ",") {
			if v = strings.TrimSpace(v); !slices.Contains(t.Values, v) {
				t.Values = append(t.Values, v)
			}
		}
	} else {
		k, v, ok := strings.Cut(term, "!=")
		op := LabelNotEquals
		if !ok {
			k, v, ok = strings.Cut(term, "=")
			v = strings.TrimPrefix(v, "=")
			op = LabelEquals
		}
		if !ok {
			return t, fmt.Errorf("want key=value, key!=value or key in (v1,v2); existence terms (key, !key) are not supported")
		}
		t = LabelTerm{Key: strings.TrimSpace(k), Op: op, Values: []string{strings.TrimSpace(v)}}
	}
	if why := ValidateLabelKey(t.Key); why != "" {
		return t, fmt.Errorf("invalid label key: %s", why)
	}
	for _, v := range t.Values {
		if why := ValidateLabelValue(v); why != "" {
			return t, fmt.Errorf("invalid label value: %s", why)
		}
	}
	return t, nil
}

// Matches reports whether labels l satisfy every term of sel.
func (sel LabelSelector) Matches(l Labels) bool {
	for _, t := range sel {
		if !t.Matches(l) {
			return false
		}
	}
	return true
}

// String is the selector as ParseLabelSelector reads it.
func (sel LabelSelector) String() string {
	parts := make([]string, len(sel))
	for i, t := range sel {
		parts[i] = t.String()
	}
	return strings.Join(parts, ",")
}
