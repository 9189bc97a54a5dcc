package doctor

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// raceDoc is the scratch document the race and the latency run on.
type raceDoc struct {
	ID      string `bson:"_id"`
	Version int64  `bson:"version"`
	Owner   int    `bson:"owner"`
}

// race starts Racers conditional writes of one document at once, all from
// the same version: exactly one must land, and every other must be told
// store.ErrConflict, the clean answer callers handle. Firestore answers a
// contended document with Aborted (112), which the store retries; a loser
// whose retries run out must still come back as a conflict, never as an
// error its caller does not expect.
func (e *deepEnv) race(ctx context.Context, r *Report) {
	name := fmt.Sprintf("race: %d conditional writers on one document", e.c.Racers)
	if ctx.Err() != nil {
		r.skip(name, "interrupted: "+ctx.Err().Error())
		return
	}
	// The writes are detached from ctx: an interrupt waits for them, so
	// none lands after the cleanup.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
	defer cancel()
	coll := e.st.Collection(e.scratch + "race")
	if _, err := coll.InsertIdempotent(wctx, raceDoc{ID: "race"}); err != nil {
		r.fail(name, "insert the document to race on: "+err.Error(), shapeFix("insert"))
		return
	}
	var (
		mu      sync.Mutex
		winners []int
		others  []string
		wg      sync.WaitGroup
		start   = make(chan struct{})
	)
	conflicts := 0
	for i := range e.c.Racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			err := coll.UpdateOne(wctx, bson.D{{Key: "_id", Value: "race"}, {Key: "version", Value: 0}},
				bson.D{{Key: "$set", Value: bson.D{{Key: "version", Value: 1}, {Key: "owner", Value: i}}}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				winners = append(winners, i)
			case isConflict(err):
				conflicts++
			default:
				others = append(others, err.Error())
			}
		}()
	}
	close(start)
	wg.Wait()
	var got raceDoc
	readErr := coll.Get(wctx, "race", &got)
	detail := fmt.Sprintf("%d winner(s), %d clean conflict(s), %d other error(s)", len(winners), conflicts, len(others))
	fix := "every losing compare-and-set must come back as store.ErrConflict (Firestore's 112 under contention is retried, and reported as a conflict when the retries run out): report this row to baton"
	switch {
	case len(others) > 0:
		r.fail(name, detail+"; first: "+others[0], fix)
	case len(winners) != 1:
		r.fail(name, detail+": want exactly one winner", fix)
	case readErr != nil:
		r.fail(name, detail+"; reading the document back: "+readErr.Error(), fix)
	case got.Version != 1 || got.Owner != winners[0]:
		r.fail(name, fmt.Sprintf("%s; but the document holds version %d owner %d, not the winner %d's write", detail, got.Version, got.Owner, winners[0]), fix)
	default:
		r.pass(name, detail)
	}
}

// absurdLatency is a conditional write's p50 past which the report warns:
// a Tick that writes a few documents per schedule would not keep up.
const absurdLatency = 2 * time.Second

// latency measures LatencyWrites conditional writes of one document, one
// after another, each from the version the last one wrote, and reports
// p50, p99 and the slowest. It fails only on a write that did not land.
func (e *deepEnv) latency(ctx context.Context, r *Report) {
	name := "latency: conditional write"
	if ctx.Err() != nil {
		r.skip(name, "interrupted: "+ctx.Err().Error())
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
	defer cancel()
	coll := e.st.Collection(e.scratch + "latency")
	if _, err := coll.InsertIdempotent(wctx, raceDoc{ID: "latency"}); err != nil {
		r.fail(name, "insert the document to write: "+err.Error(), shapeFix("insert"))
		return
	}
	took := make([]time.Duration, 0, e.c.LatencyWrites)
	for v := range int64(e.c.LatencyWrites) {
		if ctx.Err() != nil {
			r.skip(name, "interrupted: "+ctx.Err().Error())
			return
		}
		t0 := time.Now()
		err := coll.UpdateOne(wctx, bson.D{{Key: "_id", Value: "latency"}, {Key: "version", Value: v}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "version", Value: v + 1}}}})
		d := time.Since(t0)
		if err != nil {
			r.fail(name, fmt.Sprintf("write %d of %d: %v", v+1, e.c.LatencyWrites, err), shapeFix("update {_id, version} $set"))
			return
		}
		took = append(took, d)
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	p50, p99 := percentile(took, 50), percentile(took, 99)
	detail := fmt.Sprintf("%d writes: p50 %s, p99 %s, max %s", len(took), round(p50), round(p99), round(took[len(took)-1]))
	if p50 > absurdLatency {
		r.warn(name, detail, "a conditional write should take milliseconds: check that the functions run in the database's region (BATON_REGION, Terraform's firestore_location)")
		return
	}
	r.pass(name, detail)
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}

func round(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}
