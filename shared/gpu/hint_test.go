package gpu_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/gpu/worker"
)

// hintTTL is long beside the tests below, so whether the dispatcher's
// single-tenant hint is fresh is decided by the test's clock alone.
const hintTTL = time.Minute

// newTenantBehindA sets up the case the single-tenant guess cannot see:
// tenant a alone has been dispatched on both slots, so the dispatcher's
// last read of the queue heads found only a (the hint); then a and b queue
// jobs through another dispatcher, which leaves the hint as it was. a-long
// holds one slot throughout; release("first") ends the job on the other.
func newTenantBehindA(t *testing.T, queued ...gpu.EnqueueRequest) (*bundle, *recorder) {
	t.Helper()
	rec := &recorder{}
	b := setup(t, setupOpts{workers: 2, worker: withOrder(rec), tenantHintTTL: hintTTL})
	b.enqueue(gpu.EnqueueRequest{ID: "a-long", Tenant: "a", Payload: b.gate("long")})
	b.enqueue(gpu.EnqueueRequest{ID: "a-first", Tenant: "a", Payload: b.gate("first")})
	b.waitStatus("a-long", gpu.StatusRunning)
	b.waitStatus("a-first", gpu.StatusRunning)
	queueUnseen(t, b, queued...)
	return b, rec
}

// queueUnseen queues reqs through another dispatcher (queueOnly), so b's
// dispatcher neither sends them nor reads the heads: its hint stays as it
// was.
func queueUnseen(t *testing.T, b *bundle, reqs ...gpu.EnqueueRequest) {
	t.Helper()
	q := queueOnly(t, b)
	for _, req := range reqs {
		if _, _, err := q.Enqueue(b.ctx, req); err != nil {
			t.Fatal(err)
		}
	}
}

// before fails the test unless job x started before job y.
func before(t *testing.T, started []string, x, y string) {
	t.Helper()
	i, j := slices.Index(started, x), slices.Index(started, y)
	if i < 0 || j < 0 || i > j {
		t.Errorf("starts %v: want %s to start before %s", started, x, y)
	}
}

// TestTenantHintExpires: once the hint is older than TenantHintTTL, the
// hand-off reads the heads before it claims, so the freed slot goes to b
// (no slot) before a's older job (a holds the other slot). It fails if
// the guess ignores the hint's age.
func TestTenantHintExpires(t *testing.T) {
	b, rec := newTenantBehindA(t,
		gpu.EnqueueRequest{ID: "a-next", Tenant: "a", Payload: "true"},
		gpu.EnqueueRequest{ID: "b-1", Tenant: "b", Payload: "true"})
	b.clock.Advance(hintTTL + time.Second) // leases stay valid: the workers beat every 100 ms against this clock
	b.release("first")
	b.waitStatus("a-next", gpu.StatusSucceeded)
	b.waitStatus("b-1", gpu.StatusSucceeded)
	b.release("long")
	b.waitStatus("a-long", gpu.StatusSucceeded)
	before(t, rec.list(), "b-1", "a-next")
}

// TestTenantHintLagsOneHandOff: with the hint fresh, the first hand-off
// after b queued may still go to a (the guess cannot see b), but the read
// of the heads after that dispatch shows b, so the next hand-off is fair
// again: b-1 starts before a's second queued job. It fails if the
// dispatcher does not read the heads again after a guessed dispatch.
func TestTenantHintLagsOneHandOff(t *testing.T) {
	b, rec := newTenantBehindA(t,
		gpu.EnqueueRequest{ID: "a-n1", Tenant: "a", Payload: "sleep 0.3"},
		gpu.EnqueueRequest{ID: "a-n2", Tenant: "a", Payload: "true"},
		gpu.EnqueueRequest{ID: "b-1", Tenant: "b", Payload: "true"})
	b.release("first")
	for _, id := range []string{"a-n1", "a-n2", "b-1"} {
		b.waitStatus(id, gpu.StatusSucceeded)
	}
	b.release("long")
	b.waitStatus("a-long", gpu.StatusSucceeded)
	before(t, rec.list(), "b-1", "a-n2")
}

// TestGuessedClaimFaults: the guessed claim (a findAndModify on gpu_jobs,
// the first after the fault is armed) fails once: a WriteConflict (which
// the store retries), a connection dropped before it ran, or a claim that
// landed and answered an error. The job still runs exactly once: at once,
// or, when the claim landed unseen, after its lease runs out and the sweep
// requeues it. The fault must have been hit.
func TestGuessedClaimFaults(t *testing.T) {
	faults := jobWriteFaults("findAndModify")
	for name, fault := range faults {
		t.Run(name, func(t *testing.T) {
			rec := &recorder{}
			// One beat a minute, and a lease that outlasts the test's
			// steps, so no heartbeat (also a findAndModify on gpu_jobs)
			// takes the fault before the claim does.
			b := setup(t, setupOpts{workers: 1, lease: 30 * time.Second, tenantHintTTL: hintTTL, worker: func(c *worker.Config) {
				c.Observer = rec.observe
				c.HeartbeatInterval = time.Minute
			}})
			b.enqueue(gpu.EnqueueRequest{ID: "a-first", Tenant: "a", Payload: b.gate("first")})
			b.waitStatus("a-first", gpu.StatusRunning)
			if _, _, err := queueOnly(t, b).Enqueue(b.ctx, gpu.EnqueueRequest{ID: "a-next", Tenant: "a", Payload: "true"}); err != nil {
				t.Fatal(err)
			}
			fault(t, b.st)
			b.release("first")
			b.waitStatus("a-first", gpu.StatusSucceeded)
			b.waitFor("a-next to be dispatched or run", func() bool {
				return b.job("a-next").Status != gpu.StatusQueued
			})
			// Claimed unseen, the job stays dispatched while its slot is
			// free again; sent, it starts. Only the first needs its lease
			// to run out, and as nothing else runs then, moving the clock
			// past it expires no one else's.
			b.waitFor("a-next to start, or its slot to be freed under it", func() bool {
				if rec.count("a-next") > 0 {
					return true
				}
				slots, err := b.d.Slots(b.ctx)
				return err == nil && len(slots) == 1 && slots[0].State == "free" && b.job("a-next").Status == gpu.StatusDispatched
			})
			if rec.count("a-next") == 0 {
				b.clock.Advance(b.d.LeaseTTL() + time.Second)
			}
			b.waitFor("a-next to succeed", func() bool {
				_, _, _ = b.d.Sweep(b.ctx) // a tick's sweep
				return b.job("a-next").Status == gpu.StatusSucceeded
			})
			if n := rec.count("a-next"); n != 1 {
				t.Errorf("a-next started %d times (%v), want once", n, rec.list())
			}
			if j := b.job("a-next"); j.Attempts > 1 || (name != "LandedWithError" && j.Attempts != 0) {
				t.Errorf("a-next used %d attempts", j.Attempts)
			}
			var reply struct {
				Count int64 `bson:"count"`
			}
			admin := emutest.RawClient(t, emutest.MongoURI(t)).Database("admin")
			if err := admin.RunCommand(context.Background(), bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}}).Decode(&reply); err != nil {
				t.Fatal(err)
			}
			if reply.Count < 1 {
				t.Errorf("the fail point was never hit")
			}
		})
	}
}

// TestTenantHintSeenByEveryType: each slot type keeps its own hint, but an
// untyped job can run on every slot, so a read of one type's heads that
// finds a new tenant's untyped job must clear the other types' hints too.
// Tenant a holds the untyped and the L4 slot (both hints: a alone); b's
// untyped job queues unseen behind two of a's. The untyped slot's
// hand-off may go to a on the guess (the one hand-off the bound allows),
// and its read afterwards sees b; then the L4 slot's hand-off must go to
// b, not to a's second job. It fails if noteHeads keeps what one type's
// read learns to that type.
func TestTenantHintSeenByEveryType(t *testing.T) {
	rec := &recorder{}
	b := setup(t, setupOpts{workers: 2, types: []string{"", "nvidia-l4"}, worker: withOrder(rec), tenantHintTTL: hintTTL})
	untyped := gpu.SlotID(b.workers[0].URL, 0)
	b.enqueue(gpu.EnqueueRequest{ID: "a-l4", Tenant: "a", GPUType: "nvidia-l4", Payload: b.gate("l4")})
	b.enqueue(gpu.EnqueueRequest{ID: "a-u", Tenant: "a", Payload: b.gate("u")})
	if j := b.waitStatus("a-u", gpu.StatusRunning); j.Worker != b.workers[0].URL {
		t.Fatalf("a-u runs on %s; want the untyped worker", j.Worker)
	}
	b.waitStatus("a-l4", gpu.StatusRunning)
	for _, slot := range []string{untyped, gpu.SlotID(b.workers[1].URL, 0)} {
		if tenant, single := gpu.TenantHint(b.d, slot); tenant != "a" || !single {
			t.Fatalf("hint of %s: %q alone=%v; want a alone", slot, tenant, single)
		}
	}
	queueUnseen(t, b,
		gpu.EnqueueRequest{ID: "a-n1", Tenant: "a", Payload: b.gate("n1")},
		gpu.EnqueueRequest{ID: "a-n2", Tenant: "a", Payload: "true"},
		gpu.EnqueueRequest{ID: "b-1", Tenant: "b", Payload: "true"})
	b.release("u")
	b.waitStatus("a-n1", gpu.StatusRunning)
	b.waitFor("the untyped slot's read after its hand-off", func() bool {
		_, single := gpu.TenantHint(b.d, untyped)
		return !single
	})
	b.release("l4")
	b.waitStatus("a-n2", gpu.StatusSucceeded)
	b.waitStatus("b-1", gpu.StatusSucceeded)
	b.release("n1")
	b.waitStatus("a-n1", gpu.StatusSucceeded)
	before(t, rec.list(), "b-1", "a-n2")
}

// TestTenantHintReadAfterUnansweredRun: a guessed POST /run whose answer
// is lost may still run (send keeps the job on its slot), so it is a
// hand-off like any other and the heads are read after it too. Two slots
// at a network edge (a test double that records each POST /run and, for
// a-3 alone, drops the connection instead of answering) run a's jobs, so
// the hint is a alone; b's job queues unseen behind a-3 and a-4. The
// first completion guesses a-3, unanswered; the second must go to b-1
// (a holds the other slot), not a-4. It fails if send reads the heads
// only after an answered POST.
func TestTenantHintReadAfterUnansweredRun(t *testing.T) {
	runs := make(chan gpu.RunRequest, 8)
	edge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req gpu.RunRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Error(err)
		}
		runs <- req
		if req.JobID == "a-3" {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			conn.Close() // the worker has the job; its answer is lost
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(edge.Close)
	b := setup(t, setupOpts{workers: 0, extraPool: edge.URL + "=2", tenantHintTTL: hintTTL})
	b.enqueue(gpu.EnqueueRequest{ID: "a-1", Tenant: "a", Payload: "true"})
	b.enqueue(gpu.EnqueueRequest{ID: "a-2", Tenant: "a", Payload: "true"})
	first, second := nextRun(t, runs), nextRun(t, runs)
	queueUnseen(t, b,
		gpu.EnqueueRequest{ID: "a-3", Tenant: "a", Payload: "true"},
		gpu.EnqueueRequest{ID: "a-4", Tenant: "a", Payload: "true"},
		gpu.EnqueueRequest{ID: "b-1", Tenant: "b", Payload: "true"})
	complete := func(r gpu.RunRequest) {
		t.Helper()
		if _, err := b.d.Complete(b.ctx, r.JobID, gpu.CompleteRequest{Fence: gpu.Fence{Slot: r.Slot, Epoch: r.Epoch, Secret: r.Secret}}); err != nil {
			t.Fatal(err)
		}
	}
	complete(first)
	if r := nextRun(t, runs); r.JobID != "a-3" {
		t.Fatalf("the first hand-off sent %s; want a-3 (the guess)", r.JobID)
	}
	complete(second)
	if r := nextRun(t, runs); r.JobID != "b-1" {
		t.Errorf("the second hand-off sent %s; want b-1: a holds the other slot", r.JobID)
	}
}

// TestOneGuessAtATime: four completions answered at once, while the hint
// says a alone and b has queued unseen. Only one of the four fills may act
// on the guess; the others read the heads and see b, so b gets at least
// one of the four freed slots. How many more it gets is fair share by
// usage over time (docs/gpu.md): b starts level with a (the credit cap),
// the tie goes to a's older head, and from then on each fill compares the
// slot-seconds both have used, which on a slow machine (-race) can leave
// a three of the four. The stand-in workers at the network edge (a test
// double) only record each POST /run. It fails, as a rule, if every fill
// may guess at once: all four then go to a.
func TestOneGuessAtATime(t *testing.T) {
	runs := make(chan gpu.RunRequest, 16)
	edge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req gpu.RunRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Error(err)
		}
		runs <- req
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(edge.Close)
	b := setup(t, setupOpts{workers: 0, extraPool: edge.URL + "=4", tenantHintTTL: hintTTL})
	var running []gpu.RunRequest
	for i := range 4 {
		b.enqueue(gpu.EnqueueRequest{ID: fmt.Sprintf("a-%d", i), Tenant: "a", Payload: "true"})
		running = append(running, nextRun(t, runs))
	}
	queueUnseen(t, b,
		gpu.EnqueueRequest{ID: "a-next0", Tenant: "a", Payload: "true"},
		gpu.EnqueueRequest{ID: "a-next1", Tenant: "a", Payload: "true"},
		gpu.EnqueueRequest{ID: "a-next2", Tenant: "a", Payload: "true"},
		gpu.EnqueueRequest{ID: "a-next3", Tenant: "a", Payload: "true"},
		gpu.EnqueueRequest{ID: "b-0", Tenant: "b", Payload: "true"},
		gpu.EnqueueRequest{ID: "b-1", Tenant: "b", Payload: "true"},
		gpu.EnqueueRequest{ID: "b-2", Tenant: "b", Payload: "true"},
		gpu.EnqueueRequest{ID: "b-3", Tenant: "b", Payload: "true"})
	var wg sync.WaitGroup
	for _, r := range running {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.d.Complete(b.ctx, r.JobID, gpu.CompleteRequest{Fence: gpu.Fence{Slot: r.Slot, Epoch: r.Epoch, Secret: r.Secret}}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	toA := 0
	var sent []string
	for range 4 {
		r := nextRun(t, runs)
		sent = append(sent, r.JobID)
		if tenantOf(r.JobID) == "a" {
			toA++
		}
	}
	if toA > 3 {
		t.Errorf("the four freed slots went to %v: %d to a; want at most 3 (one guess, then the heads: b is seen)", sent, toA)
	}
}
