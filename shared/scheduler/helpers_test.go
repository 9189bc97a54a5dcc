package scheduler_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// clock is an injected, settable clock for decisions. Lease expiry is
// judged by the lease manager on the GCS emulator's clock, so leases use
// real time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *clock { return &clock{t: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func (c *clock) Add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

// gate is a builtin whose executions the test controls: it counts calls,
// reports each start on started, and blocks the first `block` calls until
// release is closed.
type gate struct {
	calls   atomic.Int64
	block   int64
	started chan int64
	release chan struct{}
}

var (
	gatesMu sync.Mutex
	gates   = map[string]*gate{}
)

func init() {
	scheduler.RegisterBuiltin("test-gate", func(ctx context.Context, args map[string]string) (string, error) {
		gatesMu.Lock()
		g := gates[args["key"]]
		gatesMu.Unlock()
		if g == nil {
			return "", fmt.Errorf("no gate %q", args["key"])
		}
		n := g.calls.Add(1)
		select {
		case g.started <- n:
		default:
		}
		if n <= g.block {
			select {
			case <-g.release:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		// fail: "first" fails the first call only, anything else every one.
		if f := args["fail"]; f != "" && (f != "first" || n == 1) {
			return "", fmt.Errorf("gate call %d: failing as asked", n)
		}
		return fmt.Sprintf("call %d", n), nil
	})
}

func newGate(t *testing.T, block int64) (string, *gate) {
	g := &gate{block: block, started: make(chan int64, 1000), release: make(chan struct{})}
	key := fmt.Sprintf("%s-%p", t.Name(), g)
	gatesMu.Lock()
	gates[key] = g
	gatesMu.Unlock()
	t.Cleanup(func() {
		g.open()
		gatesMu.Lock()
		delete(gates, key)
		gatesMu.Unlock()
	})
	return key, g
}

var closeMu sync.Mutex

func (g *gate) open() {
	closeMu.Lock()
	defer closeMu.Unlock()
	select {
	case <-g.release:
	default:
		close(g.release)
	}
}

func (g *gate) waitStarted(t *testing.T) int64 {
	t.Helper()
	select {
	case n := <-g.started:
		return n
	case <-time.After(30 * time.Second):
		t.Fatal("gate: no execution started within 30s")
		return 0
	}
}

type bundle struct {
	store  *mongostore.Store
	leases *lease.Manager
	clock  *clock
	eng    *scheduler.Engine
}

// t0 is the scripted start: Monday 2 March 2026, 09:00 UTC.
var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func setup(t *testing.T, mod ...func(*scheduler.Config)) *bundle {
	t.Helper()
	s := emutest.Store(t)
	// Simulated time: the scheduler's clock is c, and a test runs many
	// minutes of ticks in seconds (emutest.SimulatedTimeGCS says why the
	// per-object rate is off for it).
	client, bucket := emutest.SimulatedTimeGCS(t)
	if err := s.EnsureIndexes(context.Background(), mongostore.SchedulerIndexes...); err != nil {
		t.Fatal(err)
	}
	m := lease.NewManager(client.Bucket(bucket), "leases/", lease.Options{Holder: "test-" + t.Name(), ObjectWriteGap: -1})
	c := newClock(t0)
	cfg := scheduler.Config{Store: s, Leases: m, Clock: c, TickLeaseTTL: 10 * time.Second}
	for _, f := range mod {
		f(&cfg)
	}
	e, err := scheduler.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Wait)
	return &bundle{store: s, leases: m, clock: c, eng: e}
}

// addSchedule validates s (defaults filled), computes nextRunAt from the
// bundle's clock, and inserts it.
func (b *bundle) addSchedule(t *testing.T, s schedule.Schedule) schedule.Schedule {
	t.Helper()
	if err := s.Normalize(schedule.ValidateOptions{Builtins: scheduler.Builtins(), AllowedHosts: []string{"127.0.0.1"}}); err != nil {
		t.Fatalf("normalize: %v", err)
	}
	now := b.clock.Now()
	next, err := schedule.NextFire(s.Cron, s.TimeZone, now)
	if err != nil {
		t.Fatal(err)
	}
	s.NextRunAt, s.Enabled, s.Version, s.CreatedAt, s.UpdatedAt = next.UTC(), true, 1, now, now
	if ok, err := b.store.Collection(schedule.SchedulesCollection).InsertIdempotent(context.Background(), s); err != nil || !ok {
		t.Fatalf("insert schedule: %v %v", ok, err)
	}
	return s
}

func gateTarget(key string) schedule.Target {
	return schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "test-gate", Args: map[string]string{"key": key}}}
}

func (b *bundle) tick(t *testing.T) *scheduler.Summary {
	t.Helper()
	sum, err := b.eng.Tick(context.Background(), b.clock.Now())
	if err != nil {
		t.Fatalf("tick: %v", err)
	}
	return sum
}

// runs lists a schedule's runs, oldest fire time first, without the
// records of missed windows (id suffix -missed), which are reports, not
// executions; allRuns includes them.
func (b *bundle) runs(t *testing.T, scheduleID string) []schedule.Run {
	t.Helper()
	var out []schedule.Run
	for _, r := range b.allRuns(t, scheduleID) {
		if !strings.HasSuffix(r.ID, "-missed") {
			out = append(out, r)
		}
	}
	return out
}

// allRuns is runs with the missed-window records.
func (b *bundle) allRuns(t *testing.T, scheduleID string) []schedule.Run {
	t.Helper()
	var out []schedule.Run
	err := b.store.Collection(schedule.RunsCollection).Find(context.Background(), bson.D{{Key: "scheduleId", Value: scheduleID}}, &out)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].FireTime.Equal(out[j].FireTime) {
			return out[i].FireTime.Before(out[j].FireTime)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

func (b *bundle) getSchedule(t *testing.T, id string) schedule.Schedule {
	t.Helper()
	var s schedule.Schedule
	if err := b.store.Collection(schedule.SchedulesCollection).Get(context.Background(), id, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func fireTimesOf(runs []schedule.Run) []string {
	var out []string
	for _, r := range runs {
		out = append(out, r.FireTime.UTC().Format("15:04")+" "+string(r.Source)+" "+string(r.Status))
	}
	return out
}
