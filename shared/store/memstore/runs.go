package memstore

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// runs implements store.Runs, as mongostore's does.
type runs struct{ s *Store }

var _ store.Runs = runs{}

const runsColl = schedule.RunsCollection

func statusIs(m bson.M, st schedule.RunStatus) bool { return eqStr(m, "status", string(st)) }

func pending(m bson.M) bool { return statusIs(m, schedule.RunPending) }
func running(m bson.M) bool { return statusIs(m, schedule.RunRunning) }

// upd is an update of a run: set then unset.
func upd(set bson.M, unset ...string) func(bson.M) bson.M {
	return func(m bson.M) bson.M {
		for k, v := range set {
			m[k] = val(v)
		}
		for _, k := range unset {
			delete(m, k)
		}
		return m
	}
}

// withExpiry and withNotice add to an outcome's set, as mongostore's.
func withExpiry(set bson.M, expireAt time.Time) bson.M {
	if !expireAt.IsZero() {
		set["expireAt"] = expireAt.UTC()
	}
	return set
}

func withNotice(set bson.M, n *store.Notice) bson.M {
	if n != nil {
		set["notifyAt"] = n.At
		set["notifyEvent"] = n.Event
	}
	return set
}

func skipUpdate(reason string, at, expireAt time.Time, n *store.Notice) func(bson.M) bson.M {
	return upd(withNotice(withExpiry(bson.M{"status": schedule.RunSkipped, "reason": reason, "finishedAt": at}, expireAt), n), "sweepAt")
}

func outcomeUpdate(set bson.M, o store.RunOutcome) func(bson.M) bson.M {
	set = withNotice(withExpiry(set, o.ExpireAt), o.Notice)
	if !o.RetryOwedAt.IsZero() {
		set["sweepAt"] = o.RetryOwedAt
		return upd(set)
	}
	return upd(set, "sweepAt")
}

// update is the write of a running run: fenced by the job lease epoch when
// the run has one.
func (r runs) update(ctx context.Context, id string, epoch int64, pred func(bson.M) bool, apply func(bson.M) bson.M) error {
	if epoch != 0 {
		return r.s.fencedUpdate(ctx, runsColl, id, store.DefaultFenceField, epoch, pred, apply)
	}
	_, err := r.s.update(ctx, runsColl, "update", id, pred, apply)
	return err
}

func (r runs) up(ctx context.Context, id string, pred func(bson.M) bool, apply func(bson.M) bson.M) error {
	_, err := r.s.update(ctx, runsColl, "update", id, pred, apply)
	return err
}

// Insert implements store.Runs, stamping the decider shard as
// mongostore's does.
func (r runs) Insert(ctx context.Context, rd *store.RunRecord) (bool, error) {
	rd.DeciderShard = schedule.RunDeciderShard(rd.ScheduleID)
	return r.s.insert(ctx, runsColl, rd)
}

// inDeciderShard is mongostore's: vshard equal, or missing for
// store.LegacyRuns.
func inDeciderShard(m bson.M, vshard int) bool {
	v, ok := m["vshard"]
	if vshard == store.LegacyRuns {
		return !ok || v == nil
	}
	n, isNum := intOf(v)
	return ok && isNum && n == int64(vshard)
}

func (r runs) Get(ctx context.Context, id string) (*store.RunRecord, error) {
	var rd store.RunRecord
	if err := r.s.getInto(ctx, runsColl, id, &rd); err != nil {
		return nil, err
	}
	return &rd, nil
}

func (r runs) one(ctx context.Context, match func(bson.M) bool, less func(a, b bson.M) bool) (*store.RunRecord, error) {
	m, err := r.s.findOne(ctx, runsColl, match, less)
	if err != nil {
		return nil, err
	}
	var rd store.RunRecord
	if err := decode(m, &rd); err != nil {
		return nil, err
	}
	return &rd, nil
}

func (r runs) many(ctx context.Context, match func(bson.M) bool, less func(a, b bson.M) bool, limit int) ([]store.RunRecord, error) {
	got, err := r.s.find(ctx, runsColl, "find", match, less, limit)
	if err != nil {
		return nil, err
	}
	return decodeAll[store.RunRecord](runsColl, got)
}

func tickFenceLT(m bson.M, epoch int64) bool {
	n, ok := intOf(m["tickFence"])
	return ok && n < epoch
}

func (r runs) Adopt(ctx context.Context, id string, epoch int64) error {
	return r.up(ctx, id, func(m bson.M) bool { return pending(m) && tickFenceLT(m, epoch) }, upd(bson.M{"tickFence": epoch}))
}

func (r runs) UndoStale(ctx context.Context, id string, epoch int64, reason string, at, expireAt time.Time) error {
	return r.up(ctx, id, func(m bson.M) bool {
		n, ok := intOf(m["tickFence"])
		return pending(m) && ok && n == epoch
	}, skipUpdate(reason, at, expireAt, nil))
}

func (r runs) Skip(ctx context.Context, id, reason string, at, expireAt time.Time, n *store.Notice) error {
	return r.up(ctx, id, pending, skipUpdate(reason, at, expireAt, n))
}

func (r runs) PutBack(ctx context.Context, id string, skippedAt, sweepAt time.Time) error {
	return r.up(ctx, id, func(m bson.M) bool { return statusIs(m, schedule.RunSkipped) && timeEq(m, "finishedAt", skippedAt) },
		upd(bson.M{"status": schedule.RunPending, "sweepAt": sweepAt}, "reason", "finishedAt", "notifyAt", "notifyEvent"))
}

func (r runs) MarkWaiting(ctx context.Context, id string) error {
	return r.up(ctx, id, pending, upd(bson.M{"waiting": true}))
}

// ofSchedule matches the runs of scheduleID, of shard when set.
func ofSchedule(scheduleID string, shard *int, more func(bson.M) bool) func(bson.M) bool {
	return func(m bson.M) bool {
		if !eqStr(m, "scheduleId", scheduleID) {
			return false
		}
		if shard != nil {
			n, ok := intOf(m["shard"])
			if !ok || n != int64(*shard) {
				return false
			}
		}
		return more(m)
	}
}

func (r runs) NextWaiting(ctx context.Context, scheduleID string, shard *int) (*store.RunRecord, error) {
	return r.one(ctx, ofSchedule(scheduleID, shard, func(m bson.M) bool { return pending(m) && isTrue(m, "waiting") }), byTime("fireTime"))
}

func (r runs) WaitForGroup(ctx context.Context, id, group, reason string, fireTime, sweepAt time.Time) error {
	return r.up(ctx, id, pending, upd(bson.M{"waitingFor": reason, "group": group, "groupAt": fireTime.UTC(), "sweepAt": sweepAt}))
}

func (r runs) OldestGroupWaiting(ctx context.Context, group string) (*store.RunRecord, error) {
	return r.one(ctx, func(m bson.M) bool { return eqStr(m, "group", group) && pending(m) }, byTimeThenID("groupAt"))
}

func (r runs) Claim(ctx context.Context, id string, c store.RunClaim) error {
	set := bson.M{"status": schedule.RunRunning, "claim": c.Token, "holder": c.Holder,
		"startedAt": c.At, "heartbeatAt": c.At, "sweepAt": c.SweepAt}
	if c.Epoch != 0 {
		set["epoch"] = c.Epoch
	}
	if c.Delivery != nil {
		set["delivery"] = c.Delivery
	}
	if c.GPUJob != "" {
		set["gpuJob"] = c.GPUJob
	}
	if c.RunJob != "" {
		set["runJob"] = c.RunJob
	}
	err := r.update(ctx, id, c.Epoch, pending, upd(set, "waitingFor", "group", "groupAt"))
	if err != nil && !errors.Is(err, store.ErrConflict) {
		if m, gerr := r.s.get(context.WithoutCancel(ctx), runsColl, id); gerr == nil && running(m) && eqStr(m, "claim", c.Token) {
			return nil
		}
	}
	return err
}

func (r runs) Heartbeat(ctx context.Context, id string, epoch int64, at, sweepAt time.Time) error {
	return r.update(ctx, id, epoch, running, upd(bson.M{"heartbeatAt": at, "sweepAt": sweepAt}))
}

func (r runs) HandOff(ctx context.Context, id string, epoch int64, output string, at, sweepAt time.Time) error {
	return r.update(ctx, id, epoch, running, upd(bson.M{"output": output, "heartbeatAt": at, "sweepAt": sweepAt}))
}

func (r runs) RecordExecution(ctx context.Context, id string, epoch int64, sweptAt time.Time, execution, output string, sweepAt time.Time) error {
	return r.update(ctx, id, epoch, func(m bson.M) bool {
		return running(m) && !has(m, "execution") && (sweptAt.IsZero() || timeEq(m, "sweepAt", sweptAt))
	}, upd(bson.M{"execution": execution, "output": output, "sweepAt": sweepAt}))
}

func (r runs) Finish(ctx context.Context, id string, epoch int64, o store.RunOutcome) error {
	set := bson.M{"finishedAt": o.FinishedAt, "output": o.Output, "status": o.Status}
	if o.Status == schedule.RunFailed {
		set["error"] = o.Error
	}
	err := r.update(ctx, id, epoch, running, outcomeUpdate(set, o))
	if err == nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if m, gerr := r.s.get(rctx, runsColl, id); gerr == nil && statusIs(m, o.Status) && timeEq(m, "finishedAt", o.FinishedAt) {
		return nil
	}
	return err
}

func (r runs) FinishSwept(ctx context.Context, id string, sweptAt time.Time, o store.RunOutcome) error {
	set := bson.M{"finishedAt": o.FinishedAt, "output": o.Output, "status": o.Status}
	if o.ExitCode != nil {
		set["exitCode"] = int32(*o.ExitCode) //nolint:gosec // an exit status
	}
	if o.Status == schedule.RunFailed {
		set["error"] = o.Error
	}
	return r.up(ctx, id, func(m bson.M) bool { return running(m) && timeEq(m, "sweepAt", sweptAt) }, outcomeUpdate(set, o))
}

func (r runs) FailOver(ctx context.Context, id string, sweptAt time.Time, reason string, at, retryOwedAt, expireAt time.Time, n *store.Notice) error {
	return r.up(ctx, id, func(m bson.M) bool { return running(m) && timeEq(m, "sweepAt", sweptAt) },
		upd(withNotice(withExpiry(bson.M{"status": schedule.RunFailed, "error": reason, "finishedAt": at, "sweepAt": retryOwedAt}, expireAt), n)))
}

func (r runs) RetryRecorded(ctx context.Context, id string) error {
	return r.up(ctx, id, func(m bson.M) bool { return statusIs(m, schedule.RunFailed) && has(m, "sweepAt") }, upd(nil, "sweepAt"))
}

func (r runs) MoveSweep(ctx context.Context, id string, status schedule.RunStatus, from, to time.Time) error {
	return r.up(ctx, id, func(m bson.M) bool { return statusIs(m, status) && timeEq(m, "sweepAt", from) }, upd(bson.M{"sweepAt": to}))
}

func (r runs) Stale(ctx context.Context, shards []int, status schedule.RunStatus, now time.Time, limit int) ([]store.RunRecord, error) {
	keys := make([]int64, len(shards))
	for i, v := range shards {
		keys[i] = int64(v)
	}
	got, err := r.s.findInShards(ctx, runsColl, "find", keys, func(m bson.M) bool {
		if !statusIs(m, status) || !timeLTE(m, "sweepAt", now) {
			return false
		}
		for _, v := range shards {
			if inDeciderShard(m, v) {
				return true
			}
		}
		return false
	}, byTime("sweepAt"), limit)
	if err != nil {
		return nil, err
	}
	return decodeAll[store.RunRecord](runsColl, got)
}

func (r runs) RunningAt(ctx context.Context, scheduleID string, shard *int, epoch int64) (*store.RunRecord, error) {
	return r.one(ctx, ofSchedule(scheduleID, shard, func(m bson.M) bool {
		n, ok := intOf(m["epoch"])
		return running(m) && ok && n == epoch
	}), nil)
}

func (r runs) PendingOf(ctx context.Context, scheduleID string, shard *int, limit int) ([]store.RunRecord, error) {
	return r.many(ctx, ofSchedule(scheduleID, shard, pending), byTimeThenID("fireTime"), limit)
}

func (r runs) StartedAfter(ctx context.Context, scheduleID string, shard *int, fireTime time.Time) (*store.RunRecord, error) {
	return r.one(ctx, ofSchedule(scheduleID, shard, func(m bson.M) bool {
		t, ok := msOf(m["fireTime"])
		src := schedule.Source(strOf(m["source"]))
		return ok && t > ms(fireTime) && has(m, "startedAt") &&
			(src == schedule.SourceScheduled || src == schedule.SourceCatchup || src == schedule.SourceMisfire)
	}), byTime("fireTime"))
}

func (r runs) RunningGPU(ctx context.Context, scheduleID string, shard *int, exceptID string) (*store.RunRecord, error) {
	return r.one(ctx, ofSchedule(scheduleID, shard, func(m bson.M) bool {
		return running(m) && has(m, "gpuJob") && (exceptID == "" || idOf(m) != exceptID)
	}), nil)
}

func (r runs) RunningRunJob(ctx context.Context, scheduleID string, shard *int, exceptID string) (*store.RunRecord, error) {
	return r.one(ctx, ofSchedule(scheduleID, shard, func(m bson.M) bool {
		return running(m) && has(m, "runJob") && (exceptID == "" || idOf(m) != exceptID)
	}), nil)
}

func (r runs) LiveSibling(ctx context.Context, scheduleID string, shard *int, createdAt, now time.Time) (*store.RunRecord, error) {
	return r.one(ctx, ofSchedule(scheduleID, shard, func(m bson.M) bool {
		t, ok := msOf(m["sweepAt"])
		return running(m) && timeEq(m, "createdAt", createdAt) && ok && t > ms(now)
	}), func(a, b bson.M) bool { return cmpTime(a, b, "sweepAt") > 0 })
}

func (r runs) PendingNotices(ctx context.Context, now time.Time, limit int) ([]store.RunRecord, error) {
	return r.many(ctx, func(m bson.M) bool { return timeLTE(m, "notifyAt", now) }, byTime("notifyAt"), limit)
}

func (r runs) NoticeDone(ctx context.Context, id string, at time.Time, gaveUp string) error {
	return r.up(ctx, id, func(m bson.M) bool { return timeEq(m, "notifyAt", at) }, func(m bson.M) bson.M {
		delete(m, "notifyAt")
		if gaveUp != "" {
			m["notifyError"] = gaveUp
			n, _ := intOf(m["notifyAttempts"])
			m["notifyAttempts"] = n + 1
		}
		return m
	})
}

func (r runs) NoticeRetry(ctx context.Context, id string, at, next time.Time, errMsg string) error {
	return r.up(ctx, id, func(m bson.M) bool { return timeEq(m, "notifyAt", at) }, func(m bson.M) bson.M {
		m["notifyAt"], m["notifyError"] = val(next), errMsg
		n, _ := intOf(m["notifyAttempts"])
		m["notifyAttempts"] = n + 1
		return m
	})
}

func (r runs) HighestFence(ctx context.Context, scheduleID string) (int64, error) {
	return r.s.highestFence(ctx, runsColl, func(m bson.M) bool { return eqStr(m, "scheduleId", scheduleID) }, store.DefaultFenceField)
}

func (r runs) DeleteExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	return r.s.deleteBatch(ctx, runsColl, func(m bson.M) bool { return timeLTE(m, "expireAt", now) }, byTime("expireAt"), limit)
}
