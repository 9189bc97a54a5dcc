package lease

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"

	"github.com/baton-cron/baton/shared/store"
)

// Object is one lease object as an ObjectStore holds it.
type Object struct {
	// Name is the object's name (PREFIX+NAME+".json", or with the hash
	// directory of a spread lease).
	Name string
	// Record is the lease state the object holds.
	Record Record
	// Generation is the compare-and-set token: it changes on every
	// write, and is never 0 for an object that exists.
	Generation int64
	// Updated is the store's own time of the last write. Expiry is judged
	// on it, never on the holder's stamps.
	Updated time.Time
}

// ObjectStore keeps lease objects: the seam below Manager. Everything the
// lease promises (exclusion, the monotonic epoch, fencing, the trust
// window, the lost-answer recovery) rests on these four operations and
// on Manager's use of them, so a store only has to do them exactly as
// said here; storetest-style, every implementation passes the one suite
// in objects_test.go and the Manager tests run against each.
//
// The error contract:
//   - ReadObject of a missing object returns an error wrapping ErrNotFound.
//   - WriteObject and DeleteObject whose generation does not match the
//     object's (including a missing object for a generation other than 0,
//     and an existing one for generation 0) return an error wrapping
//     store.ErrConflict, and change nothing.
//   - Any other error leaves the outcome unknown: the write may have
//     landed. Manager then reads the object back and recognises its own
//     write by the record's Token. A store may retry a write internally
//     only when the retry is safe: after an answer that says it was not
//     applied, or (as GCS's library does) when a landed first attempt
//     makes the retry fail with store.ErrConflict rather than apply twice.
//   - Reads are strongly consistent: a read after a write's answer sees
//     that write or a later one.
type ObjectStore interface {
	// ReadObject returns the object.
	ReadObject(ctx context.Context, object string) (Object, error)
	// WriteObject stores rec when the object's generation is gen (0: only
	// if the object does not exist), and returns the object as written:
	// its new generation and the store's Updated time.
	WriteObject(ctx context.Context, object string, rec Record, gen int64) (Object, error)
	// DeleteObject deletes the object when its generation is gen.
	DeleteObject(ctx context.Context, object string, gen int64) error
	// ListObjects returns one page of the objects whose names start with
	// prefix, in name order, at most pageSize (1..MaxListPage), and the
	// token of the next page ("" on the last). A token the store did not
	// issue for this prefix gives an error wrapping ErrBadPageToken.
	ListObjects(ctx context.Context, prefix string, pageSize int, pageToken string) ([]Object, string, error)
}

// GCSObjects is the ObjectStore of lease objects in a Cloud Storage bucket:
// the generation precondition (ifGenerationMatch) is the compare-and-set,
// and the object's metadata mirrors the record so one metadata read tells
// all (doc.go).
func GCSObjects(b *storage.BucketHandle) ObjectStore { return newGCSObjects(b) }

var _ ObjectStore = (*gcsObjects)(nil)

// gcsObjects is GCSObjects; Manager keeps one for the objects that only a
// bucket has (markers written there, legacy flat objects).
type gcsObjects struct {
	bucket  *storage.BucketHandle
	backoff gax.Backoff
}

func newGCSObjects(b *storage.BucketHandle) *gcsObjects {
	return &gcsObjects{bucket: b, backoff: gax.Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2}}
}

// handle is the object with the lease writes' retry policy: idempotent only
// (a write under a precondition).
func (g *gcsObjects) handle(object string) *storage.ObjectHandle {
	return g.bucket.Object(object).Retryer(
		storage.WithPolicy(storage.RetryIdempotent),
		storage.WithBackoff(g.backoff),
	)
}

// ReadObject is one metadata GET; the body is read only for objects
// written by something other than this package (no metadata mirror).
func (g *gcsObjects) ReadObject(ctx context.Context, object string) (Object, error) {
	attrs, err := g.handle(object).Attrs(ctx)
	if errors.Is(err, storage.ErrObjectNotExist) {
		return Object{}, ErrNotFound
	}
	if err != nil {
		return Object{}, fmt.Errorf("read object %s: %w", object, err)
	}
	return g.objectFromAttrs(ctx, attrs)
}

func (g *gcsObjects) objectFromAttrs(ctx context.Context, attrs *storage.ObjectAttrs) (Object, error) {
	rec, ok := recordFromMetadata(attrs.Metadata)
	if !ok {
		r, err := g.handle(attrs.Name).Generation(attrs.Generation).NewReader(ctx)
		if err != nil {
			return Object{}, fmt.Errorf("read body of %s: %w", attrs.Name, err)
		}
		defer r.Close()
		b, err := io.ReadAll(io.LimitReader(r, 1<<16))
		if err != nil {
			return Object{}, fmt.Errorf("read body of %s: %w", attrs.Name, err)
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			return Object{}, fmt.Errorf("object %s is not a lease: %w", attrs.Name, err)
		}
	}
	return Object{Name: attrs.Name, Record: rec, Generation: attrs.Generation, Updated: attrs.Updated}, nil
}

// WriteObject writes with ifGenerationMatch (0: DoesNotExist). The library
// retries it (RetryIdempotent): a first attempt that landed makes the
// retry a 412, which Manager settles by reading the token back.
func (g *gcsObjects) WriteObject(ctx context.Context, object string, rec Record, gen int64) (Object, error) {
	body, err := json.Marshal(rec)
	if err != nil {
		return Object{}, fmt.Errorf("encode %s: %w", object, err)
	}
	c := storage.Conditions{GenerationMatch: gen}
	if gen == 0 {
		c = storage.Conditions{DoesNotExist: true}
	}
	w := g.handle(object).If(c).NewWriter(ctx)
	w.ContentType = "application/json"
	w.CacheControl = "no-store"
	w.Metadata = rec.metadata()
	// The body is a few hundred bytes. The default 16 MiB chunk buffer would
	// be allocated and zeroed on every heartbeat; the minimum chunk size still
	// sends one request and keeps the library's retries (ChunkSize 0 would
	// disable them, and the lost-create recovery relies on them).
	w.ChunkSize = googleapi.MinUploadChunkSize
	if _, err := w.Write(body); err != nil {
		_ = w.Close()
		return Object{}, fmt.Errorf("write %s: %w", object, err)
	}
	if err := w.Close(); err != nil {
		if isPreconditionFailed(err) {
			return Object{}, fmt.Errorf("write %s: %w: %w", object, store.ErrConflict, err)
		}
		return Object{}, fmt.Errorf("write %s: %w", object, err)
	}
	a := w.Attrs()
	return Object{Name: object, Record: rec, Generation: a.Generation, Updated: a.Updated}, nil
}

// DeleteObject deletes with ifGenerationMatch; a 412 or a missing object
// is store.ErrConflict.
func (g *gcsObjects) DeleteObject(ctx context.Context, object string, gen int64) error {
	err := g.handle(object).If(storage.Conditions{GenerationMatch: gen}).Delete(ctx)
	if errors.Is(err, storage.ErrObjectNotExist) || isPreconditionFailed(err) {
		return fmt.Errorf("delete %s: %w: %w", object, store.ErrConflict, err)
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", object, err)
	}
	return nil
}

// ListObjects is one page of the bucket list, on its own page token, so
// a deep page reads no more than its own objects. Objects that are not
// leases (release markers, anything without the .json suffix or
// unreadable as a lease) are counted against the page and skipped.
func (g *gcsObjects) ListObjects(ctx context.Context, prefix string, pageSize int, pageToken string) ([]Object, string, error) {
	if pageSize < 1 || pageSize > MaxListPage {
		return nil, "", fmt.Errorf("list objects: page size %d is not between 1 and %d", pageSize, MaxListPage)
	}
	tok, err := decodeStoreToken(prefix, pageToken)
	if err != nil {
		return nil, "", err
	}
	q := &storage.Query{Prefix: prefix}
	if err := q.SetAttrSelection([]string{"Name", "Generation", "Updated", "Metadata"}); err != nil {
		return nil, "", fmt.Errorf("list objects: %w", err)
	}
	var attrs []*storage.ObjectAttrs
	next, err := iterator.NewPager(g.bucket.Objects(ctx, q), pageSize, tok).NextPage(&attrs)
	if err != nil {
		var ge *googleapi.Error
		if pageToken != "" && errors.As(err, &ge) && ge.Code == http.StatusBadRequest {
			return nil, "", fmt.Errorf("list objects %q: %w", prefix, ErrBadPageToken)
		}
		return nil, "", fmt.Errorf("list objects %q: %w", prefix, err)
	}
	out := make([]Object, 0, len(attrs))
	for _, a := range attrs {
		if len(a.Name) < len(".json") || a.Name[len(a.Name)-len(".json"):] != ".json" {
			continue
		}
		o, err := g.objectFromAttrs(ctx, a)
		if err != nil {
			continue
		}
		out = append(out, o)
	}
	return out, encodeStoreToken(prefix, next), nil
}

// encodeStoreToken wraps a store's own page token with the prefix it was
// issued for (pageToken), so a token from another list is refused.
func encodeStoreToken(prefix, tok string) string {
	if tok == "" {
		return ""
	}
	b, _ := json.Marshal(pageToken{Prefix: prefix, Token: tok}) // two strings cannot fail
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeStoreToken is encodeStoreToken's inverse; "" is the first page.
func decodeStoreToken(prefix, s string) (string, error) {
	if s == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	var t pageToken
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	if err != nil || t.Prefix != prefix || t.Token == "" {
		return "", fmt.Errorf("list objects: %w", ErrBadPageToken)
	}
	return t.Token, nil
}

// Job-lease store kinds, as BATON_JOB_LEASE_STORE names them.
const (
	JobStoreGCS       = "gcs"
	JobStoreFirestore = "firestore"
)

// JobLeaseStores returns Options.JobLeases and Options.OtherJobLeases for
// the job-lease store kind: with "firestore" the job leases are in
// firestore and the bucket is the other store; with "gcs" they are in the
// bucket and firestore (when not nil) is the other. Both are set whenever
// both exist, so that a deployment switching kinds is guarded in either
// direction (switch.go).
func JobLeaseStores(kind string, bucket *storage.BucketHandle, firestore ObjectStore) (jobs, other ObjectStore, err error) {
	switch kind {
	case JobStoreFirestore:
		if firestore == nil {
			return nil, nil, fmt.Errorf("lease: job leases in firestore need the Firestore store (BATON_MONGO_URI)")
		}
		return firestore, GCSObjects(bucket), nil
	case JobStoreGCS, "":
		return nil, firestore, nil
	default:
		return nil, nil, fmt.Errorf("lease: job-lease store %q is neither %q nor %q", kind, JobStoreGCS, JobStoreFirestore)
	}
}
