package gpu_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/schedule"
)

// TestDispatchSendsConcurrently: one Dispatch that finds several jobs
// queued and several slots free sends to all of them at once, so a worker
// whose instance is still starting (a Cloud Run cold start holds POST
// /run) does not hold back the jobs claimed for the others. The endpoints
// are a barrier standing in for workers (an edge double: what is under
// test is only when the dispatcher's requests arrive): each answers only
// once all three requests are in flight, so sends made one at a time
// never complete, and fail once the barrier gives up.
func TestDispatchSendsConcurrently(t *testing.T) {
	const k = 3
	var (
		mu      sync.Mutex
		arrived int
		all     = make(chan struct{})
	)
	barrier := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived++
		if arrived == k {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
			w.WriteHeader(http.StatusAccepted)
		case <-time.After(5 * time.Second):
			http.Error(w, "barrier: the other sends never came", http.StatusServiceUnavailable)
		}
	})
	var pool gpu.Pool
	for range k {
		srv := httptest.NewServer(barrier)
		t.Cleanup(srv.Close)
		pool = append(pool, gpu.Worker{URL: srv.URL, Slots: 1})
	}
	st := emutest.Store(t)
	// A first dispatcher, with no pool, only queues the jobs; the one
	// under test then finds all three waiting.
	q, err := gpu.New(gpu.Config{Store: st, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range k {
		if _, _, err := q.Enqueue(t.Context(), gpu.EnqueueRequest{ID: "j" + string(rune('a'+i)), Payload: "true", Timeout: schedule.Duration(time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	d, err := gpu.New(gpu.Config{Store: st, Pool: pool, Logger: quietLogger(), RunTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	n, err := d.Dispatch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n != k {
		t.Fatalf("Dispatch handed %d jobs to workers, want %d: its sends were not concurrent", n, k)
	}
}
