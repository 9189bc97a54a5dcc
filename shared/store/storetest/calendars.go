package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

func newCalendar(id string) schedule.Calendar {
	return schedule.Calendar{ID: id, TimeZone: "Europe/Berlin", Dates: []string{"2026-12-25"}, Version: 1, CreatedAt: t0, UpdatedAt: t0}
}

// calendars holds an implementation to store.Calendars: create, the
// versioned replace (which removes what the new calendar leaves out),
// delete, the tick's read by ids, the list, and a lost create answer.
func (s *suite) calendars(t *testing.T) {
	t.Run("CreateReplaceDelete", func(t *testing.T) {
		b := s.backend(t)
		v := b.Calendars()
		c := newCalendar("hol")
		if err := v.CreateCalendar(t.Context(), &c); err != nil {
			t.Fatal(err)
		}
		if err := v.CreateCalendar(t.Context(), &c); err != nil {
			t.Errorf("the same create again = %v; want nil (its answer was lost)", err)
		}
		other := c
		other.Description = "another"
		onlyConflict(t, "create of a taken id", v.CreateCalendar(t.Context(), &other))
		next := schedule.Calendar{ID: "hol", Weekdays: []string{"sun"}, Version: 2, CreatedAt: t0, UpdatedAt: t0}
		onlyConflict(t, "replace of another version", v.ReplaceCalendar(t.Context(), &next, 5))
		if err := v.ReplaceCalendar(t.Context(), &next, 1); err != nil {
			t.Fatal(err)
		}
		got, err := v.GetCalendar(t.Context(), "hol")
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != 2 || len(got.Dates) != 0 || len(got.Weekdays) != 1 || got.TimeZone != "" {
			t.Errorf("after replace: %+v; want version 2, no dates (removed), weekdays [sun], no zone", got)
		}
		onlyConflict(t, "delete of another version", v.DeleteCalendar(t.Context(), "hol", 1))
		if err := v.DeleteCalendar(t.Context(), "hol", 2); err != nil {
			t.Fatal(err)
		}
		if _, err := v.GetCalendar(t.Context(), "hol"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("get after delete = %v; want ErrNotFound", err)
		}
		onlyConflict(t, "delete of a deleted calendar", v.DeleteCalendar(t.Context(), "hol", 0))
	})
	t.Run("GetCalendars", func(t *testing.T) {
		b := s.backend(t)
		v := b.Calendars()
		for _, id := range []string{"a", "b", "c"} {
			c := newCalendar(id)
			if err := v.CreateCalendar(t.Context(), &c); err != nil {
				t.Fatal(err)
			}
		}
		before := b.Meter().Total()
		got, err := v.GetCalendars(t.Context(), []string{"a", "c", "missing"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got["a"] == nil || got["c"] == nil || got["a"].Dates[0] != "2026-12-25" {
			t.Errorf("GetCalendars = %v; want a and c, missing absent", got)
		}
		if n := b.Meter().Total() - before; n != 2 {
			t.Errorf("GetCalendars of 3 ids (2 found) read %d documents; want 2", n)
		}
		if got, err := v.GetCalendars(t.Context(), nil); err != nil || len(got) != 0 {
			t.Errorf("GetCalendars(nil) = %v, %v; want empty, nil", got, err)
		}
	})
	t.Run("List", func(t *testing.T) {
		b := s.backend(t)
		v := b.Calendars()
		var want []string
		for i := 0; i < 5; i++ {
			c := newCalendar(fmt.Sprintf("c%d", i))
			want = append(want, c.ID)
			if err := v.CreateCalendar(t.Context(), &c); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		token := ""
		for pages := 0; ; pages++ {
			if pages > 5 {
				t.Fatal("the list does not end")
			}
			page, next, err := v.ListCalendars(t.Context(), 2, token)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range page {
				got = append(got, c.ID)
			}
			if next == "" {
				break
			}
			token = next
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("listed %v; want %v", got, want)
		}
		if _, _, err := v.ListCalendars(t.Context(), 2, "garbage"); !errors.Is(err, store.ErrBadPageToken) {
			t.Errorf("bad token = %v; want ErrBadPageToken", err)
		}
	})
	t.Run("CreateAnswerLost", func(t *testing.T) {
		st := s.h.OpenBackend(t)
		b := st
		f := s.faultsFor(t, st)
		f.LoseAnswer(t, s.viewColl(t, schedule.CalendarsCollection), 1, CodeDeadlineExceeded, "insert")
		c := newCalendar("hol")
		if err := b.Calendars().CreateCalendar(t.Context(), &c); err != nil {
			t.Errorf("create whose answer was lost = %v; want nil (the read-back finds it ours)", err)
		}
	})
	t.Run("ReplaceAnswerLost", func(t *testing.T) {
		st := s.h.OpenBackend(t)
		b := st
		f := s.faultsFor(t, st)
		c := newCalendar("hol")
		if err := b.Calendars().CreateCalendar(t.Context(), &c); err != nil {
			t.Fatal(err)
		}
		next := c
		next.Version = 2
		f.LoseAnswer(t, s.viewColl(t, schedule.CalendarsCollection), 1, CodeDeadlineExceeded, "update")
		err := b.Calendars().ReplaceCalendar(t.Context(), &next, 1)
		if !errors.Is(err, store.ErrUnknownOutcome) || errors.Is(err, store.ErrConflict) {
			t.Errorf("replace whose answer was lost = %v; want ErrUnknownOutcome, not ErrConflict", err)
		}
	})
}
