package schedule

import (
	"fmt"
	"hash/fnv"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// MaxJitter bounds a schedule's jitter: the offset delays every fire, and
// a day is already longer than any reason to spread load.
const MaxJitter = 24 * time.Hour

// hashOf is the stable hash that seeds a schedule's jitter and its H
// fields: the same id gives the same offsets on every replica, release and
// restart, so run ids (which carry the fire time) stay deterministic.
func hashOf(id, salt string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(salt))
	return h.Sum64()
}

// JitterOffset is the stable offset in [0, jitter) that a schedule with
// this id adds to each fire time, in whole seconds (fire times are whole
// seconds). A jitter under a second gives 0.
func JitterOffset(id string, jitter time.Duration) time.Duration {
	secs := uint64(jitter / time.Second)
	if secs == 0 {
		return 0
	}
	return time.Duration(hashOf(id, "jitter")%secs) * time.Second
}

// jitterSpec shifts every fire time of a spec by a fixed offset. The shift
// keeps the order and the spacing of fire times, so catch-up, misfire and
// DST rules apply as they do to the spec itself, offset by the same amount.
type jitterSpec struct {
	inner  Spec
	offset time.Duration
}

func (j *jitterSpec) String() string { return j.inner.String() }

func (j *jitterSpec) next(loc *time.Location, after time.Time) time.Time {
	t := j.inner.next(loc, after.Add(-j.offset))
	if t.IsZero() {
		return t
	}
	return t.Add(j.offset)
}

// WithJitter returns spec with every fire time moved offset later; a zero
// offset returns spec itself, so a schedule without jitter fires exactly
// where its expression says.
func WithJitter(spec Spec, offset time.Duration) Spec {
	if offset <= 0 {
		return spec
	}
	return &jitterSpec{inner: spec, offset: offset}
}

// Spec returns the schedule's fire-time spec: its cron, with H fields
// resolved from its id, under its DST policy, shifted by its jitter's
// stable offset.
func (s *Schedule) Spec() (Spec, error) {
	spec, err := ParseFor(s.Cron, s.ID)
	if err != nil {
		return nil, err
	}
	if s.DST != nil {
		if spec, err = withDST(spec, *s.DST); err != nil {
			return nil, err
		}
	}
	spec = WithJitter(spec, JitterOffset(s.ID, s.Jitter.D()))
	if !s.StartAt.IsZero() || !s.EndAt.IsZero() {
		spec = &boundedSpec{inner: spec, start: s.StartAt, end: s.EndAt}
	}
	return spec, nil
}

// boundedSpec keeps a spec's fire times inside [start, end) (a zero bound
// is open). The bound applies to the jittered times: they are the times
// the schedule fires at.
type boundedSpec struct {
	inner      Spec
	start, end time.Time
}

func (b *boundedSpec) String() string { return b.inner.String() }

func (b *boundedSpec) next(loc *time.Location, after time.Time) time.Time {
	if !b.start.IsZero() {
		if floor := b.start.Add(-time.Nanosecond); after.Before(floor) {
			after = floor
		}
	}
	t := b.inner.next(loc, after)
	if t.IsZero() || (!b.end.IsZero() && !t.Before(b.end)) {
		return time.Time{}
	}
	return t
}

// NextFireOf is the schedule's first fire time strictly after after.
func (s *Schedule) NextFireOf(after time.Time) (time.Time, error) {
	spec, err := s.Spec()
	if err != nil {
		return time.Time{}, err
	}
	loc, err := LoadLocation(s.TimeZone)
	if err != nil {
		return time.Time{}, err
	}
	t := Next(spec, loc, after)
	if t.IsZero() {
		if !s.EndAt.IsZero() {
			return t, &FieldError{Field: "endAt", Reason: fmt.Sprintf("%s leaves no fire time after %s: the schedule would never fire", s.EndAt.UTC().Format(time.RFC3339), after.UTC().Format(time.RFC3339))}
		}
		return t, &FieldError{Field: "cron", Reason: fmt.Sprintf("never fires after %s", after.Format(time.RFC3339))}
	}
	return t, nil
}

// hashRanges are the values an H may take in each of the six fields. The
// day of the month stops at 28, so that a hashed day exists in every month
// (Jenkins does the same).
var hashRanges = [6][2]int{{0, 59}, {0, 59}, {0, 23}, {1, 28}, {1, 12}, {0, 6}}

// hashToken is one H item of a field: H, H/n, H(a-b) or H(a-b)/n.
var hashToken = regexp.MustCompile(`^H(?:\((\d+)-(\d+)\))?(?:/(\d+))?$`)

// isHashItem reports whether one comma-separated item of a field is an H
// item. No day or month name starts with H (THU contains one: it is not).
func isHashItem(item string) bool {
	return item == "H" || strings.HasPrefix(item, "H(") || strings.HasPrefix(item, "H/")
}

// hasHash reports whether a field expression has an H item.
func hasHash(expr string) bool {
	if strings.HasPrefix(strings.TrimSpace(expr), "@") {
		return false
	}
	for _, f := range strings.Fields(expr) {
		for _, item := range strings.Split(f, ",") {
			if isHashItem(item) {
				return true
			}
		}
	}
	return false
}

// ParseFor is Parse for a schedule's cron, where H stands for a value
// hashed from id (Jenkins-style): "H * * * *" fires once an hour at a
// minute of its own, "H/15 * * * *" every 15 minutes from a hashed start,
// "H(0-29) 3 * * *" at a hashed minute of the first half hour. Schedules
// with the same expression spread out instead of all firing at :00, and
// each keeps its times across restarts and replicas.
func ParseFor(expr, id string) (Spec, error) {
	if !hasHash(expr) {
		return Parse(expr)
	}
	resolved, err := resolveHash(expr, id)
	if err != nil {
		return nil, err
	}
	sp, err := Parse(resolved)
	if err != nil {
		return nil, err
	}
	return &hashedSpec{Spec: sp, expr: expr}, nil
}

// hashedSpec is a spec parsed from an expression with H fields; it reports
// the expression as written.
type hashedSpec struct {
	Spec
	expr string
}

func (h *hashedSpec) String() string { return h.expr }

// resolveHash replaces each H item of expr with the value (or the start of
// the step) hashed from id.
func resolveHash(expr, id string) (string, error) {
	fields := strings.Fields(expr)
	offset := 0
	switch len(fields) {
	case 5:
		offset = 1 // no seconds field: the first field is the minute
	case 6:
	default:
		return "", cronError("has %d fields; want 5 (minute hour day-of-month month day-of-week) or 6 (with leading seconds)", len(fields))
	}
	for i, f := range fields {
		fi := i + offset
		items := strings.Split(f, ",")
		for k, item := range items {
			if !isHashItem(item) {
				continue
			}
			v, err := hashItem(item, fi, id)
			if err != nil {
				return "", err
			}
			items[k] = v
		}
		fields[i] = strings.Join(items, ",")
	}
	return strings.Join(fields, " "), nil
}

func hashItem(item string, field int, id string) (string, error) {
	if id == "" {
		return "", cronError("%s field %q: H (a value hashed from the schedule id) is only allowed in a schedule's cron", fieldNames[field], item)
	}
	m := hashToken.FindStringSubmatch(item)
	if m == nil {
		return "", cronError("%s field %q: want H, H/n, H(a-b) or H(a-b)/n", fieldNames[field], item)
	}
	lo, hi := hashRanges[field][0], hashRanges[field][1]
	if m[1] != "" {
		a, _ := strconv.Atoi(m[1])
		b, _ := strconv.Atoi(m[2])
		if a < hashRanges[field][0] || b > hashRanges[field][1] || a > b {
			return "", cronError("%s field %q: the range must be within %d-%d and not reversed", fieldNames[field], item, hashRanges[field][0], hashRanges[field][1])
		}
		lo, hi = a, b
	}
	seed := hashOf(id, "H"+strconv.Itoa(field))
	if m[3] == "" {
		return strconv.Itoa(lo + int(seed%uint64(hi-lo+1))), nil
	}
	step, _ := strconv.Atoi(m[3])
	if step < 1 || step > hi-lo+1 {
		return "", cronError("%s field %q: the step must be from 1 to %d", fieldNames[field], item, hi-lo+1)
	}
	start := lo + int(seed%uint64(step))
	return fmt.Sprintf("%d-%d/%d", start, hi, step), nil
}
