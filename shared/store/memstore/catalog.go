package memstore

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// catalog implements store.Catalog, as mongostore's does.
type catalog struct{ s *Store }

var _ store.Catalog = catalog{}

const versionsColl = schedule.VersionsCollection

func (v catalog) Create(ctx context.Context, sc *schedule.Schedule) error {
	inserted, err := v.s.insert(ctx, schedColl, sc)
	if err != nil {
		return err
	}
	if !inserted {
		if v.isOurs(ctx, sc) {
			return nil
		}
		return fmt.Errorf("store: insert into %s: _id %s is taken: %w", schedColl, sc.ID, store.ErrConflict)
	}
	return nil
}

// isOurs reports whether the stored schedule is sc, field for field.
func (v catalog) isOurs(ctx context.Context, sc *schedule.Schedule) bool {
	want, err := bson.Marshal(sc)
	if err != nil {
		return false
	}
	var stored schedule.Schedule
	if err := v.s.getInto(ctx, schedColl, sc.ID, &stored); err != nil {
		return false
	}
	got, err := bson.Marshal(&stored)
	return err == nil && bytes.Equal(want, got)
}

func (v catalog) Get(ctx context.Context, id string) (schedule.Schedule, error) {
	return schedules(v).Get(ctx, id)
}

func (v catalog) ListSchedules(ctx context.Context, limit int, token string, sel ...schedule.LabelTerm) ([]schedule.Schedule, string, error) {
	got, next, err := v.s.page(ctx, pageQuery{coll: schedColl, binding: labelBinding(sel), match: hasLabels(sel), limit: limit, token: token})
	if err != nil {
		return nil, "", err
	}
	out, err := decodeAll[schedule.Schedule](schedColl, got)
	return out, next, err
}

func (v catalog) ListRuns(ctx context.Context, scheduleID string, limit int, token string) ([]schedule.Run, string, error) {
	return v.runsPage(ctx, "scheduleId="+scheduleID, func(m bson.M) bool { return eqStr(m, "scheduleId", scheduleID) }, limit, token)
}

func (v catalog) runsPage(ctx context.Context, binding string, match func(bson.M) bool, limit int, token string) ([]schedule.Run, string, error) {
	got, next, err := v.s.page(ctx, pageQuery{coll: runsColl, binding: binding, match: match, sortField: "fireTime", desc: true, limit: limit, token: token})
	if err != nil {
		return nil, "", err
	}
	out, err := decodeAll[schedule.Run](runsColl, got)
	return out, next, err
}

// runIndexes are mongostore's: the filter combinations an index serves.
var runIndexes = map[string]bool{"": true, "status": true, "source": true, "scheduleId": true, "scheduleId,status": true}

func (v catalog) ListAllRuns(ctx context.Context, f store.RunFilter, limit int, token string) ([]schedule.Run, string, error) {
	var keys, binding []string
	add := func(k, val string) {
		if val != "" {
			keys = append(keys, k)
			binding = append(binding, k+"="+val)
		}
	}
	add("scheduleId", f.ScheduleID)
	add("status", string(f.Status))
	add("source", string(f.Source))
	key := strings.Join(keys, ",")
	if !runIndexes[key] || !f.Indexed() {
		return nil, "", fmt.Errorf("store: list runs by %s: %w", key, store.ErrUnindexed)
	}
	var since int64
	if !f.Since.IsZero() {
		// The first millisecond at or after Since, as mongostore rounds.
		s := f.Since.UTC()
		if t := s.Truncate(time.Millisecond); t.Before(s) {
			s = t.Add(time.Millisecond)
		}
		since = s.UnixMilli()
		binding = append(binding, fmt.Sprintf("since=%d", since))
	}
	match := func(m bson.M) bool {
		if (f.ScheduleID != "" && !eqStr(m, "scheduleId", f.ScheduleID)) ||
			(f.Status != "" && !eqStr(m, "status", string(f.Status))) ||
			(f.Source != "" && !eqStr(m, "source", string(f.Source))) {
			return false
		}
		if !f.Since.IsZero() {
			t, ok := msOf(m["fireTime"])
			return ok && t >= since
		}
		return true
	}
	return v.runsPage(ctx, strings.Join(binding, "&"), match, limit, token)
}

func (v catalog) GetRun(ctx context.Context, id string) (schedule.Run, error) {
	var r schedule.Run
	if err := v.s.getInto(ctx, runsColl, id, &r); err != nil {
		return schedule.Run{}, err
	}
	return r, nil
}

// notWritten are the fields Update never writes (mongostore's).
var notWritten = map[string]bool{"_id": true, "createdAt": true, "misfire": true, "fence": true}

func (v catalog) Update(ctx context.Context, cur, next *schedule.Schedule) error {
	nd, err := toDoc(next)
	if err != nil {
		return fmt.Errorf("store: update %s: %w", schedColl, err)
	}
	cd, err := toDoc(cur)
	if err != nil {
		return fmt.Errorf("store: update %s: %w", schedColl, err)
	}
	_, err = v.s.update(ctx, schedColl, "update", cur.ID,
		func(m bson.M) bool { n, ok := intOf(m["version"]); return ok && n == cur.Version },
		func(m bson.M) bson.M {
			for k, val := range nd {
				if !notWritten[k] {
					m[k] = val
				}
			}
			for k := range cd {
				if _, ok := nd[k]; !ok && !notWritten[k] {
					delete(m, k)
				}
			}
			return m
		})
	return err
}

func (v catalog) Delete(ctx context.Context, id string, version int64) error {
	return v.s.deleteOne(ctx, schedColl, id, func(m bson.M) bool {
		n, ok := intOf(m["version"])
		return version == 0 || (ok && n == version)
	})
}

// PutVersion implements store.Catalog: an upsert of the whole record,
// refused over a final one unless it is final itself.
func (v catalog) PutVersion(ctx context.Context, rec *schedule.VersionRecord) error {
	doc, err := toDoc(rec)
	if err != nil {
		return fmt.Errorf("store: upsert into %s: %w", versionsColl, err)
	}
	w := mutation{kind: KindUpdate, command: "update", coll: versionsColl, id: rec.ID,
		pred:  func(m bson.M) bool { return m == nil || rec.Final || !isTrue(m, "final") },
		apply: func(bson.M) bson.M { return clone(doc) }}
	err = retryWrite(ctx, true, func() error {
		_, err := v.s.attempt(ctx, w)
		return err
	})
	if err == nil {
		v.s.landed(versionsColl, "upsert", rec.ID, doc)
		return nil
	}
	if err == errMiss { //nolint:errorlint // the primitive's own sentinel, unwrapped
		// The upsert of a matched-nothing filter would insert and meet the
		// final record's _id: a duplicate key.
		return fmt.Errorf("store: put %s into %s: a final record is there: %w", rec.ID, versionsColl, store.ErrConflict)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	stored, rerr := v.s.get(rctx, versionsColl, rec.ID)
	switch {
	case rerr != nil && strings.Contains(rerr.Error(), "not found"):
		return writeError("upsert into", versionsColl, err)
	case rerr != nil:
		return fmt.Errorf("store: upsert into %s: %w: %w; reading _id %s back failed too: %v", versionsColl, store.ErrUnknownOutcome, err, rec.ID, rerr) //nolint:errorlint // the outcome is the write's
	}
	v.s.meter.Add(versionsColl+".upsertCheck", 1)
	var got, ours schedule.VersionRecord
	if derr := decode(stored, &got); derr != nil {
		return fmt.Errorf("store: upsert into %s: %w; _id %s holds something else: %v", versionsColl, err, rec.ID, derr) //nolint:errorlint // the outcome is the write's
	}
	if derr := decode(doc, &ours); derr == nil && reflect.DeepEqual(&ours, &got) {
		return nil
	}
	if got.Final && !rec.Final {
		return fmt.Errorf("store: put %s into %s: a final record is there: %w", rec.ID, versionsColl, store.ErrConflict)
	}
	return writeError("upsert into", versionsColl, err)
}

func (v catalog) ListVersions(ctx context.Context, scheduleID string, limit int, token string) ([]schedule.VersionRecord, string, error) {
	got, next, err := v.s.page(ctx, pageQuery{coll: versionsColl, binding: "scheduleId=" + scheduleID,
		match: func(m bson.M) bool { return eqStr(m, "scheduleId", scheduleID) }, desc: true, limit: limit, token: token})
	if err != nil {
		return nil, "", err
	}
	out, err := decodeAll[schedule.VersionRecord](versionsColl, got)
	return out, next, err
}

func (v catalog) PruneVersions(ctx context.Context, scheduleID, belowID string, limit int) (int, error) {
	return v.s.deleteBatch(ctx, versionsColl,
		func(m bson.M) bool { return eqStr(m, "scheduleId", scheduleID) && idOf(m) < belowID },
		func(a, b bson.M) bool { return cmpID(a, b) > 0 }, limit)
}

func (v catalog) DeleteExpiredVersions(ctx context.Context, now time.Time, limit int) (int, error) {
	return v.s.deleteBatch(ctx, versionsColl, func(m bson.M) bool { return timeLTE(m, "expireAt", now) }, byTime("expireAt"), limit)
}

// labelBinding binds a page token to its label selector, as mongostore
// binds it to its filter: a token of one selector is refused by another.
func labelBinding(sel []schedule.LabelTerm) string {
	if len(sel) == 0 {
		return "all"
	}
	return "labels=" + schedule.LabelSelector(sel).String()
}

// hasLabels matches the documents whose labels array (the stored
// "key=value" form) satisfies every term of sel, as mongostore's filter
// does: = is {labels: pair}, != is {labels: {$ne: pair}} (no element is
// the pair, so a document without labels matches), in is {labels: {$in:
// pairs}}, several terms are $and. nil for no selector.
func hasLabels(sel []schedule.LabelTerm) func(bson.M) bool {
	if len(sel) == 0 {
		return nil
	}
	return func(m bson.M) bool {
		arr, _ := m["labels"].(bson.A)
		have := make(map[string]bool, len(arr))
		for _, x := range arr {
			have[strOf(x)] = true
		}
		for _, t := range sel {
			pairs := t.Pairs()
			switch t.Op {
			case schedule.LabelNotEquals:
				if have[pairs[0]] {
					return false
				}
			case schedule.LabelIn:
				if !slices.ContainsFunc(pairs, func(p string) bool { return have[p] }) {
					return false
				}
			default:
				if !have[pairs[0]] {
					return false
				}
			}
		}
		return true
	}
}
