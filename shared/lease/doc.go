// Package lease is a single-runner lease on a Cloud Storage object: compare
// and set on the object's generation, a heartbeat, a trust window, and a
// fencing epoch.
//
// # The object
//
// A lease named NAME is the object PREFIX+NAME+".json", whose body is
// {holder, epoch, ttlSeconds, acquiredAt, renewedAt, token}. The same fields
// are mirrored in the object's custom metadata, so one metadata read (or the
// response to a write) tells the generation, the server's Updated time and the
// lease state together. token is a random value per acquisition; it lets an
// acquirer recognise its own write when the response was lost.
//
// # The store below
//
// Manager reads and writes lease objects through an ObjectStore (objects.go):
// GCSObjects, the bucket, keeps every lease by default; Options.JobLeases
// puts the job leases in another store, Firestore documents
// (mongostore.LeaseObjects), where an acquire is a write unit instead of a
// Class A write. What follows is said of the bucket; a document store keeps
// the same contract (a generation compared and set, the server's Updated
// time, a conflict error for a mismatch), and both pass one suite
// (conformance_test.go). Switching stores is guarded (switch.go).
//
// # Compare and set
//
// GCS checks ETag If-Match only on reads. For writes its compare-and-swap is
// the generation precondition (ifGenerationMatch), which is the same idea
// under another name; ifGenerationMatch=0 means "only if it does not exist".
//   - Acquire a missing lease: create with DoesNotExist, epoch 1.
//   - Acquire an expired or released lease: overwrite with
//     GenerationMatch(g), epoch+1.
//   - A live lease: *HeldError (errors.Is(err, ErrHeld)) with holder, epoch
//     and expiry.
//   - Heartbeat: rewrite with GenerationMatch(current) every ttl/3, never
//     more than once a second. A 412 means lost: the lease's context is
//     cancelled at once.
//   - Release: a write of a release marker, the object NAME.json.released
//     naming the epoch and token it releases (marker.go), after one read
//     that checks the lease is still ours. The lease object is not written:
//     GCS allows about one write per second to one object, and a run that
//     wrote it to acquire and again to release would be refused for a
//     schedule firing every second. An acquirer that finds the lease held
//     and a marker naming its epoch and token treats it as free. If the
//     marker cannot be written, the release writes the free state (holder
//     "", the epoch kept) with GenerationMatch(current). Neither is a
//     delete, because a deleted object would restart at epoch 1 and the
//     fencing token must only go up.
//
// # Write rate
//
// GCS answers 429 rateLimitExceeded to writes faster than about one a
// second to one object (https://cloud.google.com/storage/quotas). A
// Manager spaces its own writes to one object by MinObjectWriteGap; the
// library retries a 429 (every lease write is idempotent: it carries a
// generation precondition, or, for the marker, rewrites the same value),
// and a heartbeat that keeps meeting 429 is judged by the trust window, as
// any other failing renew, never taken for a lost lease.
//
// # Clocks
//
// Expiry is judged on the object's server-set Updated time plus ttl plus a
// skew allowance (Options.Skew), never on the holder's own timestamps. The
// holder trusts itself only until lastSuccessfulRenew + ttl − SafetyMargin on
// its monotonic clock (lastSuccessfulRenew is when the successful renew was
// sent). When that window closes without a renew, or when a renew gets a 412,
// the lease's context is cancelled. Since the window closes SafetyMargin+Skew
// before anyone else may take over, a holder whose renews fail stops before a
// successor starts.
//
// # Fencing
//
// Generations are unique but GCS does not promise that they increase, so the
// lease carries its own epoch, which only goes up. Lease.Epoch is a fencing
// token: pass Lease.Fence to store.FencedUpdate, and a holder that paused past
// its lease and woke up has its writes refused with store.ErrStaleFence.
//
// # Retries and the lost create
//
// Every conditional operation runs with the storage library's RetryIdempotent
// policy (a write with a generation precondition is idempotent), with a short
// backoff and a deadline at the end of the trust window. A write that the
// server applied but whose response was lost is retried by the library and
// comes back as a 412; the lease re-reads the object and recognises its own
// token, for acquire, renew and release alike.
//
// # What it does not guarantee
//
// Mutual exclusion rests on GCS's conditional writes and on clocks running
// at roughly the same rate: the holder's monotonic clock and the contenders'
// wall clocks, against the server's Updated time, within Options.Skew. A
// holder that is paused between checking its context and acting can still
// act late; that is what the fencing epoch is for.
package lease
