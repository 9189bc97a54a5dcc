package gpu_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/gpu/worker"
	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

const testToken = "test-token"

// clock is real time plus an offset the test can jump forward, so leases
// expire on demand while heartbeats and commands run in real time.
type clock struct{ off atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) Advance(d time.Duration) { c.off.Add(int64(d)) }
func (c *clock) String() string          { return time.Duration(c.off.Load()).String() }
func quietLogger() *slog.Logger          { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
func noop(*worker.Config)                {}
func withOrder(rec *recorder) func(*worker.Config) {
	return func(c *worker.Config) { c.Observer = rec.observe }
}

// recorder notes the order in which a worker starts jobs.
type recorder struct {
	mu      sync.Mutex
	started []string
}

func (r *recorder) observe(e worker.Event) {
	if e.Kind == "start" {
		r.mu.Lock()
		r.started = append(r.started, e.JobID)
		r.mu.Unlock()
	}
}

// count is how often job id started.
func (r *recorder) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, x := range r.started {
		if x == id {
			n++
		}
	}
	return n
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.started...)
}

// testWorker is a real worker server on a real port.
type testWorker struct {
	*worker.Server
	srv *httptest.Server
	URL string
}

// bundle is one control plane (dispatcher + GPU API over HTTP) with real
// workers running real commands, on the Mongo and GCS emulators.
type bundle struct {
	t       *testing.T
	ctx     context.Context
	clock   *clock
	d       *gpu.Dispatcher
	api     *httptest.Server
	workers []*testWorker
	bucket  *storage.BucketHandle
	dir     string // scratch directory for gate files
	st      *mongostore.Store
}

type setupOpts struct {
	workers   int
	slots     int // per worker URL; 1 by default
	extraPool string
	lease     time.Duration
	worker    func(*worker.Config)
	// runTimeout bounds the dispatcher's POST /run; 0 keeps the default.
	runTimeout time.Duration
	// types gives worker i the GPU type types[i] ("" or past the end:
	// untyped).
	types []string
	// weights and quotas are the tenants' (Config.Weights, Config.Quotas).
	weights, quotas map[string]int
	// preemptMinRun and maxPreemptions are Config's; 0 keeps the default.
	preemptMinRun  time.Duration
	maxPreemptions int
	// tenantHintTTL is Config.TenantHintTTL; 0 keeps the default.
	tenantHintTTL time.Duration
}

func setup(t *testing.T, o setupOpts) *bundle {
	t.Helper()
	if o.slots == 0 {
		o.slots = 1
	}
	if o.lease == 0 {
		o.lease = 5 * time.Second
	}
	if o.worker == nil {
		o.worker = noop
	}
	st := emutest.Store(t)
	client, bucketName := emutest.GCS(t)
	b := &bundle{t: t, ctx: context.Background(), clock: &clock{}, bucket: client.Bucket(bucketName), dir: t.TempDir(), st: st}

	var handler atomic.Value
	b.api = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handler.Load().(http.Handler).ServeHTTP(w, r)
	}))
	t.Cleanup(b.api.Close)

	pool := ""
	for i := 0; i < o.workers; i++ {
		cfg := worker.Config{
			Command:           []string{"sh"},
			ControlURL:        b.api.URL,
			Token:             testToken,
			Bucket:            b.bucket,
			Logger:            quietLogger(),
			HeartbeatInterval: 100 * time.Millisecond,
		}
		o.worker(&cfg)
		ws := worker.New(cfg)
		srv := httptest.NewServer(ws)
		tw := &testWorker{Server: ws, srv: srv, URL: srv.URL}
		t.Cleanup(func() {
			ws.Thaw()
			srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = ws.Shutdown(ctx)
		})
		b.workers = append(b.workers, tw)
		pool += fmt.Sprintf("%s=%d", srv.URL, o.slots)
		if i < len(o.types) && o.types[i] != "" {
			pool += "@" + o.types[i]
		}
		pool += ","
	}
	pool += o.extraPool
	p, err := gpu.ParsePool(pool)
	if err != nil {
		t.Fatal(err)
	}
	d, err := gpu.New(gpu.Config{
		Store: st, Pool: p, Clock: b.clock, LeaseTTL: o.lease, Logger: quietLogger(),
		RefusalBackoff: 200 * time.Millisecond, RunTimeout: o.runTimeout,
		Weights: o.weights, Quotas: o.quotas,
		PreemptMinRun: o.preemptMinRun, MaxPreemptions: o.maxPreemptions,
		TenantHintTTL: o.tenantHintTTL,
		Authorize: func(r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+testToken)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	b.d = d
	handler.Store(httpapi.RequireToken(testToken, gpu.NewHandler(d)))
	return b
}

// jobWriteFaults are the three faults every write on the run path is
// tested under, each armed once on the next cmd against gpu_jobs: a
// WriteConflict (which the store retries), a connection dropped before the
// command ran, and a write that landed and answered an error.
func jobWriteFaults(cmd string) map[string]func(*testing.T, *mongostore.Store) {
	once := bson.D{{Key: "times", Value: 1}}
	return map[string]func(*testing.T, *mongostore.Store){
		"WriteConflict": func(t *testing.T, st *mongostore.Store) {
			emutest.FailCommandCode(t, st, mongostore.GPUJobsCollection, once, 112, cmd)
		},
		"Dropped": func(t *testing.T, st *mongostore.Store) {
			emutest.FailCommandDrop(t, st, mongostore.GPUJobsCollection, once, cmd)
		},
		"LandedWithError": func(t *testing.T, st *mongostore.Store) {
			emutest.FailCommandAfterWrite(t, st, mongostore.GPUJobsCollection, once, cmd)
		},
	}
}

// gate returns a payload that blocks until release(name) is called.
func (b *bundle) gate(name string) string {
	return fmt.Sprintf("while [ ! -e %q ]; do sleep 0.02; done", filepath.Join(b.dir, name))
}

func (b *bundle) release(name string) {
	b.t.Helper()
	if err := os.WriteFile(filepath.Join(b.dir, name), nil, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

func (b *bundle) enqueue(req gpu.EnqueueRequest) gpu.Job {
	b.t.Helper()
	job, _, err := b.d.Enqueue(b.ctx, req)
	if err != nil {
		b.t.Fatalf("enqueue %+v: %v", req, err)
	}
	return job
}

func (b *bundle) job(id string) gpu.Job {
	b.t.Helper()
	j, err := b.d.Get(b.ctx, id)
	if err != nil {
		b.t.Fatal(err)
	}
	return j
}

// waitFor polls cond until it holds. The deadline only stops a hung test;
// nothing is asserted about how long it took.
func (b *bundle) waitFor(what string, cond func() bool) {
	b.t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			b.t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func (b *bundle) waitStatus(id string, status gpu.JobStatus) gpu.Job {
	b.t.Helper()
	var j gpu.Job
	b.waitFor(fmt.Sprintf("job %s to be %s", id, status), func() bool {
		j = b.job(id)
		return j.Status == status
	})
	return j
}

func (b *bundle) workerByURL(u string) *testWorker {
	for _, w := range b.workers {
		if w.URL == u {
			return w
		}
	}
	return nil
}
