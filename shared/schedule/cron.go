package schedule

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/baton-cron/baton/shared/httpapi"
)

// Spec is a parsed cron expression. It is opaque: hand it to Next or
// FireTimes. A Spec is immutable and safe for concurrent use.
type Spec interface {
	// String returns the expression the Spec was parsed from.
	String() string
	next(loc *time.Location, after time.Time) time.Time
}

// MinEvery is the shortest interval "@every" accepts.
const MinEvery = time.Second

// fieldNames name the six fields of a (seconds-extended) cron expression, in
// order, for error messages.
var fieldNames = [6]string{"second", "minute", "hour", "day-of-month", "month", "day-of-week"}

// nameHints complete "is not a number" for the fields that take names.
var nameHints = [6]string{4: " or a month name (JAN-DEC)", 5: " or a day name (SUN-SAT)"}

// fieldDefaults fill the other five fields when one field is checked alone.
var fieldDefaults = [6]string{"0", "0", "0", "*", "*", "*"}

// fullParser reads the six-field form. Parse always hands it six fields (a
// five-field expression gets a leading "0"), and never a descriptor, so that
// baton, not the library, decides what a descriptor means.
var fullParser = cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// descriptors maps each accepted @-descriptor to its six-field expression.
var descriptors = map[string]string{
	"@yearly":   "0 0 0 1 1 *",
	"@annually": "0 0 0 1 1 *",
	"@monthly":  "0 0 0 1 * *",
	"@weekly":   "0 0 0 * * 0",
	"@daily":    "0 0 0 * * *",
	"@midnight": "0 0 0 * * *",
	"@hourly":   "0 0 * * * *",
}

// Parse parses a cron expression:
//
//   - 5-field unix cron "minute hour day-of-month month day-of-week", or 6
//     fields with a leading seconds field;
//   - @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly;
//   - "@every <duration>", a Go duration of at least one second, in whole
//     seconds (see Next for its anchor).
//
// Fields take numbers, names (JAN–DEC, SUN–SAT, any case), ranges (a-b),
// lists (a,b), steps (*/n, a-b/n, a/n), "*" and "?". Day-of-week runs 0–7,
// where both 0 and 7 are Sunday. When both day-of-month and day-of-week are
// restricted (neither is "*" or "?"), a day matches if EITHER matches (the
// Vixie cron rule); otherwise both must match.
//
// Errors are *FieldError with Field "cron" and a reason naming the cron field
// at fault.
func Parse(expr string) (Spec, error) {
	if hasHash(expr) {
		// Only a schedule's cron has an id to hash: ParseFor.
		_, err := resolveHash(expr, "")
		return nil, err
	}
	if sp, ok := specs.get(expr); ok {
		return sp, nil
	}
	sp, err := parse(expr)
	if err != nil {
		return nil, err
	}
	specs.put(expr, sp)
	return sp, nil
}

// specCache remembers parsed expressions: the tick parses the expression of
// every due schedule on every decision (~35 µs each), and a Spec is
// immutable. It holds at most specCacheSize entries and simply starts over
// when full, which is enough for a working set of schedules.
type specCache struct {
	mu sync.Mutex
	m  map[string]Spec
}

const specCacheSize = 4096

var specs = &specCache{m: map[string]Spec{}}

func (c *specCache) get(expr string) (Spec, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sp, ok := c.m[expr]
	return sp, ok
}

func (c *specCache) put(expr string, sp Spec) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= specCacheSize {
		clear(c.m)
	}
	c.m[expr] = sp
}

func parse(expr string) (Spec, error) {
	s := strings.TrimSpace(expr)
	if s == "" {
		return nil, cronError("is empty; want 5 fields (minute hour day-of-month month day-of-week), 6 with leading seconds, or a descriptor such as @hourly")
	}
	if strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ=") {
		return nil, cronError("must not carry a time zone prefix; set the timeZone field instead")
	}
	if strings.HasPrefix(s, "@") {
		return parseDescriptor(s)
	}
	fields := strings.Fields(s)
	switch len(fields) {
	case 5:
		fields = append([]string{"0"}, fields...)
	case 6:
	default:
		return nil, cronError("has %d fields; want 5 (minute hour day-of-month month day-of-week) or 6 (with leading seconds)", len(fields))
	}
	dow, err := rewriteDow(fields[5])
	if err != nil {
		return nil, err
	}
	fields[5] = dow
	// Check each field alone first, so that the error names the field.
	for i, f := range fields {
		probe := fieldDefaults
		probe[i] = f
		if _, err := fullParser.Parse(strings.Join(probe[:], " ")); err != nil {
			// The library ends its messages with ": <field>"; the prefix
			// already quotes the field.
			reason := strings.TrimSuffix(err.Error(), ": "+f)
			const notInt = "failed to parse int from "
			if _, rest, ok := strings.Cut(reason, notInt); ok {
				bad, _, _ := strings.Cut(rest, ":")
				reason = fmt.Sprintf("%q is not a number%s", bad, nameHints[i])
			}
			return nil, cronError("%s field %q: %s", fieldNames[i], f, reason)
		}
	}
	sched, err := fullParser.Parse(strings.Join(fields, " "))
	if err != nil {
		return nil, cronError("%v", err)
	}
	ss, ok := sched.(*cron.SpecSchedule)
	if !ok {
		return nil, cronError("unexpected schedule type %T", sched)
	}
	sp := &cronSpec{expr: expr, s: *ss}
	// A spec such as "0 0 30 2 *" parses but never fires; refuse it now
	// rather than let a schedule sit forever with no next run.
	if sp.next(time.UTC, time.Date(1999, 12, 31, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, cronError("never fires: no calendar date matches its day-of-month, month and day-of-week")
	}
	return sp, nil
}

func cronError(format string, args ...any) *FieldError {
	return &FieldError{Field: "cron", Reason: httpapi.Sprintf(format, args...)}
}

func parseDescriptor(s string) (Spec, error) {
	name, arg, _ := strings.Cut(s, " ")
	name = strings.ToLower(name)
	if name == "@every" {
		arg = strings.TrimSpace(arg)
		if arg == "" {
			return nil, cronError("@every needs a duration, such as \"@every 90s\"")
		}
		d, err := time.ParseDuration(arg)
		if err != nil {
			return nil, cronError("@every: invalid duration %q: want a Go duration such as 90s, 5m or 1h30m", arg)
		}
		if d < MinEvery {
			return nil, cronError("@every %s is shorter than the minimum of %s", arg, MinEvery)
		}
		if d%time.Second != 0 {
			return nil, cronError("@every %s is not a whole number of seconds", arg)
		}
		return &everySpec{expr: s, d: d}, nil
	}
	if strings.TrimSpace(arg) != "" {
		return nil, cronError("descriptor %s takes no argument, got %q", name, arg)
	}
	six, ok := descriptors[name]
	if !ok {
		return nil, cronError("unknown descriptor %q; want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every <duration>", name)
	}
	sched, err := fullParser.Parse(six)
	if err != nil { // cannot happen: the table is constant and tested
		return nil, cronError("descriptor %s: %v", name, err)
	}
	return &cronSpec{expr: s, s: *sched.(*cron.SpecSchedule)}, nil
}

var dowNames = map[string]int{"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}

// rewriteDow maps day-of-week 7 (Sunday, as in Vixie cron) onto 0, because
// the library's day-of-week field runs 0–6. Names are turned into numbers so
// that ranges such as FRI-7 work. Anything it does not understand is passed
// through unchanged for the library to judge.
func rewriteDow(field string) (string, error) {
	parts := strings.Split(field, ",")
	out := make([]string, 0, len(parts)+1)
	for _, p := range parts {
		rng, step, hasStep := strings.Cut(p, "/")
		lo, hi, isRange := strings.Cut(rng, "-")
		if rng == "*" || rng == "?" {
			out = append(out, p)
			continue
		}
		a, okA := dowNumber(lo)
		if !okA {
			out = append(out, p)
			continue
		}
		b := a
		if isRange {
			var okB bool
			if b, okB = dowNumber(hi); !okB {
				out = append(out, p)
				continue
			}
		}
		if hasStep && !isRange {
			b = 7 // "a/n" means a through the maximum (7), stepping n
		}
		if a > 7 || b > 7 {
			return "", cronError("day-of-week field %q: %q is out of range 0-7 (0 and 7 are Sunday)", field, p)
		}
		if b != 7 {
			out = append(out, p)
			continue
		}
		if a == 7 { // "7", "7-7", "7/n": Sunday
			out = append(out, "0")
			continue
		}
		// a-7[/n] becomes a-6[/n], plus 0 when the steps land on 7.
		n := 1
		stepText := ""
		if hasStep {
			v, err := strconv.Atoi(step)
			if err != nil || v <= 0 {
				out = append(out, p) // the library reports the bad step
				continue
			}
			n, stepText = v, "/"+step
		}
		out = append(out, fmt.Sprintf("%d-6%s", a, stepText))
		if (7-a)%n == 0 {
			out = append(out, "0")
		}
	}
	return strings.Join(out, ","), nil
}

// dowNumber reads a day-of-week number or name.
func dowNumber(s string) (int, bool) {
	if v, ok := dowNames[strings.ToLower(s)]; ok {
		return v, true
	}
	if s == "" || len(s) > 3 {
		return 0, false
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

// SubMinute reports whether spec can fire twice within one minute: a
// seconds field that matches more than one second, or "@every" under a
// minute. Such a schedule needs a ticker at second granularity (baton
// daemon); a once-a-minute Tick would fire it once a minute, in silence.
func SubMinute(spec Spec) bool {
	switch sp := spec.(type) {
	case *cronSpec:
		return bits.OnesCount64(sp.s.Second&^(1<<63)) > 1
	case *everySpec:
		return sp.d < time.Minute
	case *hashedSpec:
		return SubMinute(sp.Spec)
	case *jitterSpec:
		return SubMinute(sp.inner)
	case *dstSpec:
		return SubMinute(sp.c)
	case *boundedSpec:
		return SubMinute(sp.inner)
	}
	return false
}

// cronSpec is a field-based expression, held as the parser's bit sets.
type cronSpec struct {
	expr string
	s    cron.SpecSchedule
}

func (c *cronSpec) String() string { return c.expr }

// everySpec is "@every d": a fixed interval in absolute time.
type everySpec struct {
	expr string
	d    time.Duration
}

func (e *everySpec) String() string { return e.expr }

// next for @every: the fire times are the instants whose distance from the
// Unix epoch is a whole multiple of d. Anchoring on the epoch rather than on
// a creation time keeps Next pure and makes every replica agree; DST cannot
// move it because it never looks at wall clocks.
func (e *everySpec) next(_ *time.Location, after time.Time) time.Time {
	d := int64(e.d / time.Second)
	sec := after.Unix() // floor: Unix truncates toward the earlier second
	k := floorDiv(sec, d) + 1
	return time.Unix(k*d, 0).UTC()
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
