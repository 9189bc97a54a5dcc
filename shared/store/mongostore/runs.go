package mongostore

import (
	"context"
	"errors"
	"sort"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// runs implements store.Runs.
type runs struct{ s *Store }

var _ store.Runs = runs{}

func (r runs) c() *Collection { return r.s.named(schedule.RunsCollection) }

// update is the write of a running run: fenced by the job lease epoch when
// the run has one, and conditional on the filter alone for an allow run.
func (r runs) update(ctx context.Context, epoch int64, filter, upd bson.D) error {
	if epoch != 0 {
		return r.c().FencedUpdate(ctx, filter, store.Fence{Epoch: epoch}, upd)
	}
	return r.c().UpdateOne(ctx, filter, upd)
}

func byRunID(id string, more ...bson.E) bson.D {
	return append(bson.D{{Key: "_id", Value: id}}, more...)
}

func statusIs(s schedule.RunStatus) bson.E { return bson.E{Key: "status", Value: s} }

// skipUpdate records a run skipped with reason at at, clears its sweepAt
// and queues n.
func skipUpdate(reason string, at, expireAt time.Time, n *store.Notice) bson.D {
	set := withNotice(withExpiry(bson.D{{Key: "status", Value: schedule.RunSkipped}, {Key: "reason", Value: reason}, {Key: "finishedAt", Value: at}}, expireAt), n)
	return bson.D{
		{Key: "$set", Value: set},
		{Key: "$unset", Value: bson.D{{Key: "sweepAt", Value: ""}}},
	}
}

// withExpiry adds to an outcome's $set the run's expireAt, when set.
func withExpiry(set bson.D, expireAt time.Time) bson.D {
	if expireAt.IsZero() {
		return set
	}
	return append(set, bson.E{Key: "expireAt", Value: expireAt.UTC()})
}

// withNotice adds to an outcome's $set the notice n (the outbox), so that
// the outcome and its event land in one write.
func withNotice(set bson.D, n *store.Notice) bson.D {
	if n == nil {
		return set
	}
	return append(set, bson.E{Key: "notifyAt", Value: n.At}, bson.E{Key: "notifyEvent", Value: n.Event})
}

// outcomeUpdate sets the outcome fields set, queues o.Notice, and either
// keeps the owed-retry mark at o.RetryOwedAt or clears sweepAt.
func outcomeUpdate(set bson.D, o store.RunOutcome) bson.D {
	set = withNotice(withExpiry(set, o.ExpireAt), o.Notice)
	if !o.RetryOwedAt.IsZero() {
		return bson.D{{Key: "$set", Value: append(set, bson.E{Key: "sweepAt", Value: o.RetryOwedAt})}}
	}
	return bson.D{{Key: "$set", Value: set}, {Key: "$unset", Value: bson.D{{Key: "sweepAt", Value: ""}}}}
}

// Insert implements store.Runs. It stamps the run's decider shard
// (schedule.RunDeciderShard), which the runs' time-ordered indexes lead
// with, so that no caller can store a run outside its shard.
func (r runs) Insert(ctx context.Context, rd *store.RunRecord) (bool, error) {
	rd.DeciderShard = schedule.RunDeciderShard(rd.ScheduleID)
	return r.c().InsertIdempotent(ctx, rd)
}

// inDeciderShard is the filter on a run's decider shard: vshard, or, for
// store.LegacyRuns, the runs without one ({vshard: null} matches a missing
// field, and an index led by vshard holds them under null).
func inDeciderShard(vshard int) bson.E {
	if vshard == store.LegacyRuns {
		return bson.E{Key: DeciderShardField, Value: nil}
	}
	return bson.E{Key: DeciderShardField, Value: vshard}
}

func (r runs) Get(ctx context.Context, id string) (*store.RunRecord, error) {
	var rd store.RunRecord
	if err := r.c().Get(ctx, id, &rd); err != nil {
		return nil, err
	}
	return &rd, nil
}

func (r runs) findOne(ctx context.Context, filter bson.D, opts ...options.Lister[options.FindOneOptions]) (*store.RunRecord, error) {
	var rd store.RunRecord
	if err := r.c().FindOne(ctx, filter, &rd, opts...); err != nil {
		return nil, err
	}
	return &rd, nil
}

func (r runs) Adopt(ctx context.Context, id string, epoch int64) error {
	return r.c().UpdateOne(ctx,
		byRunID(id, statusIs(schedule.RunPending), bson.E{Key: "tickFence", Value: bson.D{{Key: "$lt", Value: epoch}}}),
		bson.D{{Key: "$set", Value: bson.D{{Key: "tickFence", Value: epoch}}}})
}

func (r runs) UndoStale(ctx context.Context, id string, epoch int64, reason string, at, expireAt time.Time) error {
	return r.c().UpdateOne(ctx,
		byRunID(id, statusIs(schedule.RunPending), bson.E{Key: "tickFence", Value: epoch}),
		skipUpdate(reason, at, expireAt, nil))
}

func (r runs) Skip(ctx context.Context, id, reason string, at, expireAt time.Time, n *store.Notice) error {
	return r.c().UpdateOne(ctx, byRunID(id, statusIs(schedule.RunPending)), skipUpdate(reason, at, expireAt, n))
}

func (r runs) PutBack(ctx context.Context, id string, skippedAt, sweepAt time.Time) error {
	return r.c().UpdateOne(ctx,
		byRunID(id, statusIs(schedule.RunSkipped), bson.E{Key: "finishedAt", Value: skippedAt}),
		bson.D{{Key: "$set", Value: bson.D{{Key: "status", Value: schedule.RunPending}, {Key: "sweepAt", Value: sweepAt}}},
			{Key: "$unset", Value: bson.D{{Key: "reason", Value: ""}, {Key: "finishedAt", Value: ""}, {Key: "notifyAt", Value: ""}, {Key: "notifyEvent", Value: ""}}}})
}

func (r runs) MarkWaiting(ctx context.Context, id string) error {
	return r.c().UpdateOne(ctx, byRunID(id, statusIs(schedule.RunPending)),
		bson.D{{Key: "$set", Value: bson.D{{Key: "waiting", Value: true}}}})
}

func (r runs) NextWaiting(ctx context.Context, scheduleID string, shard *int) (*store.RunRecord, error) {
	return r.findOne(ctx, inShard(bson.D{{Key: "scheduleId", Value: scheduleID}, statusIs(schedule.RunPending), {Key: "waiting", Value: true}}, shard),
		options.FindOne().SetSort(bson.D{{Key: "fireTime", Value: 1}}))
}

func (r runs) WaitForGroup(ctx context.Context, id, group, reason string, fireTime, sweepAt time.Time) error {
	return r.c().UpdateOne(ctx, byRunID(id, statusIs(schedule.RunPending)),
		bson.D{{Key: "$set", Value: bson.D{{Key: "waitingFor", Value: reason}, {Key: "group", Value: group}, {Key: "groupAt", Value: fireTime.UTC()}, {Key: "sweepAt", Value: sweepAt}}}})
}

func (r runs) OldestGroupWaiting(ctx context.Context, group string) (*store.RunRecord, error) {
	return r.findOne(ctx, bson.D{{Key: "group", Value: group}, statusIs(schedule.RunPending)},
		options.FindOne().SetSort(bson.D{{Key: "groupAt", Value: 1}, {Key: "_id", Value: 1}}))
}

func (r runs) Claim(ctx context.Context, id string, c store.RunClaim) error {
	set := bson.D{statusIs(schedule.RunRunning), {Key: "claim", Value: c.Token}, {Key: "holder", Value: c.Holder}}
	if c.Epoch != 0 {
		set = append(set, bson.E{Key: "epoch", Value: c.Epoch})
	}
	set = append(set,
		bson.E{Key: "startedAt", Value: c.At}, bson.E{Key: "heartbeatAt", Value: c.At},
		bson.E{Key: "sweepAt", Value: c.SweepAt})
	if c.Delivery != nil {
		set = append(set, bson.E{Key: "delivery", Value: c.Delivery})
	}
	if c.GPUJob != "" {
		set = append(set, bson.E{Key: "gpuJob", Value: c.GPUJob})
	}
	if c.RunJob != "" {
		set = append(set, bson.E{Key: "runJob", Value: c.RunJob})
	}
	// A run that waited for its concurrency group starts now: it waits no
	// more (and leaves the group's line, OldestGroupWaiting).
	upd := bson.D{{Key: "$set", Value: set}, {Key: "$unset", Value: bson.D{{Key: "waitingFor", Value: ""}, {Key: "group", Value: ""}, {Key: "groupAt", Value: ""}}}}
	err := r.update(ctx, c.Epoch, byRunID(id, statusIs(schedule.RunPending)), upd)
	if err != nil && !errors.Is(err, store.ErrConflict) {
		// retryWrites=false: the claim may have landed with its answer
		// lost. Left unread, the run would stay running with nobody
		// executing it, and the sweep would fail it over without its
		// target ever called.
		var got struct {
			Status schedule.RunStatus `bson:"status"`
			Claim  string             `bson:"claim"`
		}
		if gerr := r.c().Get(context.WithoutCancel(ctx), id, &got); gerr == nil && got.Status == schedule.RunRunning && got.Claim == c.Token {
			return nil
		}
	}
	return err
}

// running is the filter of the writes to a claimed run.
func running(id string) bson.D { return byRunID(id, statusIs(schedule.RunRunning)) }

func (r runs) Heartbeat(ctx context.Context, id string, epoch int64, at, sweepAt time.Time) error {
	return r.update(ctx, epoch, running(id),
		bson.D{{Key: "$set", Value: bson.D{{Key: "heartbeatAt", Value: at}, {Key: "sweepAt", Value: sweepAt}}}})
}

func (r runs) HandOff(ctx context.Context, id string, epoch int64, output string, at, sweepAt time.Time) error {
	return r.update(ctx, epoch, running(id), bson.D{{Key: "$set", Value: bson.D{
		{Key: "output", Value: output},
		{Key: "heartbeatAt", Value: at},
		{Key: "sweepAt", Value: sweepAt},
	}}})
}

func (r runs) RecordExecution(ctx context.Context, id string, epoch int64, sweptAt time.Time, execution, output string, sweepAt time.Time) error {
	filter := byRunID(id, statusIs(schedule.RunRunning), bson.E{Key: "execution", Value: bson.D{{Key: "$exists", Value: false}}})
	if !sweptAt.IsZero() {
		filter = append(filter, bson.E{Key: "sweepAt", Value: sweptAt})
	}
	return r.update(ctx, epoch, filter, bson.D{{Key: "$set", Value: bson.D{
		{Key: "execution", Value: execution},
		{Key: "output", Value: output},
		{Key: "sweepAt", Value: sweepAt},
	}}})
}

func (r runs) Finish(ctx context.Context, id string, epoch int64, o store.RunOutcome) error {
	set := bson.D{{Key: "finishedAt", Value: o.FinishedAt}, {Key: "output", Value: o.Output}}
	if o.Status == schedule.RunFailed {
		set = append(set, bson.E{Key: "error", Value: o.Error})
	}
	set = append(set, statusIs(o.Status))
	err := r.finish(ctx, id, epoch, outcomeUpdate(set, o))
	if err == nil {
		return nil
	}
	// A write that landed with its answer lost (retryWrites=false), or an
	// earlier attempt's, is recognised by its status and finishedAt.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var got store.RunRecord
	if gerr := r.c().Get(rctx, id, &got); gerr == nil && got.Status == o.Status && got.FinishedAt.Equal(o.FinishedAt.Truncate(time.Millisecond)) {
		return nil
	}
	return err
}

// finish writes a running run's outcome upd under epoch. The claim set the
// run's fence to the epoch it was claimed under, and a run is finished
// under that same epoch: then the fence already says what a fenced write
// would set, and the write names it in its filter instead (fence: epoch),
// so that it rewrites no entry of the runs' fence index. Under Firestore's
// write units that is one unit a run of three: the finish of a leased run
// touches eight indexes with the fence, seven without (docs/cost.md). A
// run whose fence is not the epoch (lower: a finish under a later epoch
// than its claim; higher: a newer holder's) falls back to the fenced
// write, which raises a lower fence and tells a stale epoch
// (ErrStaleFence) from a conflict, as before. An allow run (epoch 0) is
// not fenced: r.update writes it unconditioned on the fence.
func (r runs) finish(ctx context.Context, id string, epoch int64, upd bson.D) error {
	if epoch != 0 {
		err := r.c().UpdateOne(ctx, append(running(id), bson.E{Key: store.DefaultFenceField, Value: epoch}), upd)
		if !errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrContended) {
			return err
		}
	}
	return r.update(ctx, epoch, running(id), upd)
}

func (r runs) FinishSwept(ctx context.Context, id string, sweptAt time.Time, o store.RunOutcome) error {
	set := bson.D{{Key: "finishedAt", Value: o.FinishedAt}}
	if o.ExitCode != nil {
		set = append(set, bson.E{Key: "exitCode", Value: *o.ExitCode})
	}
	set = append(set, bson.E{Key: "output", Value: o.Output}, statusIs(o.Status))
	if o.Status == schedule.RunFailed {
		set = append(set, bson.E{Key: "error", Value: o.Error})
	}
	return r.c().UpdateOne(ctx, byRunID(id, statusIs(schedule.RunRunning), bson.E{Key: "sweepAt", Value: sweptAt}), outcomeUpdate(set, o))
}

func (r runs) FailOver(ctx context.Context, id string, sweptAt time.Time, reason string, at, retryOwedAt, expireAt time.Time, n *store.Notice) error {
	return r.c().UpdateOne(ctx,
		byRunID(id, statusIs(schedule.RunRunning), bson.E{Key: "sweepAt", Value: sweptAt}),
		bson.D{
			{Key: "$set", Value: withNotice(withExpiry(bson.D{statusIs(schedule.RunFailed), {Key: "error", Value: reason}, {Key: "finishedAt", Value: at},
				{Key: "sweepAt", Value: retryOwedAt}}, expireAt), n)},
		})
}

func (r runs) RetryRecorded(ctx context.Context, id string) error {
	return r.c().UpdateOne(ctx, byRunID(id, statusIs(schedule.RunFailed), bson.E{Key: "sweepAt", Value: bson.D{{Key: "$exists", Value: true}}}),
		bson.D{{Key: "$unset", Value: bson.D{{Key: "sweepAt", Value: ""}}}})
}

func (r runs) MoveSweep(ctx context.Context, id string, status schedule.RunStatus, from, to time.Time) error {
	return r.c().UpdateOne(ctx,
		byRunID(id, statusIs(status), bson.E{Key: "sweepAt", Value: from}),
		bson.D{{Key: "$set", Value: bson.D{{Key: "sweepAt", Value: to}}}})
}

func (r runs) Stale(ctx context.Context, shards []int, status schedule.RunStatus, now time.Time, limit int) ([]store.RunRecord, error) {
	var nums bson.A
	legacy := false
	for _, v := range shards {
		if v == store.LegacyRuns {
			legacy = true
		} else {
			nums = append(nums, v)
		}
	}
	var out []store.RunRecord
	query := func(shard bson.E) error {
		var got []store.RunRecord
		err := r.c().Find(ctx, bson.D{shard, statusIs(status), {Key: "sweepAt", Value: bson.D{{Key: "$lte", Value: now}}}}, &got,
			options.Find().SetSort(bson.D{{Key: "sweepAt", Value: 1}}).SetLimit(int64(limit)))
		out = append(out, got...)
		return err
	}
	switch len(nums) {
	case 0:
	case 1:
		if err := query(bson.E{Key: DeciderShardField, Value: nums[0]}); err != nil {
			return nil, err
		}
	default:
		// One query for all the partition's shards: $in on the sweep
		// index's leading key (Firestore's supported-features page lists
		// $in: https://cloud.google.com/firestore/mongodb-compatibility/docs/supported-features).
		if err := query(bson.E{Key: DeciderShardField, Value: bson.D{{Key: "$in", Value: nums}}}); err != nil {
			return nil, err
		}
	}
	if legacy {
		// Apart, not as null inside the $in: {vshard: null} is the
		// filter on a missing field that both Firestore and the
		// emulator document.
		if err := query(inDeciderShard(store.LegacyRuns)); err != nil {
			return nil, err
		}
		if len(nums) > 0 {
			sort.SliceStable(out, func(i, j int) bool { return out[i].SweepAt.Before(out[j].SweepAt) })
		}
	}
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (r runs) RunningAt(ctx context.Context, scheduleID string, shard *int, epoch int64) (*store.RunRecord, error) {
	return r.findOne(ctx, inShard(bson.D{{Key: "scheduleId", Value: scheduleID}, statusIs(schedule.RunRunning), {Key: "epoch", Value: epoch}}, shard))
}

func (r runs) PendingOf(ctx context.Context, scheduleID string, shard *int, limit int) ([]store.RunRecord, error) {
	var out []store.RunRecord
	err := r.c().Find(ctx, inShard(bson.D{{Key: "scheduleId", Value: scheduleID}, statusIs(schedule.RunPending)}, shard), &out,
		options.Find().SetSort(bson.D{{Key: "fireTime", Value: 1}, {Key: "_id", Value: 1}}).SetLimit(int64(limit)))
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (r runs) StartedAfter(ctx context.Context, scheduleID string, shard *int, fireTime time.Time) (*store.RunRecord, error) {
	return r.findOne(ctx, inShard(bson.D{
		{Key: "scheduleId", Value: scheduleID},
		{Key: "fireTime", Value: bson.D{{Key: "$gt", Value: fireTime}}},
		{Key: "startedAt", Value: bson.D{{Key: "$exists", Value: true}}},
		{Key: "source", Value: bson.D{{Key: "$in", Value: bson.A{schedule.SourceScheduled, schedule.SourceCatchup, schedule.SourceMisfire}}}},
	}, shard), options.FindOne().SetSort(bson.D{{Key: "fireTime", Value: 1}}))
}

func (r runs) RunningGPU(ctx context.Context, scheduleID string, shard *int, exceptID string) (*store.RunRecord, error) {
	filter := inShard(bson.D{{Key: "scheduleId", Value: scheduleID}, statusIs(schedule.RunRunning), {Key: "gpuJob", Value: bson.D{{Key: "$exists", Value: true}}}}, shard)
	if exceptID != "" {
		filter = append(filter, bson.E{Key: "_id", Value: bson.D{{Key: "$ne", Value: exceptID}}})
	}
	return r.findOne(ctx, filter)
}

func (r runs) RunningRunJob(ctx context.Context, scheduleID string, shard *int, exceptID string) (*store.RunRecord, error) {
	filter := inShard(bson.D{{Key: "scheduleId", Value: scheduleID}, statusIs(schedule.RunRunning), {Key: "runJob", Value: bson.D{{Key: "$exists", Value: true}}}}, shard)
	if exceptID != "" {
		filter = append(filter, bson.E{Key: "_id", Value: bson.D{{Key: "$ne", Value: exceptID}}})
	}
	return r.findOne(ctx, filter)
}

func (r runs) LiveSibling(ctx context.Context, scheduleID string, shard *int, createdAt, now time.Time) (*store.RunRecord, error) {
	return r.findOne(ctx,
		inShard(bson.D{{Key: "scheduleId", Value: scheduleID}, statusIs(schedule.RunRunning), {Key: "createdAt", Value: createdAt},
			{Key: "sweepAt", Value: bson.D{{Key: "$gt", Value: now}}}}, shard),
		options.FindOne().SetSort(bson.D{{Key: "sweepAt", Value: -1}}))
}

// inShard narrows a filter on one schedule's runs to shard's, when shard is
// set. The runs of one schedule are few at a time in these statuses, so
// the schedule's index serves and the shard is a residual filter.
func inShard(filter bson.D, shard *int) bson.D {
	if shard == nil {
		return filter
	}
	return append(filter, bson.E{Key: "shard", Value: *shard})
}

func (r runs) PendingNotices(ctx context.Context, now time.Time, limit int) ([]store.RunRecord, error) {
	var out []store.RunRecord
	err := r.c().Find(ctx, bson.D{{Key: "notifyAt", Value: bson.D{{Key: "$lte", Value: now}}}}, &out,
		options.Find().SetSort(bson.D{{Key: "notifyAt", Value: 1}}).SetLimit(int64(limit)))
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (r runs) NoticeDone(ctx context.Context, id string, at time.Time, gaveUp string) error {
	upd := bson.D{{Key: "$unset", Value: bson.D{{Key: "notifyAt", Value: ""}}}}
	if gaveUp != "" {
		upd = append(upd,
			bson.E{Key: "$set", Value: bson.D{{Key: "notifyError", Value: gaveUp}}},
			bson.E{Key: "$inc", Value: bson.D{{Key: "notifyAttempts", Value: 1}}})
	}
	return r.c().UpdateOne(ctx, byRunID(id, bson.E{Key: "notifyAt", Value: at}), upd)
}

func (r runs) NoticeRetry(ctx context.Context, id string, at, next time.Time, errMsg string) error {
	return r.c().UpdateOne(ctx, byRunID(id, bson.E{Key: "notifyAt", Value: at}), bson.D{
		{Key: "$set", Value: bson.D{{Key: "notifyAt", Value: next}, {Key: "notifyError", Value: errMsg}}},
		{Key: "$inc", Value: bson.D{{Key: "notifyAttempts", Value: 1}}},
	})
}

// HighestFence implements store.Runs.
func (r runs) HighestFence(ctx context.Context, scheduleID string) (int64, error) {
	return highestFence(ctx, r.c(), bson.D{{Key: "scheduleId", Value: scheduleID}}, store.DefaultFenceField)
}
