package memstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// schedules implements store.Schedules, as mongostore's does.
type schedules struct{ s *Store }

var _ store.Schedules = schedules{}

const schedColl = schedule.SchedulesCollection

// Due implements store.Schedules.
func (v schedules) Due(ctx context.Context, now time.Time, limit int, token string) ([]schedule.Schedule, string, error) {
	by := ms(now)
	got, next, err := v.s.page(ctx, pageQuery{
		coll: schedColl, binding: "due|" + strconv.FormatInt(ms(now), 10),
		match:     func(m bson.M) bool { return isTrue(m, "enabled") && timeLTE(m, "nextRunAt", now) },
		dueBy:     &by,
		sortField: "nextRunAt", limit: limit, token: token,
	})
	if err != nil {
		return nil, "", err
	}
	page, err := decodeAll[schedule.Schedule](schedColl, got)
	return page, next, err
}

// DueInShard is Due restricted to the schedules whose vshard field (the
// virtual decider shard, issue 28) is vshard: one partition's read. A
// token of another shard's page is ErrBadPageToken. It is here ahead of
// the interface method the partitioned deciders add to store.Schedules.
func (v schedules) DueInShard(ctx context.Context, vshard int, now time.Time, limit int, token string) ([]schedule.Schedule, string, error) {
	shard := int64(vshard)
	got, next, err := v.s.page(ctx, pageQuery{
		coll: schedColl, binding: "due|" + strconv.FormatInt(ms(now), 10) + "|vshard=" + strconv.Itoa(vshard),
		match: func(m bson.M) bool {
			n, ok := intOf(m["vshard"])
			return ok && n == int64(vshard) && isTrue(m, "enabled") && timeLTE(m, "nextRunAt", now)
		},
		shard: &shard, sortField: "nextRunAt", limit: limit, token: token,
	})
	if err != nil {
		return nil, "", err
	}
	page, err := decodeAll[schedule.Schedule](schedColl, got)
	return page, next, err
}

// NextDue implements store.Schedules.
func (v schedules) NextDue(ctx context.Context) (time.Time, bool, error) {
	m, err := v.s.findOne(ctx, schedColl, func(m bson.M) bool { return isTrue(m, "enabled") }, byTimeThenID("nextRunAt"))
	if errors.Is(err, store.ErrNotFound) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	t, _ := msOf(m["nextRunAt"])
	return time.UnixMilli(t).UTC(), true, nil
}

// Advance implements store.Schedules.
func (v schedules) Advance(ctx context.Context, read *schedule.Schedule, next time.Time, remaining *int64, f store.Fence) error {
	field := f.Field
	if field == "" {
		field = store.DefaultFenceField
	}
	return v.s.fencedUpdate(ctx, schedColl, read.ID, field, f.Epoch,
		func(m bson.M) bool {
			if !timeEq(m, "nextRunAt", read.NextRunAt) {
				return false
			}
			if read.Version != 0 {
				n, ok := intOf(m["version"])
				return ok && n == read.Version
			}
			return true
		},
		func(m bson.M) bson.M {
			if next.IsZero() {
				m["enabled"] = false
			} else {
				m["nextRunAt"] = val(next.UTC())
			}
			if remaining != nil {
				m["remainingRuns"] = *remaining
			}
			return m
		})
}

// DropChange implements store.Schedules.
func (v schedules) DropChange(ctx context.Context, id string, version int64) error {
	_, err := v.s.update(ctx, schedColl, "update", id,
		func(m bson.M) bool {
			n, ok := intOf(m["version"])
			cv, cok := intOf(nested(m["lastChange"], "version"))
			return ok && n == version && cok && cv == version
		},
		func(m bson.M) bson.M {
			delete(m, "lastChange")
			return m
		})
	return err
}

// Get implements store.Schedules.
func (v schedules) Get(ctx context.Context, id string) (schedule.Schedule, error) {
	var sc schedule.Schedule
	if err := v.s.getInto(ctx, schedColl, id, &sc); err != nil {
		return schedule.Schedule{}, err
	}
	return sc, nil
}

// SetMisfire implements store.Schedules: open a window, or join the open
// one (two writes, as mongostore's).
func (v schedules) SetMisfire(ctx context.Context, id string, fireTime time.Time, bump bool) error {
	ft := val(fireTime.UTC())
	inc := func(m bson.M) {
		if bump {
			n, _ := intOf(m["misfireSeq"])
			m["misfireSeq"] = n + 1
		}
	}
	_, err := v.s.update(ctx, schedColl, "update", id, func(m bson.M) bool { return !isTrue(m, "misfire") },
		func(m bson.M) bson.M { m["misfire"], m["misfireAt"] = true, ft; inc(m); return m })
	if errors.Is(err, store.ErrConflict) {
		_, err = v.s.update(ctx, schedColl, "update", id, func(m bson.M) bool { return isTrue(m, "misfire") },
			func(m bson.M) bson.M {
				m["misfire"] = true
				if old, ok := msOf(m["misfireAt"]); !ok || old < ms(fireTime) {
					m["misfireAt"] = ft
				}
				inc(m)
				return m
			})
	}
	return err
}

func misfireOf(m bson.M) store.Misfire {
	at, _ := msOf(m["misfireAt"])
	seq, _ := intOf(m["misfireSeq"])
	jf, _ := intOf(m[mongostore.JobFenceField])
	mf := store.Misfire{Set: isTrue(m, "misfire"), Seq: seq, JobFence: jf}
	if _, ok := m["misfireAt"]; ok {
		mf.At = time.UnixMilli(at).UTC()
	}
	return mf
}

// ClearMisfire implements store.Schedules.
func (v schedules) ClearMisfire(ctx context.Context, id string, jobEpoch int64) (store.Misfire, error) {
	got, err := v.s.update(ctx, schedColl, "findAndModify", id,
		func(m bson.M) bool {
			if !isTrue(m, "misfire") {
				return false
			}
			jf, ok := intOf(m[mongostore.JobFenceField])
			return !has(m, mongostore.JobFenceField) || (ok && jf <= jobEpoch)
		},
		func(m bson.M) bson.M { m["misfire"], m[mongostore.JobFenceField] = false, jobEpoch; return m })
	if err != nil && !errors.Is(err, store.ErrConflict) {
		if back, gerr := v.s.get(ctx, schedColl, id); gerr == nil {
			if st := misfireOf(back); !st.Set && st.JobFence == jobEpoch {
				return st, nil
			}
		}
	}
	if err != nil {
		return store.Misfire{}, err
	}
	return misfireOf(got), nil
}

// PausedUntil implements store.Schedules.
func (v schedules) PausedUntil(ctx context.Context, now time.Time, limit int) ([]schedule.Schedule, error) {
	got, err := v.s.find(ctx, schedColl, "find", func(m bson.M) bool {
		return has(m, "enabled") && !isTrue(m, "enabled") && timeLTE(m, "pausedUntil", now)
	}, byTime("pausedUntil"), limit)
	if err != nil {
		return nil, err
	}
	return decodeAll[schedule.Schedule](schedColl, got)
}

// Unpause implements store.Schedules.
func (v schedules) Unpause(ctx context.Context, read *schedule.Schedule, next, at time.Time) error {
	ch, err := unpauseChange(read, next, at)
	if err != nil {
		return fmt.Errorf("store: unpause %s: %w", read.ID, err)
	}
	chDoc, err := toDoc(ch)
	if err != nil {
		return fmt.Errorf("store: unpause %s: %w", read.ID, err)
	}
	_, err = v.s.update(ctx, schedColl, "update", read.ID,
		func(m bson.M) bool {
			n, ok := intOf(m["version"])
			return has(m, "enabled") && !isTrue(m, "enabled") && ok && n == read.Version
		},
		func(m bson.M) bson.M {
			m["version"], m["updatedAt"], m["lastChange"] = read.Version+1, val(at.UTC()), chDoc
			if next.IsZero() {
				delete(m, "pausedUntil")
				return m
			}
			m["enabled"], m["nextRunAt"] = true, val(next.UTC())
			for _, k := range []string{"pauseReason", "pausedBy", "pausedAt", "pausedUntil"} {
				delete(m, k)
			}
			return m
		})
	return err
}

// unpauseChange is mongostore's: the change Unpause makes, by "baton".
func unpauseChange(read *schedule.Schedule, next, at time.Time) (*schedule.Change, error) {
	after := *read
	op := schedule.ChangeResume
	if next.IsZero() {
		after.PausedUntil, op = time.Time{}, schedule.ChangeUpdate
	} else {
		after.Enabled = true
		after.PauseReason, after.PausedBy, after.PausedAt, after.PausedUntil = "", "", time.Time{}, time.Time{}
	}
	diff, err := schedule.Diff(read, &after)
	if err != nil {
		return nil, err
	}
	return &schedule.Change{Version: read.Version + 1, Op: op, Actor: "baton", At: at.UTC(), Diff: diff}, nil
}

// HasMisfire implements store.Schedules: a count of at most one.
func (v schedules) HasMisfire(ctx context.Context, id string) (bool, error) {
	got, err := v.s.find(ctx, schedColl, "count", func(m bson.M) bool { return idOf(m) == id && isTrue(m, "misfire") }, nil, 1)
	if err != nil {
		return false, err
	}
	return len(got) > 0, nil
}

// Misfired implements store.Schedules.
func (v schedules) Misfired(ctx context.Context, after string, limit int) ([]schedule.Schedule, error) {
	got, err := v.s.find(ctx, schedColl, "find", func(m bson.M) bool { return isTrue(m, "misfire") && idOf(m) > after },
		func(a, b bson.M) bool { return cmpID(a, b) < 0 }, limit)
	if err != nil {
		return nil, err
	}
	return decodeAll[schedule.Schedule](schedColl, got)
}

// EditedAfter implements store.Schedules.
func (v schedules) EditedAfter(ctx context.Context, after time.Time, afterID string, limit int) ([]schedule.Schedule, error) {
	got, err := v.s.find(ctx, schedColl, "find", func(m bson.M) bool {
		t, ok := msOf(m["updatedAt"])
		return ok && (t > ms(after) || (t == ms(after) && idOf(m) > afterID))
	}, byTimeThenID("updatedAt"), limit)
	if err != nil {
		return nil, err
	}
	return decodeAll[schedule.Schedule](schedColl, got)
}

// HighestTickFence implements store.Schedules.
func (v schedules) HighestTickFence(ctx context.Context) (int64, error) {
	return v.s.highestFence(ctx, schedColl, func(bson.M) bool { return true }, store.DefaultFenceField)
}

// JobFence implements store.Schedules.
func (v schedules) JobFence(ctx context.Context, id string) (int64, error) {
	return v.s.highestFence(ctx, schedColl, func(m bson.M) bool { return idOf(m) == id }, mongostore.JobFenceField)
}

// highestFence is the highest value of field among the documents that
// match (0 when none, or the field is absent): one document read.
func (s *Store) highestFence(ctx context.Context, coll string, match func(bson.M) bool, field string) (int64, error) {
	m, err := s.findOne(ctx, coll, match, func(a, b bson.M) bool {
		x, xok := intOf(a[field])
		y, yok := intOf(b[field])
		if xok != yok {
			return xok
		}
		return x > y
	})
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: highest %s in %s: %w", field, coll, err)
	}
	n, _ := intOf(m[field])
	return n, nil
}

// nested is field key of an embedded document v, decoded as bson.M or
// bson.D; nil when v is neither or lacks it.
func nested(v any, key string) any {
	switch d := v.(type) {
	case bson.M:
		return d[key]
	case bson.D:
		for _, e := range d {
			if e.Key == key {
				return e.Value
			}
		}
	}
	return nil
}
