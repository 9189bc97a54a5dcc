package mongostore

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// catalog implements store.Catalog.
type catalog struct{ s *Store }

var _ store.Catalog = catalog{}

func (v catalog) schedules() *Collection { return v.s.named(schedule.SchedulesCollection) }
func (v catalog) runs() *Collection      { return v.s.named(schedule.RunsCollection) }

// Create implements store.Catalog.
func (v catalog) Create(ctx context.Context, sc *schedule.Schedule) error {
	c := v.schedules()
	inserted, err := c.InsertIdempotent(ctx, sc)
	if err != nil {
		return err
	}
	if !inserted {
		// "It is there" is all InsertIdempotent can say: a lost answer to
		// this very insert looks like a taken id. The stored document
		// tells them apart: ours, byte for byte (down to createdAt, which
		// is the caller's clock), is a create that succeeded.
		if v.isOurs(ctx, sc) {
			return nil
		}
		return fmt.Errorf("store: insert into %s: _id %s is taken: %w", c.name, sc.ID, store.ErrConflict)
	}
	return nil
}

// isOurs reports whether the stored schedule with sc's id is sc exactly, as
// Create would have written it. Both sides go through the Go type and back
// to BSON, so that the comparison does not depend on the order in which
// the database keeps fields. Any difference, or a failed read, is "not
// ours".
func (v catalog) isOurs(ctx context.Context, sc *schedule.Schedule) bool {
	want, err := bson.Marshal(sc)
	if err != nil {
		return false
	}
	var stored schedule.Schedule
	if err := v.schedules().Get(ctx, sc.ID, &stored); err != nil {
		return false
	}
	got, err := bson.Marshal(&stored)
	return err == nil && bytes.Equal(want, got)
}

// Get implements store.Catalog.
func (v catalog) Get(ctx context.Context, id string) (schedule.Schedule, error) {
	var sc schedule.Schedule
	if err := v.schedules().Get(ctx, id, &sc); err != nil {
		return schedule.Schedule{}, err
	}
	return sc, nil
}

// ListSchedules implements store.Catalog.
func (v catalog) ListSchedules(ctx context.Context, limit int, token string, sel ...schedule.LabelTerm) ([]schedule.Schedule, string, error) {
	// Every id is a string: a token carrying anything else was not ours.
	q := PageQuery{Limit: limit, Token: token, IDType: bson.TypeString, Filter: labelFilter(sel)}
	out := []schedule.Schedule{}
	p, err := v.schedules().Page(ctx, q, &out)
	if err != nil {
		return nil, "", err
	}
	return out, p.NextToken, nil
}

// ListRuns implements store.Catalog.
func (v catalog) ListRuns(ctx context.Context, scheduleID string, limit int, token string) ([]schedule.Run, string, error) {
	return v.runsPage(ctx, bson.D{{Key: "scheduleId", Value: scheduleID}}, limit, token)
}

// runsPage is one keyset page of the runs matching filter, newest fire
// time first: the order of every run list, which the history index and
// runIndexes serve.
func (v catalog) runsPage(ctx context.Context, filter bson.D, limit int, token string) ([]schedule.Run, string, error) {
	out := []schedule.Run{}
	p, err := v.runs().Page(ctx, runsQuery(filter, limit, token), &out)
	if err != nil {
		return nil, "", err
	}
	return out, p.NextToken, nil
}

// runsQuery is the keyset query of a run list: newest fire time first.
func runsQuery(filter bson.D, limit int, token string) PageQuery {
	return PageQuery{
		Filter:    filter,
		SortField: "fireTime", SortType: bson.TypeDateTime, Desc: true,
		IDType: bson.TypeString,
		Limit:  limit, Token: token,
	}
}

// runIndexes names, for each filter combination ListAllRuns serves (the
// equality fields it fixes, in index order), the index of SchedulerIndexes
// that serves it: vshard when merged (a query per decider shard, whose
// pages ListAllRuns merges), then those fields, then fireTime and _id
// descending, the keyset's order. A test holds each entry to its index's
// keys.
var runIndexes = map[string]runIndex{
	"":                  {"all", true},
	"status":            {"by_status", true},
	"source":            {"by_source", true},
	"scheduleId":        {"history", false},
	"scheduleId,status": {"history_status", false},
}

// runIndex is an index of runIndexes; merged when it leads with vshard.
type runIndex struct {
	name   string
	merged bool
}

// runShards is the values of vshard a merged runs list reads: the runs
// stored before runs carried one (null), then every decider shard of this
// deployment.
func runShards() []any {
	out := []any{nil}
	for v := range schedule.DeciderShards() {
		out = append(out, v)
	}
	return out
}

// runFilter is f as a filter, its equality fields in index order, then
// the fire-time bound; and the key of runIndexes it needs.
func runFilter(f store.RunFilter) (bson.D, string) {
	var d bson.D
	var keys []string
	add := func(k, v string) {
		if v != "" {
			d = append(d, bson.E{Key: k, Value: v})
			keys = append(keys, k)
		}
	}
	add("scheduleId", f.ScheduleID)
	add("status", string(f.Status))
	add("source", string(f.Source))
	if !f.Since.IsZero() {
		// BSON keeps milliseconds and truncates: a bound between two
		// milliseconds is rounded up, or a run fired just before it would
		// pass.
		since := f.Since.UTC()
		if ms := since.Truncate(time.Millisecond); ms.Before(since) {
			since = ms.Add(time.Millisecond)
		}
		d = append(d, bson.E{Key: "fireTime", Value: bson.D{{Key: "$gte", Value: since}}})
	}
	return d, strings.Join(keys, ",")
}

// ListAllRuns implements store.Catalog.
func (v catalog) ListAllRuns(ctx context.Context, f store.RunFilter, limit int, token string) ([]schedule.Run, string, error) {
	filter, key := runFilter(f)
	ix, ok := runIndexes[key]
	if !ok || !f.Indexed() {
		return nil, "", fmt.Errorf("store: list runs by %s: %w", key, store.ErrUnindexed)
	}
	if !ix.merged {
		return v.runsPage(ctx, filter, limit, token)
	}
	out := []schedule.Run{}
	p, err := v.runs().MergedPage(ctx, runsQuery(filter, limit, token), DeciderShardField, runShards(), &out)
	if err != nil {
		return nil, "", err
	}
	return out, p.NextToken, nil
}

// GetRun implements store.Catalog.
func (v catalog) GetRun(ctx context.Context, id string) (schedule.Run, error) {
	var r schedule.Run
	if err := v.runs().Get(ctx, id, &r); err != nil {
		return schedule.Run{}, err
	}
	return r, nil
}

// Update implements store.Catalog.
func (v catalog) Update(ctx context.Context, cur, next *schedule.Schedule) error {
	set, unset, err := changes(cur, next)
	if err != nil {
		return fmt.Errorf("store: update %s: %w", v.schedules().name, err)
	}
	update := bson.D{{Key: "$set", Value: set}}
	if len(unset) > 0 {
		update = append(update, bson.E{Key: "$unset", Value: unset})
	}
	return v.schedules().UpdateOne(ctx, bson.D{{Key: "_id", Value: cur.ID}, {Key: "version", Value: cur.Version}}, update)
}

// notWritten are the stored fields Update never writes: the id, and what
// the tick owns (the misfire flag and its fence), so an edit racing a tick
// cannot undo the tick's bookkeeping.
var notWritten = map[string]bool{"_id": true, "createdAt": true, "misfire": true, "fence": true}

// changes returns the $set and $unset that turn the stored cur into next:
// every top-level field of next, and the fields that next omits (omitempty)
// but cur has.
func changes(cur, next *schedule.Schedule) (set, unset bson.D, err error) {
	nb, err := bson.Marshal(next)
	if err != nil {
		return nil, nil, err
	}
	cb, err := bson.Marshal(cur)
	if err != nil {
		return nil, nil, err
	}
	nels, err := bson.Raw(nb).Elements()
	if err != nil {
		return nil, nil, err
	}
	present := map[string]bool{}
	for _, e := range nels {
		k := e.Key()
		present[k] = true
		if !notWritten[k] {
			set = append(set, bson.E{Key: k, Value: e.Value()})
		}
	}
	cels, err := bson.Raw(cb).Elements()
	if err != nil {
		return nil, nil, err
	}
	for _, e := range cels {
		if k := e.Key(); !present[k] && !notWritten[k] {
			unset = append(unset, bson.E{Key: k, Value: ""})
		}
	}
	return set, unset, nil
}

// Delete implements store.Catalog.
func (v catalog) Delete(ctx context.Context, id string, version int64) error {
	filter := bson.D{{Key: "_id", Value: id}}
	if version != 0 {
		filter = append(filter, bson.E{Key: "version", Value: version})
	}
	return v.schedules().DeleteOne(ctx, filter)
}

// labelFilter matches the documents whose stored label pairs
// (schedule.Labels, an array of "key=value") satisfy every term of sel;
// nil for none. Each term is one condition on the array:
//
//	key=value        {labels: "key=value"}
//	key!=value       {labels: {$ne: "key=value"}}  (no element is the pair: a document without the key matches, as kubectl's != does)
//	key in (a, b)    {labels: {$in: ["key=a", "key=b"]}}
//
// and several terms are {$and: [...]}. $ne, $in and $and are on
// Firestore's supported operators
// (https://docs.cloud.google.com/firestore/mongodb-compatibility/docs/supported-features-80,
// emulator/mongo/allowlist.go). The filter is part of the page query, so
// a token is bound to its selector, and the "labels" index (labels, _id)
// serves = and in in the keyset's order; a selector of != terms only
// reads in _id order and skips what does not match.
func labelFilter(sel []schedule.LabelTerm) bson.D {
	cond := func(t schedule.LabelTerm) bson.D {
		pairs := t.Pairs()
		switch t.Op {
		case schedule.LabelNotEquals:
			return bson.D{{Key: "labels", Value: bson.D{{Key: "$ne", Value: pairs[0]}}}}
		case schedule.LabelIn:
			return bson.D{{Key: "labels", Value: bson.D{{Key: "$in", Value: pairs}}}}
		default:
			return bson.D{{Key: "labels", Value: pairs[0]}}
		}
	}
	switch len(sel) {
	case 0:
		return nil
	case 1:
		return cond(sel[0])
	}
	and := make(bson.A, len(sel))
	for i, t := range sel {
		and[i] = cond(t)
	}
	return bson.D{{Key: "$and", Value: and}}
}
