package gcs

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// front sits ahead of fake-gcs-server's handler and enforces the object
// preconditions that fake-gcs-server ignores (see doc.go).
//
// Locking: every mutating request whose object it can name takes
// all.RLock plus that object's mutex, checks preconditions against the live
// object, and forwards while still holding both, so check-then-act is atomic
// against any other named write to the same object. A mutating request it
// cannot name (resumable-upload content, compose, rewrite, XML-API writes)
// takes all.Lock, which excludes everything else. Reads are not locked.
type front struct {
	fake *fakestorage.Server
	next http.Handler
	log  *slog.Logger

	all   sync.RWMutex
	mu    sync.Mutex
	locks map[string]*sync.Mutex

	// rate is the per-object write limit (rate.go); strict enforces it,
	// and Lax turns that off. Forced refusals (FailNextWrites) apply
	// either way.
	rate   *objectRate
	strict bool

	// ops counts requests by Cloud Storage's operation class
	// (Server.Ops).
	ops opCounter
}

// Ops counts the requests the emulator served by the class Cloud Storage
// bills them in (https://cloud.google.com/storage/pricing#operations-by-class):
// Class A for writes, lists and metadata updates, Class B for object and
// metadata reads; deletes are free. Every request counts, answered or
// refused, as Google counts operations whatever their outcome.
type Ops struct {
	ClassA, ClassB, Free int64
}

type opCounter struct{ a, b, free atomic.Int64 }

// count classes one request: JSON API object GETs are Class B, a GET of
// a bucket's object list is Class A, DELETE is free, every other write is
// Class A.
func (c *opCounter) count(r *http.Request) {
	switch r.Method {
	case http.MethodDelete:
		c.free.Add(1)
	case http.MethodGet, http.MethodHead:
		p := strings.TrimSuffix(r.URL.EscapedPath(), "/")
		if strings.HasPrefix(p, "/storage/v1/b/") && strings.HasSuffix(p, "/o") {
			c.a.Add(1) // objects.list
			return
		}
		c.b.Add(1)
	case http.MethodOptions:
	default:
		c.a.Add(1)
	}
}

func newFront(fake *fakestorage.Server, log *slog.Logger, strict bool, now func() time.Time) *front {
	return &front{fake: fake, next: fake.HTTPHandler(), log: log, locks: map[string]*sync.Mutex{}, rate: newObjectRate(now), strict: strict}
}

// op is what the front understood of a request.
type op int

const (
	opRead   op = iota // GET, HEAD, OPTIONS: forwarded unlocked
	opDelete           // JSON API object delete
	opUpdate           // JSON API object metadata PATCH / PUT / POST
	opUpload           // JSON API media upload naming its object
	opOther            // any other write: exclusive lock, no checks
)

func classify(r *http.Request) (op, string, string) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return opRead, "", ""
	}
	path := r.URL.EscapedPath()
	if b, o, ok := jsonObjectPath(path, "/storage/v1/b/"); ok {
		switch r.Method {
		case http.MethodDelete:
			return opDelete, b, o
		case http.MethodPatch, http.MethodPut, http.MethodPost:
			return opUpdate, b, o
		}
	}
	if rest, ok := strings.CutPrefix(path, "/upload/storage/v1/b/"); ok && r.Method == http.MethodPost {
		b, tail, _ := strings.Cut(rest, "/")
		name := r.URL.Query().Get("name")
		if (tail == "o" || tail == "o/") && name != "" && !r.URL.Query().Has("upload_id") {
			bu, err := url.PathUnescape(b)
			if err == nil {
				return opUpload, bu, name
			}
		}
	}
	return opOther, "", ""
}

// jsonObjectPath splits /storage/v1/b/{bucket}/o/{object} with no further
// segments (the object name is one escaped segment in the JSON API; ACL,
// rewrite and compose paths have more segments and are not matched).
func jsonObjectPath(path, prefix string) (bucket, object string, ok bool) {
	rest, ok := strings.CutPrefix(path, prefix)
	if !ok {
		return "", "", false
	}
	b, rest, ok := strings.Cut(rest, "/o/")
	if !ok || b == "" || rest == "" || strings.Contains(b, "/") || strings.Contains(rest, "/") {
		return "", "", false
	}
	bu, err1 := url.PathUnescape(b)
	ob, err2 := url.PathUnescape(rest)
	if err1 != nil || err2 != nil {
		return "", "", false
	}
	return bu, ob, true
}

func (f *front) objectLock(bucket, object string) *sync.Mutex {
	key := bucket + "\x00" + object
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.locks[key]
	if !ok {
		m = &sync.Mutex{}
		f.locks[key] = m
	}
	return m
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.ops.count(r)
	kind, bucket, object := classify(r)
	switch kind {
	case opRead:
		f.next.ServeHTTP(w, r)
		return
	case opOther:
		f.all.Lock()
		defer f.all.Unlock()
		f.next.ServeHTTP(w, r)
		return
	}
	f.all.RLock()
	defer f.all.RUnlock()
	m := f.objectLock(bucket, object)
	m.Lock()
	defer m.Unlock()
	conds, err := parseConditions(r.URL.Query())
	if err != nil {
		writeGCSError(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	if conds.any() {
		// Streaming: only the attributes are needed, not the content.
		obj, err := f.fake.GetObjectStreaming(bucket, object)
		exists := err == nil
		if exists {
			_ = obj.Close()
		}
		if !exists && kind != opUpload {
			// Delete or patch of a missing object: GCS answers 404 whatever
			// the preconditions; so does fake-gcs-server.
			f.next.ServeHTTP(w, r)
			return
		}
		var gen, metagen int64
		if exists {
			// fake-gcs-server keeps no metageneration and reports "1" for
			// every object, so "1" is what clients have seen and match on.
			gen, metagen = obj.Generation, 1
		}
		if msg := conds.check(exists, gen, metagen); msg != "" {
			f.log.Debug("gcs emulator: precondition failed", "method", r.Method, "bucket", bucket, "object", object, "why", msg)
			writeGCSError(w, http.StatusPreconditionFailed, "conditionNotMet",
				"At least one of the pre-conditions you specified did not hold. ("+msg+")")
			return
		}
	}
	// The rate is checked after the preconditions: a write that would get
	// 412 mutates nothing, and only mutations count (rate.go).
	if !f.rate.allow(bucket, object, f.strict) {
		f.log.Debug("gcs emulator: object write rate exceeded", "method", r.Method, "bucket", bucket, "object", object)
		writeGCSError(w, http.StatusTooManyRequests, "rateLimitExceeded",
			"The object "+bucket+"/"+object+" exceeded the rate limit for object mutation operations (create, update, and delete). Please reduce your request rate. See https://cloud.google.com/storage/docs/gcs429.")
		return
	}
	rec := &statusRecorder{ResponseWriter: w}
	f.next.ServeHTTP(rec, r)
	if rec.code >= 200 && rec.code < 300 {
		f.rate.spend(bucket, object)
	}
}

// conditions are GCS's object preconditions as query parameters.
type conditions struct {
	genMatch, genNotMatch, metaMatch, metaNotMatch *int64
}

func (c conditions) any() bool {
	return c.genMatch != nil || c.genNotMatch != nil || c.metaMatch != nil || c.metaNotMatch != nil
}

func parseConditions(q url.Values) (conditions, error) {
	var c conditions
	for _, p := range []struct {
		name string
		dst  **int64
	}{
		{"ifGenerationMatch", &c.genMatch},
		{"ifGenerationNotMatch", &c.genNotMatch},
		{"ifMetagenerationMatch", &c.metaMatch},
		{"ifMetagenerationNotMatch", &c.metaNotMatch},
	} {
		v := q.Get(p.name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return c, fmt.Errorf("invalid %s %q: %w", p.name, v, err)
		}
		*p.dst = &n
	}
	return c, nil
}

// check returns why the conditions fail against the live object, or "".
// A missing object has generation 0, so ifGenerationMatch=0 means "does not
// exist"; metageneration conditions on a missing object fail, as in GCS.
func (c conditions) check(exists bool, gen, metagen int64) string {
	switch {
	case c.genMatch != nil && *c.genMatch != gen:
		return fmt.Sprintf("ifGenerationMatch=%d, live generation %d", *c.genMatch, gen)
	case c.genNotMatch != nil && *c.genNotMatch == gen:
		return fmt.Sprintf("ifGenerationNotMatch=%d, live generation %d", *c.genNotMatch, gen)
	case c.metaMatch != nil && (!exists || *c.metaMatch != metagen):
		return fmt.Sprintf("ifMetagenerationMatch=%d, live metageneration %d", *c.metaMatch, metagen)
	case c.metaNotMatch != nil && exists && *c.metaNotMatch == metagen:
		return fmt.Sprintf("ifMetagenerationNotMatch=%d, live metageneration %d", *c.metaNotMatch, metagen)
	}
	return ""
}

// writeGCSError writes the JSON API error shape real GCS uses, which the Go
// client turns into a *googleapi.Error with Code and Errors[].Reason.
func writeGCSError(w http.ResponseWriter, code int, reason, msg string) {
	type item struct {
		Domain  string `json:"domain"`
		Reason  string `json:"reason"`
		Message string `json:"message"`
	}
	var body struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Errors  []item `json:"errors"`
		} `json:"error"`
	}
	body.Error.Code = code
	body.Error.Message = msg
	body.Error.Errors = []item{{Domain: "global", Reason: reason, Message: msg}}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	if err := json.NewEncoder(w).Encode(body); err != nil && !errors.Is(err, http.ErrHandlerTimeout) {
		return
	}
}
