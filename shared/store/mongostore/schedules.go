package mongostore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// JobFenceField is the schedule field fencing the job lease holder's writes
// to the schedule (clearing the misfire flag). It is separate from "fence",
// which holds the tick lease's epoch: the two leases' epochs are unrelated
// counters.
const JobFenceField = "jobFence"

// schedules implements store.Schedules.
type schedules struct{ s *Store }

var (
	_ store.Schedules              = schedules{}
	_ store.DeciderShardBackfiller = (*Store)(nil)
)

func (v schedules) c() *Collection { return v.s.named(schedule.SchedulesCollection) }

// dueQuery is the due page's query: the filter holds now, so a token binds
// to the tick that made it.
func dueQuery(now time.Time, limit int, token string) PageQuery {
	return PageQuery{
		Filter: bson.D{
			{Key: "enabled", Value: true},
			{Key: "nextRunAt", Value: bson.D{{Key: "$lte", Value: now}}},
		},
		SortField: "nextRunAt",
		SortType:  bson.TypeDateTime,
		IDType:    bson.TypeString,
		Limit:     limit,
		Token:     token,
	}
}

// Due implements store.Schedules: two keyset-paged queries on the
// due_vshard index, one for every decider shard at once ($in on its
// leading vshard, which Firestore serves as one query over V ranges) and
// then one for the schedules stored without a shard (vshard null, before
// the backfill has reached them). There is no unsharded due index: every
// advance moves nextRunAt to the same next minute, and an index on it not
// led by vshard would take all of a tick's advances in one range, 500 a
// second
// (https://cloud.google.com/firestore/docs/best-practices#high_read_write_and_delete_rates_to_a_narrow_document_range).
// One query a shard instead would cost the unpartitioned tick (and the
// daemon, every second) V+1 read units with nothing due. Its token is
// "<i>:<now in ms>" (start at query i, 0 or 1) or that and ".<the query's
// page token>": bound to now as a page token is, with the query's page
// token signed and bound to its filter, and i checked.
func (v schedules) Due(ctx context.Context, now time.Time, limit int, token string) ([]schedule.Schedule, string, error) {
	at := strconv.FormatInt(now.UnixMilli(), 10)
	i, inner := 0, ""
	if token != "" {
		head, rest, _ := strings.Cut(token, ".")
		shard, tokAt, _ := strings.Cut(head, ":")
		k, err := strconv.Atoi(shard)
		if err != nil || k < 0 || k > 1 || tokAt != at {
			return nil, "", fmt.Errorf("store: due page: %w", store.ErrBadPageToken)
		}
		i, inner = k, rest
	}
	for ; i <= 1; i++ {
		page, next, err := v.dueIn(ctx, dueShard(i), now, limit, inner)
		if err != nil {
			return nil, "", err
		}
		inner = ""
		switch {
		case next != "":
			return page, strconv.Itoa(i) + ":" + at + "." + next, nil
		case len(page) > 0 && i < 1:
			return page, strconv.Itoa(i+1) + ":" + at, nil
		case len(page) > 0:
			return page, "", nil
		}
	}
	return nil, "", nil
}

// dueShard is the vshard filter of the due walk's i-th query: every
// decider shard ($in 0..V-1), then null (the schedules stored without one).
func dueShard(i int) any {
	if i == 1 {
		return nil
	}
	all := make(bson.A, schedule.DeciderShards())
	for k := range all {
		all[k] = k
	}
	return bson.D{{Key: "$in", Value: all}}
}

// dueIn is one shard's due page (the due_vshard index).
func (v schedules) dueIn(ctx context.Context, vshard any, now time.Time, limit int, token string) ([]schedule.Schedule, string, error) {
	q := dueQuery(now, limit, token)
	q.Filter = append(bson.D{{Key: DeciderShardField, Value: vshard}}, q.Filter...)
	var page []schedule.Schedule
	p, err := v.c().Page(ctx, q, &page)
	if err != nil {
		return nil, "", err
	}
	return page, p.NextToken, nil
}

// DeciderShardField is the schedule field holding its virtual decider
// shard (schedule.Schedule.DeciderShard).
const DeciderShardField = "vshard"

// backfillWrites bounds the backfill's writes in flight.
const backfillWrites = 16

// DueInShard implements store.Schedules. The filter holds the shard, so a
// token binds to its shard's query.
func (v schedules) DueInShard(ctx context.Context, vshard int, now time.Time, limit int, token string) ([]schedule.Schedule, string, error) {
	return v.dueIn(ctx, vshard, now, limit, token)
}

// BackfillDeciderShards implements store.DeciderShardBackfiller: one pass
// over the schedules by _id (the "list" index), reading only _id and
// vshard, writing only the schedules whose vshard is missing or is not
// DeciderShardOf(id, v). A pass over N schedules is N/pageSize reads of
// pageSize documents, and writes nothing once every schedule has its
// shard. Without a guard: the value depends on the id alone, so a
// concurrent edit writes the same one.
func (s *Store) BackfillDeciderShards(ctx context.Context, v, pageSize int) (int, error) {
	if v < 1 || pageSize < 1 {
		return 0, fmt.Errorf("store: backfill decider shards: want v and pageSize of at least 1, got %d and %d", v, pageSize)
	}
	c := s.named(schedule.SchedulesCollection)
	written, after := 0, ""
	for {
		var page []struct {
			ID     string `bson:"_id"`
			VShard *int   `bson:"vshard"`
		}
		filter := bson.D{}
		if after != "" {
			filter = bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: after}}}}
		}
		err := c.Find(ctx, filter, &page, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).
			SetLimit(int64(pageSize)).SetProjection(bson.D{{Key: "_id", Value: 1}, {Key: DeciderShardField, Value: 1}}))
		if err != nil {
			return written, fmt.Errorf("store: backfill decider shards: read after %q: %w", after, err)
		}
		// The writes of a page go backfillWrites at a time: at
		// Firestore's latency one after another, the first pass over
		// 100,000 schedules would take most of an hour.
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			werr error
			sem  = make(chan struct{}, backfillWrites)
		)
		for _, d := range page {
			want := schedule.DeciderShardOf(d.ID, v)
			if d.VShard != nil && *d.VShard == want {
				continue
			}
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: d.ID}}, bson.D{{Key: "$set", Value: bson.D{{Key: DeciderShardField, Value: want}}}})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					written++
				case errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrContended):
					// Deleted since read.
				case werr == nil:
					werr = fmt.Errorf("store: backfill decider shards: write %s: %w", d.ID, err)
				}
			}()
		}
		wg.Wait()
		if werr != nil {
			return written, werr
		}
		if len(page) < pageSize {
			return written, nil
		}
		after = page[len(page)-1].ID
	}
}

// NextDue implements store.Schedules: the earlier of two one-document
// reads on the due_vshard index, every decider shard at once ($in, as in
// Due) and the schedules without a shard, in place of V+1 reads (the
// daemon asks on every wake).
func (v schedules) NextDue(ctx context.Context) (time.Time, bool, error) {
	var (
		best  time.Time
		found bool
	)
	for i := range 2 {
		var s struct {
			NextRunAt time.Time `bson:"nextRunAt"`
		}
		err := v.c().FindOne(ctx, bson.D{{Key: DeciderShardField, Value: dueShard(i)}, {Key: "enabled", Value: true}}, &s,
			options.FindOne().SetSort(bson.D{{Key: "nextRunAt", Value: 1}, {Key: "_id", Value: 1}}).
				SetProjection(bson.D{{Key: "nextRunAt", Value: 1}}))
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return time.Time{}, false, fmt.Errorf("store: next due: %w", err)
		case !found || s.NextRunAt.Before(best):
			best, found = s.NextRunAt, true
		}
	}
	return best, found, nil
}

// Advance implements store.Schedules.
func (v schedules) Advance(ctx context.Context, read *schedule.Schedule, next time.Time, remaining *int64, f store.Fence) error {
	set := bson.D{{Key: "nextRunAt", Value: next.UTC()}}
	if next.IsZero() {
		set = bson.D{{Key: "enabled", Value: false}}
	}
	if remaining != nil {
		set = append(set, bson.E{Key: "remainingRuns", Value: *remaining})
	}
	// The filter holds the version read too: an edit may recompute the same
	// nextRunAt (its clock was just before the fire time) while changing the
	// expression, and then only the version tells that the edit must win.
	filter := bson.D{{Key: "_id", Value: read.ID}, {Key: "nextRunAt", Value: read.NextRunAt}}
	if read.Version != 0 {
		filter = append(filter, bson.E{Key: "version", Value: read.Version})
	}
	return v.c().FencedUpdate(ctx, filter, f, bson.D{{Key: "$set", Value: set}})
}

// DropChange implements store.Schedules.
func (v schedules) DropChange(ctx context.Context, id string, version int64) error {
	return v.c().UpdateOne(ctx,
		bson.D{{Key: "_id", Value: id}, {Key: "version", Value: version}, {Key: "lastChange.version", Value: version}},
		bson.D{{Key: "$unset", Value: bson.D{{Key: "lastChange", Value: ""}}}})
}

// Get implements store.Schedules.
func (v schedules) Get(ctx context.Context, id string) (schedule.Schedule, error) {
	var s schedule.Schedule
	if err := v.c().Get(ctx, id, &s); err != nil {
		return schedule.Schedule{}, err
	}
	return s, nil
}

// SetMisfire implements store.Schedules.
func (v schedules) SetMisfire(ctx context.Context, id string, fireTime time.Time, bump bool) error {
	ft := fireTime.UTC()
	open := bson.D{{Key: "$set", Value: bson.D{{Key: "misfire", Value: true}, {Key: "misfireAt", Value: ft}}}}
	join := bson.D{{Key: "$set", Value: bson.D{{Key: "misfire", Value: true}}}, {Key: "$max", Value: bson.D{{Key: "misfireAt", Value: ft}}}}
	if bump {
		inc := bson.E{Key: "$inc", Value: bson.D{{Key: "misfireSeq", Value: int64(1)}}}
		open, join = append(open, inc), append(join, inc)
	}
	err := v.c().UpdateOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "misfire", Value: bson.D{{Key: "$ne", Value: true}}}}, open)
	if errors.Is(err, store.ErrConflict) {
		// Up already (or deleted): join the open window. A clear between
		// the two writes makes this one miss too: ErrConflict.
		err = v.c().UpdateOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "misfire", Value: true}}, join)
	}
	return err
}

// misfireDoc is the schedule document's buffer_one bookkeeping.
type misfireDoc struct {
	Misfire    bool      `bson:"misfire"`
	MisfireAt  time.Time `bson:"misfireAt"`
	MisfireSeq int64     `bson:"misfireSeq"`
	JobFence   int64     `bson:"jobFence"`
}

func (d misfireDoc) state() store.Misfire {
	return store.Misfire{Set: d.Misfire, At: d.MisfireAt, Seq: d.MisfireSeq, JobFence: d.JobFence}
}

// ClearMisfire implements store.Schedules.
func (v schedules) ClearMisfire(ctx context.Context, id string, jobEpoch int64) (store.Misfire, error) {
	var got misfireDoc
	err := v.c().FindOneAndUpdate(ctx,
		bson.D{{Key: "_id", Value: id}, {Key: "misfire", Value: true}, {Key: "$or", Value: bson.A{
			bson.D{{Key: JobFenceField, Value: bson.D{{Key: "$lte", Value: jobEpoch}}}},
			bson.D{{Key: JobFenceField, Value: bson.D{{Key: "$exists", Value: false}}}},
		}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "misfire", Value: false}, {Key: JobFenceField, Value: jobEpoch}}}},
		&got)
	if err != nil && !errors.Is(err, store.ErrConflict) {
		// The clear may have landed with its answer lost. If the flag is
		// down under this fence, go on as if it answered: the misfire run
		// id is the one this flag setting owns, so a clear we did not in
		// fact make records nothing new.
		var back misfireDoc
		if gerr := v.c().Get(ctx, id, &back); gerr == nil && !back.Misfire && back.JobFence == jobEpoch {
			return back.state(), nil
		}
	}
	if err != nil {
		return store.Misfire{}, err
	}
	return got.state(), nil
}

// HasMisfire implements store.Schedules.
func (v schedules) HasMisfire(ctx context.Context, id string) (bool, error) {
	n, err := v.c().Count(ctx, bson.D{{Key: "_id", Value: id}, {Key: "misfire", Value: true}})
	if err != nil {
		return false, err
	}
	return n > 0, nil
}

// Misfired implements store.Schedules: a keyset page on (misfire, _id),
// which the "misfire" index serves.
func (v schedules) Misfired(ctx context.Context, after string, limit int) ([]schedule.Schedule, error) {
	var flagged []schedule.Schedule
	err := v.c().Find(ctx, bson.D{{Key: "misfire", Value: true}, {Key: "_id", Value: bson.D{{Key: "$gt", Value: after}}}}, &flagged,
		options.Find().SetSort(bson.D{{Key: "misfire", Value: 1}, {Key: "_id", Value: 1}}).SetLimit(int64(limit)))
	if err != nil {
		return nil, err
	}
	return flagged, nil
}

// PausedUntil implements store.Schedules.
func (v schedules) PausedUntil(ctx context.Context, now time.Time, limit int) ([]schedule.Schedule, error) {
	var due []schedule.Schedule
	err := v.c().Find(ctx, bson.D{{Key: "enabled", Value: false}, {Key: "pausedUntil", Value: bson.D{{Key: "$lte", Value: now.UTC()}}}}, &due,
		options.Find().SetSort(bson.D{{Key: "enabled", Value: 1}, {Key: "pausedUntil", Value: 1}}).SetLimit(int64(limit)))
	if err != nil {
		return nil, err
	}
	return due, nil
}

// Unpause implements store.Schedules.
func (v schedules) Unpause(ctx context.Context, read *schedule.Schedule, next, at time.Time) error {
	filter := bson.D{{Key: "_id", Value: read.ID}, {Key: "enabled", Value: false}, {Key: "version", Value: read.Version}}
	update := bson.D{
		{Key: "$set", Value: bson.D{{Key: "enabled", Value: true}, {Key: "nextRunAt", Value: next.UTC()}, {Key: "version", Value: read.Version + 1}, {Key: "updatedAt", Value: at.UTC()}}},
		{Key: "$unset", Value: bson.D{{Key: "pauseReason", Value: ""}, {Key: "pausedBy", Value: ""}, {Key: "pausedAt", Value: ""}, {Key: "pausedUntil", Value: ""}}},
	}
	if next.IsZero() {
		update = bson.D{
			{Key: "$set", Value: bson.D{{Key: "version", Value: read.Version + 1}, {Key: "updatedAt", Value: at.UTC()}}},
			{Key: "$unset", Value: bson.D{{Key: "pausedUntil", Value: ""}}},
		}
	}
	// The write's change travels with it (schedule.Change; the caller has
	// copied the previous one into the history).
	ch, err := unpauseChange(read, next, at)
	if err != nil {
		return fmt.Errorf("store: unpause %s: %w", read.ID, err)
	}
	update[0].Value = append(update[0].Value.(bson.D), bson.E{Key: "lastChange", Value: ch})
	return v.c().UpdateOne(ctx, filter, update)
}

// unpauseChange is the change Unpause makes, by the scheduler ("baton"):
// a resume, or (next zero) the removal of pausedUntil alone.
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

// EditedAfter implements store.Schedules.
func (v schedules) EditedAfter(ctx context.Context, after time.Time, afterID string, limit int) ([]schedule.Schedule, error) {
	var page []schedule.Schedule
	err := v.c().Find(ctx, bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: "updatedAt", Value: bson.D{{Key: "$gt", Value: after}}}},
		bson.D{{Key: "updatedAt", Value: after}, {Key: "_id", Value: bson.D{{Key: "$gt", Value: afterID}}}},
	}}}, &page, options.Find().SetSort(bson.D{{Key: "updatedAt", Value: 1}, {Key: "_id", Value: 1}}).SetLimit(int64(limit)))
	if err != nil {
		return nil, err
	}
	return page, nil
}

// HighestTickFence implements store.Schedules.
func (v schedules) HighestTickFence(ctx context.Context) (int64, error) {
	return highestFence(ctx, v.c(), bson.D{}, store.DefaultFenceField)
}

// JobFence implements store.Schedules.
func (v schedules) JobFence(ctx context.Context, id string) (int64, error) {
	return highestFence(ctx, v.c(), bson.D{{Key: "_id", Value: id}}, JobFenceField)
}

// highestFence is the highest value of the fence field among the documents
// of c matching filter (0 when none matches or the field is absent): one
// read, on an index ordered by the field.
func highestFence(ctx context.Context, c *Collection, filter bson.D, field string) (int64, error) {
	var doc bson.M
	err := c.FindOne(ctx, filter, &doc, options.FindOne().SetSort(bson.D{{Key: field, Value: -1}}).SetProjection(bson.D{{Key: field, Value: 1}}))
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: highest %s in %s: %w", field, c.Name(), err)
	}
	switch v := doc[field].(type) {
	case int64:
		return v, nil
	case int32:
		return int64(v), nil
	}
	return 0, nil
}
