package tests

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/stack"
	"github.com/baton-cron/baton/shared/schedule"
)

// TestGroupLimitOneNeverRunsAtOnce is #16's concurrency-group acceptance on
// the local stack: two schedules firing every 2 s in one group of limit 1,
// with targets that take 1.5 s, never run at once; both make progress;
// runs that find the group full wait (recorded on the run) instead of
// being dropped. Bad concurrency fields are refused with a 400 naming them.
func TestGroupLimitOneNeverRunsAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: time.Second})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })

	type visit struct {
		sched       string
		enter, exit time.Time
	}
	var (
		mu     sync.Mutex
		visits []visit
	)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := visit{sched: strings.TrimPrefix(r.URL.Path, "/"), enter: time.Now()}
		select {
		case <-time.After(1500 * time.Millisecond):
		case <-r.Context().Done():
		}
		v.exit = time.Now()
		mu.Lock()
		visits = append(visits, v)
		mu.Unlock()
	}))
	t.Cleanup(target.Close)

	for _, tc := range []struct {
		conc  map[string]any
		field string
	}{
		{map[string]any{"group": "ETL", "limit": 1}, "concurrency.group"},
		{map[string]any{"limit": 1}, "concurrency.group"},
		{map[string]any{"group": "etl", "limit": 0}, "concurrency.limit"},
		{map[string]any{"group": "etl", "limit": 101}, "concurrency.limit"},
	} {
		bad := httpSchedule("bad", "*/2 * * * * *", target.URL+"/bad", "10s")
		bad["concurrency"] = tc.conc
		var e struct{ Error struct{ Field string } }
		if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", bad, &e); code != http.StatusBadRequest || e.Error.Field != tc.field {
			t.Errorf("create with concurrency %v: %d field %q; want 400 naming %s", tc.conc, code, e.Error.Field, tc.field)
		}
	}
	if code := api(t, s.URL, s.Token, "GET", "/Schedules/schedules/bad", nil, nil); code != http.StatusNotFound {
		t.Errorf("a refused create wrote the schedule: get %d", code)
	}

	for _, id := range []string{"ga", "gb"} {
		sc := httpSchedule(id, "*/2 * * * * *", target.URL+"/"+id, "10s")
		sc["concurrency"] = map[string]any{"group": "etl", "limit": 1}
		if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", sc, nil); code != http.StatusCreated {
			t.Fatalf("create %s: %d", id, code)
		}
	}
	var got schedule.Schedule
	api(t, s.URL, s.Token, "GET", "/Schedules/schedules/ga", nil, &got)
	if got.Concurrency == nil || got.Concurrency.Group != "etl" || got.Concurrency.Limit != 1 {
		t.Fatalf("get ga: concurrency %+v; want group etl limit 1", got.Concurrency)
	}

	// Run until both have been called at least 3 times (or 40 s), and
	// watch for runs recorded waiting for the group meanwhile.
	sawWaiting := false
	deadline := time.Now().Add(40 * time.Second)
	for {
		for _, id := range []string{"ga", "gb"} {
			var page struct{ Runs []schedule.Run }
			api(t, s.URL, s.Token, "GET", "/Schedules/schedules/"+id+"/runs?pageSize=100", nil, &page)
			for _, r := range page.Runs {
				if r.Status == schedule.RunPending && r.WaitingFor == "group etl" {
					sawWaiting = true
				}
				if r.Status == schedule.RunFailed || (r.Status == schedule.RunSkipped && strings.Contains(r.Reason, "group")) {
					t.Errorf("run %s: %s (%s %s); a run of a full group waits, it is not dropped", r.ID, r.Status, r.Reason, r.Error)
				}
			}
		}
		mu.Lock()
		n := map[string]int{}
		for _, v := range visits {
			n[v.sched]++
		}
		mu.Unlock()
		if n["ga"] >= 3 && n["gb"] >= 3 && sawWaiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 40 s: calls %v, saw a waiting run %v; want both schedules called 3 times and a run waiting for group etl", n, sawWaiting)
		}
		time.Sleep(300 * time.Millisecond)
	}
	// Stop firing, so that no call is in flight while the visits are read.
	for _, id := range []string{"ga", "gb"} {
		if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules/"+id+":pause", nil, nil); code != http.StatusOK {
			t.Fatalf("pause %s: %d", id, code)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	sort.Slice(visits, func(i, j int) bool { return visits[i].enter.Before(visits[j].enter) })
	for i := 1; i < len(visits); i++ {
		if prev, cur := visits[i-1], visits[i]; cur.enter.Before(prev.exit) {
			t.Errorf("%s entered at %s while %s (entered %s) had not exited (%s): group etl of limit 1 ran two at once",
				cur.sched, cur.enter.Format(time.RFC3339Nano), prev.sched, prev.enter.Format(time.RFC3339Nano), prev.exit.Format(time.RFC3339Nano))
		}
	}
}
