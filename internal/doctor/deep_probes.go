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
	e     *deepEnv
	b     store.Backend
	now   time.Time
	sc    schedule.Schedule
	slot  gpumodel.Slot
	job2  gpumodel.Job
	hold1 gpumodel.Hold
	hold3 gpumodel.Hold
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
	probeJob2     = "doctor-job-2"
	probeJob3     = "doctor-job-3"
	probeRun2     = "doctor-run-2"
	probeRun3     = "doctor-run-3"
	probeRun4     = "doctor-run-4"
	probeSecret   = "doctor-secret-hash"
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
				Labels:  schedule.Labels{schedule.OwnerLabel: "doctor", "probe": "yes"},
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
		{"Catalog.ListSchedules (labels)", "find schedules {labels: \"k=v\"} sort {_id: 1} limit (labelSelector, the labels index)", func(ctx context.Context, p *probeState) error {
			page, _, err := p.b.Catalog().ListSchedules(ctx, 10, "", schedule.Eq(schedule.OwnerLabel, "doctor"))
			if err == nil && len(page) != 1 {
				return wrong("%d schedules, want 1", len(page))
			}
			return err
		}},
		{"Catalog.ListSchedules (label terms)", "find schedules {$and: [{labels: \"k=v\"}, {labels: {$ne: …}}, {labels: {$in: […]}}]} sort {_id: 1} limit (a selector of =, != and in terms)", func(ctx context.Context, p *probeState) error {
			owner := schedule.Eq(schedule.OwnerLabel, "doctor")
			in := schedule.LabelTerm{Key: "probe", Op: schedule.LabelIn, Values: []string{"maybe", "yes"}}
			page, _, err := p.b.Catalog().ListSchedules(ctx, 10, "", owner, schedule.LabelTerm{Key: "probe", Op: schedule.LabelNotEquals, Values: []string{"no"}}, in)
			if err == nil && len(page) != 1 {
				return wrong("%d schedules, want 1", len(page))
			}
			if err == nil {
				page, _, err = p.b.Catalog().ListSchedules(ctx, 10, "", owner, schedule.LabelTerm{Key: "probe", Op: schedule.LabelNotEquals, Values: []string{"yes"}})
				if err == nil && len(page) != 0 {
					return wrong("%d schedules for probe!=yes, want 0", len(page))
				}
			}
			return err
		}},
		{"Schedules.Due", "find schedules {vshard, enabled, nextRunAt: {$lte}} sort {nextRunAt: 1, _id: 1} limit, shard by shard, then {vshard: null} (the unpartitioned due walk)", func(ctx context.Context, p *probeState) error {
			page, _, err := p.b.Schedules().Due(ctx, p.now, 100, "")
			if err == nil && len(page) != 1 {
				return wrong("%d due schedules, want 1", len(page))
			}
			return err
		}},
		{"Schedules.NextDue", "find schedules {vshard, enabled} sort {vshard, enabled, nextRunAt, _id} projection {nextRunAt} limit 1, one per decider shard", func(ctx context.Context, p *probeState) error {
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
		{"Schedules.JobFence", "find schedules {_id} sort {jobFence: -1} projection {jobFence: 1} limit 1", func(ctx context.Context, p *probeState) error {
			_, err := p.b.Schedules().JobFence(ctx, probeSchedule)
			return err
		}},
		{"Schedules.EditedAfter", "find schedules {$or: [{updatedAt: {$gt}}, {updatedAt, _id: {$gt}}]} sort {updatedAt: 1, _id: 1} limit (the daemon's poll)", func(ctx context.Context, p *probeState) error {
			got, err := p.b.Schedules().EditedAfter(ctx, p.now.Add(-time.Hour), "", 10)
			if err == nil && len(got) != 1 {
				return wrong("%d edited schedules, want 1", len(got))
			}
			return err
		}},
		{"Schedules.PausedUntil", "find schedules {enabled: false, pausedUntil: {$lte}} sort {enabled: 1, pausedUntil: 1} limit", func(ctx context.Context, p *probeState) error {
			_, err := p.b.Schedules().PausedUntil(ctx, p.now, 10)
			return err
		}},
		{"Schedules.SetMisfire", "update schedules {_id, misfire: {$ne: true}} $set, then {_id, misfire: true} $set/$max/$inc", func(ctx context.Context, p *probeState) error {
			return p.b.Schedules().SetMisfire(ctx, probeSchedule, p.now, true)
		}},
		{"Schedules.HasMisfire", "count schedules {_id, misfire: true} (the count command)", func(ctx context.Context, p *probeState) error {
			ok, err := p.b.Schedules().HasMisfire(ctx, probeSchedule)
			if err == nil && !ok {
				return wrong("flag not seen")
			}
			return err
		}},
		{"Schedules.Misfired", "find schedules {misfire: true, _id: {$gt}} sort {misfire, _id} limit", func(ctx context.Context, p *probeState) error {
			got, err := p.b.Schedules().Misfired(ctx, "", 10)
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
		{"Schedules.DropChange", "update schedules {_id, version, lastChange.version} $unset {lastChange} (a dotted path in the filter): a match, then a miss", func(ctx context.Context, p *probeState) error {
			cur, err := p.b.Catalog().Get(ctx, probeSchedule)
			if err != nil {
				return err
			}
			next := cur
			next.Version++
			next.UpdatedAt = p.now
			next.LastChange = &schedule.Change{Version: next.Version, Op: schedule.ChangeUpdate, Actor: "baton doctor", At: p.now}
			if err := p.b.Catalog().Update(ctx, &cur, &next); err != nil {
				return err
			}
			if err := p.b.Schedules().DropChange(ctx, probeSchedule, next.Version); err != nil {
				return err
			}
			got, err := p.b.Catalog().Get(ctx, probeSchedule)
			if err != nil {
				return err
			}
			if got.LastChange != nil || got.Version != next.Version {
				return wrong("after the drop: version %d, lastChange %+v; want version %d without it", got.Version, got.LastChange, next.Version)
			}
			if err := p.b.Schedules().DropChange(ctx, probeSchedule, next.Version); !errors.Is(err, store.ErrConflict) {
				return wrong("a second drop = %v, want ErrConflict", err)
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
		{"Catalog.PruneVersions", "find schedule_versions {scheduleId, _id: {$lt}} sort {scheduleId: 1, _id: -1} projection {_id: 1} limit, then delete (many) {$and: [{_id: {$in}}, {scheduleId, _id: {$lt}}]}", func(ctx context.Context, p *probeState) error {
			_, err := p.b.Catalog().PruneVersions(ctx, probeSchedule, schedule.VersionID(probeSchedule, p.now, 1), 10)
			return err
		}},
		{"Catalog.DeleteExpiredVersions", "find schedule_versions {expireAt: {$lte}} sort {expireAt: 1} projection {_id: 1} limit, then delete (many) {$and: [{_id: {$in}}, {expireAt: {$lte}}]}", func(ctx context.Context, p *probeState) error {
			n, err := p.b.Catalog().DeleteExpiredVersions(ctx, p.now.Add(2*time.Hour), 10)
			if err == nil && n != 1 {
				return wrong("deleted %d, want 1", n)
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
		{"Runs.RunningAt", "find runs {scheduleId, status: running, epoch} limit 1", func(ctx context.Context, p *probeState) error {
			_, err := p.b.Runs().RunningAt(ctx, probeSchedule, nil, 1)
			return err
		}},
		{"Runs.RunningGPU", "find runs {scheduleId, status: running, gpuJob: {$exists: true}, _id: {$ne}} limit 1", func(ctx context.Context, p *probeState) error {
			_, err := p.b.Runs().RunningGPU(ctx, probeSchedule, nil, "doctor-other")
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			return err
		}},
		{"Runs.LiveSibling", "find runs {scheduleId, status: running, createdAt, sweepAt: {$gt}} sort {sweepAt: -1} limit 1", func(ctx context.Context, p *probeState) error {
			_, err := p.b.Runs().LiveSibling(ctx, probeSchedule, nil, p.now, p.now)
			return err
		}},
		{"Runs.NextWaiting", "find runs {scheduleId, status: pending, waiting: true} sort {fireTime: 1} limit 1", func(ctx context.Context, p *probeState) error {
			_, err := p.b.Runs().NextWaiting(ctx, probeSchedule, nil)
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			return err
		}},
		{"Runs.PendingOf", "find runs {scheduleId, status: pending} sort {fireTime: 1, _id: 1} limit (failover wakes the runs behind)", func(ctx context.Context, p *probeState) error {
			_, err := p.b.Runs().PendingOf(ctx, probeSchedule, nil, 10)
			return err
		}},
		{"Runs.StartedAfter", "find runs {scheduleId, fireTime: {$gt}, startedAt: {$exists}, source: {$in}} sort {fireTime: 1} limit 1 (the order rule)", func(ctx context.Context, p *probeState) error {
			_, err := p.b.Runs().StartedAfter(ctx, probeSchedule, nil, p.now.Add(-time.Hour))
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			return err
		}},
		{"Runs.OldestGroupWaiting", "find runs {group, status: pending} sort {groupAt: 1, _id: 1} limit 1", func(ctx context.Context, p *probeState) error {
			_, err := p.b.Runs().OldestGroupWaiting(ctx, "doctor-group")
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			return err
		}},
		{"Runs.Stale", "find runs {vshard, status, sweepAt: {$lte}} sort {sweepAt: 1} limit (the sweep, one decider shard)", func(ctx context.Context, p *probeState) error {
			got, err := p.b.Runs().Stale(ctx, []int{schedule.RunDeciderShard(probeSchedule)}, schedule.RunRunning, p.now.Add(2*time.Minute), 10)
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
		{"Catalog.ListAllRuns", "find runs {vshard, status, fireTime: {$gte}} sort {fireTime: -1, _id: -1} limit, one per decider shard, merged", func(ctx context.Context, p *probeState) error {
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
		{"Runs.NoticeRetry", "update runs {_id, notifyAt} $set/$inc", func(ctx context.Context, p *probeState) error {
			return p.b.Runs().NoticeRetry(ctx, probeRun, p.now, p.now.Add(time.Second), "baton doctor")
		}},
		{"Runs.NoticeDone", "update runs {_id, notifyAt} $unset/$set", func(ctx context.Context, p *probeState) error {
			return p.b.Runs().NoticeDone(ctx, probeRun, p.now.Add(time.Second), "")
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
		{"Runs.Adopt", "update runs {_id, status: pending, tickFence: {$lt}} $set (a second run, pending)", func(ctx context.Context, p *probeState) error {
			r2 := probeRunAt(probeRun2, p.now)
			r2.TickFence = 3 // decided by a tick, as Adopt requires
			if _, err := p.b.Runs().Insert(ctx, r2); err != nil {
				return fmt.Errorf("insert a second run: %w", err)
			}
			return p.b.Runs().Adopt(ctx, probeRun2, 5)
		}},
		{"Runs.UndoStale", "update runs {_id, status: pending, tickFence} $set/$unset", func(ctx context.Context, p *probeState) error {
			return p.b.Runs().UndoStale(ctx, probeRun2, 5, "baton doctor", p.now, time.Time{})
		}},
		{"Runs.PutBack", "update runs {_id, status: skipped, finishedAt} $set/$unset", func(ctx context.Context, p *probeState) error {
			return p.b.Runs().PutBack(ctx, probeRun2, p.now, p.now.Add(time.Minute))
		}},
		{"Runs.MarkWaiting", "update runs {_id, status: pending} $set", func(ctx context.Context, p *probeState) error {
			return p.b.Runs().MarkWaiting(ctx, probeRun2)
		}},
		{"Runs.WaitForGroup", "update runs {_id, status: pending} $set", func(ctx context.Context, p *probeState) error {
			return p.b.Runs().WaitForGroup(ctx, probeRun2, "doctor-group", "baton doctor", p.now, p.now.Add(2*time.Minute))
		}},
		{"Runs.MoveSweep", "update runs {_id, status, sweepAt} $set", func(ctx context.Context, p *probeState) error {
			return p.b.Runs().MoveSweep(ctx, probeRun2, schedule.RunPending, p.now.Add(2*time.Minute), p.now.Add(3*time.Minute))
		}},
		{"Runs.Skip", "update runs {_id, status: pending} $set/$unset", func(ctx context.Context, p *probeState) error {
			return p.b.Runs().Skip(ctx, probeRun2, "baton doctor", p.now, time.Time{}, nil)
		}},
		{"Runs.HandOff", "update runs {_id, status: running, fence} $set (a third run, claimed)", func(ctx context.Context, p *probeState) error {
			if _, err := p.b.Runs().Insert(ctx, probeRunAt(probeRun3, p.now)); err != nil {
				return fmt.Errorf("insert a third run: %w", err)
			}
			if err := p.b.Runs().Claim(ctx, probeRun3, store.RunClaim{Token: "doctor-3", Holder: "baton-doctor", Epoch: 1, At: p.now, SweepAt: p.now.Add(time.Minute)}); err != nil {
				return fmt.Errorf("claim the third run: %w", err)
			}
			return p.b.Runs().HandOff(ctx, probeRun3, 1, "baton doctor", p.now, p.now.Add(2*time.Minute))
		}},
		{"Runs.RecordExecution", "update runs {_id, status: running, execution: {$exists: false}, fence} $set", func(ctx context.Context, p *probeState) error {
			return p.b.Runs().RecordExecution(ctx, probeRun3, 1, time.Time{}, "baton-doctor", "baton doctor", p.now.Add(2*time.Minute))
		}},
		{"Runs.FailOver", "update runs {_id, status: running, sweepAt} $set/$unset", func(ctx context.Context, p *probeState) error {
			return p.b.Runs().FailOver(ctx, probeRun3, p.now.Add(2*time.Minute), "baton doctor", p.now, p.now.Add(3*time.Minute), time.Time{}, nil)
		}},
		{"Runs.RetryRecorded", "update runs {_id, status: failed, sweepAt: {$exists: true}} $unset", func(ctx context.Context, p *probeState) error {
			return p.b.Runs().RetryRecorded(ctx, probeRun3)
		}},
		{"Runs.FinishSwept", "update runs {_id, status: running, sweepAt} $set/$unset (a fourth run, claimed)", func(ctx context.Context, p *probeState) error {
			if _, err := p.b.Runs().Insert(ctx, probeRunAt(probeRun4, p.now)); err != nil {
				return fmt.Errorf("insert a fourth run: %w", err)
			}
			if err := p.b.Runs().Claim(ctx, probeRun4, store.RunClaim{Token: "doctor-4", Holder: "baton-doctor", At: p.now, SweepAt: p.now.Add(time.Minute)}); err != nil {
				return fmt.Errorf("claim the fourth run: %w", err)
			}
			return p.b.Runs().FinishSwept(ctx, probeRun4, p.now.Add(time.Minute), store.RunOutcome{Status: schedule.RunSucceeded, FinishedAt: p.now})
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
		{"Calendars.ListCalendars", "find calendars sort {_id: 1} limit (keyset page)", func(ctx context.Context, p *probeState) error {
			page, _, err := p.b.Calendars().ListCalendars(ctx, 10, "")
			if err == nil && len(page) != 1 {
				return wrong("%d calendars, want 1", len(page))
			}
			return err
		}},
		{"Calendars.ReplaceCalendar", "update calendars {_id, version} with a replacement document", func(ctx context.Context, p *probeState) error {
			return p.b.Calendars().ReplaceCalendar(ctx, &schedule.Calendar{ID: probeCalendar, TimeZone: "UTC", Dates: []string{"2026-12-26"}, Version: 2, CreatedAt: p.now, UpdatedAt: p.now}, 1)
		}},
		{"Calendars.DeleteCalendar", "delete calendars {_id, version}", func(ctx context.Context, p *probeState) error {
			return p.b.Calendars().DeleteCalendar(ctx, probeCalendar, 2)
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
		{"GPU.UpgradeQueued", "update gpu_jobs {status: queued, gpuType|tenant: {$exists: false}} $set", func(ctx context.Context, p *probeState) error {
			_, err := p.b.GPU().UpgradeQueued(ctx, 10)
			return err
		}},
		{"GPU.AnyQueued", "find gpu_jobs {status: queued} projection {_id: 1} limit 1", func(ctx context.Context, p *probeState) error {
			ok, err := p.b.GPU().AnyQueued(ctx)
			if err == nil && !ok {
				return wrong("no queued job seen")
			}
			return err
		}},
		{"GPU.CountQueuedTenant", "count gpu_jobs {status: queued, tenant} with limit", func(ctx context.Context, p *probeState) error {
			n, err := p.b.GPU().CountQueuedTenant(ctx, gpumodel.DefaultTenant, 10)
			if err == nil && n != 1 {
				return wrong("%d queued, want 1", n)
			}
			return err
		}},
		{"GPU.CountQueued", "count gpu_jobs {status: queued} with limit (the count command)", func(ctx context.Context, p *probeState) error {
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
		{"GPU.Slots", "find gpu_slots {_id: {$in}} sort {_id: 1}", func(ctx context.Context, p *probeState) error {
			got, err := p.b.GPU().Slots(ctx, []string{probeSlot})
			if err == nil && len(got) != 1 {
				return wrong("%d slots, want 1", len(got))
			}
			return err
		}},
		{"GPU.ClaimSlot", "findAndModify gpu_slots {_id: {$in}, leaseUntil: {$lte}} sort {leaseUntil: 1, _id: 1} $set/$inc/$unset new: true", func(ctx context.Context, p *probeState) error {
			slot, err := p.b.GPU().ClaimSlot(ctx, []string{probeSlot}, p.now, p.now.Add(time.Minute))
			p.slot = slot
			return err
		}},
		{"GPU.ClaimBestJob", "findAndModify gpu_jobs {status: queued} sort {priority: -1, createdAt: 1, _id: 1} $set/$inc new: true (the GPU claim)", func(ctx context.Context, p *probeState) error {
			job, err := p.b.GPU().ClaimBestJob(ctx, p.slot, probeSecret, p.now, p.now.Add(time.Minute))
			if err == nil && job.ID != probeJob {
				return wrong("claimed %q, want %q", job.ID, probeJob)
			}
			return err
		}},
		{"GPU.LinkSlot", "findAndModify gpu_slots {_id, epoch} $set new: true", func(ctx context.Context, p *probeState) error {
			p.hold1 = gpumodel.Hold{Slot: p.slot.ID, Epoch: p.slot.Epoch, SecretHash: probeSecret}
			return p.b.GPU().LinkSlot(ctx, p.slot.ID, p.slot.Epoch, probeJob, gpumodel.DefaultTenant, probeSecret, p.now.Add(time.Hour), gpumodel.SlotUsage{})
		}},
		{"GPU.ExtendSlot", "findAndModify gpu_slots {_id, epoch} $set new: true", func(ctx context.Context, p *probeState) error {
			return p.b.GPU().ExtendSlot(ctx, p.slot.ID, p.slot.Epoch, probeJob, p.now.Add(2*time.Hour))
		}},
		{"GPU.ReclaimSlot", "findAndModify gpu_slots {_id, epoch, jobId: {$in}, secretHash} $set/$inc/$unset new: true", func(ctx context.Context, p *probeState) error {
			slot, err := p.b.GPU().ReclaimSlot(ctx, p.hold1, probeJob, p.now.Add(time.Minute))
			if err == nil {
				p.slot = slot
			}
			return err
		}},
		{"GPU.Heartbeat", "findAndModify gpu_jobs {_id, slot, epoch, status: {$in}, secretHash, preempting: {$ne: true}} $set/$min new: true", func(ctx context.Context, p *probeState) error {
			_, err := p.b.GPU().Heartbeat(ctx, probeJob, p.hold1, p.now, p.now.Add(time.Minute))
			return err
		}},
		{"GPU.Complete", "findAndModify gpu_jobs {_id, active under the hold} $set/$unset new: true", func(ctx context.Context, p *probeState) error {
			_, err := p.b.GPU().Complete(ctx, probeJob, p.hold1,
				gpumodel.Outcome{Status: gpumodel.StatusSucceeded}, p.now)
			return err
		}},
		{"GPU.Release", "findAndModify gpu_slots {_id, epoch} $set new: true", func(ctx context.Context, p *probeState) error {
			return p.b.GPU().Release(ctx, p.slot.ID, p.slot.Epoch, time.Unix(0, 0).UTC(), time.Time{})
		}},
		{"GPU.ClaimTenantJob", "findAndModify gpu_jobs {status: queued, gpuType: {$in}, tenant} sort {priority: -1, createdAt: 1, _id: 1} $set/$inc new: true", func(ctx context.Context, p *probeState) error {
			if _, err := p.b.GPU().Enqueue(ctx, gpumodel.Job{ID: probeJob2, Status: gpumodel.StatusQueued, Priority: 1, MaxAttempts: 1,
				Payload: "baton doctor", Source: "doctor", CreatedAt: p.now, Tenant: gpumodel.DefaultTenant}); err != nil {
				return fmt.Errorf("enqueue a second job: %w", err)
			}
			job, err := p.b.GPU().ClaimTenantJob(ctx, gpumodel.DefaultTenant, []string{""}, p.slot, probeSecret, p.now, p.now.Add(time.Minute))
			if err == nil && job.ID != probeJob2 {
				return wrong("claimed %q, want %q", job.ID, probeJob2)
			}
			p.job2 = job
			return err
		}},
		{"GPU.Unclaim", "findAndModify gpu_jobs {_id, status: dispatched, slot, epoch} $set/$unset new: true", func(ctx context.Context, p *probeState) error {
			return p.b.GPU().Unclaim(ctx, p.job2)
		}},
		{"GPU.ClaimJob", "findAndModify gpu_jobs {_id, status: queued} $set/$inc new: true", func(ctx context.Context, p *probeState) error {
			job, err := p.b.GPU().ClaimJob(ctx, probeJob2, p.slot, probeSecret, p.now, p.now.Add(time.Minute))
			p.job2 = job
			return err
		}},
		{"GPU.Cancel", "findAndModify gpu_jobs {_id, status, epoch} $set/$unset new: true", func(ctx context.Context, p *probeState) error {
			return p.b.GPU().Cancel(ctx, probeJob2, p.job2.Status, p.job2.Epoch, p.now)
		}},
		{"GPU.Expired", "find gpu_jobs {status: {$in}, leaseUntil: {$lt}} sort {leaseUntil: 1, _id: 1} limit (the lease sweep)", func(ctx context.Context, p *probeState) error {
			_, err := p.b.GPU().Expired(ctx, p.now, 10)
			return err
		}},
		{"GPU.RunningPreemptible", "find gpu_jobs {status: running, preemptible: true} sort {priority: 1, startedAt: -1, _id: 1} limit", func(ctx context.Context, p *probeState) error {
			_, err := p.b.GPU().RunningPreemptible(ctx, 10)
			return err
		}},
		{"GPU.MarkPreempting", "findAndModify gpu_jobs {_id, slot, epoch, status: running, preemptible: true, preempting: {$ne: true}, preemptions, startedAt: {$lte}} $set new: true", func(ctx context.Context, p *probeState) error {
			if _, err := p.b.GPU().Enqueue(ctx, gpumodel.Job{ID: probeJob3, Status: gpumodel.StatusQueued, Priority: 1, MaxAttempts: 5, Preemptible: true,
				Payload: "baton doctor", Source: "doctor", CreatedAt: p.now, Tenant: gpumodel.DefaultTenant}); err != nil {
				return fmt.Errorf("enqueue a preemptible job: %w", err)
			}
			if err := p.dispatch3(ctx); err != nil {
				return err
			}
			job, err := p.b.GPU().Heartbeat(ctx, probeJob3, p.hold3, p.now, p.now.Add(time.Minute))
			if err != nil {
				return fmt.Errorf("start the preemptible job: %w", err)
			}
			return p.b.GPU().MarkPreempting(ctx, job, p.now, 3)
		}},
		{"GPU.RequeuePreempted", "findAndModify gpu_jobs {_id, active under the hold, preempting: true, preemptions} $set/$inc/$unset new: true", func(ctx context.Context, p *probeState) error {
			job, err := p.b.GPU().Get(ctx, probeJob3)
			if err != nil {
				return err
			}
			_, err = p.b.GPU().RequeuePreempted(ctx, job, p.hold3, "baton doctor")
			return err
		}},
		{"GPU.RequeueExpired", "findAndModify gpu_jobs {_id, slot, epoch, status: {$in}, attempts, leaseUntil: {$lt}} $set/$unset new: true", func(ctx context.Context, p *probeState) error {
			job, err := p.dispatch3Job(ctx)
			if err != nil {
				return err
			}
			return p.b.GPU().RequeueExpired(ctx, job, p.now.Add(2*time.Minute), "baton doctor", p.now)
		}},
		{"GPU.RequeueRefused", "findAndModify gpu_jobs {_id, status: dispatched, slot, epoch, attempts} $set/$unset new: true", func(ctx context.Context, p *probeState) error {
			job, err := p.dispatch3Job(ctx)
			if err != nil {
				return err
			}
			return p.b.GPU().RequeueRefused(ctx, job, "baton doctor", p.now)
		}},
		{"GPU.RequeueInterrupted", "findAndModify gpu_jobs {_id, active under the hold, attempts} $set/$unset new: true", func(ctx context.Context, p *probeState) error {
			job, err := p.dispatch3Job(ctx)
			if err != nil {
				return err
			}
			_, err = p.b.GPU().RequeueInterrupted(ctx, job, p.hold3, "baton doctor", p.now)
			return err
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
func probeRunRecord(now time.Time) *store.RunRecord { return probeRunAt(probeRun, now) }

// probeRunAt is a pending run of the probe's schedule, with id.
func probeRunAt(id string, now time.Time) *store.RunRecord {
	return &store.RunRecord{Run: schedule.Run{
		ID: id, ScheduleID: probeSchedule, FireTime: now, Source: schedule.SourceScheduled,
		Status: schedule.RunPending, Attempt: 1, CreatedAt: now, HeartbeatAt: now,
	}, SweepAt: now}
}

// dispatch3 dispatches the third job to the probe's slot, as the
// dispatcher does (ClaimJob), and records the hold it runs under.
func (p *probeState) dispatch3(ctx context.Context) error {
	_, err := p.dispatch3Job(ctx)
	return err
}

func (p *probeState) dispatch3Job(ctx context.Context) (gpumodel.Job, error) {
	job, err := p.b.GPU().ClaimJob(ctx, probeJob3, p.slot, probeSecret, p.now, p.now.Add(time.Minute))
	if err != nil {
		return job, fmt.Errorf("dispatch the third job: %w", err)
	}
	p.hold3 = gpumodel.Hold{Slot: job.Slot, Epoch: job.Epoch, SecretHash: probeSecret}
	return job, nil
}
