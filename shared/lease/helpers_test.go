package lease_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/lease"
)

// action is what faultTransport does with one request.
type action int

const (
	pass           action = iota
	dropResponse          // forward, let the server apply it, lose the answer
	unavailable           // answer 503 without forwarding
	appliedThen400        // forward, let the server apply it, answer 400
)

// faultTransport is a test double at the network edge, where no emulator
// exists: it forwards requests to the real GCS emulator and, as decide says,
// drops the response of a request the server applied (the client sees
// io.ErrUnexpectedEOF) or answers 503 without forwarding. It also counts
// requests by kind, for the benchmarks.
type faultTransport struct {
	base http.RoundTripper

	mu     sync.Mutex
	decide func(r *http.Request) action

	writes, reads, dropped, failed atomic.Int64
}

func isWrite(r *http.Request) bool {
	return r.Method != http.MethodGet && r.Method != http.MethodHead
}

func isUpload(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/upload/")
}

func (f *faultTransport) set(d func(r *http.Request) action) {
	f.mu.Lock()
	f.decide = d
	f.mu.Unlock()
}

func (f *faultTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	d := f.decide
	f.mu.Unlock()
	a := pass
	if d != nil {
		a = d(r)
	}
	if a == unavailable {
		f.failed.Add(1)
		return fakeResponse(r, http.StatusServiceUnavailable), nil
	}
	if isWrite(r) {
		f.writes.Add(1)
	} else {
		f.reads.Add(1)
	}
	resp, err := f.base.RoundTrip(r)
	if err != nil || a == pass {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	f.dropped.Add(1)
	if a == appliedThen400 {
		return fakeResponse(r, http.StatusBadRequest), nil
	}
	return nil, io.ErrUnexpectedEOF
}

// fakeResponse is a GCS-shaped JSON error answer.
func fakeResponse(r *http.Request, code int) *http.Response {
	body := fmt.Sprintf(`{"error":{"code":%d,"message":"injected","errors":[{"reason":"injected","message":"injected"}]}}`, code)
	return &http.Response{
		StatusCode: code, Status: fmt.Sprintf("%d %s", code, http.StatusText(code)),
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)),
		Request: r, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}
}

// nth returns a decide func that applies a to the first n requests matching
// match, then passes everything.
func nth(n int64, match func(*http.Request) bool, a action) func(*http.Request) action {
	var seen atomic.Int64
	return func(r *http.Request) action {
		if match(r) && seen.Add(1) <= n {
			return a
		}
		return pass
	}
}

// bundle is one test's bucket, reached through a fault transport.
type bundle struct {
	bucket *storage.BucketHandle
	name   string // the bucket's name
	ft     *faultTransport
}

func setup(t testing.TB) *bundle {
	t.Helper()
	ctx := context.Background()
	srv := emutest.GCSServer(t)
	name := emutest.BucketName(t)
	if err := srv.CreateBucket(ctx, name); err != nil {
		t.Fatal(err)
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = 64 // 50 concurrent acquirers must not reconnect each round
	ft := &faultTransport{base: base}
	opts := append(srv.ClientOptions(), option.WithHTTPClient(&http.Client{Transport: ft}))
	c, err := storage.NewClient(ctx, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &bundle{bucket: c.Bucket(name), name: name, ft: ft}
}

// manager returns a manager on the bundle's bucket under "leases/".
func (b *bundle) manager(holder string, o lease.Options) *lease.Manager {
	o.Holder = holder
	return lease.NewManager(b.bucket, "leases/", o)
}

// clock is an injected wall clock that tests set.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// waitDone waits for the lease to end, failing the test after limit (a
// guard against hanging, not a timing assertion).
func waitDone(t *testing.T, l *lease.Lease, limit time.Duration) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(limit):
		t.Fatalf("lease %s epoch %d still held after %s", l.Name(), l.Epoch(), limit)
	}
}

// waitFor polls cond until true, failing after limit.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func release(t *testing.T, l *lease.Lease) {
	t.Helper()
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("release %s: %v", l.Name(), err)
	}
}
