package gcs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"

	"github.com/baton-cron/baton/emulator/gcs"
)

// fakeClock is a wall clock the test moves, so a token bucket refills
// without sleeping.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// write is an unconditional upload: the Go client does not retry it, so a
// 429 comes back to the test as it came from the server.
func write(o *storage.ObjectHandle, body string) error {
	w := o.NewWriter(context.Background())
	_, _ = io.WriteString(w, body)
	return w.Close()
}

// want429 fails unless err is GCS's 429 with reason rateLimitExceeded.
func want429(t *testing.T, op string, err error) {
	t.Helper()
	var e *googleapi.Error
	if !errors.As(err, &e) || e.Code != http.StatusTooManyRequests {
		t.Fatalf("%s: want 429, got %v", op, err)
	}
	if len(e.Errors) == 0 || e.Errors[0].Reason != "rateLimitExceeded" {
		t.Fatalf("%s: want reason rateLimitExceeded, got %+v", op, e.Errors)
	}
	if !strings.Contains(e.Message, "exceeded the rate limit for object mutation operations") {
		t.Fatalf("%s: want GCS's rate-limit message, got %q", op, e.Message)
	}
}

// TestSustainedWritesToOneObjectGet429: after the burst, writes to one
// object faster than one a second get 429 rateLimitExceeded, whatever kind
// of write they are; writes to other objects do not; after a pause a write
// goes through again, and a 412 spends nothing.
func TestSustainedWritesToOneObjectGet429(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	tb := setupWith(t, gcs.Options{Clock: clk})
	hot := tb.bucket.Object("hot")
	for i := range int(gcs.ObjectWriteBurst) {
		if err := write(hot, fmt.Sprint(i)); err != nil {
			t.Fatalf("write %d of the burst: %v", i, err)
		}
	}
	want429(t, "overwrite past the burst", write(hot, "x"))
	_, err := hot.Update(ctx, storage.ObjectAttrsToUpdate{Metadata: map[string]string{"k": "v"}})
	want429(t, "metadata update past the burst", err)
	want429(t, "delete past the burst", hot.Delete(ctx))

	// Other objects have their own limit.
	for i := range 10 {
		if err := write(tb.bucket.Object(fmt.Sprintf("cold-%d", i)), "c"); err != nil {
			t.Fatalf("write to another object: %v", err)
		}
	}

	// A second later, one more write; not two.
	clk.Add(time.Second)
	if err := write(hot, "after a pause"); err != nil {
		t.Fatalf("write after a one-second pause: %v", err)
	}
	want429(t, "second write in the same second", write(hot, "y"))

	// A write refused by its precondition mutates nothing and spends no
	// token.
	clk.Add(time.Second)
	for range 5 {
		err := func() error {
			w := hot.If(storage.Conditions{DoesNotExist: true}).NewWriter(ctx)
			_, _ = io.WriteString(w, "z")
			return w.Close()
		}()
		want412(t, "create of an existing object", err)
	}
	if err := write(hot, "the 412s spent nothing"); err != nil {
		t.Fatalf("write after 412s: %v", err)
	}

	applied, refused := tb.srv.ObjectWrites("b", "hot")
	if applied != int64(gcs.ObjectWriteBurst)+2 || refused != 4 {
		t.Fatalf("ObjectWrites(hot) (-want,+got): -%d applied %d refused +%d applied %d refused", int64(gcs.ObjectWriteBurst)+2, 4, applied, refused)
	}
}

// TestWallClockRate: through the real clock, a writer that keeps writing
// one object as fast as it can is refused within the first few writes.
func TestWallClockRate(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	o := tb.bucket.Object("fast")
	for i := range 10 {
		if err := write(o, fmt.Sprint(i)); err != nil {
			want429(t, "fast writes", err)
			return
		}
	}
	t.Fatal("10 back-to-back writes to one object: none got 429")
}

// TestLaxAllowsFastWrites: Options.Lax turns the limit off and says so in
// the log; FailNextWrites still refuses.
func TestLaxAllowsFastWrites(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	var mu sync.Mutex
	tb := setupWith(t, gcs.Options{Lax: true, Logger: slog.New(slog.NewJSONHandler(&lockedWriter{w: &logs, mu: &mu}, nil))})
	o := tb.bucket.Object("lax")
	for i := range 10 {
		if err := write(o, fmt.Sprint(i)); err != nil {
			t.Fatalf("lax write %d: %v", i, err)
		}
	}
	mu.Lock()
	if !strings.Contains(logs.String(), "lax mode") {
		t.Errorf("lax mode not logged; log:\n%s", logs.String())
	}
	mu.Unlock()
	tb.srv.FailNextWrites("b", "lax", 1)
	want429(t, "forced", write(o, "forced"))
	if err := write(o, "after the forced one"); err != nil {
		t.Fatalf("write after the forced 429: %v", err)
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p) //nolint:wrapcheck // a test buffer
}
