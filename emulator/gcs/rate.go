package gcs

import (
	"net/http"
	"sync"
	"time"
)

// Cloud Storage limits how fast one object name may be written.
// "Quotas & limits" (https://cloud.google.com/storage/quotas, Objects):
// "There is an update limit on each object of once per second, so rapid
// writes to a single object won't scale." "About Cloud Storage objects"
// (https://cloud.google.com/storage/docs/objects#immutability): "a single
// particular object can only be updated or overwritten up to once per
// second". The 429 real GCS answers names what
// counts: "The object B/O exceeded the rate limit for object mutation
// operations (create, update, and delete). Please reduce your request rate.
// See https://cloud.google.com/storage/docs/gcs429." So creates,
// overwrites, metadata updates and deletes all count, each against its
// object name.
//
// Google documents no burst figure: "once per second" is a sustained rate.
// The front allows a burst of ObjectWriteBurst writes, refilled at
// ObjectWriteRate: a pair of writes in quick succession passes once, but
// two writes a second, sustained, are refused within a few seconds. A
// refusal is HTTP 429 with reason rateLimitExceeded, which the Go client
// retries with backoff for idempotent (precondition-carrying) calls.
const (
	// ObjectWriteRate is the sustained writes per second the front lets
	// through to one object name.
	ObjectWriteRate = 1.0
	// ObjectWriteBurst is how many writes to one object name may come
	// back to back after a quiet second or more.
	ObjectWriteBurst = 2.0
)

// objectRate is a token bucket per object name. Only writes that the
// backend applied (a 2xx answer) spend a token: a 412 or a 404 mutates
// nothing. Callers hold the object's lock, so the check before forwarding
// and the spend after it are not raced by another write to the object.
type objectRate struct {
	now func() time.Time

	mu      sync.Mutex
	buckets map[string]*tokenBucket
	writes  map[string]int64 // applied writes per object, for tests
	refused map[string]int64 // 429s per object, for tests
	force   map[string]int   // writes still to be refused (FailNextWrites)
	// times is when the last writes per object were applied, on the
	// front's clock, at most maxWriteTimes each (ObjectWriteTimes).
	times map[string][]time.Time
}

// maxWriteTimes bounds the applied-write times kept per object: enough for
// a test's window, and a long-running local stack does not grow.
const maxWriteTimes = 256

type tokenBucket struct {
	tokens float64
	at     time.Time
}

func newObjectRate(now func() time.Time) *objectRate {
	return &objectRate{now: now, buckets: map[string]*tokenBucket{}, writes: map[string]int64{}, refused: map[string]int64{}, force: map[string]int{}, times: map[string][]time.Time{}}
}

func rateKey(bucket, object string) string { return bucket + "\x00" + object }

// refill brings b up to now; the caller holds r.mu.
func (r *objectRate) refill(key string, now time.Time) *tokenBucket {
	b, ok := r.buckets[key]
	if !ok {
		b = &tokenBucket{tokens: ObjectWriteBurst, at: now}
		r.buckets[key] = b
		if len(r.buckets) > 4096 {
			r.prune(now)
		}
		return b
	}
	if el := now.Sub(b.at); el > 0 {
		b.tokens = min(ObjectWriteBurst, b.tokens+el.Seconds()*ObjectWriteRate)
		b.at = now
	}
	return b
}

// prune drops the buckets that have refilled: they hold no state a fresh
// one would not.
func (r *objectRate) prune(now time.Time) {
	for k, b := range r.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*ObjectWriteRate >= ObjectWriteBurst {
			delete(r.buckets, k)
		}
	}
}

// allow reports whether a write to the object may go ahead now, and counts
// a refusal.
func (r *objectRate) allow(bucket, object string, enforce bool) bool {
	key := rateKey(bucket, object)
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := r.force[key]; n > 0 {
		r.force[key] = n - 1
		r.refused[key]++
		return false
	}
	if !enforce {
		return true
	}
	if r.refill(key, r.now()).tokens < 1 {
		r.refused[key]++
		return false
	}
	return true
}

// spend records an applied write.
func (r *objectRate) spend(bucket, object string) {
	key := rateKey(bucket, object)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes[key]++
	now := r.now()
	ts := append(r.times[key], now)
	if len(ts) > maxWriteTimes {
		ts = ts[len(ts)-maxWriteTimes:]
	}
	r.times[key] = ts
	b := r.refill(key, now)
	b.tokens = max(b.tokens-1, 0)
}

// statusRecorder remembers the status a handler answered.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b) //nolint:wrapcheck // a ResponseWriter's own error, passed through
}

// Flush passes through, for streamed answers.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
