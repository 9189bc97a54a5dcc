package storetest

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/gpu/gpumodel"
	"github.com/baton-cron/baton/shared/store"
)

// tenantJob is a queued job of tenant (and GPU type) for the fair-share
// cases.
func tenantJob(id, tenant, gpuType string, priority int, createdAt time.Time) gpumodel.Job {
	j := queuedJob(id, priority, createdAt)
	j.Tenant, j.GPUType = tenant, gpuType
	return j
}

// gpuQueueHeads: the heads are each tenant's best job (priority, then
// age, then id) among the queued jobs of the asked types, one per tenant
// merged across types, without their payload; dispatched jobs and other
// types are not heads; and the read is one job per tenant and type (and
// the last tenant's name per type), however long each tenant's queue is.
func (s *suite) gpuQueueHeads(t *testing.T) {
	b, q := s.gpuRig(t)
	ctx := t.Context()
	for i := range 6 {
		// A long queue for a, behind its head: never read.
		enqueue(t, q, tenantJob(fmt.Sprintf("a-tail%d", i), "a", "", 1, gpuT0.Add(time.Duration(i)*time.Second)))
	}
	for _, j := range []gpumodel.Job{
		tenantJob("a-head", "a", "", 5, gpuT0.Add(time.Hour)),
		tenantJob("b-old", "b", "", 0, gpuT0),
		tenantJob("b-l4", "b", "nvidia-l4", 9, gpuT0.Add(time.Minute)),
		tenantJob("c-h100", "c", "nvidia-h100", 0, gpuT0),
		tenantJob("d-l4", "d", "nvidia-l4", 0, gpuT0),
	} {
		enqueue(t, q, j)
	}
	if _, err := q.ClaimJob(ctx, "a-head", gpumodel.Slot{ID: "s0", Worker: "w", Epoch: 1}, "h", gpuT0, gpuT0.Add(gpuLease)); err != nil {
		t.Fatal(err)
	}
	heads := func(types ...string) map[string]string {
		t.Helper()
		got, err := q.QueueHeads(ctx, types, 100)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, h := range got {
			if h.Payload != "" {
				t.Errorf("head %s carries its payload; the heads are read without it", h.ID)
			}
			if _, dup := out[h.TenantOf()]; dup {
				t.Errorf("tenant %s has two heads", h.TenantOf())
			}
			out[h.TenantOf()] = h.ID
		}
		return out
	}
	want := func(what string, got, want map[string]string) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("heads %s = %v; want %v", what, got, want)
		}
	}
	want("untyped", heads(""), map[string]string{"a": "a-tail0", "b": "b-old"})
	before := b.Meter().Total()
	want("untyped and l4", heads("", "nvidia-l4"), map[string]string{"a": "a-tail0", "b": "b-l4", "d": "d-l4"})
	// Two tenants have an untyped job and two an l4 one: one job per
	// tenant and type, and one (the last tenant's name) per type; the six
	// jobs behind a's head are never read.
	if read := b.Meter().Total() - before; read > 6 {
		t.Errorf("the heads of 3 tenants over 2 types read %d documents; want at most 6 (one per tenant and type, one more per type)", read)
	}
	want("h100", heads("nvidia-h100"), map[string]string{"c": "c-h100"})
	want("none of that type", heads("nvidia-a100"), map[string]string{})
	got, err := q.QueueHeads(ctx, []string{""}, 1)
	if err != nil || len(got) != 1 {
		t.Errorf("heads bounded to 1 tenant = %d heads, %v; want 1", len(got), err)
	}
}

// gpuClaimJob: a chosen job is claimed only while queued, stamped with
// the slot's fence; of racers on it exactly one wins; and a claim whose
// answer was lost reports ErrUnknownOutcome, not a conflict, though it
// landed; one refused with a write conflict is retried.
func (s *suite) gpuClaimJob(t *testing.T) {
	t.Run("Guard", func(t *testing.T) {
		_, q := s.gpuRig(t)
		ctx := t.Context()
		enqueue(t, q, tenantJob("j", "a", "", 0, gpuT0))
		slot := gpumodel.Slot{ID: "s0", Worker: "w", Epoch: 7}
		job, err := q.ClaimJob(ctx, "j", slot, "h", gpuT0, gpuT0.Add(gpuLease))
		if err != nil {
			t.Fatal(err)
		}
		if job.Status != gpumodel.StatusDispatched || job.Slot != "s0" || job.Epoch != 7 || job.SecretHash != "h" || job.Payload != "p-j" {
			t.Errorf("claimed job %+v; want dispatched under s0@7 with the secret's hash and its payload", job)
		}
		_, err = q.ClaimJob(ctx, "j", gpumodel.Slot{ID: "s1", Worker: "w", Epoch: 1}, "h2", gpuT0, gpuT0.Add(gpuLease))
		onlyConflict(t, "claim of a dispatched job", err)
		_, err = q.ClaimJob(ctx, "nope", slot, "h", gpuT0, gpuT0.Add(gpuLease))
		onlyConflict(t, "claim of a job that does not exist", err)
	})
	t.Run("Tenant", func(t *testing.T) {
		_, q := s.gpuRig(t)
		ctx := t.Context()
		for _, j := range []gpumodel.Job{
			tenantJob("a-low", "a", "", 0, gpuT0),
			tenantJob("a-high", "a", "", 5, gpuT0.Add(time.Hour)),
			tenantJob("a-h100", "a", "nvidia-h100", 9, gpuT0),
			tenantJob("b-top", "b", "", 9, gpuT0),
		} {
			enqueue(t, q, j)
		}
		for _, want := range []string{"a-high", "a-low"} {
			job, err := q.ClaimTenantJob(ctx, "a", []string{"", "nvidia-l4"}, gpumodel.Slot{ID: "s0", Worker: "w", Epoch: 1}, "h", gpuT0, gpuT0.Add(gpuLease))
			if err != nil || job.ID != want || job.Status != gpumodel.StatusDispatched {
				t.Errorf("claim for a = %s %s, %v; want %s dispatched (a's best of the types asked)", job.ID, job.Status, err, want)
			}
		}
		_, err := q.ClaimTenantJob(ctx, "a", []string{"", "nvidia-l4"}, gpumodel.Slot{ID: "s0", Worker: "w", Epoch: 1}, "h", gpuT0, gpuT0.Add(gpuLease))
		onlyConflict(t, "claim for a with only another type left", err)
		if got := getJob(t, q, "b-top"); got.Status != gpumodel.StatusQueued {
			t.Errorf("b's job is %s; a's claims must not touch it", got.Status)
		}
	})
	t.Run("Race", func(t *testing.T) {
		_, q := s.gpuRig(t)
		ctx := t.Context()
		enqueue(t, q, tenantJob("only", "a", "", 0, gpuT0))
		var mu sync.Mutex
		var won []string
		race(Racers, func(i int) {
			slot := gpumodel.Slot{ID: fmt.Sprintf("s%d", i), Worker: "w", Epoch: int64(i + 1)}
			if _, err := q.ClaimJob(ctx, "only", slot, "h", gpuT0, gpuT0.Add(gpuLease)); err != nil {
				onlyConflict(t, fmt.Sprintf("racer %d", i), err)
				return
			}
			mu.Lock()
			won = append(won, slot.ID)
			mu.Unlock()
		})
		if len(won) != 1 || getJob(t, q, "only").Slot != won[0] {
			t.Errorf("winners %v, job held by %s; want exactly one winner holding it", won, getJob(t, q, "only").Slot)
		}
	})
	t.Run("LostAnswer", func(t *testing.T) {
		st, q := s.gpuRig(t)
		f := s.faultsFor(t, st)
		ctx := t.Context()
		enqueue(t, q, tenantJob("j", "a", "", 0, gpuT0))
		f.LoseAnswer(t, s.viewColl(t, gpuJobsColl), 1, CodeDeadlineExceeded, "findAndModify")
		_, err := q.ClaimJob(ctx, "j", gpumodel.Slot{ID: "s0", Worker: "w", Epoch: 1}, "h", gpuT0, gpuT0.Add(gpuLease))
		if !errors.Is(err, store.ErrUnknownOutcome) || errors.Is(err, store.ErrConflict) {
			t.Errorf("claim whose answer was lost = %v; want ErrUnknownOutcome and not ErrConflict", err)
		}
		if got := getJob(t, q, "j"); got.Status != gpumodel.StatusDispatched || got.LeaseUntil == nil {
			t.Errorf("the lost claim did not land with a lease (the sweep's hook): %+v", got)
		}
	})
	t.Run("Refused", func(t *testing.T) {
		st, q := s.gpuRig(t)
		f := s.faultsFor(t, st)
		ctx := t.Context()
		enqueue(t, q, tenantJob("j", "a", "", 0, gpuT0))
		// A write conflict was not applied, so the store retries it, and
		// the claim lands once.
		f.Refuse(t, s.viewColl(t, gpuJobsColl), 1, CodeAborted, "findAndModify")
		job, err := q.ClaimJob(ctx, "j", gpumodel.Slot{ID: "s0", Worker: "w", Epoch: 1}, "h", gpuT0, gpuT0.Add(gpuLease))
		if err != nil {
			t.Fatalf("claim after one write conflict = %v; want it retried", err)
		}
		if got := getJob(t, q, "j"); got.Status != gpumodel.StatusDispatched || got.Epoch != 1 || job.Epoch != 1 {
			t.Errorf("after the retried claim the job is %+v; want dispatched under s0@1", got)
		}
	})
}

// gpuSlotTenant: a linked slot carries its job's tenant; a release clears
// it, and a claim keeps it until the next link, so a slot between two jobs
// still counts for the tenant it served.
func (s *suite) gpuSlotTenant(t *testing.T) {
	_, q := s.gpuRig(t)
	ctx := t.Context()
	if err := q.EnsureSlots(ctx, freeSlot("s0")); err != nil {
		t.Fatal(err)
	}
	enqueue(t, q, tenantJob("j", "a", "", 0, gpuT0))
	slot, _ := dispatch(t, q, "s0", "h", gpuT0)
	if got := getSlot(t, q, "s0"); got.Tenant != "a" || got.JobID != "j" {
		t.Fatalf("linked slot %+v; want job j of tenant a", got)
	}
	if err := q.Release(ctx, "s0", slot.Epoch, time.Unix(0, 0).UTC(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got := getSlot(t, q, "s0"); got.Tenant != "" {
		t.Errorf("released slot keeps tenant %q", got.Tenant)
	}
	slot, err := q.ClaimSlot(ctx, []string{"s0"}, gpuT0, gpuT0.Add(gpuLease))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.LinkSlot(ctx, "s0", slot.Epoch, "j", "b", "h", gpuT0.Add(gpuRunLease), gpumodel.SlotUsage{}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.ClaimSlot(ctx, []string{"s0"}, gpuT0.Add(2*gpuRunLease), gpuT0.Add(3*gpuRunLease)); err != nil {
		t.Fatal(err)
	}
	if got := getSlot(t, q, "s0"); got.Tenant != "b" || got.JobID != "" {
		t.Errorf("re-claimed slot %+v; want no job, and tenant b until it is linked again or released", got)
	}
}

// gpuListTenant: the listing and the queued count filter by tenant, with
// and without a status.
func (s *suite) gpuListTenant(t *testing.T) {
	_, q := s.gpuRig(t)
	ctx := t.Context()
	for i, ten := range []string{"a", "b", "a", "a", "b"} {
		enqueue(t, q, tenantJob(fmt.Sprintf("%s%d", ten, i), ten, "", 0, gpuT0.Add(time.Duration(i)*time.Second)))
	}
	if _, err := q.ClaimJob(ctx, "a0", gpumodel.Slot{ID: "s0", Worker: "w", Epoch: 1}, "h", gpuT0, gpuT0.Add(gpuLease)); err != nil {
		t.Fatal(err)
	}
	ids := func(status gpumodel.JobStatus, tenant string) []string {
		t.Helper()
		jobs, _, err := q.List(ctx, status, tenant, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, j := range jobs {
			out = append(out, j.ID)
		}
		sort.Strings(out)
		return out
	}
	if got := fmt.Sprint(ids("", "a")); got != "[a0 a2 a3]" {
		t.Errorf("tenant a = %s; want [a0 a2 a3]", got)
	}
	if got := fmt.Sprint(ids(gpumodel.StatusQueued, "a")); got != "[a2 a3]" {
		t.Errorf("queued of tenant a = %s; want [a2 a3]", got)
	}
	if got := fmt.Sprint(ids("", "c")); got != "[]" {
		t.Errorf("tenant c = %s; want []", got)
	}
	if n, err := q.CountQueuedTenant(ctx, "a", 0); err != nil || n != 2 {
		t.Errorf("CountQueuedTenant(a) = %d, %v; want 2", n, err)
	}
	if n, err := q.CountQueuedTenant(ctx, "b", 1); err != nil || n != 1 {
		t.Errorf("CountQueuedTenant(b, limit 1) = %d, %v; want 1", n, err)
	}
}

// gpuUpgradeQueued: a job queued before tenants and GPU types (neither
// field stored) is invisible to the queue heads until UpgradeQueued gives
// it the default tenant and any type; a second call changes nothing, and
// a job that has its fields is left as it is.
func (s *suite) gpuUpgradeQueued(t *testing.T) {
	st, q := s.gpuRig(t)
	ctx := t.Context()
	old := bson.D{{Key: "_id", Value: "old"}, {Key: "status", Value: gpumodel.StatusQueued}, {Key: "priority", Value: 0},
		{Key: "maxAttempts", Value: 3}, {Key: "createdAt", Value: gpuT0}}
	if l, ok := st.(loader); ok {
		if err := l.Load(gpuJobsColl, old); err != nil {
			t.Fatal(err)
		}
	} else if _, err := s.mongo(t, st).Collection(gpuJobsColl).InsertIdempotent(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(ctx, tenantJob("new", "a", "nvidia-l4", 0, gpuT0)); err != nil {
		t.Fatal(err)
	}
	if heads, err := q.QueueHeads(ctx, []string{""}, 10); err != nil || len(heads) != 0 {
		t.Fatalf("heads of any type before the upgrade = %v, %v; want none (the old job has no gpuType)", heads, err)
	}
	n, err := q.UpgradeQueued(ctx, 100)
	if err != nil || n != 2 {
		t.Fatalf("UpgradeQueued = %d, %v; want 2 writes (the old job's gpuType and tenant)", n, err)
	}
	if n, err := q.UpgradeQueued(ctx, 100); err != nil || n != 0 {
		t.Fatalf("second UpgradeQueued = %d, %v; want 0", n, err)
	}
	heads, err := q.QueueHeads(ctx, []string{""}, 10)
	if err != nil || len(heads) != 1 || heads[0].ID != "old" || heads[0].Tenant != gpumodel.DefaultTenant {
		t.Fatalf("heads of any type after the upgrade = %+v, %v; want the old job, tenant %q", heads, err, gpumodel.DefaultTenant)
	}
	if heads, err := q.QueueHeads(ctx, []string{"nvidia-l4"}, 10); err != nil || len(heads) != 1 || heads[0].Tenant != "a" {
		t.Fatalf("heads of nvidia-l4 = %+v, %v; want the new job, tenant a", heads, err)
	}
}

// loader is a Backend that can store a document as given, bypassing its
// views (shared/store/memstore's Load): how a case writes a document of an
// older shape into a Backend that is not mongostore.
type loader interface {
	Load(coll string, docs ...any) error
}
