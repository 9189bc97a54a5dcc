package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/gpu/gpumodel"
	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// gpu: the GPU queue's rules, through store.GPU. A slot's epoch fences
// every write of its holder, so a stale holder changes nothing; a free
// slot and a queued job are each claimed once among racers, the job in
// priority order; an enqueue is idempotent, even when its answer is lost;
// and a fenced callback whose answer was lost is never taken for one
// refused.
func (s *suite) gpu(t *testing.T) {
	t.Run("StaleEpoch", s.gpuStaleEpoch)
	t.Run("ClaimSlotRace", func(t *testing.T) { s.gpuClaimSlotRace(t, false) })
	t.Run("ClaimSlotRaceUnderAborted", func(t *testing.T) { s.gpuClaimSlotRace(t, true) })
	t.Run("ClaimBestJobOrder", s.gpuClaimBestJobOrder)
	t.Run("CountQueued", s.gpuCountQueued)
	t.Run("ClaimBestJobRace", func(t *testing.T) { s.gpuClaimBestJobRace(t, false) })
	t.Run("ClaimBestJobRaceUnderAborted", func(t *testing.T) { s.gpuClaimBestJobRace(t, true) })
	t.Run("EnqueueIdempotent", s.gpuEnqueueIdempotent)
	t.Run("CallbackLostAnswer", s.gpuCallbackLostAnswer)
	t.Run("QueueHeads", s.gpuQueueHeads)
	t.Run("ClaimJob", s.gpuClaimJob)
	t.Run("SlotTenant", s.gpuSlotTenant)
	t.Run("ListTenant", s.gpuListTenant)
	t.Run("UpgradeQueued", s.gpuUpgradeQueued)
	t.Run("Preempt", s.gpuPreempt)
}

// gpuRig opens a store for the case and returns its GPU view.
func (s *suite) gpuRig(t *testing.T) (store.Backend, store.GPU) {
	t.Helper()
	st := s.h.OpenBackend(t)
	return st, st.GPU()
}

// gpuJobsColl is the collection the GPU view keeps jobs in, for the fault
// injector.
const gpuJobsColl = mongostore.GPUJobsCollection

// gpuT0 is the suite's clock, in milliseconds as the database keeps them.
var gpuT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// gpuLease is the lease every claim in the suite takes.
const gpuLease = time.Minute

// gpuRunLease is the slot's lease once linked to a job: the whole run
// (gpu.Dispatcher.runLease), longer than the claim's.
const gpuRunLease = time.Hour

func queuedJob(id string, priority int, createdAt time.Time) gpumodel.Job {
	return gpumodel.Job{ID: id, Status: gpumodel.StatusQueued, Priority: priority, MaxAttempts: 3, Payload: "p-" + id, Source: "api", CreatedAt: createdAt}
}

func freeSlot(id string) gpumodel.Slot {
	return gpumodel.Slot{ID: id, Worker: "http://worker-" + id, LeaseUntil: time.Unix(0, 0).UTC()}
}

func enqueue(t *testing.T, q store.GPU, job gpumodel.Job) {
	t.Helper()
	if created, err := q.Enqueue(t.Context(), job); err != nil || !created {
		t.Fatalf("enqueue %s = %v, %v; want true, nil", job.ID, created, err)
	}
}

func getJob(t *testing.T, q store.GPU, id string) gpumodel.Job {
	t.Helper()
	job, err := q.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("get job %s: %v", id, err)
	}
	return job
}

func getSlot(t *testing.T, q store.GPU, id string) gpumodel.Slot {
	t.Helper()
	slots, err := q.Slots(t.Context(), []string{id})
	if err != nil || len(slots) != 1 {
		t.Fatalf("slot %s = %v, %v; want the one slot", id, slots, err)
	}
	return slots[0]
}

// dispatch claims slot (free, or expired at now) and the best queued job
// for it under secretHash, and links the two, as the dispatcher does.
func dispatch(t *testing.T, q store.GPU, slotID, secretHash string, now time.Time) (gpumodel.Slot, gpumodel.Job) {
	t.Helper()
	ctx := t.Context()
	slot, err := q.ClaimSlot(ctx, []string{slotID}, now, now.Add(gpuLease))
	if err != nil {
		t.Fatalf("claim slot %s at %v: %v", slotID, now, err)
	}
	job, err := q.ClaimBestJob(ctx, slot, secretHash, now, now.Add(gpuLease))
	if err != nil {
		t.Fatalf("claim a job for slot %s@%d: %v", slotID, slot.Epoch, err)
	}
	if err := q.LinkSlot(ctx, slot.ID, slot.Epoch, job.ID, job.TenantOf(), secretHash, now.Add(gpuRunLease), gpumodel.SlotUsage{}); err != nil {
		t.Fatalf("link slot %s@%d to %s: %v", slotID, slot.Epoch, job.ID, err)
	}
	return slot, job
}

// gpuStaleEpoch: a job dispatched under slot s0 at epoch 1 expires, is
// taken back and dispatched again under epoch 2. The epoch-1 holder's
// heartbeat, completion, hand-off reclaim and release are all refused
// with ErrConflict, and the epoch-2 holder's job and slot stand. Both
// dispatches carry the same secret hash on purpose: only the epoch tells
// the stale holder from the current one.
func (s *suite) gpuStaleEpoch(t *testing.T) {
	_, q := s.gpuRig(t)
	ctx := t.Context()
	const hash = "same-secret-hash"
	if err := q.EnsureSlots(ctx, freeSlot("s0")); err != nil {
		t.Fatal(err)
	}
	enqueue(t, q, queuedJob("j", 0, gpuT0))
	old, job := dispatch(t, q, "s0", hash, gpuT0)
	if old.Epoch != 1 || job.Epoch != 1 || job.Slot != "s0" || job.Status != gpumodel.StatusDispatched {
		t.Fatalf("first dispatch: slot %+v, job %+v; want both at epoch 1, the job dispatched on s0", old, job)
	}
	// The job's lease runs out: the sweep takes the job back and frees
	// its slot (whose own lease covers the whole run), a new claim bumps
	// the slot's epoch, and the job goes out again.
	later := gpuT0.Add(2 * gpuLease)
	if err := q.RequeueExpired(ctx, job, later, "lease expired", later); err != nil {
		t.Fatalf("requeue the expired job: %v", err)
	}
	if err := q.Release(ctx, "s0", old.Epoch, time.Unix(0, 0).UTC(), time.Time{}); err != nil {
		t.Fatalf("free the expired job's slot: %v", err)
	}
	cur, job := dispatch(t, q, "s0", hash, later)
	if cur.Epoch != 2 || job.Epoch != 2 {
		t.Fatalf("second dispatch: slot epoch %d, job epoch %d; want 2", cur.Epoch, job.Epoch)
	}
	stale := gpumodel.Hold{Slot: "s0", Epoch: old.Epoch, SecretHash: hash}
	at := later.Add(time.Second)

	_, err := q.Heartbeat(ctx, "j", stale, at, at.Add(gpuLease))
	onlyConflict(t, "heartbeat at epoch 1 under epoch 2", err)
	_, err = q.Complete(ctx, "j", stale, gpumodel.Outcome{Status: gpumodel.StatusSucceeded, Error: "stale"}, at)
	onlyConflict(t, "complete at epoch 1 under epoch 2", err)
	_, err = q.ReclaimSlot(ctx, stale, "j", at.Add(gpuLease))
	onlyConflict(t, "reclaim slot at epoch 1 under epoch 2", err)
	err = q.ExtendSlot(ctx, "s0", old.Epoch, "j", at.Add(time.Hour))
	onlyConflict(t, "extend slot at epoch 1 under epoch 2", err)
	err = q.LinkSlot(ctx, "s0", old.Epoch, "j", "default", hash, at.Add(time.Hour), gpumodel.SlotUsage{})
	onlyConflict(t, "link slot at epoch 1 under epoch 2", err)
	err = q.Release(ctx, "s0", old.Epoch, time.Unix(0, 0).UTC(), time.Time{})
	onlyConflict(t, "release slot at epoch 1 under epoch 2", err)

	got := getJob(t, q, "j")
	if got.Status != gpumodel.StatusDispatched || got.Epoch != 2 || got.Slot != "s0" || got.FinishedAt != nil || got.HeartbeatAt != nil || got.Error == "stale" {
		t.Errorf("after the stale holder's callbacks the job is %+v; want the epoch-2 dispatch untouched", got)
	}
	// The lease is the link's (the run's), not the claim's: the link
	// writes it, and the stale holder's writes moved it nowhere.
	if sl := getSlot(t, q, "s0"); sl.Epoch != 2 || sl.JobID != "j" || !sl.LeaseUntil.Equal(later.Add(gpuRunLease)) {
		t.Errorf("after the stale holder's slot writes the slot is %+v; want epoch 2 holding j until %v", sl, later.Add(gpuRunLease))
	}
	// The current holder still gets through, so the refusals above were
	// the epoch's doing.
	cur0 := gpumodel.Hold{Slot: "s0", Epoch: 2, SecretHash: hash}
	if _, err := q.Heartbeat(ctx, "j", cur0, at, at.Add(gpuLease)); err != nil {
		t.Errorf("heartbeat at epoch 2 = %v; want nil", err)
	}
	if err := q.Release(ctx, "s0", 2, time.Unix(0, 0).UTC(), time.Time{}); err != nil {
		t.Errorf("release at epoch 2 = %v; want nil", err)
	}
}

// gpuClaimSlotRace: Racers claim one free slot at once; exactly one wins,
// with the slot's next epoch, and every other racer hears ErrConflict.
// With aborted, the server answers 112 to all the racers' claim attempts
// but one (underAborted): the losers, each of whom met a 112 on every
// attempt, must lose as cleanly.
func (s *suite) gpuClaimSlotRace(t *testing.T, aborted bool) {
	st, q := s.gpuRig(t)
	ctx := t.Context()
	if err := q.EnsureSlots(ctx, freeSlot("s0")); err != nil {
		t.Fatal(err)
	}
	if aborted {
		s.underAborted(t, st, mongostore.GPUSlotsCollection)
	}
	var mu sync.Mutex
	var won []gpumodel.Slot
	race(Racers, func(i int) {
		slot, err := q.ClaimSlot(ctx, []string{"s0"}, gpuT0, gpuT0.Add(gpuLease))
		if err != nil {
			onlyConflict(t, fmt.Sprintf("racer %d's claim", i), err)
			return
		}
		mu.Lock()
		won = append(won, slot)
		mu.Unlock()
	})
	if len(won) != 1 {
		t.Fatalf("%d racers claimed the one free slot; want exactly 1", len(won))
	}
	if won[0].Epoch != 1 {
		t.Errorf("the winner holds epoch %d; want 1 (the free slot's 0, bumped once)", won[0].Epoch)
	}
	if sl := getSlot(t, q, "s0"); sl.Epoch != 1 || !sl.LeaseUntil.Equal(gpuT0.Add(gpuLease)) {
		t.Errorf("the slot is %+v; want epoch 1, leased until %v", sl, gpuT0.Add(gpuLease))
	}
}

// gpuClaimBestJobOrder: jobs go out highest priority first, then oldest,
// then by id, each stamped with its slot's fence; with none queued the
// claim is a conflict.
func (s *suite) gpuClaimBestJobOrder(t *testing.T) {
	_, q := s.gpuRig(t)
	ctx := t.Context()
	for _, j := range []gpumodel.Job{
		queuedJob("low-oldest", 1, gpuT0),
		queuedJob("high-newest", 5, gpuT0.Add(2*time.Second)),
		queuedJob("high-old-b", 5, gpuT0.Add(time.Second)),
		queuedJob("high-old-a", 5, gpuT0.Add(time.Second)),
	} {
		enqueue(t, q, j)
	}
	for i, want := range []string{"high-old-a", "high-old-b", "high-newest", "low-oldest"} {
		slot := gpumodel.Slot{ID: fmt.Sprintf("s%d", i), Worker: "w", Epoch: int64(10 + i)}
		job, err := q.ClaimBestJob(ctx, slot, "h", gpuT0, gpuT0.Add(gpuLease))
		if err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
		if job.ID != want {
			t.Errorf("claim %d took %s; want %s (priority, then createdAt, then id)", i, job.ID, want)
		}
		if job.Status != gpumodel.StatusDispatched || job.Slot != slot.ID || job.Epoch != slot.Epoch || job.SecretHash != "h" {
			t.Errorf("claim %d: job %+v; want dispatched under %s@%d with the secret's hash", i, job, slot.ID, slot.Epoch)
		}
	}
	_, err := q.ClaimBestJob(ctx, gpumodel.Slot{ID: "s9", Epoch: 1}, "h", gpuT0, gpuT0.Add(gpuLease))
	onlyConflict(t, "claim with nothing queued", err)
	if yes, err := q.AnyQueued(ctx); err != nil || yes {
		t.Errorf("AnyQueued with nothing queued = %v, %v; want false, nil", yes, err)
	}
}

// gpuCountQueued: the count covers queued jobs only, and stops at the
// limit, reading no more than it (the metrics gauge's bounded read).
func (s *suite) gpuCountQueued(t *testing.T) {
	b, q := s.gpuRig(t)
	ctx := t.Context()
	for i := range 5 {
		enqueue(t, q, queuedJob(fmt.Sprintf("q%d", i), 0, gpuT0.Add(time.Duration(i)*time.Second)))
	}
	if _, err := q.ClaimBestJob(ctx, gpumodel.Slot{ID: "s0", Worker: "w", Epoch: 1}, "h", gpuT0, gpuT0.Add(gpuLease)); err != nil {
		t.Fatalf("claim: %v", err)
	}
	if n, err := q.CountQueued(ctx, 0); err != nil || n != 4 {
		t.Errorf("CountQueued(no limit) = %d, %v; want 4 (5 enqueued, 1 dispatched)", n, err)
	}
	before := b.Meter().Total()
	if n, err := q.CountQueued(ctx, 3); err != nil || n != 3 {
		t.Errorf("CountQueued(limit 3) = %d, %v; want 3", n, err)
	}
	if read := b.Meter().Total() - before; read > 3 {
		t.Errorf("CountQueued(limit 3) read %d documents; want at most 3", read)
	}
}

// gpuClaimBestJobRace: with one job queued, Racers claim it at once for
// slots of their own; exactly one gets it, and the job carries that
// racer's fence. With aborted, as in gpuClaimSlotRace.
func (s *suite) gpuClaimBestJobRace(t *testing.T, aborted bool) {
	st, q := s.gpuRig(t)
	ctx := t.Context()
	enqueue(t, q, queuedJob("only", 0, gpuT0))
	if aborted {
		s.underAborted(t, st, gpuJobsColl)
	}
	var mu sync.Mutex
	var won []gpumodel.Job
	race(Racers, func(i int) {
		slot := gpumodel.Slot{ID: fmt.Sprintf("s%d", i), Worker: "w", Epoch: int64(i + 1)}
		job, err := q.ClaimBestJob(ctx, slot, fmt.Sprintf("h%d", i), gpuT0, gpuT0.Add(gpuLease))
		if err != nil {
			onlyConflict(t, fmt.Sprintf("racer %d's claim", i), err)
			return
		}
		mu.Lock()
		won = append(won, job)
		mu.Unlock()
	})
	if len(won) != 1 {
		t.Fatalf("%d racers got the one queued job; want exactly 1", len(won))
	}
	got := getJob(t, q, "only")
	if got.Slot != won[0].Slot || got.Epoch != won[0].Epoch || got.SecretHash != won[0].SecretHash {
		t.Errorf("the job is held by %s@%d (%s); want the winner's %s@%d (%s)", got.Slot, got.Epoch, got.SecretHash, won[0].Slot, won[0].Epoch, won[0].SecretHash)
	}
}

// gpuEnqueueIdempotent: enqueueing an id twice keeps the first job and
// answers created=false, nil; so does an enqueue whose insert landed but
// whose answer was lost, and there is one job.
func (s *suite) gpuEnqueueIdempotent(t *testing.T) {
	t.Run("Twice", func(t *testing.T) {
		_, q := s.gpuRig(t)
		first := queuedJob("k", 3, gpuT0)
		enqueue(t, q, first)
		again := queuedJob("k", 7, gpuT0.Add(time.Hour))
		again.Payload = "second"
		created, err := q.Enqueue(t.Context(), again)
		if err != nil || created {
			t.Fatalf("second enqueue of k = %v, %v; want false, nil", created, err)
		}
		if got := getJob(t, q, "k"); got.Payload != first.Payload || got.Priority != 3 {
			t.Errorf("after the second enqueue k is %+v; want the first job", got)
		}
	})
	t.Run("LostAnswer", func(t *testing.T) {
		st, q := s.gpuRig(t)
		f := s.faultsFor(t, st)
		f.LoseAnswer(t, s.viewColl(t, gpuJobsColl), 1, CodeDeadlineExceeded, "insert")
		created, err := q.Enqueue(t.Context(), queuedJob("lost", 0, gpuT0))
		if err != nil || created {
			t.Fatalf("enqueue whose answer was lost = %v, %v; want false, nil (it is there)", created, err)
		}
		jobs, _, err := q.List(t.Context(), "", "", "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 1 || jobs[0].ID != "lost" || jobs[0].Status != gpumodel.StatusQueued {
			t.Errorf("after the lost answer the jobs are %+v; want the one queued job", jobs)
		}
	})
}

// gpuCallbackLostAnswer: a holder's completion (and heartbeat) that landed
// but whose answer was lost reports ErrUnknownOutcome, never a conflict:
// a conflict would tell the worker its fence was stale. The write did
// land, and a repeat then misses the guard.
func (s *suite) gpuCallbackLostAnswer(t *testing.T) {
	st, q := s.gpuRig(t)
	f := s.faultsFor(t, st)
	ctx := t.Context()
	if err := q.EnsureSlots(ctx, freeSlot("s0")); err != nil {
		t.Fatal(err)
	}
	enqueue(t, q, queuedJob("j", 0, gpuT0))
	slot, _ := dispatch(t, q, "s0", "h", gpuT0)
	h := gpumodel.Hold{Slot: "s0", Epoch: slot.Epoch, SecretHash: "h"}
	lost := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrUnknownOutcome) || errors.Is(err, store.ErrConflict) {
			t.Errorf("%s whose answer was lost = %v; want ErrUnknownOutcome and not ErrConflict", what, err)
		}
	}

	at := gpuT0.Add(time.Second)
	f.LoseAnswer(t, s.viewColl(t, gpuJobsColl), 1, CodeDeadlineExceeded, "findAndModify")
	_, err := q.Heartbeat(ctx, "j", h, at, at.Add(gpuLease))
	lost("heartbeat", err)
	if got := getJob(t, q, "j"); got.Status != gpumodel.StatusRunning {
		t.Fatalf("the lost heartbeat did not land: %+v", got)
	}

	f.LoseAnswer(t, s.viewColl(t, gpuJobsColl), 1, CodeDeadlineExceeded, "findAndModify")
	_, err = q.Complete(ctx, "j", h, gpumodel.Outcome{Status: gpumodel.StatusSucceeded}, at)
	lost("complete", err)
	if got := getJob(t, q, "j"); got.Status != gpumodel.StatusSucceeded || got.FinishedAt == nil {
		t.Fatalf("the lost completion did not land: %+v", got)
	}
	// The repeat misses the guard, which the completion itself moved on.
	_, err = q.Complete(ctx, "j", h, gpumodel.Outcome{Status: gpumodel.StatusSucceeded}, at)
	onlyConflict(t, "complete repeated after it landed", err)
}

// underAborted arms 112 for the next Racers*WriteAttempts-1 findAndModify
// commands on the view collection coll of st: Racers-1 claimers meet a 112
// on every attempt and run out of retries, and one lands on its last.
func (s *suite) underAborted(t *testing.T, st store.Backend, coll string) {
	t.Helper()
	s.faultsFor(t, st).Refuse(t, s.viewColl(t, coll), Racers*mongostore.WriteAttempts-1, CodeAborted, "findAndModify")
}
