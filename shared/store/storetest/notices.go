package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// notices pins the notification outbox: the outcome writes that queue a
// notice, the pending page, and the conditional settling writes.
func (s *suite) notices(t *testing.T) {
	t.Run("OutcomeWritesQueue", s.noticesOutcomeWritesQueue)
	t.Run("PendingPage", s.noticesPendingPage)
	t.Run("ConditionalClear", s.noticesConditionalClear)
	t.Run("LostAnswer", s.noticesLostAnswer)
}

// noticeAt is a notice due at runT0 + d.
func noticeAt(ev schedule.Event, d time.Duration) *store.Notice {
	return &store.Notice{Event: ev, At: runT0.Add(d)}
}

// noticesOutcomeWritesQueue: Finish, FinishSwept, FailOver and Skip record
// the notice they are given in the same write as the outcome, and nothing
// when given none; PutBack withdraws a skip's notice.
func (s *suite) noticesOutcomeWritesQueue(t *testing.T) {
	_, r, id := s.runsRig(t)
	ctx := t.Context()
	running := func(rid string) {
		t.Helper()
		insertRun(t, r, pendingRecord(rid))
		if err := r.Claim(ctx, rid, claimOf("x", 0)); err != nil {
			t.Fatalf("claim %s: %v", rid, err)
		}
	}
	want := func(rid string, n *store.Notice, status schedule.RunStatus) {
		t.Helper()
		got := getRun(t, r, rid)
		if got.Status != status {
			t.Errorf("%s: status %s, want %s", rid, got.Status, status)
		}
		switch {
		case n == nil && (!got.NotifyAt.IsZero() || got.NotifyEvent != ""):
			t.Errorf("%s: notice %s %s queued, want none", rid, got.NotifyEvent, got.NotifyAt)
		case n != nil && (!got.NotifyAt.Equal(n.At) || got.NotifyEvent != n.Event):
			t.Errorf("%s: notice %q at %s, want %q at %s", rid, got.NotifyEvent, got.NotifyAt, n.Event, n.At)
		}
	}
	for i, n := range []*store.Notice{nil, noticeAt(schedule.EventFailed, time.Second)} {
		rid := fmt.Sprintf("%s-finish-%d", id, i)
		running(rid)
		if err := r.Finish(ctx, rid, 0, store.RunOutcome{Status: schedule.RunFailed, FinishedAt: runT0, Error: "500", Notice: n}); err != nil {
			t.Fatalf("finish: %v", err)
		}
		want(rid, n, schedule.RunFailed)

		rid = fmt.Sprintf("%s-swept-%d", id, i)
		running(rid)
		if err := r.FinishSwept(ctx, rid, runT0.Add(time.Minute), store.RunOutcome{Status: schedule.RunFailed, FinishedAt: runT0, Error: "exit 1", Notice: n}); err != nil {
			t.Fatalf("finish swept: %v", err)
		}
		want(rid, n, schedule.RunFailed)

		rid = fmt.Sprintf("%s-failover-%d", id, i)
		running(rid)
		if err := r.FailOver(ctx, rid, runT0.Add(time.Minute), "dead", runT0, runT0.Add(time.Hour), time.Time{}, n); err != nil {
			t.Fatalf("fail over: %v", err)
		}
		want(rid, n, schedule.RunFailed)

		rid = fmt.Sprintf("%s-skip-%d", id, i)
		insertRun(t, r, pendingRecord(rid))
		if err := r.Skip(ctx, rid, "overlap skip", runT0, time.Time{}, n); err != nil {
			t.Fatalf("skip: %v", err)
		}
		want(rid, n, schedule.RunSkipped)
		if err := r.PutBack(ctx, rid, runT0, runT0); err != nil {
			t.Fatalf("put back: %v", err)
		}
		want(rid, nil, schedule.RunPending)
	}
	// A refused outcome write queues nothing either.
	rid := id + "-refused"
	insertRun(t, r, pendingRecord(rid))
	onlyConflict(t, "finish a pending run", r.Finish(ctx, rid, 0, store.RunOutcome{Status: schedule.RunFailed, FinishedAt: runT0, Notice: noticeAt(schedule.EventFailed, 0)}))
	want(rid, nil, schedule.RunPending)
}

// noticesPendingPage: PendingNotices returns the runs whose notice is due,
// oldest first, up to limit, and no run without one: its reads grow with
// the pending notices, not with the runs.
func (s *suite) noticesPendingPage(t *testing.T) {
	st, r, id := s.runsRig(t)
	ctx := t.Context()
	// Ten runs owe nothing; four owe a notice, due at +3s, +1s, +2s, +1h.
	for i := range 10 {
		insertRun(t, r, pendingRecord(fmt.Sprintf("%s-quiet-%d", id, i)))
	}
	for i, d := range []time.Duration{3 * time.Second, time.Second, 2 * time.Second, time.Hour} {
		rid := fmt.Sprintf("%s-owes-%d", id, i)
		insertRun(t, r, pendingRecord(rid))
		if err := r.Skip(ctx, rid, "overlap skip", runT0, time.Time{}, noticeAt(schedule.EventSkipped, d)); err != nil {
			t.Fatal(err)
		}
	}
	before := st.Meter().Total()
	got, err := r.PendingNotices(ctx, runT0.Add(time.Minute), 2)
	if err != nil {
		t.Fatalf("pending notices: %v", err)
	}
	if read := st.Meter().Total() - before; read > 2 {
		t.Errorf("a page of 2 read %d documents; want at most 2", read)
	}
	var ids []string
	for _, rd := range got {
		ids = append(ids, rd.ID)
	}
	if want := []string{id + "-owes-1", id + "-owes-2"}; fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Errorf("first page %v, want %v (oldest notice first)", ids, want)
	}
	got, err = r.PendingNotices(ctx, runT0.Add(time.Minute), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Errorf("%d due notices, want 3 (the +1h one is not due)", len(got))
	}
	for _, rd := range got {
		if rd.NotifyEvent != schedule.EventSkipped || rd.Status != schedule.RunSkipped || rd.Reason != "overlap skip" {
			t.Errorf("pending %s: %+v, want the skipped run with its event", rd.ID, rd)
		}
	}
}

// noticesConditionalClear: NoticeDone and NoticeRetry settle a notice only
// at the notifyAt the deliverer read: of two deliverers that raced, the
// second gets ErrConflict and the notice is not lost to it.
func (s *suite) noticesConditionalClear(t *testing.T) {
	_, r, id := s.runsRig(t)
	ctx := t.Context()
	insertRun(t, r, pendingRecord(id))
	at := runT0.Add(time.Second)
	if err := r.Skip(ctx, id, "overlap skip", runT0, time.Time{}, &store.Notice{Event: schedule.EventSkipped, At: at}); err != nil {
		t.Fatal(err)
	}
	next := at.Add(30 * time.Second)
	if err := r.NoticeRetry(ctx, id, at, next, "503"); err != nil {
		t.Fatalf("retry: %v", err)
	}
	got := getRun(t, r, id)
	if !got.NotifyAt.Equal(next) || got.NotifyAttempts != 1 || got.NotifyError != "503" {
		t.Errorf("after a failed delivery: notifyAt %s attempts %d error %q; want %s, 1, 503", got.NotifyAt, got.NotifyAttempts, got.NotifyError, next)
	}
	// A deliverer that read the old notifyAt settles nothing.
	onlyConflict(t, "done at a notifyAt that moved", r.NoticeDone(ctx, id, at, ""))
	onlyConflict(t, "retry at a notifyAt that moved", r.NoticeRetry(ctx, id, at, next.Add(time.Minute), "late"))
	if got := getRun(t, r, id); !got.NotifyAt.Equal(next) {
		t.Errorf("a stale settle moved the notice to %s", got.NotifyAt)
	}
	if err := r.NoticeDone(ctx, id, next, ""); err != nil {
		t.Fatalf("done: %v", err)
	}
	if got := getRun(t, r, id); !got.NotifyAt.IsZero() {
		t.Errorf("notifyAt %s after delivery, want none", got.NotifyAt)
	}
	onlyConflict(t, "done twice", r.NoticeDone(ctx, id, next, ""))
	if due, err := r.PendingNotices(ctx, next.Add(time.Hour), 10); err != nil || len(due) != 0 {
		t.Errorf("pending after delivery = %v, %v; want none", due, err)
	}

	// Giving up clears the notice and keeps the reason.
	gid := id + "-gaveup"
	insertRun(t, r, pendingRecord(gid))
	if err := r.Skip(ctx, gid, "overlap skip", runT0, time.Time{}, &store.Notice{Event: schedule.EventSkipped, At: at}); err != nil {
		t.Fatal(err)
	}
	if err := r.NoticeDone(ctx, gid, at, "gave up: 503"); err != nil {
		t.Fatalf("give up: %v", err)
	}
	if got := getRun(t, r, gid); !got.NotifyAt.IsZero() || got.NotifyError != "gave up: 503" || got.NotifyAttempts != 1 {
		t.Errorf("after giving up: %+v; want no notifyAt, the error and one attempt", got)
	}
}

// noticesLostAnswer: an outcome write that lands with its answer lost has
// queued its notice; a settling write whose answer is lost is
// ErrUnknownOutcome, never ErrConflict (the deliverer must not take it for
// a lost race).
func (s *suite) noticesLostAnswer(t *testing.T) {
	st, r, id := s.runsRig(t)
	f := s.faultsFor(t, st)
	ctx := t.Context()
	insertRun(t, r, pendingRecord(id))
	if err := r.Claim(ctx, id, claimOf("x", 0)); err != nil {
		t.Fatal(err)
	}
	n := noticeAt(schedule.EventFailed, time.Second)
	f.LoseAnswer(t, s.viewColl(t, schedule.RunsCollection), 1, CodeDeadlineExceeded, "update")
	if err := r.Finish(ctx, id, 0, store.RunOutcome{Status: schedule.RunFailed, FinishedAt: runT0, Error: "500", Notice: n}); err != nil {
		t.Fatalf("finish that landed, answer lost = %v; want nil", err)
	}
	if got := getRun(t, r, id); !got.NotifyAt.Equal(n.At) {
		t.Fatalf("notifyAt %s after a landed finish, want %s", got.NotifyAt, n.At)
	}
	f.LoseAnswer(t, s.viewColl(t, schedule.RunsCollection), 1, CodeDeadlineExceeded, "update")
	err := r.NoticeDone(ctx, id, n.At, "")
	if !errors.Is(err, store.ErrUnknownOutcome) || errors.Is(err, store.ErrConflict) {
		t.Errorf("done, answer lost = %v; want ErrUnknownOutcome, not ErrConflict", err)
	}
	if got := getRun(t, r, id); !got.NotifyAt.IsZero() {
		t.Errorf("notifyAt %s; want the clear that landed", got.NotifyAt)
	}
}
