package gpu_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/gpu/worker"
)

// startLog notes every job start and finish across all workers, in order.
type startLog struct {
	mu      sync.Mutex
	started []string
	running map[string]int // tenant → running now, from the job id's prefix
	max     map[string]int // tenant → most ever running at once
}

func newStartLog() *startLog { return &startLog{running: map[string]int{}, max: map[string]int{}} }

// tenantOf is the tenant a test job id starts with ("a-7" → "a").
func tenantOf(id string) string { t, _, _ := strings.Cut(id, "-"); return t }

func (l *startLog) observe(e worker.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := tenantOf(e.JobID)
	switch e.Kind {
	case "start":
		l.started = append(l.started, e.JobID)
		l.running[t]++
		l.max[t] = max(l.max[t], l.running[t])
	case "finish":
		l.running[t]--
	}
}

func (l *startLog) snapshot() (started []string, maxRunning map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := map[string]int{}
	for k, v := range l.max {
		m[k] = v
	}
	return append([]string(nil), l.started...), m
}

// sampleView polls the pool view every 10 ms until stop is closed, and
// then sends the most slots it ever saw linked to a job, per tenant and in
// all ("" key). It is the dispatcher's own account of who holds the slots:
// a worker's command may be short beside the hand-off around it, so the
// workers' start and finish events alone understate how full the pool is.
func sampleView(b *bundle, stop <-chan struct{}) <-chan map[string]int {
	out := make(chan map[string]int, 1)
	go func() {
		most := map[string]int{}
		defer func() { out <- most }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			v, err := b.d.View(b.ctx)
			if err != nil {
				continue
			}
			total := 0
			for _, tv := range v.Tenants {
				most[tv.Tenant] = max(most[tv.Tenant], tv.Running)
				total += tv.Running
			}
			most[""] = max(most[""], total)
		}
	}()
	return out
}

// queueOnly returns a dispatcher on b's database with no pool, so its
// Enqueue queues without dispatching: the test fills the queue first and
// then lets b's dispatcher choose.
func queueOnly(t *testing.T, b *bundle) *gpu.Dispatcher {
	t.Helper()
	d, err := gpu.New(gpu.Config{Store: b.st, Clock: b.clock, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestFairShareWeights: tenants a and b, weights 3:1, both with a long
// queue (40 and 20 jobs), share 4 one-slot workers. Among the first 40 jobs started the
// split is 30:10 ± 4 (the rule: the next slot goes to the tenant furthest
// below its weighted share of the running slots), and the pool stays
// full: 4 jobs ran at once. Before that, b alone is queued and gets all 4
// slots: a's unused share is lent.
//
// Under -race (make test runs this package only so) the jobs take 2 s: on
// CI's loaded 2-core machine a hand-off under the detector took longer
// than half a second, and a pool whose jobs end before the next is handed
// to it is never full, which says nothing of the rule.
func TestFairShareWeights(t *testing.T) {
	payload := "sleep 0.5"
	if raceBuild {
		payload = "sleep 2"
	}
	fairShare(t, nil, payload, true)
}

// TestFairShareWeightsWithQuotas is TestFairShareWeights with a quota
// configured (for a tenant that queues nothing), which serialises fills
// in the process, and short jobs: completions then pile up waiting for
// the fill with their slots already re-claimed, and those slots must
// still count for the tenant they last held, or they would mostly go to
// one tenant (measured: 24:16). With jobs this short the hand-offs, not
// the commands, fill the time, so the pool-full check is left to
// TestFairShareWeights.
func TestFairShareWeightsWithQuotas(t *testing.T) {
	fairShare(t, map[string]int{"idle": 1}, "sleep 0.1", false)
}

// fairShare runs the 3:1 case with the given quotas and job payload; the
// pool-full check (poolFull) needs jobs longer than a hand-off.
func fairShare(t *testing.T, quotas map[string]int, payload string, poolFull bool) {
	log := newStartLog()
	b := setup(t, setupOpts{workers: 4, lease: 30 * time.Second, weights: map[string]int{"a": 3, "b": 1}, quotas: quotas,
		worker: func(c *worker.Config) { c.Observer = log.observe }})
	q := queueOnly(t, b)

	// Lending: b alone, gated, takes every slot.
	for i := range 4 {
		if _, _, err := q.Enqueue(b.ctx, gpu.EnqueueRequest{ID: fmt.Sprintf("b-lend%d", i), Tenant: "b", Payload: b.gate("lend")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.d.Dispatch(b.ctx); err != nil {
		t.Fatal(err)
	}
	b.waitFor("b to run on all 4 slots", func() bool {
		v, err := b.d.View(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, tv := range v.Tenants {
			if tv.Tenant == "b" {
				return tv.Running == 4
			}
		}
		return false
	})

	// Both queued: jobs of the same length, interleaved in age so that
	// age alone would split them evenly, and more of each than the first
	// 40 starts take (30 and 10). Half a second each (2 s under -race),
	// so the pool is full even on a loaded machine, where a hand-off can
	// take 100 ms.
	const each = 40
	for i := range each {
		for _, ten := range []string{"a", "b"} {
			if ten == "b" && i >= each/2 {
				continue
			}
			req := gpu.EnqueueRequest{ID: fmt.Sprintf("%s-%02d", ten, i), Tenant: ten, Payload: payload}
			if _, _, err := q.Enqueue(b.ctx, req); err != nil {
				t.Fatal(err)
			}
		}
	}
	stop := make(chan struct{})
	views := sampleView(b, stop)
	b.release("lend")
	b.waitFor("40 queued jobs to start", func() bool {
		started, _ := log.snapshot()
		n := 0
		for _, id := range started {
			if !strings.Contains(id, "lend") {
				n++
			}
		}
		return n >= 40
	})
	close(stop)
	held := <-views
	started, maxRunning := log.snapshot()
	split := map[string]int{}
	n := 0
	for _, id := range started {
		if strings.Contains(id, "lend") || n == 40 {
			continue
		}
		split[tenantOf(id)]++
		n++
	}
	t.Logf("first 40 starts: a=%d b=%d; most commands running at once: %v; most slots held (pool view): %v", split["a"], split["b"], maxRunning, held)
	// Under -race the detector slows hand-offs unevenly, and the first 40
	// starts are then about the machine, not the rule: the split is held
	// in an ordinary run (go test ./shared/gpu/) and logged here.
	if !raceBuild && (split["a"] < 26 || split["a"] > 34 || split["a"]+split["b"] != 40) {
		t.Errorf("first 40 starts split a=%d b=%d; want 30:10 ± 4 for weights 3:1", split["a"], split["b"])
	}
	if poolFull && (held[""] < 4 || held["a"] < 3 || held["b"] < 1) {
		t.Errorf("the pool view held at most %v; want the pool full (4), a reaching its 3 slots and b its 1", held)
	}
	// Let the rest drain, so the workers' commands end before cleanup.
	for i := range each {
		b.waitStatus(fmt.Sprintf("a-%02d", i), gpu.StatusSucceeded)
		if i < each/2 {
			b.waitStatus(fmt.Sprintf("b-%02d", i), gpu.StatusSucceeded)
		}
	}
}

// TestQuotaNeverExceeded: tenant c has a quota of 1 slot and a long queue,
// d has none; 3 slots. c never runs two jobs at once, by the workers' own
// start and finish events and by the dispatcher's view of the slots
// sampled meanwhile; d uses the slots c may not, and every job succeeds.
func TestQuotaNeverExceeded(t *testing.T) {
	log := newStartLog()
	b := setup(t, setupOpts{workers: 3, lease: 30 * time.Second, quotas: map[string]int{"c": 1},
		worker: func(c *worker.Config) { c.Observer = log.observe }})
	q := queueOnly(t, b)
	var ids []string
	for i := range 8 {
		for _, ten := range []string{"c", "d"} {
			id := fmt.Sprintf("%s-%d", ten, i)
			ids = append(ids, id)
			if _, _, err := q.Enqueue(b.ctx, gpu.EnqueueRequest{ID: id, Tenant: ten, Priority: map[string]int{"c": 9, "d": 0}[ten], Payload: map[string]string{"c": "sleep 0.1", "d": "sleep 1"}[ten]}); err != nil {
				t.Fatal(err)
			}
		}
	}
	stop := make(chan struct{})
	views := sampleView(b, stop)
	if _, err := b.d.Dispatch(b.ctx); err != nil {
		t.Fatal(err)
	}
	var cJobs []gpu.Job
	for _, id := range ids {
		j := b.waitStatus(id, gpu.StatusSucceeded)
		if j.Tenant == "c" {
			cJobs = append(cJobs, j)
		}
	}
	close(stop)
	_, maxRunning := log.snapshot()
	if maxRunning["c"] != 1 {
		t.Errorf("tenant c ran %d jobs at once; its quota is 1", maxRunning["c"])
	}
	// d's jobs last a second, so that the two slots c may not use are seen
	// busy at once however slow the hand-offs (-race, a loaded machine).
	if maxRunning["d"] < 2 {
		t.Errorf("tenant d ran at most %d at once; want the 2 slots c may not use", maxRunning["d"])
	}
	// The job records cannot show it: a completion hands its slot to the
	// next job before it writes its own outcome (Complete), so c's next
	// job is dispatched before the previous one's finishedAt, on the slot
	// it freed. The dispatcher's own count must never pass the quota
	// either: sampled while the queue drained (see sampleView).
	if v := (<-views)["c"]; v > 1 {
		t.Errorf("the pool view showed tenant c on %d slots at once; its quota is 1", v)
	}
	_ = cJobs
}

// TestGPUTypes: a typed job runs only on a slot of its type, even when
// another slot is free; an untyped job takes any slot; a type no pool
// entry has is a 400 naming gpuType, and nothing is queued.
func TestGPUTypes(t *testing.T) {
	b := setup(t, setupOpts{workers: 3, types: []string{"", "nvidia-l4", ""}})
	l4 := b.workers[1].URL

	first := b.enqueue(gpu.EnqueueRequest{ID: "l4-first", GPUType: "nvidia-l4", Payload: b.gate("l4")})
	if first.Worker != l4 {
		t.Fatalf("the l4 job went to %s; want the l4 worker %s", first.Worker, l4)
	}
	second := b.enqueue(gpu.EnqueueRequest{ID: "l4-second", GPUType: "nvidia-l4", Payload: "true"})
	if second.Status != gpu.StatusQueued {
		t.Fatalf("the second l4 job is %s on %s with the l4 slot busy; want it queued (the free slots are untyped)", second.Status, second.Worker)
	}
	any := b.enqueue(gpu.EnqueueRequest{ID: "untyped", Payload: "true"})
	if j := b.waitStatus(any.ID, gpu.StatusSucceeded); j.Worker == l4 {
		t.Errorf("the untyped job ran on the busy l4 worker")
	}
	if got := b.job("l4-second"); got.Status != gpu.StatusQueued {
		t.Errorf("the second l4 job is %s after the untyped one ran; want still queued", got.Status)
	}
	b.release("l4")
	if j := b.waitStatus("l4-second", gpu.StatusSucceeded); j.Worker != l4 {
		t.Errorf("the second l4 job ran on %s; want %s", j.Worker, l4)
	}

	v, err := b.d.View(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range v.Slots {
		want := ""
		if s.Worker == l4 {
			want = "nvidia-l4"
		}
		if s.GPUType != want {
			t.Errorf("slot %s shows type %q; want %q", s.ID, s.GPUType, want)
		}
	}

	for _, c := range []struct{ body, field string }{
		{`{"payload":"true","gpuType":"nvidia-h100"}`, "gpuType"},
		{`{"payload":"true","gpuType":"Not A Type"}`, "gpuType"},
		{`{"payload":"true","tenant":"no spaces"}`, "tenant"},
	} {
		req, _ := http.NewRequest(http.MethodPost, b.api.URL+"/gpu/jobs", strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error struct {
				Field string `json:"field"`
			} `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || e.Error.Field != c.field {
			t.Errorf("POST %s = %d naming %q; want 400 naming %s", c.body, resp.StatusCode, e.Error.Field, c.field)
		}
	}
	jobs, _, err := b.d.List(b.ctx, gpu.ListQuery{})
	if err != nil || len(jobs) != 3 {
		t.Errorf("after the refused enqueues there are %d jobs (%v); want the 3 accepted", len(jobs), err)
	}
}

// TestQuotaLiftedTakesFreeSlot: a job held back by its tenant's quota runs
// on a free slot as soon as the tenant's running job ends, even when that
// job's own slot goes to another tenant. Two slots; c (quota 1) has c1
// running and c2 queued, so the other slot is left free; e1, older than
// c2, is queued without being dispatched. c1's completion hands its slot
// to e1 (the older head, both tenants at 0), and c2 must then take the
// free slot while e1 still runs, not wait for e1 or the next sweep.
func TestQuotaLiftedTakesFreeSlot(t *testing.T) {
	b := setup(t, setupOpts{workers: 2, lease: 30 * time.Second, quotas: map[string]int{"c": 1}})
	q := queueOnly(t, b)
	for _, id := range []string{"c-1", "c-2"} {
		payload := "true"
		if id == "c-1" {
			payload = b.gate("c1")
		}
		if _, _, err := q.Enqueue(b.ctx, gpu.EnqueueRequest{ID: id, Tenant: "c", Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.d.Dispatch(b.ctx); err != nil {
		t.Fatal(err)
	}
	c1 := b.waitStatus("c-1", gpu.StatusRunning)
	if got := b.job("c-2"); got.Status != gpu.StatusQueued {
		t.Fatalf("c-2 is %s with c-1 running; want queued (quota 1)", got.Status)
	}
	// e1, an hour older than c-2, queued without a dispatch.
	past := &clock{}
	past.Advance(-time.Hour)
	old, err := gpu.New(gpu.Config{Store: b.st, Clock: past, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := old.Enqueue(b.ctx, gpu.EnqueueRequest{ID: "e-1", Tenant: "e", Payload: b.gate("e1")}); err != nil {
		t.Fatal(err)
	}
	b.release("c1")
	e1 := b.waitStatus("e-1", gpu.StatusRunning)
	if e1.Worker != c1.Worker {
		t.Logf("e-1 went to %s, not c-1's slot %s", e1.Worker, c1.Worker)
	}
	c2 := b.waitStatus("c-2", gpu.StatusSucceeded)
	if got := b.job("e-1"); got.Status != gpu.StatusRunning {
		t.Errorf("e-1 is %s; c-2 should have run beside it", got.Status)
	}
	if c2.Worker == e1.Worker {
		t.Errorf("c-2 ran on e-1's worker %s; want the free one", c2.Worker)
	}
	b.release("e1")
	b.waitStatus("e-1", gpu.StatusSucceeded)
}
