package doctor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
)

// gcs checks the bucket the way leases use it, on scratch objects under
// Scratch + "/" (never under leases/): create-if-absent
// (ifGenerationMatch=0), a write conditional on the generation read, the
// 412 a stale generation gets, and the answer to writes to one object
// faster than once a second. Google documents "one write per second to
// the same object name"
// (https://cloud.google.com/storage/quotas#objects) and answers 429
// rateLimitExceeded past a burst it does not bound, so a 429 is the
// expected answer and its absence a WARN, not a failure. Each write is
// made once: the client's own retries are off, so the report shows what
// the service answered.
func (e *deepEnv) gcs(ctx context.Context, r *Report) {
	if ctx.Err() != nil {
		r.skip("gcs", "interrupted: "+ctx.Err().Error())
		return
	}
	cl, err := e.newStorage(ctx)
	if err != nil {
		r.fail("gcs: client", err.Error(), "gcloud auth application-default login (or, for baton local, . DATA_DIR/env so STORAGE_EMULATOR_HOST is set)")
		return
	}
	defer cl.Close()
	bkt := cl.Bucket(e.c.Bucket)
	prefix := e.scratch + "/"
	defer e.cleanupGCS(ctx, bkt, prefix, r)
	obj := func(name string) *storage.ObjectHandle {
		return bkt.Object(prefix + name).Retryer(storage.WithPolicy(storage.RetryNever))
	}
	where := "gs://" + e.c.Bucket + "/" + prefix

	e.preconditions(ctx, obj("cas"), where, r)
	e.rate(ctx, obj("rate"), r)
}

// preconditions checks create-if-absent, a write on the generation read,
// and the 412 of a stale generation, on one object; a check that cannot
// run because an earlier one failed is a SKIP saying so.
func (e *deepEnv) preconditions(ctx context.Context, cas *storage.ObjectHandle, where string, r *Report) {
	leaseFix := "leases compare-and-set on generations: the bucket must honour ifGenerationMatch; check BATON_BUCKET names baton's bucket (baton doctor checks its settings)"
	gen1, err := e.writePaced(ctx, cas.If(storage.Conditions{DoesNotExist: true}), "1")
	if err != nil {
		r.fail("gcs: create-if-absent", fmt.Sprintf("create %scas with ifGenerationMatch=0: %v", where, err), leaseFix)
		r.skip("gcs: generation match", "needs the object create-if-absent failed to make")
		r.skip("gcs: stale generation", "needs the object create-if-absent failed to make")
		return
	}
	_, err = e.writePaced(ctx, cas.If(storage.Conditions{DoesNotExist: true}), "2")
	if code := httpCode(err); code != http.StatusPreconditionFailed {
		r.fail("gcs: create-if-absent", fmt.Sprintf("created generation %d; a second create of the same name answered %v, want 412", gen1, errOrNil(err)), leaseFix)
	} else {
		r.pass("gcs: create-if-absent", fmt.Sprintf("ifGenerationMatch=0 created generation %d, and a second create got 412", gen1))
	}

	gen2, err := e.writePaced(ctx, cas.If(storage.Conditions{GenerationMatch: gen1}), "3")
	if err != nil {
		r.fail("gcs: generation match", fmt.Sprintf("write with ifGenerationMatch=%d (the current generation): %v", gen1, err), leaseFix)
		r.skip("gcs: stale generation", "needs the write generation match failed to make")
		return
	}
	r.pass("gcs: generation match", fmt.Sprintf("ifGenerationMatch=%d wrote generation %d", gen1, gen2))

	_, err = e.writePaced(ctx, cas.If(storage.Conditions{GenerationMatch: gen1}), "4")
	if code := httpCode(err); code != http.StatusPreconditionFailed {
		r.fail("gcs: stale generation", fmt.Sprintf("write with ifGenerationMatch=%d after generation %d: %v, want 412", gen1, gen2, errOrNil(err)), leaseFix)
	} else {
		r.pass("gcs: stale generation", fmt.Sprintf("ifGenerationMatch=%d after generation %d: 412 Precondition Failed", gen1, gen2))
	}
}

// rate writes one object as fast as it can, up to RateWrites times or for
// RateWindow, and reports what came back.
func (e *deepEnv) rate(ctx context.Context, obj *storage.ObjectHandle, r *Report) {
	const name = "gcs: per-object write rate"
	deadline := time.Now().Add(e.c.RateWindow)
	start := time.Now()
	for i := 1; i <= e.c.RateWrites; i++ {
		if ctx.Err() != nil {
			r.skip(name, fmt.Sprintf("interrupted after %d writes: %v", i-1, ctx.Err()))
			return
		}
		if time.Now().After(deadline) {
			r.warn(name, fmt.Sprintf("%d writes in %s and no 429 before the %s bound: the bucket tolerated the burst", i-1, time.Since(start).Round(time.Millisecond), e.c.RateWindow),
				"nothing to do: Google allows bursts above one write a second per object, and baton keeps each lease object under it")
			return
		}
		_, err := e.write(ctx, obj, fmt.Sprint(i))
		elapsed := time.Since(start)
		switch {
		case err == nil:
			continue
		case httpCode(err) == http.StatusTooManyRequests:
			r.pass(name, fmt.Sprintf("write %d to one object in %s answered 429 (%s): the limit Google documents, which leases keep under (one write a second per lease object)", i, elapsed.Round(time.Millisecond), reason(err)))
			return
		default:
			r.fail(name, fmt.Sprintf("write %d to one object: %v (want success, or 429 rateLimitExceeded)", i, err), "check the service account may write to the bucket (roles/storage.objectUser)")
			return
		}
	}
	elapsed := time.Since(start)
	r.warn(name, fmt.Sprintf("%d writes to one object in %s (%.1f/s) and no 429: the bucket tolerated the burst", e.c.RateWrites, elapsed.Round(time.Millisecond), float64(e.c.RateWrites)/elapsed.Seconds()),
		"nothing to do: Google allows bursts above one write a second per object, and baton keeps each lease object under it")
}

// writePaced is write for the precondition checks, which write one object
// a few times in a row: a 429 there is the per-object rate (checked on
// its own below), not an answer to the precondition, so the write is made
// again after the second the rate allows (paced).
func (e *deepEnv) writePaced(ctx context.Context, obj *storage.ObjectHandle, body string) (int64, error) {
	var gen int64
	err := paced(ctx, func() (err error) {
		gen, err = e.write(ctx, obj, body)
		return err
	})
	return gen, err
}

// paced runs op, and again after a second while it answers 429, at most
// three times in all: the per-object rate allows the next write a second
// later, and the cleanup's delete of an object the checks just wrote is a
// write too.
func paced(ctx context.Context, op func() error) error {
	for attempt := 1; ; attempt++ {
		err := op()
		if httpCode(err) != http.StatusTooManyRequests || attempt == 3 {
			return err
		}
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// write writes body to obj in one request and returns the new generation.
func (e *deepEnv) write(ctx context.Context, obj *storage.ObjectHandle, body string) (int64, error) {
	e.count(0, 0, 1)
	// Detached from an interrupt, as the Mongo writes are: the cleanup
	// must not race a write in flight.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
	defer cancel()
	w := obj.NewWriter(wctx)
	w.ContentType = "text/plain"
	w.ChunkSize = 0 // one request: no resumable upload
	if _, err := w.Write([]byte(body)); err != nil {
		_ = w.Close()
		return 0, err
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	return w.Attrs().Generation, nil
}

// cleanupGCS deletes every scratch object, on a context of its own.
func (e *deepEnv) cleanupGCS(ctx context.Context, bkt *storage.BucketHandle, prefix string, r *Report) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	it := bkt.Objects(cctx, &storage.Query{Prefix: prefix})
	e.count(0, 0, 1)
	n := 0
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			r.fail("gcs: cleanup", fmt.Sprintf("list gs://%s/%s*: %v", e.c.Bucket, prefix, err), fmt.Sprintf("gcloud storage rm -r gs://%s/%s", e.c.Bucket, prefix))
			return
		}
		e.count(0, 0, 1)
		if err := paced(cctx, func() error { return bkt.Object(a.Name).Delete(cctx) }); err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
			r.fail("gcs: cleanup", fmt.Sprintf("delete gs://%s/%s: %v", e.c.Bucket, a.Name, err), fmt.Sprintf("gcloud storage rm -r gs://%s/%s", e.c.Bucket, prefix))
			return
		}
		n++
	}
	r.pass("gcs: cleanup", fmt.Sprintf("deleted %d scratch objects (gs://%s/%s*)", n, e.c.Bucket, prefix))
}

// httpCode is the HTTP status of a Cloud Storage error, or 0.
func httpCode(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}

// reason is the reason a Cloud Storage error gives (rateLimitExceeded),
// or its message.
func reason(err error) string {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		for _, it := range ge.Errors {
			if it.Reason != "" {
				return it.Reason
			}
		}
		if ge.Message != "" {
			return ge.Message
		}
	}
	return err.Error()
}

func errOrNil(err error) string {
	if err == nil {
		return "success"
	}
	return err.Error()
}
