package catalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// DefaultVersionsKept is how many change records a schedule keeps when
// Options.VersionsKept is 0.
const DefaultVersionsKept = 100

// pruneBatch bounds the records one write prunes: a write adds one record,
// so a batch larger than one keeps every schedule at its bound.
const pruneBatch = 50

type actorKey struct{}

// WithActor returns ctx carrying who makes the writes done under it
// (httpapi.Actor of the request), for the change records.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// actorOf is the actor WithActor put in ctx, or "unknown".
func actorOf(ctx context.Context) string {
	if a, _ := ctx.Value(actorKey{}).(string); a != "" {
		return a
	}
	return "unknown"
}

// VersionPage is one page of a schedule's change records, newest first.
type VersionPage struct {
	Versions []schedule.VersionRecord `json:"versions"`
	// NextPageToken continues the list; empty on the last page.
	NextPageToken string `json:"nextPageToken,omitempty"`
}

// keep is how long sc's change records and finished runs are kept.
func (s *Service) keep(sc *schedule.Schedule) time.Duration {
	return sc.KeepOr(s.opts.HistoryKeep)
}

// change is the Change a write of op makes, from before to after (either
// may be nil), at version.
func (s *Service) change(ctx context.Context, op string, before, after *schedule.Schedule, version int64, at time.Time) (*schedule.Change, error) {
	diff, err := schedule.Diff(before, after)
	if err != nil {
		return nil, err
	}
	return &schedule.Change{Version: version, Op: op, Actor: actorOf(ctx), At: at, Diff: diff}, nil
}

// copyForward writes the change that produced cur's stored version into
// VersionsCollection, final, before a write replaces cur: cur's document is
// the only place that change is sure to be (a record written next to an
// earlier write may have been lost, or overwritten by a writer that lost
// the race), and the write about to land removes it from there. It is
// idempotent, so every writer that read cur may do it. A failure aborts
// the write: going on would lose the change.
func (s *Service) copyForward(ctx context.Context, cur *schedule.Schedule) error {
	if cur.LastChange == nil || cur.LastChange.Version != cur.Version {
		return nil // written before history existed, or by a write that keeps none
	}
	rec := cur.LastChange.Record(cur.ID, cur.CreatedAt, s.keep(cur), true)
	if err := s.store.PutVersion(ctx, rec); err != nil {
		return fmt.Errorf("catalog: record version %d of %s: %w", cur.Version, cur.ID, err)
	}
	return nil
}

// recorded is the bookkeeping after a write of sc landed: its own change
// is copied (so that the list usually needs no help from the document),
// and records past the bound are pruned, a bounded batch. Both are best
// effort: the change is safe in sc's document, and the next write prunes.
func (s *Service) recorded(ctx context.Context, sc *schedule.Schedule) {
	if err := s.copyForward(ctx, sc); err != nil {
		slog.WarnContext(ctx, "recording a change failed; the next write of the schedule records it", "schedule", sc.ID, "err", err)
	}
	if sc.Version <= int64(s.opts.VersionsKept) {
		return
	}
	below := schedule.VersionID(sc.ID, sc.CreatedAt, sc.Version-int64(s.opts.VersionsKept)+1)
	if _, err := s.store.PruneVersions(ctx, sc.ID, below, pruneBatch); err != nil {
		slog.WarnContext(ctx, "pruning old change records failed; the next write prunes", "schedule", sc.ID, "err", err)
	}
}

// ListVersions returns one page of schedule id's history of changes,
// newest first, with a keyset cursor. The record of the current version is
// taken from the schedule document, which its write updated atomically; a
// record a write made before it landed (a delete's) is shown only once the
// write is known to have landed. A deleted schedule's history is still
// listed; an id with neither a schedule nor records is ErrNotFound. A page
// of n reads at most n records and the schedule, and may hold n+1
// records: the current version's, when its copy has not been made yet.
func (s *Service) ListVersions(ctx context.Context, id string, o ListOptions) (*VersionPage, error) {
	n, err := pageSize(o)
	if err != nil {
		return nil, err
	}
	var cur *schedule.Schedule
	switch sc, err := s.store.Get(ctx, id); {
	case err == nil:
		cur = &sc
	case !errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("catalog: list versions of %s: %w", id, err)
	}
	recs, next, err := s.store.ListVersions(ctx, id, n, o.PageToken)
	if err != nil {
		return nil, pageError("list versions of "+id, err)
	}
	out := &VersionPage{Versions: []schedule.VersionRecord{}, NextPageToken: next}
	var truth *schedule.VersionRecord
	if cur != nil && cur.LastChange != nil && cur.LastChange.Version == cur.Version {
		truth = cur.LastChange.Record(cur.ID, cur.CreatedAt, s.keep(cur), true)
	}
	if truth != nil && o.PageToken == "" && (len(recs) == 0 || recs[0].ID != truth.ID) {
		out.Versions = append(out.Versions, *truth)
	}
	for _, r := range recs {
		if cur != nil && !r.Incarnation.Before(cur.CreatedAt) {
			switch {
			case r.Version > cur.Version || r.Incarnation.After(cur.CreatedAt):
				continue // a write that has not landed (or never will)
			case !r.Final && r.Op == schedule.ChangeDelete:
				continue // a delete that did not land: the schedule is there
			case truth != nil && r.ID == truth.ID:
				r = *truth // the document is the truth of its own version
			}
		}
		out.Versions = append(out.Versions, r)
	}
	if cur == nil && len(out.Versions) == 0 && o.PageToken == "" {
		return nil, fmt.Errorf("catalog: list versions of %s: %w", id, ErrNotFound)
	}
	return out, nil
}
