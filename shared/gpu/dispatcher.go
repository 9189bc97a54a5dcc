package gpu

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/baton-cron/baton/shared/clock"
	"github.com/baton-cron/baton/shared/gpu/gpumodel"
	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/metrics"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// Defaults for Config.
const (
	// DefaultLeaseTTL is short so a dead worker's job is requeued within
	// about 20 s: the worker beats every third of it (one write every 5 s
	// per running job), the sweep takes the job back ClockSkew after the
	// lease, and heartbeats run that sweep (see Heartbeat). docs/gpu.md
	// has the timeline and the write cost.
	DefaultLeaseTTL       = 15 * time.Second
	DefaultRefusalBackoff = 2 * time.Second
	DefaultRunTimeout     = 15 * time.Second
	// DefaultPreemptMinRun protects a preemptible job for its first 30 s,
	// so a stream of urgent jobs cannot keep killing it before it has
	// done any work.
	DefaultPreemptMinRun = 30 * time.Second
	// DefaultMaxPreemptions bounds how often one job is preempted; after
	// that it runs to its end.
	DefaultMaxPreemptions = 3
	// DefaultTenantHintTTL bounds how stale a view of the queued tenants
	// a hand-off may act on (claimFair): a dispatcher that has handed
	// off within it knows whether a second tenant queued since.
	DefaultTenantHintTTL = 2 * time.Second
)

// Config configures a Dispatcher.
type Config struct {
	// Store holds the GPU queue (its GPU view: jobs and slots). Required.
	Store store.Backend
	// Pool lists the workers (see ParsePool).
	Pool Pool
	// HTTPClient posts /run to workers; nil means a client with RunTimeout.
	HTTPClient *http.Client
	// Authorize adds credentials to each POST /run: a bearer token locally,
	// a Google ID token for the worker's URL in the cloud. Nil adds none.
	Authorize func(req *http.Request) error
	// Clock is the clock for leases and timestamps; nil means the wall
	// clock.
	Clock clock.Clock
	// LeaseTTL is the job lease (and the slot's while it is being filled);
	// heartbeats extend the job's. A slot linked to a job holds it for the
	// job's whole run instead (see runLease).
	LeaseTTL time.Duration
	// RefusalBackoff keeps a slot whose worker refused a job out of
	// dispatch for a moment, so a busy worker is not hammered.
	RefusalBackoff time.Duration
	// RunTimeout bounds POST /run. Cloud Run answers 429 after about 10 s
	// at max instances, so the default is a little longer.
	RunTimeout time.Duration
	// ClockSkew is added to every lease before it counts as expired, since
	// the instance that wrote it may have a different clock.
	ClockSkew time.Duration
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Outputs reads the workers' stdout and stderr objects for GET
	// /gpu/jobs/{id}/logs; nil answers that route 503 naming BATON_BUCKET.
	Outputs Outputs
	// Metrics records queue waits; nil records into metrics.Default().
	Metrics *metrics.Set
	// Weights are the tenants' weights for fair share (BATON_GPU_WEIGHTS,
	// see ParseShares); a tenant not named weighs 1.
	Weights map[string]int
	// Quotas cap each named tenant's running slots (BATON_GPU_QUOTAS); a
	// tenant not named has no cap.
	Quotas map[string]int
	// PreemptMinRun is how long a preemptible job runs (from its first
	// heartbeat) before it may be preempted; 0 means DefaultPreemptMinRun.
	PreemptMinRun time.Duration
	// MaxPreemptions bounds how often one job is preempted; 0 means
	// DefaultMaxPreemptions.
	MaxPreemptions int
	// TenantHintTTL is how long a read of the queue heads that found one
	// tenant alone lets later fills claim that tenant's next job without
	// reading the heads again (claimFair); 0 means DefaultTenantHintTTL,
	// and a negative value reads them on every fill.
	TenantHintTTL time.Duration
	// FairHalfLife is the half-life of the usage fair share compares
	// (BATON_GPU_FAIR_HALFLIFE, see usage.go); 0 means
	// DefaultFairHalfLife.
	FairHalfLife time.Duration
}

// Dispatcher is the busy-aware GPU dispatcher. It is safe for concurrent
// use, and any number of dispatchers (function instances) may share one
// database: every state change is a conditional update.
type Dispatcher struct {
	cfg  Config
	q    store.GPU
	ids  []string
	urls map[string]string // slot id → worker URL
	// types is each slot's GPU type ("" untyped), from the configured
	// pool rather than the slot documents, so retyping a worker takes
	// effect at the next deploy.
	types map[string]string

	// fillMu makes choosing a job and linking it to its slot one step per
	// process when quotas are configured, so this process's concurrent
	// fills (hand-offs from completions answered in parallel) count each
	// other's running slots and cannot together overrun a tenant's quota.
	// Dispatchers in other processes can still race: docs/gpu.md has the
	// bound.
	fillMu sync.Mutex

	initMu sync.Mutex
	inited bool

	// hint is, per slot type (key "" for untyped slots), what the last
	// read of the queue heads found: the single-tenant guess (claimFair).
	hintMu sync.Mutex
	hint   map[string]tenantHint
	// guessing is, per slot type, the one fill acting on the guess
	// (takeGuess): "" while it claims, then the id of the job it claimed,
	// until send has read the heads again (endGuess).
	guessing map[string]string

	// lastSweep is when sweepSoon last ran (Unix nanoseconds), so
	// heartbeats sweep at most once per DefaultSweepEvery.
	lastSweep atomic.Int64

	// testHookEmptyFill, when set by a test, runs when fill has found no
	// queued job and still holds the slot: the window a late enqueue hits.
	testHookEmptyFill func()
}

// New returns a dispatcher. Slot documents and indexes are created on
// first use (see Init).
func New(cfg Config) (*Dispatcher, error) {
	if cfg.Store == nil {
		return nil, errors.New("gpu: new dispatcher: Config.Store is nil")
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.RefusalBackoff <= 0 {
		cfg.RefusalBackoff = DefaultRefusalBackoff
	}
	if cfg.RunTimeout <= 0 {
		cfg.RunTimeout = DefaultRunTimeout
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: cfg.RunTimeout}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Metrics = metrics.Or(cfg.Metrics)
	if cfg.PreemptMinRun <= 0 {
		cfg.PreemptMinRun = DefaultPreemptMinRun
	}
	if cfg.MaxPreemptions <= 0 {
		cfg.MaxPreemptions = DefaultMaxPreemptions
	}
	if cfg.TenantHintTTL == 0 {
		cfg.TenantHintTTL = DefaultTenantHintTTL
	}
	if cfg.FairHalfLife <= 0 {
		cfg.FairHalfLife = DefaultFairHalfLife
	}
	d := &Dispatcher{
		cfg:   cfg,
		q:     cfg.Store.GPU(),
		ids:   cfg.Pool.slotIDs(),
		urls:  map[string]string{},
		types: map[string]string{},
	}
	for _, w := range cfg.Pool {
		for i := 0; i < w.Slots; i++ {
			d.urls[SlotID(w.URL, i)] = w.URL
			d.types[SlotID(w.URL, i)] = w.Type
		}
	}
	return d, nil
}

// Pool returns the configured pool.
func (d *Dispatcher) Pool() Pool { return d.cfg.Pool }

// LeaseTTL returns the slot and job lease.
func (d *Dispatcher) LeaseTTL() time.Duration { return d.cfg.LeaseTTL }

// Init creates one document per configured slot. It is idempotent, and
// every other method calls it first. The indexes (Indexes) are not created
// here, so a cold start does no index work: Terraform declares them in the
// cloud, and the local stack creates them, as for the scheduler's.
func (d *Dispatcher) Init(ctx context.Context) error {
	d.initMu.Lock()
	defer d.initMu.Unlock()
	if d.inited {
		return nil
	}
	slots := make([]Slot, len(d.ids))
	for i, id := range d.ids {
		slots[i] = Slot{ID: id, Worker: d.urls[id], LeaseUntil: time.Unix(0, 0).UTC()}
	}
	if err := d.q.EnsureSlots(ctx, slots...); err != nil {
		return fmt.Errorf("gpu: init %w", err)
	}
	// Jobs queued by a version before tenants and GPU types have neither
	// field, and the queue's equality queries would never find them.
	if n, err := d.q.UpgradeQueued(ctx, maxUpgradeQueued); err != nil {
		return fmt.Errorf("gpu: init: %w", err)
	} else if n > 0 {
		d.cfg.Logger.Info("gpu: gave queued jobs from an earlier version a tenant and any GPU type", "jobs", n)
	}
	d.inited = true
	return nil
}

// Enqueue validates req, inserts the job (idempotently when req.ID is set)
// and dispatches at once. created is false when a job with that id existed.
func (d *Dispatcher) Enqueue(ctx context.Context, req EnqueueRequest) (job Job, created bool, err error) {
	if err := req.normalize(); err != nil {
		return Job{}, false, err
	}
	if err := d.checkType(req.GPUType); err != nil {
		return Job{}, false, err
	}
	id := req.ID
	if id == "" {
		id = newJobID(d.cfg.Clock.Now())
	}
	return d.insert(ctx, id, SourceAPI, req)
}

// EnqueueRun enqueues the gpu target of a schedule run. The job id comes
// from the run id, so a repeated call (a retried tick) enqueues nothing
// twice. It implements scheduler.GPU.
func (d *Dispatcher) EnqueueRun(ctx context.Context, runID string, t schedule.GPUTarget) (string, error) {
	req := EnqueueRequest{
		ID: schedule.GPUJobID(runID), Payload: t.Payload, Priority: t.Priority, MaxAttempts: t.MaxAttempts, Timeout: t.Timeout, Shard: t.Shard,
		Tenant: t.Tenant, GPUType: t.GPUType, Preemptible: t.Preemptible,
	}
	err := req.normalize()
	if err == nil {
		// The Schedules API checks gpuType against its pool when it
		// knows one; a schedule written without that check, or before the
		// pool lost the type, still must not queue a job no slot can run.
		err = d.checkType(req.GPUType)
	}
	if err != nil {
		// Permanent: asking again cannot help, so the run fails rather
		// than wait for a job that will never be queued.
		return "", fmt.Errorf("gpu: enqueue run %s: %w: %w", runID, schedule.ErrInvalidGPUTarget, err)
	}
	job, _, err := d.insert(ctx, req.ID, SourceRunPrefix+runID, req)
	if err != nil {
		return "", err
	}
	return job.ID, nil
}

func (d *Dispatcher) insert(ctx context.Context, id, source string, req EnqueueRequest) (Job, bool, error) {
	if err := d.Init(ctx); err != nil {
		return Job{}, false, err
	}
	job := Job{
		ID: id, Status: StatusQueued, Priority: req.Priority, MaxAttempts: req.MaxAttempts,
		Timeout: req.Timeout, Payload: req.Payload, Source: source, CreatedAt: d.cfg.Clock.Now().UTC(),
		Tenant: req.Tenant, GPUType: req.GPUType, Shard: req.Shard, Preemptible: req.Preemptible,
	}
	created, err := d.q.Enqueue(ctx, job)
	if err != nil {
		return Job{}, false, fmt.Errorf("gpu: enqueue %s: %w", id, err)
	}
	if !created {
		job, err = d.Get(ctx, id)
		return job, false, err
	}
	// The caller hanging up must not strand a half-dispatched job.
	if _, err := d.Dispatch(context.WithoutCancel(ctx)); err != nil {
		// The job is safely queued; the next completion or sweep
		// dispatches it.
		d.cfg.Logger.Warn("gpu: dispatch after enqueue", "job", id, "error", err.Error())
	}
	if got, err := d.Get(ctx, id); err == nil {
		job = got
	}
	if job.Status == StatusQueued && job.Priority > 0 {
		// No slot took it: it may take a preemptible job's (preempt.go).
		// A priority-0 job outranks none, so the common enqueue pays no
		// extra read. The slot comes back through the victim's
		// completion, not this call.
		d.preemptLogged(context.WithoutCancel(ctx))
	}
	return job, true, nil
}

// checkType refuses a gpuType that no pool entry has: no slot could ever
// run the job.
func (d *Dispatcher) checkType(t string) error {
	if t == "" || d.cfg.Pool.HasType(t) {
		return nil
	}
	have := d.cfg.Pool.Types()
	if len(have) == 0 {
		return httpapi.BadRequest("gpuType", "%q: no worker in the pool (BATON_GPU_POOL) declares a GPU type; omit gpuType", t)
	}
	return httpapi.BadRequest("gpuType", "%q: no worker in the pool (BATON_GPU_POOL) has that type; the pool has %s", t, strings.Join(have, ", "))
}

// newJobID is time-ordered (for humans reading a list) and random enough
// to never collide.
func newJobID(now time.Time) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "j" + now.UTC().Format("20060102T150405.000") + "-" + hex.EncodeToString(b[:])
}

// Dispatch sends queued jobs to free slots until it runs out of either,
// and returns how many jobs it handed to a worker. Slots whose worker
// refuses are skipped for the rest of the call and back off briefly.
func (d *Dispatcher) Dispatch(ctx context.Context) (int, error) {
	if err := d.Init(ctx); err != nil {
		return 0, err
	}
	if len(d.ids) == 0 {
		return 0, nil
	}
	refused := map[string]bool{}
	late := 0
	// Sends run concurrently: each POST /run can take as long as its
	// worker's instance needs to start (RunTimeout), and one cold or slow
	// worker must not hold back the jobs claimed for the others (measured
	// by `baton bench gpu-cold`). The claims stay one at a time, so the
	// queue order and the quotas are decided as before. Dispatch returns
	// once every send has been answered.
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		n       int
		sendErr error
		// bounced are the slots whose worker refused during this call,
		// merged into refused before each claim: as when the sends ran one
		// at a time, a refusing worker is not tried twice in one
		// call, even if its backoff ends meanwhile.
		bounced []string
	)
	done := func(err error) (int, error) {
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			err = sendErr
		}
		return n, err
	}
	for {
		if err := ctx.Err(); err != nil {
			return done(err)
		}
		mu.Lock()
		for _, id := range bounced {
			refused[id] = true
		}
		bounced = bounced[:0]
		mu.Unlock()
		slot, job, secret, err := d.claim(ctx, refused)
		if errors.Is(err, errLateJob) && late < maxLateJobs {
			late++
			continue
		}
		if errors.Is(err, errLateJob) {
			return done(nil) // still queued: the next completion or sweep takes it
		}
		if err != nil || slot == nil {
			return done(err)
		}
		if job == nil {
			// Nothing this slot's type can run (or only tenants at
			// their quota): its like are no use either for the rest of
			// the call, but a slot of another type may be.
			for id, t := range d.types {
				if t == d.types[slot.ID] {
					refused[id] = true
				}
			}
			continue
		}
		// A slot being sent to is held, and one whose worker refuses is
		// freed only after RefusalBackoff, so no later claim of this call
		// takes it again.
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := d.send(ctx, slot, job, secret)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				n++
			case errors.Is(err, ErrRefused) || errors.Is(err, ErrUnanswered):
				bounced = append(bounced, slot.ID)
			case sendErr == nil:
				sendErr = err
			}
		}()
	}
}

// claim takes a claimable slot and then the best queued job, with the
// dispatch's secret (see fill). It returns a nil slot when there is no free
// slot, and the slot (freed again) with a nil job when no queued job fits
// it.
func (d *Dispatcher) claim(ctx context.Context, refused map[string]bool) (*Slot, *Job, string, error) {
	ids := make([]string, 0, len(d.ids))
	for _, id := range d.ids {
		if !refused[id] {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, nil, "", nil
	}
	now := d.cfg.Clock.Now().UTC()
	lease := now.Add(d.cfg.LeaseTTL)
	expired := now.Add(-d.cfg.ClockSkew)
	// Step 1: the slot. Bumping the epoch fences out whoever held it
	// before. If we die here, the slot's lease runs out and it is
	// claimable again. The previous dispatch's secret goes with its epoch.
	slot, err := d.q.ClaimSlot(ctx, ids, expired, lease)
	if errors.Is(err, store.ErrConflict) {
		return nil, nil, "", nil
	}
	if err != nil {
		return nil, nil, "", fmt.Errorf("gpu: claim slot: %w", err)
	}
	job, secret, err := d.fill(ctx, &slot, nil)
	if err != nil {
		return nil, nil, "", err
	}
	return &slot, job, secret, nil
}

// fill gives a claimed slot the best queued job and links the two. With no
// queued job it frees the slot and returns a nil job. It also returns the
// dispatch's secret, which exists nowhere else: the job and the slot keep
// only its hash, and send puts it in POST /run.
//
// early, when not nil, is a read of the queue heads started before the slot
// was held (see claimFair).
func (d *Dispatcher) fill(ctx context.Context, slot *Slot, early <-chan headsRead) (*Job, string, error) {
	// serial makes the rest of the fill one step per process (fillMu):
	// with quotas always, and otherwise from when claimFair finds more
	// than one tenant queued (fair share then decides by the usage the
	// slots show, and fills deciding together would each give their slot
	// to the tenant whose just-started job counts little yet). A single
	// tenant's fills, and the single-tenant guess, stay concurrent:
	// serialising them would cap how many slots one process can fill per
	// second.
	locked := false
	serial := func() {
		if !locked {
			d.fillMu.Lock()
			locked = true
		}
	}
	defer func() {
		if locked {
			d.fillMu.Unlock()
		}
	}()
	if len(d.cfg.Quotas) > 0 {
		serial()
	}
	now := d.cfg.Clock.Now().UTC()
	lease := now.Add(d.cfg.LeaseTTL)
	secret, hash := newSecret()
	// Step 2: the job, stamped with the slot's fence and the secret's hash
	// in one write, so no reader sees a fence without the hash that
	// guards it, and every write that clears the fence clears the hash. If
	// we die here, the job's own lease runs out and Sweep requeues it.
	job, lift, err := d.claimFair(ctx, *slot, hash, now, lease, early, serial)
	if err != nil {
		if errors.Is(err, store.ErrConflict) && d.testHookEmptyFill != nil {
			d.testHookEmptyFill()
		}
		d.freeSlot(ctx, slot.ID, slot.Epoch, time.Unix(0, 0).UTC(), d.holdEnd(*slot, now))
		if !errors.Is(err, store.ErrConflict) {
			return nil, "", fmt.Errorf("gpu: claim job: %w", err)
		}
		// A job enqueued between the query above and the free found
		// the slot still held, so its own Dispatch gave up: look once
		// more now that the slot is free, or it waits for the next sweep.
		if d.fits(ctx, slot.ID) {
			return nil, "", errLateJob
		}
		return nil, "", nil
	}
	// Step 3: link the slot to the job, under the fence. The slot keeps the
	// hash too: a completion re-claims the slot before it touches the job
	// (see Complete), and that write must be the worker's alone. The same
	// write gives the slot its lease for the whole run, so heartbeats
	// write the job alone. It also records the slot's fair-share usage:
	// the hold that just ended (or ended at its release) folded in, as
	// read from the claim's own answer, so usage costs no extra read or
	// write (usage.go).
	err = d.q.LinkSlot(ctx, slot.ID, slot.Epoch, job.ID, job.TenantOf(), hash, d.runLease(now, job), d.linkUsage(*slot, job.TenantOf(), lift, now))
	if err != nil {
		// We were too slow and lost the slot: give the job back unharmed.
		if d.ownsGuess(slot.ID, job.ID) {
			d.endGuess(slot.ID)
		}
		d.requeueUnharmed(ctx, &job)
		if errors.Is(err, store.ErrConflict) {
			return nil, "", nil
		}
		return nil, "", fmt.Errorf("gpu: link slot %s to job %s: %w", slot.ID, job.ID, err)
	}
	if job.Attempts == 0 {
		// First dispatch: the wait the queue cost this job. A retried
		// attempt's createdAt is the original enqueue, which would count
		// its earlier runs as waiting.
		d.cfg.Metrics.GPUDispatched(ctx, job.CreatedAt, now)
	}
	slot.JobID = job.ID
	slot.Tenant = job.TenantOf()
	slot.SecretHash = hash
	slot.LinkedTenant, slot.LinkedAt, slot.FreedAt = job.TenantOf(), now, time.Time{}
	return &job, secret, nil
}

// maxTenantsPerDispatch bounds the tenants one dispatch reads heads for,
// per GPU type, so a flood of tenant names cannot make a dispatch
// unbounded; tenants past it (in name order) wait until those before them
// drain.
const maxTenantsPerDispatch = 200

// maxHeadRaces bounds how often claimFair picks again after another
// dispatcher took the head it chose.
const maxHeadRaces = 3

// claimFair claims for slot the job weighted fair share picks (pickHead)
// among the heads of the tenants' queues that the slot's type can run:
// the chosen tenant's best job that is still queued, in one conditional
// write. With nothing to run it returns an error wrapping
// store.ErrConflict, as ClaimBestJob would.
//
// Its reads: the heads (one indexed job per tenant with queued work, per
// type the slot takes, plus one probe for the last tenant's name, read at
// the same time) and, with more than one tenant queued or with quotas, the
// pool's slot documents (each tenant's running slots); then one
// conditional write.
//
// early, when not nil, is a read of the heads that the caller started
// before it held the slot (reclaim); it is used for the first choice.
//
// The single-tenant guess: when a read of this slot type's heads found one
// tenant alone in the queue less than TenantHintTTL ago (the hint), and no
// quotas are set, the fill claims that tenant's best job without reading
// the heads first: one query on the hand-off instead of three. A queued
// job of another tenant is then invisible to this fill, so the guess
// trades a bounded lag in fair share for the hand-off (measured by `baton
// bench gpu`, docs/gpu.md): send reads the heads again after each guessed
// dispatch, so within one dispatcher a new tenant is seen by the next
// fill, and a dispatcher that has not read them for TenantHintTTL reads
// them first. Within the tenant the queue order is kept exactly.
//
// serial is called before choosing among more than one tenant (see fill).
func (d *Dispatcher) claimFair(ctx context.Context, slot Slot, hash string, now, lease time.Time, early <-chan headsRead, serial func()) (Job, float64, error) {
	types := d.slotTypes(slot.ID)
	if early == nil {
		if guess, ok := d.takeGuess(slot.ID); ok {
			job, err := d.q.ClaimTenantJob(ctx, guess, types, slot, hash, now, lease)
			if err == nil {
				d.guessed(slot.ID, job.ID) // send ends the guess
				return job, 0, nil
			}
			d.endGuess(slot.ID)
			if !errors.Is(err, store.ErrConflict) {
				return job, 0, err
			}
			// Nothing of that tenant's is queued: read the heads.
		}
	}
	for range maxHeadRaces {
		if early == nil {
			early = d.readHeads(ctx, slot.ID)
		}
		hr := <-early
		early = nil
		if hr.err != nil {
			return Job{}, 0, hr.err
		}
		if len(hr.heads) > 1 {
			serial()
		}
		head, lift, ok, err := d.choose(ctx, slot.ID, hr.heads)
		if err != nil {
			return Job{}, 0, err
		}
		if !ok {
			return Job{}, 0, fmt.Errorf("no queued job fits slot %s: %w", slot.ID, store.ErrConflict)
		}
		// The tenant's best job now, not the head by id: dispatchers
		// racing on one tenant then each take the next of its jobs
		// instead of all but one losing the head.
		job, err := d.q.ClaimTenantJob(ctx, head.Tenant, types, slot, hash, now, lease)
		if !errors.Is(err, store.ErrConflict) {
			return job, lift, err
		}
		// Another dispatcher took its last fitting job, or it was
		// cancelled: choose again.
	}
	return Job{}, 0, fmt.Errorf("slot %s: the chosen job was taken %d times: %w", slot.ID, maxHeadRaces, store.ErrConflict)
}

// slotTypes are the job gpuTypes slot id can run: untyped jobs, and its
// own type's.
func (d *Dispatcher) slotTypes(id string) []string {
	if t := d.types[id]; t != "" {
		return []string{"", t}
	}
	return []string{""}
}

// headsRead is the answer of readHeads.
type headsRead struct {
	heads []Job
	err   error
}

// readHeads starts reading the queue heads that slot id can run, and
// keeps the hint for the slot's type (noteHeads). The channel is
// buffered: a read nobody waits for ends on its own.
func (d *Dispatcher) readHeads(ctx context.Context, slotID string) <-chan headsRead {
	out := make(chan headsRead, 1)
	go func() {
		at := d.cfg.Clock.Now()
		heads, err := d.q.QueueHeads(ctx, d.slotTypes(slotID), maxTenantsPerDispatch)
		if err != nil {
			out <- headsRead{err: fmt.Errorf("queue heads: %w", err)}
			return
		}
		d.noteHeads(slotID, heads, at)
		out <- headsRead{heads: heads}
	}()
	return out
}

// tenantHint is what the last read of one slot type's queue heads said:
// which tenant alone was queued, and when the read began.
type tenantHint struct {
	tenant string // as stored, so a claim matches it exactly
	single bool   // false: several tenants were queued
	at     time.Time
}

// noteHeads keeps the hint for slotID's type from a read of its heads
// that began at at. An empty queue keeps the tenant it had (no other
// tenant is queued, which is all the guess assumes) and renews it. An
// untyped head also clears the other types' hints that name another
// tenant alone.
func (d *Dispatcher) noteHeads(slotID string, heads []Job, at time.Time) {
	d.hintMu.Lock()
	defer d.hintMu.Unlock()
	if d.hint == nil {
		d.hint = map[string]tenantHint{}
	}
	key := d.types[slotID]
	if cur, ok := d.hint[key]; ok && cur.at.After(at) {
		return // a newer read has spoken
	}
	switch len(heads) {
	case 0:
		if cur, ok := d.hint[key]; ok && cur.single {
			d.hint[key] = tenantHint{tenant: cur.tenant, single: true, at: at}
		}
	case 1:
		d.hint[key] = tenantHint{tenant: heads[0].Tenant, single: true, at: at}
	default:
		d.hint[key] = tenantHint{at: at}
	}
	// An untyped job runs on every slot, so its tenant is queued for
	// every type: another type's hint naming someone else alone is wrong
	// as of this read, and a guess on it would hand that type's next
	// slot past the job too (one lost hand-off per type, not per
	// dispatcher).
	for _, h := range heads {
		if h.GPUType != "" {
			continue
		}
		for k, cur := range d.hint {
			if k != key && cur.single && cur.tenant != h.Tenant && !cur.at.After(at) {
				d.hint[k] = tenantHint{at: at}
			}
		}
	}
}

// hintFresh is the guess for slotID's type: the tenant that the last read
// of its heads found alone in the queue, if that read began less than
// TenantHintTTL ago, no other fill is acting on it, and no quotas are set
// (they need every fill to count the running slots).
func (d *Dispatcher) hintFresh(slotID string) (string, bool) {
	d.hintMu.Lock()
	defer d.hintMu.Unlock()
	return d.freshLocked(d.types[slotID])
}

func (d *Dispatcher) freshLocked(key string) (string, bool) {
	if d.cfg.TenantHintTTL < 0 || len(d.cfg.Quotas) > 0 {
		return "", false
	}
	h, ok := d.hint[key]
	if _, busy := d.guessing[key]; !ok || !h.single || busy || d.cfg.Clock.Now().Sub(h.at) >= d.cfg.TenantHintTTL {
		return "", false
	}
	return h.tenant, true
}

// takeGuess is hintFresh for a fill that will act on it: one fill per
// slot type at a time, from the claim until send has read the heads again,
// so fills that run together (completions answered at once) read the
// heads themselves, and a tenant that queued unseen waits for at most one
// guessed hand-off per dispatcher. endGuess ends it.
func (d *Dispatcher) takeGuess(slotID string) (string, bool) {
	d.hintMu.Lock()
	defer d.hintMu.Unlock()
	key := d.types[slotID]
	t, ok := d.freshLocked(key)
	if ok {
		if d.guessing == nil {
			d.guessing = map[string]string{}
		}
		d.guessing[key] = ""
	}
	return t, ok
}

// guessed records that the guess taken for slotID's type claimed jobID,
// for send, which reads the heads again and ends the guess.
func (d *Dispatcher) guessed(slotID, jobID string) {
	d.hintMu.Lock()
	defer d.hintMu.Unlock()
	d.guessing[d.types[slotID]] = jobID
}

// ownsGuess reports whether jobID was claimed on the guess under way for
// slotID's type, so its holder alone ends it.
func (d *Dispatcher) ownsGuess(slotID, jobID string) bool {
	d.hintMu.Lock()
	defer d.hintMu.Unlock()
	g, ok := d.guessing[d.types[slotID]]
	return ok && g == jobID
}

// endGuess ends the guess takeGuess began for slotID's type.
func (d *Dispatcher) endGuess(slotID string) {
	d.hintMu.Lock()
	defer d.hintMu.Unlock()
	delete(d.guessing, d.types[slotID])
}

// recheckHeads reads slotID's heads again after a guessed dispatch, so
// the next fill of its type sees a tenant that queued meanwhile.
func (d *Dispatcher) recheckHeads(ctx context.Context, slotID string) {
	if hr := <-d.readHeads(ctx, slotID); hr.err != nil {
		// The hint then ages out (TenantHintTTL), and the next fill
		// after that reads the heads first.
		d.cfg.Logger.Warn("gpu: read the queue heads after a dispatch", "slot", slotID, "error", hr.err.Error())
	}
}

// best reads the heads the slot can run and the fair state, and picks the
// next job (pickHead); ok is false when there is none.
func (d *Dispatcher) best(ctx context.Context, slotID string) (Job, bool, error) {
	hr := <-d.readHeads(ctx, slotID)
	if hr.err != nil {
		return Job{}, false, hr.err
	}
	head, _, ok, err := d.choose(ctx, slotID, hr.heads)
	return head, ok, err
}

// choose picks the next job among heads for slotID (pickHead), reading
// the slot documents (each tenant's running slots and usage, readFair)
// when it matters: with more than one tenant or with quotas. It returns
// the lift to record with the dispatch.
//
// The slots read counts a slot linked to a job for the job's tenant until
// the slot is released or linked to the next job; so does a slot in the
// middle of a hand-off (re-claimed, not linked yet), for the tenant it
// last held, because its job only just ended and the slot is about to be
// filled. Without that, completions arriving together would each see the
// others' slots as nobody's and give them all to the same tenant. The
// usage counts every hold up to now, the one that just ended on slotID
// included.
func (d *Dispatcher) choose(ctx context.Context, slotID string, heads []Job) (Job, float64, bool, error) {
	if len(heads) == 0 {
		return Job{}, 0, false, nil
	}
	var st *fairState
	if len(heads) > 1 || len(d.cfg.Quotas) > 0 {
		// One tenant with no quota needs no read: its head is the job,
		// whatever its usage.
		var err error
		if st, err = d.readFair(ctx, slotID); err != nil {
			return Job{}, 0, false, err
		}
	}
	head, lift, ok := d.pickHead(heads, st)
	return head, lift, ok, nil
}

// fits reports whether a queued job could run on slot id now. An error
// counts as yes: one more dispatch attempt is cheaper than a job left
// waiting for a sweep.
func (d *Dispatcher) fits(ctx context.Context, id string) bool {
	_, ok, err := d.best(ctx, id)
	return ok || err != nil
}

// runLease is how long a slot linked to job at now stays held: past any
// time the job can still run on it. The worker receives POST /run within
// RunTimeout and kills the command at the job's timeout; one more LeaseTTL
// covers its report. Heartbeats then need not extend the slot (one write
// per beat, not two), and the slot never becomes claimable under a running
// job. It is freed earlier by what ends the job: the completion's hand-off,
// a refusal, or the sweep that takes the job back when its own short lease
// runs out. The cost: a slot whose job was cancelled and whose worker then
// died, or whose sweep died between requeue and release, stays held until
// this lease (docs/gpu.md).
func (d *Dispatcher) runLease(now time.Time, job Job) time.Time {
	return now.Add(d.cfg.RunTimeout + job.Timeout.D() + d.cfg.LeaseTTL)
}

// handoff gives a slot that its worker just released (held under fence f
// for jobID) straight to the next queued job. Anything unusual (the slot
// moved on, the worker refused) falls back to Dispatch.
func (d *Dispatcher) handoff(ctx context.Context, f Fence, jobID string) {
	slotID := f.Slot
	slot, job, secret, ok := d.reclaim(ctx, f, jobID)
	if ok && job == nil && len(d.cfg.Quotas) == 0 {
		return // nothing queued; the slot is free
	}
	if ok && job != nil && d.send(ctx, slot, job, secret) == nil {
		if len(d.cfg.Quotas) > 0 {
			// The finished job's tenant may have been held back by its
			// quota while a slot of the pool sat free; this completion
			// lifts it below the cap, and this slot may have gone to
			// another tenant.
			d.dispatchLogged(ctx, slotID)
		}
		return
	}
	d.dispatchLogged(ctx, slotID)
}

// reclaim is the database half of a hand-off: one write re-claims the slot
// under a new epoch, instead of freeing it and claiming it again, and fill
// gives it the best queued job. It returns ok=false when the slot was not
// reclaimed (the caller falls back to Dispatch), and a nil job when nothing
// is queued (the slot is then free). With the next job comes its new
// dispatch's secret.
func (d *Dispatcher) reclaim(ctx context.Context, f Fence, jobID string) (*Slot, *Job, string, bool) {
	lease := d.cfg.Clock.Now().UTC().Add(d.cfg.LeaseTTL)
	// Fenced on this very job (or none: a slot freed under this epoch) and
	// on the dispatch's secret, since slot, epoch and job id are all
	// public (see store.GPU.ReclaimSlot).
	//
	// The queue heads do not depend on the slot, so they are read while
	// it is re-claimed, unless the fill will guess (claimFair): the
	// hand-off then waits for one of the two, not both in a row. A stale
	// or forged completion (the re-claim refused) costs that read.
	var early <-chan headsRead
	if _, guess := d.hintFresh(f.Slot); !guess {
		early = d.readHeads(ctx, f.Slot)
	}
	slot, err := d.q.ReclaimSlot(ctx, hold(f), jobID, lease)
	if err != nil {
		return nil, nil, "", false
	}
	job, secret, err := d.fill(ctx, &slot, early)
	if err != nil {
		return nil, nil, "", false
	}
	return &slot, job, secret, true
}

func (d *Dispatcher) dispatchLogged(ctx context.Context, slotID string) {
	if _, err := d.Dispatch(ctx); err != nil {
		d.cfg.Logger.Warn("gpu: dispatch after completion", "slot", slotID, "error", err.Error())
	}
}

// send posts the job to the slot's worker. A transient refusal (429, 408,
// 5xx, no connection) sends the job back to the queue without using an
// attempt: another worker, or this one later, may take it. A permanent
// one (any other 4xx: IAM, a wrong URL, a request the worker rejects)
// would refuse it forever, so it uses an attempt like a lost lease, and
// the job dies once it has used maxAttempts. Either way the slot backs off.
// secret is the dispatch's, from fill; it goes to the worker and nowhere
// else.
func (d *Dispatcher) send(ctx context.Context, slot *Slot, job *Job, secret string) error {
	// The job's lease was set at the claim and runs while this request is
	// on its way, so the worker's self-fence counts from it, not from
	// receipt.
	var leaseUntil time.Time
	if job.LeaseUntil != nil {
		leaseUntil = *job.LeaseUntil
	}
	body, _ := json.Marshal(RunRequest{ //nolint:gosec // the dispatch secret goes to the worker on purpose: it proves its callbacks with it (SecretHeader)
		JobID: job.ID, Attempt: job.Attempts + 1, Slot: slot.ID, Epoch: slot.Epoch,
		Payload: job.Payload, Timeout: job.Timeout, Lease: schedule.Duration(d.cfg.LeaseTTL), LeaseUntil: leaseUntil,
		Secret: secret, Shard: job.Shard,
	})
	guessed := d.ownsGuess(slot.ID, job.ID)
	if guessed {
		defer d.endGuess(slot.ID)
	}
	err := d.post(ctx, slot.Worker, body)
	if guessed && (err == nil || errors.Is(err, ErrUnanswered)) {
		// The job has the slot, or may have it (an unanswered POST keeps
		// it there): a hand-off either way, so the next guess must see
		// who queued meanwhile. After the POST, off the hand-off's path;
		// the caller waits for send, so the read still has the
		// instance's CPU. A refused job was requeued: it took nothing.
		d.recheckHeads(ctx, slot.ID)
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrUnanswered) {
		// Requeuing now could run the job twice: once on this worker, which
		// may have it, and once wherever the queue sends it next.
		d.cfg.Logger.Warn("gpu: POST /run unanswered; the job keeps its slot until a heartbeat confirms it or its lease expires",
			"job", job.ID, "slot", slot.ID, "error", err.Error())
		return err
	}
	var answer *runAnswerError
	if errors.As(err, &answer) && answer.permanent() {
		d.cfg.Logger.Warn("gpu: worker refused job permanently; requeued using an attempt", "job", job.ID, "slot", slot.ID,
			"attempts", job.Attempts+1, "dead", job.Attempts+1 >= job.MaxAttempts, "error", err.Error())
		d.requeueRefused(ctx, job, "worker refused: "+answer.reason())
	} else {
		d.cfg.Logger.Info("gpu: worker refused job; requeued without using an attempt", "job", job.ID, "slot", slot.ID, "error", err.Error())
		d.requeueUnharmed(ctx, job)
	}
	// The hold ends where it began: the worker never ran the job, so its
	// tenant is charged no fair-share usage for the time the refusal took
	// to come back (a slow dial, a worker that answers 503 late). The
	// slot's backoff, not the tenant, pays for a broken worker.
	now := d.cfg.Clock.Now().UTC()
	freedAt := slot.LinkedAt
	if freedAt.IsZero() || freedAt.After(now) {
		freedAt = now
	}
	d.freeSlot(ctx, slot.ID, slot.Epoch, now.Add(d.cfg.RefusalBackoff), freedAt)
	return fmt.Errorf("%w: %s: %w", ErrRefused, slot.Worker, err)
}

// maxRefusalBody bounds the worker's answer kept in a refused job's error:
// enough for an error message, not a whole HTML error page.
const maxRefusalBody = 256

// runAnswerError is a worker's non-2xx answer to POST /run. It carries the
// status code, so send can tell a refusal worth retrying from one that
// will be repeated forever.
type runAnswerError struct {
	code   int    // HTTP status code
	status string // status line, e.g. "403 Forbidden"
	body   string // the answer's body, trimmed and bounded
}

func (e *runAnswerError) Error() string { return "POST /run: " + e.reason() }

// reason is the status and body, as the job's error records them.
func (e *runAnswerError) reason() string {
	if e.body == "" {
		return e.status
	}
	return e.status + ": " + e.body
}

// permanent reports whether the same request would be refused again: a 4xx
// other than 408 (the request timed out on its way) and 429 (busy, or
// Cloud Run at max instances), which pass.
func (e *runAnswerError) permanent() bool {
	return e.code/100 == 4 && e.code != http.StatusRequestTimeout && e.code != http.StatusTooManyRequests
}

// post sends POST /run. A non-2xx answer is a *runAnswerError; an answer
// lost after the request went out wraps ErrUnanswered; anything else
// (a failure to connect, to authorize) means the worker never saw it.
func (d *Dispatcher) post(ctx context.Context, workerURL string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.RunTimeout)
	defer cancel()
	// workerURL is the slot document's worker, which Init wrote from the
	// configured pool (BATON_GPU_POOL); a callback's fence only picks which
	// slot, never where it points.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, workerURL+"/run", bytes.NewReader(body)) //nolint:gosec // G704: the URL is the configured pool's (see above), not the caller's
	if err != nil {
		return fmt.Errorf("POST /run: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if d.cfg.Authorize != nil {
		if err := d.cfg.Authorize(req); err != nil {
			return fmt.Errorf("POST /run: authorize: %w", err)
		}
	}
	resp, err := d.cfg.HTTPClient.Do(req) //nolint:gosec // G704: the URL is the configured pool's (see above)
	if err != nil {
		// Only a failure to connect proves the worker never saw the job.
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return fmt.Errorf("POST /run: %w", err)
		}
		return fmt.Errorf("%w: %v", ErrUnanswered, err) //nolint:errorlint // deliberately not wrapped: only a dial error (above) may be read as "the worker never saw the job"
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return &runAnswerError{code: resp.StatusCode, status: resp.Status, body: boundText(msg, maxRefusalBody)}
	}
	return nil
}

// boundText trims b and cuts it to at most n bytes of valid UTF-8, so a
// worker's answer (which may be binary, or cut mid-rune by the read
// limit) can be stored as a job's error.
func boundText(b []byte, n int) string {
	s := strings.ToValidUTF8(string(bytes.TrimSpace(b)), "")
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// requeueRefused takes back a job its worker refused permanently, using an
// attempt (Job.TakenBack: queued again, or dead). Like requeueUnharmed it is
// fenced on the send's slot, epoch and status, and on the attempts it read,
// so a sweep or heartbeat that moved the job on meanwhile wins.
func (d *Dispatcher) requeueRefused(ctx context.Context, job *Job, reason string) {
	err := d.q.RequeueRefused(ctx, *job, reason, d.cfg.Clock.Now().UTC())
	if err != nil && !errors.Is(err, store.ErrConflict) {
		// Its lease will run out and Sweep will requeue it.
		d.cfg.Logger.Warn("gpu: requeue refused job", "job", job.ID, "error", err.Error())
	}
}

// requeueUnharmed puts a dispatched job back in the queue with its
// attempts unchanged (the worker never ran it).
func (d *Dispatcher) requeueUnharmed(ctx context.Context, job *Job) {
	err := d.q.Unclaim(ctx, *job)
	if err != nil && !errors.Is(err, store.ErrConflict) {
		// Its lease will run out and Sweep will requeue it.
		d.cfg.Logger.Warn("gpu: requeue refused job", "job", job.ID, "error", err.Error())
	}
}

// errLateJob: fill found no queued job, freed its slot, and then saw a job
// that arrived meanwhile. The caller dispatches again.
var errLateJob = errors.New("gpu: a job was queued while the slot was being freed")

// maxUpgradeQueued bounds the writes one Init spends on jobs queued by an
// earlier version; a larger backlog is finished by the next instance's.
const maxUpgradeQueued = 10000

// maxLateJobs bounds how often one Dispatch goes round again for errLateJob,
// so a stream of enqueues racing the free cannot keep it looping.
const maxLateJobs = 3

// freeSlot releases a slot held at epoch, making it claimable at
// claimableAt (the zero lease for at once). A newer holder is left alone.
// freedAt ends the slot's fair-share hold (zero: the caller does not know
// whether one is open, and leaves it; the next link ends it at its claim).
func (d *Dispatcher) freeSlot(ctx context.Context, id string, epoch int64, claimableAt, freedAt time.Time) {
	err := d.q.Release(ctx, id, epoch, claimableAt, freedAt)
	if err != nil && !errors.Is(err, store.ErrConflict) {
		// Its lease will run out on its own.
		d.cfg.Logger.Warn("gpu: free slot", "slot", id, "error", err.Error())
	}
}

// hold is the store's fence for a worker's callback under f: the secret
// reaches the store only as its hash.
func hold(f Fence) gpumodel.Hold {
	return gpumodel.Hold{Slot: f.Slot, Epoch: f.Epoch, SecretHash: hashSecret(f.Secret)}
}

// holdEnd is the freedAt to release slot (as its claim returned it) with
// at now: now when a hold is open on it (the job that just ended on a
// hand-off), else zero, so a second release does not move the end.
func (d *Dispatcher) holdEnd(slot Slot, now time.Time) time.Time {
	if slot.LinkedTenant == "" || slot.LinkedAt.IsZero() || (!slot.FreedAt.IsZero() && !slot.FreedAt.Before(slot.LinkedAt)) {
		return time.Time{}
	}
	return now
}
