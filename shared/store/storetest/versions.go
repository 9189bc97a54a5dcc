package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// versions: the history of changes and retention. A record that may not
// have landed must never overwrite one that did, a page reads only what it
// returns, and the bounded deletes delete only past their bound, never an
// unfinished run.
func (s *suite) versions(t *testing.T) {
	rec := func(id string, v int64, final bool, op string) *schedule.VersionRecord {
		return schedule.Change{Version: v, Op: op, Actor: "local", At: t0.Add(time.Duration(v) * time.Minute)}.Record(id, t0, time.Hour, final)
	}
	t.Run("PutVersionGuard", func(t *testing.T) {
		b := s.backend(t)
		c := b.Catalog()
		if err := c.PutVersion(t.Context(), rec("x", 2, false, schedule.ChangeDelete)); err != nil {
			t.Fatalf("put a provisional record: %v", err)
		}
		if err := c.PutVersion(t.Context(), rec("x", 2, false, schedule.ChangeDelete)); err != nil {
			t.Fatalf("put it again: %v", err)
		}
		if err := c.PutVersion(t.Context(), rec("x", 2, true, schedule.ChangeUpdate)); err != nil {
			t.Fatalf("a final record over a provisional one: %v", err)
		}
		onlyConflict(t, "a provisional record over a final one", c.PutVersion(t.Context(), rec("x", 2, false, schedule.ChangeDelete)))
		if err := c.PutVersion(t.Context(), rec("x", 2, true, schedule.ChangeUpdate)); err != nil {
			t.Fatalf("the final record again: %v", err)
		}
		page, _, err := c.ListVersions(t.Context(), "x", 10, "")
		if err != nil || len(page) != 1 || page[0].Op != schedule.ChangeUpdate || !page[0].Final {
			t.Fatalf("ListVersions = %+v, %v; want the one final update", page, err)
		}
	})
	// PutVersion settles a failed write by reading the record back, not by
	// MongoDB's duplicate-key code, which Firestore does not document.
	t.Run("PutVersionGuardWhateverTheCode", func(t *testing.T) {
		// The guard's refusal answered with another code than 11000:
		// the final record is there, so it is the guard's conflict.
		st := s.h.OpenBackend(t)
		b := st
		f := s.faultsFor(t, st)
		if err := b.Catalog().PutVersion(t.Context(), rec("x", 2, true, schedule.ChangeUpdate)); err != nil {
			t.Fatal(err)
		}
		f.Refuse(t, s.viewColl(t, schedule.VersionsCollection), 1, CodeInternal, "update")
		onlyConflict(t, "a provisional record over a final one, refused with code 1", b.Catalog().PutVersion(t.Context(), rec("x", 2, false, schedule.ChangeDelete)))
	})
	t.Run("PutVersionLostAnswer", func(t *testing.T) {
		// The record landed, and the answer was an error that nothing
		// retries: read back, it is ours, and the put succeeded.
		st := s.h.OpenBackend(t)
		b := st
		f := s.faultsFor(t, st)
		f.LoseAnswer(t, s.viewColl(t, schedule.VersionsCollection), 1, CodeInternal, "update")
		if err := b.Catalog().PutVersion(t.Context(), rec("x", 2, false, schedule.ChangeDelete)); err != nil {
			t.Fatalf("a put that landed, answered code 1: %v; want nil (read back, it is there)", err)
		}
		page, _, err := b.Catalog().ListVersions(t.Context(), "x", 10, "")
		if err != nil || len(page) != 1 || page[0].Op != schedule.ChangeDelete {
			t.Fatalf("ListVersions = %+v, %v; want the one record", page, err)
		}
	})
	t.Run("ListVersionsKeyset", func(t *testing.T) {
		b := s.backend(t)
		c := b.Catalog()
		for v := int64(1); v <= 12; v++ {
			if err := c.PutVersion(t.Context(), rec("x", v, true, schedule.ChangeUpdate)); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.PutVersion(t.Context(), rec("y", 1, true, schedule.ChangeCreate)); err != nil {
			t.Fatal(err)
		}
		var got []int64
		token := ""
		for {
			b.Meter().Reset()
			page, next, err := c.ListVersions(t.Context(), "x", 5, token)
			if err != nil {
				t.Fatal(err)
			}
			if n := b.Meter().Total(); n > 5 {
				t.Errorf("a page of 5 read %d documents", n)
			}
			for _, r := range page {
				got = append(got, r.Version)
			}
			if token = next; token == "" {
				break
			}
		}
		if fmt.Sprint(got) != "[12 11 10 9 8 7 6 5 4 3 2 1]" {
			t.Errorf("versions listed %v, want 12..1, newest first, only x's", got)
		}
	})
	t.Run("PruneVersions", func(t *testing.T) {
		b := s.backend(t)
		c := b.Catalog()
		for v := int64(1); v <= 10; v++ {
			if err := c.PutVersion(t.Context(), rec("x", v, true, schedule.ChangeUpdate)); err != nil {
				t.Fatal(err)
			}
		}
		below := schedule.VersionID("x", t0, 7)
		n, err := c.PruneVersions(t.Context(), "x", below, 4)
		if err != nil || n != 4 {
			t.Fatalf("first batch = %d, %v; want 4", n, err)
		}
		if n, err = c.PruneVersions(t.Context(), "x", below, 4); err != nil || n != 2 {
			t.Fatalf("second batch = %d, %v; want the 2 left below 7", n, err)
		}
		page, _, _ := c.ListVersions(t.Context(), "x", 50, "")
		if len(page) != 4 || page[3].Version != 7 {
			t.Errorf("left %d records down to %d, want 10..7", len(page), page[len(page)-1].Version)
		}
	})
	t.Run("OutcomesCarryExpireAt", func(t *testing.T) {
		b := s.backend(t)
		r := b.Runs()
		exp := runT0.Add(24 * time.Hour)
		insertRun(t, r, pendingRecord("skipped"))
		if err := r.Skip(t.Context(), "skipped", "overlap skip", runT0, exp, nil); err != nil {
			t.Fatal(err)
		}
		insertRun(t, r, pendingRecord("dead"))
		if err := r.Claim(t.Context(), "dead", claimOf("h", 1)); err != nil {
			t.Fatal(err)
		}
		swept := getRun(t, r, "dead").SweepAt
		if err := r.FailOver(t.Context(), "dead", swept, "heartbeat stopped", runT0, time.Time{}, exp, nil); err != nil {
			t.Fatal(err)
		}
		insertRun(t, r, pendingRecord("pending"))
		for _, id := range []string{"skipped", "dead"} {
			if got := getRun(t, r, id); !got.ExpireAt.Equal(exp) {
				t.Errorf("%s: expireAt %s, want %s", id, got.ExpireAt, exp)
			}
		}
		if got := getRun(t, r, "pending"); !got.ExpireAt.IsZero() {
			t.Errorf("a pending run carries expireAt %s", got.ExpireAt)
		}
	})
	t.Run("DeleteExpired", func(t *testing.T) {
		b := s.backend(t)
		r := b.Runs()
		for i := range 5 {
			id := fmt.Sprintf("done%d", i)
			insertRun(t, r, pendingRecord(id))
			if err := r.Claim(t.Context(), id, claimOf("h", 1)); err != nil {
				t.Fatal(err)
			}
			if err := r.Finish(t.Context(), id, 1, store.RunOutcome{Status: schedule.RunSucceeded, FinishedAt: runT0, ExpireAt: runT0.Add(time.Duration(i) * time.Hour)}); err != nil {
				t.Fatal(err)
			}
		}
		insertRun(t, r, pendingRecord("pending"))
		now := runT0.Add(3 * time.Hour)
		b.Meter().Reset()
		n, err := r.DeleteExpired(t.Context(), now, 2)
		if err != nil || n != 2 {
			t.Fatalf("first batch = %d, %v; want 2", n, err)
		}
		if reads := b.Meter().Total(); reads > 2 {
			t.Errorf("a batch of 2 read %d documents", reads)
		}
		if n, err = r.DeleteExpired(t.Context(), now, 2); err != nil || n != 2 {
			t.Fatalf("second batch = %d, %v; want the 2 left expired by now (0h..3h)", n, err)
		}
		if n, err = r.DeleteExpired(t.Context(), now, 2); err != nil || n != 0 {
			t.Fatalf("third batch = %d, %v; want 0", n, err)
		}
		for _, id := range []string{"done4", "pending"} {
			if _, err := r.Get(t.Context(), id); err != nil {
				t.Errorf("%s was deleted (%v); want it kept", id, err)
			}
		}
		c := b.Catalog()
		if err := c.PutVersion(t.Context(), rec("x", 1, true, schedule.ChangeCreate)); err != nil {
			t.Fatal(err)
		}
		if n, err := c.DeleteExpiredVersions(t.Context(), t0.Add(time.Hour), 10); err != nil || n != 0 {
			t.Errorf("versions expired before their expireAt: %d, %v", n, err)
		}
		if n, err := c.DeleteExpiredVersions(t.Context(), t0.Add(2*time.Hour), 10); err != nil || n != 1 {
			t.Errorf("versions past their expireAt deleted = %d, %v; want 1", n, err)
		}
	})
}
