package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// catalog: the Schedules API's view. A versioned update is the API's
// compare-and-set: two edits of one version must not both land, or one
// of them is silently lost.
func (s *suite) catalog(t *testing.T) {
	t.Run("UpdateOnce", func(t *testing.T) {
		b := s.backend(t)
		create(t, b, newSchedule("x", t0))
		for round := range rounds {
			cur, err := b.Catalog().Get(t.Context(), "x")
			if err != nil {
				t.Fatal(err)
			}
			winners := raceWinners(t, Racers, func(i int) string { return fmt.Sprintf("round %d racer %d", round, i) }, func(i int) error {
				c := cur
				next := cur
				next.Version = cur.Version + 1
				next.Description = fmt.Sprintf("racer %d", i)
				return b.Catalog().Update(t.Context(), &c, &next)
			})
			if len(winners) != 1 {
				t.Fatalf("round %d: updates that won: %v; want exactly one of %d from version %d", round, winners, Racers, cur.Version)
			}
			got, err := b.Catalog().Get(t.Context(), "x")
			if err != nil || got.Version != cur.Version+1 || got.Description != fmt.Sprintf("racer %d", winners[0]) {
				t.Fatalf("round %d: stored %+v, %v; want version %d by racer %d", round, got, err, cur.Version+1, winners[0])
			}
		}
	})
	t.Run("UpdateKeepsTheTicksFields", func(t *testing.T) {
		// An edit never writes the misfire flag or the tick's fence, and
		// removes the fields the new schedule omits.
		b := s.backend(t)
		sc := newSchedule("x", t0)
		sc.Description = "old"
		create(t, b, sc)
		read := getSchedule(t, b, "x")
		if err := b.Schedules().Advance(t.Context(), &read, t0.Add(time.Minute), nil, store.Fence{Epoch: 9}); err != nil {
			t.Fatal(err)
		}
		if err := b.Schedules().SetMisfire(t.Context(), "x", t0, false); err != nil {
			t.Fatal(err)
		}
		cur := getSchedule(t, b, "x")
		next := read // read before the tick: misfire false, fence 0
		next.Version, next.Description = cur.Version+1, ""
		if err := b.Catalog().Update(t.Context(), &cur, &next); err != nil {
			t.Fatal(err)
		}
		got := getSchedule(t, b, "x")
		if !got.Misfire || got.Fence != 9 || got.Description != "" || got.Version != 2 {
			t.Errorf("after the edit: misfire %v fence %d description %q version %d; want misfire and fence 9 kept, description removed, version 2",
				got.Misfire, got.Fence, got.Description, got.Version)
		}
	})
	t.Run("Create", func(t *testing.T) {
		b := s.backend(t)
		sc := newSchedule("x", t0)
		create(t, b, sc)
		// The same schedule again is this create (its answer was lost);
		// another under the id is a conflict.
		if err := b.Catalog().Create(t.Context(), &sc); err != nil {
			t.Errorf("the same create again = %v; want nil", err)
		}
		other := sc
		other.CreatedAt = t0.Add(time.Second)
		onlyConflict(t, "create of a taken id", b.Catalog().Create(t.Context(), &other))
		if _, err := b.Catalog().Get(t.Context(), "missing"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get of a missing schedule = %v; want ErrNotFound", err)
		}
	})
	t.Run("CreateAnswerLost", func(t *testing.T) {
		st := s.h.OpenBackend(t)
		b := st
		f := s.faultsFor(t, st)
		f.LoseAnswer(t, s.viewColl(t, schedule.SchedulesCollection), 1, CodeDeadlineExceeded, "insert")
		sc := newSchedule("x", t0)
		if err := b.Catalog().Create(t.Context(), &sc); err != nil {
			t.Errorf("create whose answer was lost = %v; want nil (the read-back finds it ours)", err)
		}
		if got := getSchedule(t, b, "x"); got.ID != "x" {
			t.Errorf("stored %+v", got)
		}
	})
	t.Run("UpdateAnswerLost", func(t *testing.T) {
		st := s.h.OpenBackend(t)
		b := st
		f := s.faultsFor(t, st)
		create(t, b, newSchedule("x", t0))
		cur := getSchedule(t, b, "x")
		next := cur
		next.Version, next.Description = 2, "edited"
		f.LoseAnswer(t, s.viewColl(t, schedule.SchedulesCollection), 1, CodeDeadlineExceeded, "update")
		err := b.Catalog().Update(t.Context(), &cur, &next)
		if !errors.Is(err, store.ErrUnknownOutcome) || errors.Is(err, store.ErrConflict) {
			t.Errorf("update whose answer was lost = %v; want ErrUnknownOutcome, not ErrConflict", err)
		}
		wantCode(t, "update whose answer was lost", err, errcode.UnknownOutcome)
	})
	t.Run("Delete", func(t *testing.T) {
		b := s.backend(t)
		create(t, b, newSchedule("x", t0))
		onlyConflict(t, "delete of another version", b.Catalog().Delete(t.Context(), "x", 2))
		if err := b.Catalog().Delete(t.Context(), "x", 1); err != nil {
			t.Fatalf("delete of version 1: %v", err)
		}
		onlyConflict(t, "delete of a deleted schedule", b.Catalog().Delete(t.Context(), "x", 0))
		if _, err := b.Catalog().Get(t.Context(), "x"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get after delete = %v; want ErrNotFound", err)
		}
	})
	t.Run("ListAllRuns", s.catalogListAllRuns)
	t.Run("ListSchedulesByLabel", s.catalogListByLabel)
	t.Run("GetRun", func(t *testing.T) {
		b := s.backend(t)
		rd := pendingRecord("r1")
		insertRun(t, b.Runs(), rd)
		got, err := b.Catalog().GetRun(t.Context(), "r1")
		if err != nil || got.ID != "r1" || got.ScheduleID != rd.ScheduleID || !got.FireTime.Equal(runT0) {
			t.Errorf("GetRun(r1) = %+v, %v; want the run inserted", got, err)
		}
		if _, err := b.Catalog().GetRun(t.Context(), "missing"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetRun of a missing run = %v; want ErrNotFound", err)
		}
	})
	t.Run("ListSchedules", func(t *testing.T) {
		b := s.backend(t)
		for i := range 7 {
			create(t, b, newSchedule(fmt.Sprintf("s%d", i), t0))
		}
		m := b.Meter()
		read0 := m.Total()
		var ids []string
		token := ""
		for {
			page, next, err := b.Catalog().ListSchedules(t.Context(), 3, token)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, idsOf(page)...)
			if next == "" {
				break
			}
			token = next
		}
		if fmt.Sprint(ids) != "[s0 s1 s2 s3 s4 s5 s6]" {
			t.Errorf("listed %v; want every schedule once, in id order", ids)
		}
		if got := m.Total() - read0; got != 7 {
			t.Errorf("listing 7 schedules read %d documents; want 7", got)
		}
		if _, _, err := b.Catalog().ListSchedules(t.Context(), 3, token+"x"); !errors.Is(err, store.ErrBadPageToken) {
			t.Errorf("an edited token = %v; want ErrBadPageToken", err)
		}
		runs, next, err := b.Catalog().ListRuns(t.Context(), "s0", 3, "")
		if err != nil || len(runs) != 0 || next != "" {
			t.Errorf("ListRuns of a schedule without runs = %v, %q, %v; want an empty last page", runs, next, err)
		}
	})
}

// catalogListAllRuns: the runs list across schedules keeps exactly the
// runs its filter selects, newest fire time first with ties broken by id,
// pages over them each once, reads a document per run listed, binds its
// token to its filter and refuses a filter no index serves.
func (s *suite) catalogListAllRuns(t *testing.T) {
	b := s.backend(t)
	statuses := []schedule.RunStatus{schedule.RunFailed, schedule.RunSucceeded, schedule.RunPending}
	sources := []schedule.Source{schedule.SourceScheduled, schedule.SourceManual}
	var all []schedule.Run
	for i := range 12 {
		// Four fire times, three runs each: every page boundary falls
		// among runs that tie on fireTime.
		r := store.RunRecord{Run: schedule.Run{
			ID: fmt.Sprintf("r%02d", i), ScheduleID: fmt.Sprintf("s%d", i%2),
			FireTime: runT0.Add(time.Duration(i/3) * time.Minute),
			Source:   sources[i%len(sources)], Status: statuses[i%len(statuses)],
			Attempt: 1, CreatedAt: runT0,
		}}
		insertRun(t, b.Runs(), &r)
		all = append(all, r.Run)
	}
	// want is every run f keeps, in the list's order.
	want := func(f store.RunFilter) []string {
		var ids []string
		for i := len(all) - 1; i >= 0; i-- { // fire time and id both grow with i
			r := all[i]
			if (f.Status == "" || r.Status == f.Status) && (f.Source == "" || r.Source == f.Source) &&
				(f.ScheduleID == "" || r.ScheduleID == f.ScheduleID) && (f.Since.IsZero() || !r.FireTime.Before(f.Since)) {
				ids = append(ids, r.ID)
			}
		}
		return ids
	}
	for _, f := range []store.RunFilter{
		{},
		{Status: schedule.RunFailed},
		{Source: schedule.SourceManual},
		{ScheduleID: "s1"},
		{ScheduleID: "s0", Status: schedule.RunSucceeded},
		{Since: runT0.Add(2 * time.Minute)},
		{Since: runT0.Add(2*time.Minute + time.Microsecond)}, // between milliseconds
		{Status: schedule.RunPending, Since: runT0.Add(time.Minute)},
		{ScheduleID: "nobody"},
	} {
		for _, size := range []int{1, 2, 5} {
			m := b.Meter()
			read0 := m.Total()
			var ids []string
			token := ""
			pages := 0
			for {
				page, next, err := b.Catalog().ListAllRuns(t.Context(), f, size, token)
				if err != nil {
					t.Fatalf("%+v size %d: %v", f, size, err)
				}
				if len(page) > size {
					t.Fatalf("%+v: a page of %d runs; asked for %d", f, len(page), size)
				}
				ids = append(ids, runIDs(page)...)
				pages++
				if next == "" {
					break
				}
				if pages > len(all)+1 {
					t.Fatalf("%+v size %d: the list does not end", f, size)
				}
				token = next
			}
			if fmt.Sprint(ids) != fmt.Sprint(want(f)) {
				t.Errorf("%+v in pages of %d listed %v; want %v (each once, newest fire time first, ties by id)", f, size, ids, want(f))
			}
			got := m.Total() - read0
			switch {
			case f.ScheduleID != "" && got != int64(len(ids)):
				t.Errorf("%+v in pages of %d: listing %d runs read %d documents; want %d", f, size, len(ids), got, len(ids))
			case f.ScheduleID == "" && (got < int64(len(ids)) || got > int64(pages)*store.MaxMergedReads(size)):
				// Merged over the decider shards: bounded per page.
				t.Errorf("%+v in pages of %d: listing %d runs in %d pages read %d documents; want %d to %d", f, size, len(ids), pages, got, len(ids), int64(pages)*store.MaxMergedReads(size))
			}
		}
	}
	_, next, err := b.Catalog().ListAllRuns(t.Context(), store.RunFilter{Status: schedule.RunFailed}, 1, "")
	if err != nil || next == "" {
		t.Fatalf("first page of failed runs: next %q, %v", next, err)
	}
	if _, _, err := b.Catalog().ListAllRuns(t.Context(), store.RunFilter{Status: schedule.RunSucceeded}, 1, next); !errors.Is(err, store.ErrBadPageToken) {
		t.Errorf("a token of the failed runs, on the succeeded runs = %v; want ErrBadPageToken", err)
	}
	m := b.Meter()
	read0 := m.Total()
	for _, f := range []store.RunFilter{
		{Status: schedule.RunFailed, Source: schedule.SourceManual},
		{ScheduleID: "s0", Source: schedule.SourceManual},
	} {
		if _, _, err := b.Catalog().ListAllRuns(t.Context(), f, 5, ""); !errors.Is(err, store.ErrUnindexed) {
			t.Errorf("ListAllRuns(%+v) = %v; want ErrUnindexed", f, err)
		} else {
			wantCode(t, "an unindexed filter", err, errcode.InvalidArgument)
		}
	}
	if got := m.Total() - read0; got != 0 {
		t.Errorf("refused filters read %d documents; want 0", got)
	}
}

func runIDs(runs []schedule.Run) []string {
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	return ids
}

// catalogListByLabel: a label selector keeps exactly the schedules that
// satisfy every term (= needs the label with the value; != keeps what
// lacks the label, as kubectl does; in needs the label with one of the
// values), pages over them each once in id order, and binds its token to
// the selector: a token of one selector is refused by another.
func (s *suite) catalogListByLabel(t *testing.T) {
	b := s.backend(t)
	for id, l := range map[string]schedule.Labels{
		"s0": {"team": "data", "env": "prod"},
		"s1": {"team": "web", "env": "prod"},
		"s2": {"team": "data", "env": "staging"},
		"s3": {"env": "dev"},
		"s4": nil,
		"s5": {"team": "web", "env": "staging"},
		"s6": {"team": "data"},
	} {
		sc := newSchedule(id, t0)
		sc.Labels = l
		create(t, b, sc)
	}
	m := b.Meter()
	list := func(t *testing.T, sel schedule.LabelSelector) (ids []string, reads int64, firstToken string) {
		t.Helper()
		read0 := m.Total()
		token := ""
		for range 10 {
			page, next, err := b.Catalog().ListSchedules(t.Context(), 2, token, sel...)
			if err != nil {
				t.Fatalf("%s: %v", sel, err)
			}
			ids = append(ids, idsOf(page)...)
			if firstToken == "" {
				firstToken = next
			}
			if token = next; token == "" {
				return ids, m.Total() - read0, firstToken
			}
		}
		t.Fatalf("%s: the pages do not end", sel)
		return nil, 0, ""
	}
	for _, tc := range []struct {
		sel, want string
		indexed   bool // served by the labels index: reads = listed
	}{
		{"team=data", "[s0 s2 s6]", true},
		{"team!=data", "[s1 s3 s4 s5]", false},
		{"env in (prod,staging)", "[s0 s1 s2 s5]", true},
		{"team!=data,env in (prod,staging)", "[s1 s5]", false},
		{"team=data,env=prod", "[s0]", true},
		{"team in (data,web),env!=prod", "[s2 s5 s6]", false},
		{"team=data,team!=data", "[]", false},
	} {
		sel, err := schedule.ParseLabelSelector("sel", tc.sel)
		if err != nil {
			t.Fatal(err)
		}
		ids, reads, _ := list(t, sel)
		if fmt.Sprint(ids) != tc.want {
			t.Errorf("%s: listed %v; want %s", tc.sel, ids, tc.want)
		}
		if tc.indexed && reads != int64(len(ids)) {
			t.Errorf("%s: %d documents read for %d listed; want reads = listed", tc.sel, reads, len(ids))
		}
	}
	eq, _ := schedule.ParseLabelSelector("sel", "team=data")
	ne, _ := schedule.ParseLabelSelector("sel", "team!=data")
	_, _, token := list(t, eq)
	if token == "" {
		t.Fatal("team=data listed on one page of 2")
	}
	if _, _, err := b.Catalog().ListSchedules(t.Context(), 2, token, ne...); !errors.Is(err, store.ErrBadPageToken) {
		t.Errorf("a team=data token on team!=data = %v; want ErrBadPageToken", err)
	}
}
