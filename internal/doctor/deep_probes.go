package doctor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/gpu/gpumodel"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// probe is one store operation run once on the scratch collections: the
// families of the conformance suite (shared/store/storetest), each through
// the very method baton calls, so the command the server sees is the one
// production sends. shape names that command for the report: the command,
// then the stages, operators and options it carries.
type probe struct {
	name  string
	shape string
	run   func(ctx context.Context, p *probeState) error
}

// optionalShapes say, for the probes of shapes the functions never send,
// why a refusal is only a WARN, and what to do.
var optionalShapes = map[string]string{
	"createIndexes": "only baton daemon --ensure-indexes (and baton local) create indexes through the MongoDB API; in the cloud Terraform declares them: run the daemon without --ensure-indexes",
}

// probeState is what one probe leaves for the next: the documents made and
// read on the way.
type probeState struct {
	e    *deepEnv
	b    store.Backend
	now  time.Time
	sc   schedule.Schedule
	slot gpumodel.Slot
}

// errSkipped is a probe that was not asked for.
var errSkipped = errors.New("skipped")

// The index probe's collection (after the scratch prefix) and index name.
const (
	indexProbeCollection = schedule.RunsCollection
	indexProbeName       = "doctor_probe"
)

// Probe ids: fixed names inside the scratch collections, which are the
// run's own.
const (
	probeSchedule = "doctor-schedule"
	probeRun      = "doctor-run"
	probeJob      = "doctor-job"
	probeSlot     = "doctor-slot"
	probeCalendar = "doctor-calendar"
)

// beforeProbe, when set (by tests), is called as each probe starts.
var beforeProbe func(name string)

// probes runs the probe set, one row each.
func (e *deepEnv) probes(ctx context.Context, r *Report) {
	p := &probeState{e: e, b: e.st, now: e.now}
	for _, pr := range probeSet() {
		if ctx.Err() != nil {
			r.skip("probe "+pr.name, "interrupted: "+ctx.Err().Error())
			continue
		}
		if beforeProbe != nil {
			beforeProbe(pr.name)
		}
		// Detached from ctx: an interrupt stops the run between commands,
		// never with a write in flight that could land after the cleanup.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
		err := pr.run(pctx, p)
		cancel()
		name := "probe " + pr.name
		switch said, isRefusal := refusal(err); {
		case errors.Is(err, errSkipped):
			r.skip(name, "not run (--probe-indexes runs it): the functions never create indexes, Terraform declares them; on Firestore an index created through the MongoDB API outlives its collection, and dropIndexes is refused, so it would be left behind")
		case err == nil:
			r.pass(name, pr.shape)
		case isRefusal && optionalShapes[pr.name] != "":
			r.warn(name, "refused: "+pr.shape+": "+said, optionalShapes[pr.name])
		case isRefusal:
			r.fail(name, "refused: "+pr.shape+": "+said, shapeFix(pr.shape))
		case errors.Is(err, errWrong):
			r.fail(name, "answered wrongly: "+pr.shape+": "+err.Error(), shapeFix(pr.shape))
		default:
			r.fail(name, pr.shape+": "+err.Error(), shapeFix(pr.shape))
		}
	}
}

func wrong(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errWrong}, a...)...)
}

// probeSet is the probe list, in the order a schedule and a GPU job live:
// each probe may use what an earlier one made.
func probeSet() []probe {
	return []probe{
		{"createIndexes", "createIndexes on a scratch collection: {scheduleId: 1, fireTime: -1, _id: -1} (the runs.history key shape)", func(ctx context.Context, p *probeState) error {
			if !p.e.c.IndexProbe {
				return errSkipped
			}
			// Dropped by the cleanup even when the answer is an error: a
			// lost answer may hide an index that was made.
			p.e.indexMade = true
			err := p.e.st.EnsureIndexes(ctx, mongostore.Index{Collection: p.e.scratch + indexProbeCollection, Name: indexProbeName,
				Keys: bson.D{{Key: "scheduleId", Value: 1}, {Key: "fireTime", Value: -1}, {Key: "_id", Value: -1}}})
			if err == nil {
				p.e.count(0, 1, 0)
			}
			return err
		}},
		{"Catalog.Create", "insert schedules (deterministic _id), read back by _id on error", func(ctx context.Context, p *probeState) error {
			p.sc = schedule.Schedule{
				ID: probeSchedule, Cron: "* * * * *", TimeZone: "UTC",
				Target:  schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}},
				Overlap: schedule.OverlapBufferOne, Catchup: schedule.CatchupLatest,
				Enabled: true, NextRunAt: p.now.Add(-time.Minute), Version: 1, CreatedAt: p.now, UpdatedAt: p.now,
			}
			sc := p.sc
			return p.b.Catalog().Create(ctx, &sc)
		}},
		{"Catalog.Create (again)", "insert of an existing _id: a duplicate key, settled by a read-back", func(ctx context.Context, p *probeState) error {
			sc := p.sc
			if err := p.b.Catalog().Create(ctx, &sc); err != nil {
				return fmt.Errorf("the same create again (an idempotent retry) = %w; want nil", err)
			}
			return nil
		}},
		{"Catalog.Get", "find schedules {_id} limit 1", func(ctx context.Context, p *probeState) error {
			got, err := p.b.Catalog().Get(ctx, probeSchedule)
			if err != nil {
				return err
			}
			if got.Version != 1 {
				return wrong("version %d, want 1", got.Version)
			}
			p.sc = got
			return nil
		}},
		{"Catalog.ListSchedules", "find schedules sort {_id: 1} limit (keyset page)", func(ctx context.Context, p *probeState) error {
			page, _, err := p.b.Catalog().ListSchedules(ctx, 10, "")
			if err == nil && len(page) != 1 {
				return wrong("%d schedules, want 1", len(page))
			}
			return err
		}},
		{"Schedules.Due", "find schedules {enabled, nextRunAt: {$lte}} sort {nextRunAt: 1, _id: 1} limit (the due page)", func(ctx context.Context, p *probeState) error {
			page, _, err := p.b.Schedules().Due(ctx, p.now, 100, "")
			if err == nil && len(page) != 1 {
				return wrong("%d due schedules, want 1", len(page))
			}
			return err
		}},
		{"Schedules.NextDue", "find schedules {enabled} sort {enabled, nextRunAt, _id} projection {nextRunAt} limit 1", func(ctx context.Context, p *probeState) error {
			_, ok, err := p.b.Schedules().NextDue(ctx)
			if err == nil && !ok {
				return wrong("no enabled schedule found")
			}
			return err
		}},
		{"Schedules.Advance", "update schedules {$and: [{_id, nextRunAt, version}, {$or: [{fence: {$lte}}, {fence: {$exists: false}}]}]} $set (fenced compare-and-set)", func(ctx context.Context, p *probeState) error {
			return p.b.Schedules().Advance(ctx, &p.sc, p.now.Add(time.Minute), nil, store.Fence{Epoch: 2})
		}},
		{"Schedules.Advance (stale)", "the same fenced update under an older epoch: a miss, then a find by _id to tell a stale fence", func(ctx context.Context, p *probeState) error {
			err := p.b.Schedules().Advance(ctx, &p.sc, p.now.Add(2*time.Minute), nil, store.Fence{Epoch: 1})
			if !errors.Is(err, store.ErrStaleFence) {
				return wrong("= %v, want ErrStaleFence", err)
			}
			return nil
		}},
		{"Schedules.HighestTickFence", "find schedules sort {fence: -1} limit 1", func(ctx context.Context, p *probeState) error {
			f, err := p.b.Schedules().HighestTickFence(ctx)
			if err == nil && f != 2 {
				return wrong("fence %d, want 2", f)
			}
			return err
		}},
		{"Schedules.SetMisfire", "update schedules {_id, misfire: {$ne: true}} $set, then {_id, misfire: true} $set/$max/$inc", func(ctx context.Context, p *probeState) error {
			return p.b.Schedules().SetMisfire(ctx, probeSchedule, p.now, true)
		}},
		{"Schedules.HasMisfire", "count schedules {_id, misfire: true} (the driver's CountDocuments)", func(ctx context.Context, p *probeState) error {
			ok, err := p.b.Schedules().HasMisfire(ctx, probeSchedule)
			if err == nil && !ok {
				return wrong("flag not seen")
			}
			return err
		}},
		{"Schedules.Misfired", "find schedules {misfire: true} limit", func(ctx context.Context, p *probeState) error {
			got, err := p.b.Schedules().Misfired(ctx, 10)
			if err == nil && len(got) != 1 {
				return wrong("%d flagged, want 1", len(got))
			}
			return err
		}},
		{"Schedules.ClearMisfire", "findAndModify schedules {_id, misfire, $or jobFence} $set/$unset new: true", func(ctx context.Context, p *probeState) error {
			_, err := p.b.Schedules().ClearMisfire(ctx, probeSchedule, 1)
			return err
		}},
		{"Catalog.Update", "update schedules {_id, version} $set/$unset (versioned compare-and-set)", func(ctx context.Context, p *probeState) error {
			cur, err := p.b.Catalog().Get(ctx, probeSchedule)
			if err != nil {
				return err
			}
			next := cur
			next.Version++
			next.Description = "baton doctor --deep"
			next.UpdatedAt = p.now
			if err := p.b.Catalog().Update(ctx, &cur, &next); err != nil {
				return err
			}
			if err := p.b.Catalog().Update(ctx, &cur, &next); !errors.Is(err, store.ErrConflict) {
				return wrong("a second update from the same version = %v, want ErrConflict", err)
			}
			return nil
		}},
		{"Catalog.PutVersion", "update schedule_versions {_id, final: {$ne: true}} with a replacement document, upsert: true", func(ctx context.Context, p *probeState) error {
			v := &schedule.VersionRecord{ID: schedule.VersionID(probeSchedule, p.now, 1), ScheduleID: probeSchedule, Incarnation: p.now,
				Change: schedule.Change{Version: 1, Op: "create", Actor: "baton doctor", At: p.now}, Final: true, ExpireAt: p.now.Add(time.Hour)}
			return p.b.Catalog().PutVersion(ctx, v)
		}},
		{"Catalog.ListVersions", "find schedule_versions {scheduleId} sort {_id: -1} limit", func(ctx context.Context, p *probeState) error {
			page, _, err := p.b.Catalog().ListVersions(ctx, probeSchedule, 10, "")
			if err == nil && len(page) != 1 {
				return wrong("%d records, want 1", len(page))
			}
			return err
		}},
		{"Runs.Insert", "insert runs (deterministic _id)", func(ctx context.Context, p *probeState) error {
			ok, err := p.b.Runs().Insert(ctx, probeRunRecord(p.now))
			if err == nil && !ok {
				return wrong("inserted false on an empty collection")
			}
			return err
		}},
		{"Runs.Insert (twin)", "insert of an existing _id: duplicate key 11000, or a read-back", func(ctx context.Context, p *probeState) error {
			ok, err := p.b.Runs().Insert(ctx, probeRunRecord(p.now))
			if err == nil && ok {
				return wrong("inserted twice")
			}
			return err
		}},
		{"Runs.Claim", "update runs {_id, status: pending, $or epoch fence} $set/$unset", func(ctx context.Context, p *probeState) error {
			return p.b.Runs().Claim(ctx, probeRun, store.RunClaim{Token: "doctor", Holder: "baton-doctor", Epoch: 1, At: p.now, SweepAt: p.now.Add(time.Minute)})
		}},
		{"Runs.Heartbeat", "update runs {_id, status: running, fence} $set", func(ctx context.Context, p *probeState) error {
			return p.b.Runs().Heartbeat(ctx, probeRun, 1, p.now, p.now.Add(time.Minute))
		}},
		{"Runs.Stale", "find runs {status, sweepAt: {$lte}} sort {sweepAt: 1} limit (the sweep)", func(ctx context.Context, p *probeState) error {
			got, err := p.b.Runs().Stale(ctx, schedule.RunRunning, p.now.Add(2*time.Minute), 10)
			if err == nil && len(got) != 1 {
				return wrong("%d stale runs, want 1", len(got))
			}
			return err
		}},
		{"Runs.Finish", "update runs {_id, status: running, fence} $set/$unset, then find by _id", func(ctx context.Context, p *probeState) error {
			return p.b.Runs().Finish(ctx, probeRun, 1, store.RunOutcome{Status: schedule.RunSucceeded, FinishedAt: p.now, ExpireAt: p.now,
				Notice: &store.Notice{Event: schedule.EventRecovered, At: p.now}})
		}},
		{"Catalog.ListRuns", "find runs {scheduleId} sort {fireTime: -1, _id: -1} limit (run history page)", func(ctx context.Context, p *probeState) error {
			page, _, err := p.b.Catalog().ListRuns(ctx, probeSchedule, 10, "")
			if err == nil && len(page) != 1 {
				return wrong("%d runs, want 1", len(page))
			}
			return err
		}},
		{"Catalog.ListAllRuns", "find runs {status, fireTime: {$gte}} sort {fireTime: -1, _id: -1} limit", func(ctx context.Context, p *probeState) error {
			page, _, err := p.b.Catalog().ListAllRuns(ctx, store.RunFilter{Status: schedule.RunSucceeded, Since: p.now.Add(-time.Hour)}, 10, "")
			if err == nil && len(page) != 1 {
				return wrong("%d runs, want 1", len(page))
			}
			return err
		}},
		{"Runs.PendingNotices", "find runs {notifyAt: {$lte}} sort {notifyAt: 1} limit", func(ctx context.Context, p *probeState) error {
			got, err := p.b.Runs().PendingNotices(ctx, p.now.Add(time.Minute), 10)
			if err == nil && len(got) != 1 {
				return wrong("%d notices, want 1", len(got))
			}
			return err
		}},
		{"Runs.HighestFence", "find runs {scheduleId} sort {fence: -1} limit 1", func(ctx context.Context, p *probeState) error {
			_, err := p.b.Runs().HighestFence(ctx, probeSchedule)
			return err
		}},
		{"Runs.DeleteExpired", "find runs {expireAt: {$lte}} sort {expireAt: 1} projection {_id: 1} limit, then delete (many) {$and: [{_id: {$in}}, {expireAt: {$lte}}]}", func(ctx context.Context, p *probeState) error {
			n, err := p.b.Runs().DeleteExpired(ctx, p.now.Add(time.Minute), 10)
			if err == nil && n != 1 {
				return wrong("deleted %d, want 1", n)
			}
			return err
		}},
		{"Calendars.CreateCalendar", "insert calendars", func(ctx context.Context, p *probeState) error {
			return p.b.Calendars().CreateCalendar(ctx, &schedule.Calendar{ID: probeCalendar, TimeZone: "UTC", Dates: []string{"2026-12-25"}, Version: 1, CreatedAt: p.now, UpdatedAt: p.now})
		}},
		{"Calendars.GetCalendars", "find calendars {_id: {$in}}", func(ctx context.Context, p *probeState) error {
			got, err := p.b.Calendars().GetCalendars(ctx, []string{probeCalendar, "doctor-none"})
			if err == nil && len(got) != 1 {
				return wrong("%d calendars, want 1", len(got))
			}
			return err
		}},
		{"GPU.EnsureSlots", "insert gpu_slots", func(ctx context.Context, p *probeState) error {
			return p.b.GPU().EnsureSlots(ctx, gpumodel.Slot{ID: probeSlot, Worker: "http://baton-doctor.invalid", LeaseUntil: time.Unix(0, 0).UTC()})
		}},
		{"GPU.Enqueue", "insert gpu_jobs", func(ctx context.Context, p *probeState) error {
			created, err := p.b.GPU().Enqueue(ctx, gpumodel.Job{ID: probeJob, Status: gpumodel.StatusQueued, Priority: 1, MaxAttempts: 1,
				Payload: "baton doctor", Source: "doctor", CreatedAt: p.now, Tenant: gpumodel.DefaultTenant})
			if err == nil && !created {
				return wrong("created false on an empty queue")
			}
			return err
		}},
		{"GPU.CountQueued", "count gpu_jobs {status: queued} with limit (the driver's CountDocuments)", func(ctx context.Context, p *probeState) error {
			n, err := p.b.GPU().CountQueued(ctx, 10)
			if err == nil && n != 1 {
				return wrong("%d queued, want 1", n)
			}
			return err
		}},
		{"GPU.QueueHeads", "find gpu_jobs {status, gpuType} sort {tenant: -1} projection {tenant: 1} limit 1, then {status, gpuType, tenant: {$gt}} sort projection {payload: 0} limit 1 (skip scan)", func(ctx context.Context, p *probeState) error {
			heads, err := p.b.GPU().QueueHeads(ctx, []string{""}, 10)
			if err == nil && len(heads) != 1 {
				return wrong("%d heads, want 1", len(heads))
			}
			return err
		}},
		{"GPU.ClaimSlot", "findAndModify gpu_slots {_id: {$in}, leaseUntil: {$lte}} sort {leaseUntil: 1, _id: 1} $set/$inc/$unset new: true", func(ctx context.Context, p *probeState) error {
			slot, err := p.b.GPU().ClaimSlot(ctx, []string{probeSlot}, p.now, p.now.Add(time.Minute))
			p.slot = slot
			return err
		}},
		{"GPU.ClaimBestJob", "findAndModify gpu_jobs {status: queued} sort {priority: -1, createdAt: 1, _id: 1} $set/$inc new: true (the GPU claim)", func(ctx context.Context, p *probeState) error {
			job, err := p.b.GPU().ClaimBestJob(ctx, p.slot, "doctor-secret-hash", p.now, p.now.Add(time.Minute))
			if err == nil && job.ID != probeJob {
				return wrong("claimed %q, want %q", job.ID, probeJob)
			}
			return err
		}},
		{"GPU.Heartbeat", "findAndModify gpu_jobs {_id, status: {$in}, slot, epoch, secretHash} $set new: true", func(ctx context.Context, p *probeState) error {
			_, err := p.b.GPU().Heartbeat(ctx, probeJob, gpumodel.Hold{Slot: p.slot.ID, Epoch: p.slot.Epoch, SecretHash: "doctor-secret-hash"}, p.now, p.now.Add(time.Minute))
			return err
		}},
		{"GPU.Complete", "findAndModify gpu_jobs {_id, active under the hold} $set/$unset new: true", func(ctx context.Context, p *probeState) error {
			_, err := p.b.GPU().Complete(ctx, probeJob, gpumodel.Hold{Slot: p.slot.ID, Epoch: p.slot.Epoch, SecretHash: "doctor-secret-hash"},
				gpumodel.Outcome{Status: gpumodel.StatusSucceeded}, p.now)
			return err
		}},
		{"GPU.Release", "update gpu_slots {_id, epoch} $set/$unset", func(ctx context.Context, p *probeState) error {
			return p.b.GPU().Release(ctx, p.slot.ID, p.slot.Epoch, time.Unix(0, 0).UTC())
		}},
		{"GPU.List", "find gpu_jobs {status} sort {createdAt: -1, _id: -1} limit", func(ctx context.Context, p *probeState) error {
			jobs, _, err := p.b.GPU().List(ctx, gpumodel.StatusSucceeded, "", "", 10)
			if err == nil && len(jobs) != 1 {
				return wrong("%d jobs, want 1", len(jobs))
			}
			return err
		}},
		{"Catalog.Delete", "delete schedules {_id, version}", func(ctx context.Context, p *probeState) error {
			cur, err := p.b.Catalog().Get(ctx, probeSchedule)
			if err != nil {
				return err
			}
			return p.b.Catalog().Delete(ctx, probeSchedule, cur.Version)
		}},
	}
}

// probeRunRecord is the probe's run: pending, fired now, due for the sweep
// at once.
func probeRunRecord(now time.Time) *store.RunRecord {
	return &store.RunRecord{Run: schedule.Run{
		ID: probeRun, ScheduleID: probeSchedule, FireTime: now, Source: schedule.SourceScheduled,
		Status: schedule.RunPending, Attempt: 1, CreatedAt: now, HeartbeatAt: now,
	}, SweepAt: now}
}
