package gcs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"google.golang.org/api/googleapi"

	"github.com/baton-cron/baton/emulator/gcs"
)

// testBundle is one emulator with one bucket and a client.
type testBundle struct {
	srv    *gcs.Server
	client *storage.Client
	bucket *storage.BucketHandle
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	return setupWith(t, gcs.Options{})
}

func setupWith(t *testing.T, o gcs.Options) *testBundle {
	t.Helper()
	ctx := context.Background()
	srv, err := gcs.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	if err := srv.CreateBucket(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	c, err := srv.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &testBundle{srv: srv, client: c, bucket: c.Bucket("b")}
}

func put(t *testing.T, o *storage.ObjectHandle, body string) *storage.ObjectAttrs {
	t.Helper()
	w := o.NewWriter(context.Background())
	if _, err := io.WriteString(w, body); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("put %s: %v", o.ObjectName(), err)
	}
	return w.Attrs()
}

// want412 fails unless err is GCS's 412 with reason conditionNotMet.
func want412(t *testing.T, op string, err error) {
	t.Helper()
	var e *googleapi.Error
	if !errors.As(err, &e) || e.Code != http.StatusPreconditionFailed {
		t.Fatalf("%s: want 412, got %v", op, err)
	}
	if len(e.Errors) == 0 || e.Errors[0].Reason != "conditionNotMet" {
		t.Fatalf("%s: want reason conditionNotMet, got %+v", op, e.Errors)
	}
}

// TestStaleConditionalDelete is the acceptance test of the Foundation issue:
// a conditional delete with a stale generation returns 412 and keeps the
// object. fake-gcs-server alone deletes it, which the second half shows.
func TestStaleConditionalDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	o := tb.bucket.Object("leases/x.json")
	g1 := put(t, o, "one").Generation
	g2 := put(t, o, "two").Generation
	if g1 == g2 {
		t.Fatalf("generations did not change: %d", g1)
	}

	err := o.If(storage.Conditions{GenerationMatch: g1}).Delete(ctx)
	want412(t, "stale delete through emulator/gcs", err)
	attrs, err := o.Attrs(ctx)
	if err != nil {
		t.Fatalf("object gone after refused delete: %v", err)
	}
	if attrs.Generation != g2 {
		t.Fatalf("generation after refused delete (-want,+got): -%d +%d", g2, attrs.Generation)
	}
	if err := o.If(storage.Conditions{GenerationMatch: g2}).Delete(ctx); err != nil {
		t.Fatalf("current-generation delete: %v", err)
	}
	if _, err := o.Attrs(ctx); !errors.Is(err, storage.ErrObjectNotExist) {
		t.Fatalf("after delete: want ErrObjectNotExist, got %v", err)
	}

	// The same sequence against raw fake-gcs-server: the stale delete
	// succeeds and the object is gone. If this ever fails, fake-gcs-server
	// has started enforcing the precondition and the front may be dropped.
	raw, err := fakestorage.NewServerWithOptions(fakestorage.Options{NoListener: true})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Stop()
	raw.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "b"})
	ro := raw.Client().Bucket("b").Object("leases/x.json")
	r1 := put(t, ro, "one").Generation
	put(t, ro, "two")
	// Uploads, on the other hand, are checked by fake-gcs-server itself.
	w := ro.If(storage.Conditions{GenerationMatch: r1}).NewWriter(ctx)
	_, _ = io.WriteString(w, "stale")
	want412(t, "raw fake-gcs-server: stale upload", w.Close())
	if err := ro.If(storage.Conditions{GenerationMatch: r1}).Delete(ctx); err != nil {
		t.Fatalf("raw fake-gcs-server: stale delete: want it (wrongly) accepted, got %v", err)
	}
	if _, err := ro.Attrs(ctx); !errors.Is(err, storage.ErrObjectNotExist) {
		t.Fatalf("raw fake-gcs-server: want the object (wrongly) deleted, got %v", err)
	}
}

func TestPreconditions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	o := tb.bucket.Object("p")
	g := put(t, o, "v1").Generation

	t.Run("upload DoesNotExist on existing object", func(t *testing.T) {
		w := o.If(storage.Conditions{DoesNotExist: true}).NewWriter(ctx)
		_, _ = io.WriteString(w, "x")
		want412(t, "create over existing", w.Close())
	})
	t.Run("upload stale GenerationMatch", func(t *testing.T) {
		w := o.If(storage.Conditions{GenerationMatch: g + 12345}).NewWriter(ctx)
		_, _ = io.WriteString(w, "x")
		want412(t, "stale overwrite", w.Close())
	})
	t.Run("upload MetagenerationMatch wrong", func(t *testing.T) {
		w := o.If(storage.Conditions{GenerationMatch: g, MetagenerationMatch: 7}).NewWriter(ctx)
		_, _ = io.WriteString(w, "x")
		want412(t, "upload ifMetagenerationMatch", w.Close())
	})
	t.Run("delete GenerationNotMatch current", func(t *testing.T) {
		want412(t, "delete ifGenerationNotMatch", o.If(storage.Conditions{GenerationNotMatch: g}).Delete(ctx))
	})
	t.Run("delete MetagenerationMatch wrong", func(t *testing.T) {
		want412(t, "delete ifMetagenerationMatch", o.If(storage.Conditions{MetagenerationMatch: 99}).Delete(ctx))
	})
	t.Run("update stale GenerationMatch", func(t *testing.T) {
		_, err := o.If(storage.Conditions{GenerationMatch: g + 1}).Update(ctx, storage.ObjectAttrsToUpdate{Metadata: map[string]string{"k": "stale"}})
		want412(t, "stale metadata update", err)
		a, err := o.Attrs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if a.Metadata["k"] == "stale" {
			t.Fatalf("refused update was applied: %v", a.Metadata)
		}
	})
	t.Run("update MetagenerationMatch wrong", func(t *testing.T) {
		_, err := o.If(storage.Conditions{MetagenerationMatch: 42}).Update(ctx, storage.ObjectAttrsToUpdate{ContentType: "text/x-stale"})
		want412(t, "metageneration update", err)
	})
	t.Run("current conditions pass", func(t *testing.T) {
		if _, err := o.If(storage.Conditions{GenerationMatch: g, MetagenerationMatch: 1}).Update(ctx, storage.ObjectAttrsToUpdate{Metadata: map[string]string{"k": "ok"}}); err != nil {
			t.Fatalf("update with current conditions: %v", err)
		}
	})
	t.Run("delete of missing object is 404", func(t *testing.T) {
		err := tb.bucket.Object("missing").If(storage.Conditions{GenerationMatch: 1}).Delete(ctx)
		if !errors.Is(err, storage.ErrObjectNotExist) {
			t.Fatalf("want ErrObjectNotExist, got %v", err)
		}
	})
	t.Run("XML read", func(t *testing.T) {
		r, err := o.NewReader(ctx)
		if err != nil {
			t.Fatalf("XML-API read: %v", err)
		}
		defer r.Close()
		b, _ := io.ReadAll(r)
		if string(b) != "v1" {
			t.Fatalf("read (-want,+got): -%q +%q", "v1", b)
		}
	})
}

// TestDeleteRacesOverwrite: a conditional delete and a conditional
// overwrite of the same generation race; exactly one may win, every round.
func TestDeleteRacesOverwrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	for round := range 50 {
		// An object per round: one object written twice a round for 50
		// rounds would be over GCS's per-object write rate (rate_test.go).
		o := tb.bucket.Object(fmt.Sprintf("race-%d", round))
		g := put(t, o, "base").Generation
		var wg sync.WaitGroup
		var delErr, putErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			delErr = o.If(storage.Conditions{GenerationMatch: g}).Delete(ctx)
		}()
		go func() {
			defer wg.Done()
			w := o.If(storage.Conditions{GenerationMatch: g}).NewWriter(ctx)
			_, _ = io.WriteString(w, "new")
			putErr = w.Close()
		}()
		wg.Wait()
		if (delErr == nil) == (putErr == nil) {
			t.Fatalf("round %d: want exactly one winner, got delete=%v overwrite=%v", round, delErr, putErr)
		}
	}
}

// TestStorageEmulatorHost: a client built the way another process builds
// it, from STORAGE_EMULATOR_HOST alone, reads and writes.
func TestStorageEmulatorHost(t *testing.T) {
	tb := setup(t)
	t.Setenv("STORAGE_EMULATOR_HOST", tb.srv.Host())
	ctx := context.Background()
	c, err := storage.NewClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	o := c.Bucket("b").Object("env")
	put(t, o, "hello")
	r, err := o.NewReader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if b, _ := io.ReadAll(r); string(b) != "hello" {
		t.Fatalf("read via STORAGE_EMULATOR_HOST (-want,+got): -hello +%q", b)
	}
}
