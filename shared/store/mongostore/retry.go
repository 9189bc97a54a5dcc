package mongostore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/baton-cron/baton/shared/store"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Server error codes the store acts on. Firestore with MongoDB
// compatibility maps its gRPC statuses onto MongoDB codes; these are the
// ones contention and deadlines produce.
const (
	// codeWriteConflict is MongoDB's WriteConflict, which Firestore answers
	// for Aborted (contention on a hot document): the write did not
	// commit, so running it again is safe for any write.
	codeWriteConflict = 112
	// codeExceededTimeLimit is Firestore's DeadlineExceeded: the write may
	// or may not have committed.
	codeExceededTimeLimit = 262
	// codeMaxTimeMSExpired is MongoDB's operation-deadline code, unknown
	// outcome as 262.
	codeMaxTimeMSExpired = 50
)

// Retry bounds for Aborted (112), sized for real contention rather than a
// blip. Firestore "resolves data contention by delaying or failing one of
// the operations" and fails it with Aborted once the delay runs out
// (https://cloud.google.com/firestore/docs/transaction-data-contention);
// its admin API names the mode, pessimistic or optimistic by edition
// (https://cloud.google.com/ruby/docs/reference/google-cloud-firestore-admin-v1/latest/Google-Cloud-Firestore-Admin-V1-Database-ConcurrencyMode).
// Either way one hot document commits its writers one at a time, each in
// a commit's latency (tens of milliseconds), and a 112 means the writer
// queued or raced behind others. The hottest case baton has is Racers (20)
// dispatchers or sweepers on one document: the losers must outlast the
// queue ahead of them, about 20 commits, a few hundred milliseconds.
//
// Six attempts with full-jitter backoff doubling from 25ms wait at most
// 25+50+100+200+400 = 775ms in all (at least half that, 388ms, with the
// jitter), plus six round trips: about a second in the worst case. That
// covers the 20-writer queue with room, spreads contending writers apart
// (the jitter), and stays well inside the budget of the callers: a tick
// (whose writes run under its lease, minutes), an HTTP request (a GPU
// callback or an API edit, whose clients wait seconds) and the run path's
// 10-second write contexts. Past it the write is reported not applied
// (store.ErrContended, a conflict), which every caller already handles:
// the whole operation runs again on the next tick, sweep or request.
const (
	// WriteAttempts is how many times a write is tried while it meets
	// 112; exported for tests that must exhaust it exactly.
	WriteAttempts = 6
	retryBase     = 25 * time.Millisecond
)

// notApplied reports whether err says the write was not applied: a
// top-level 112, or write errors that are all 112 with no write concern
// error (which would mean it was applied).
func notApplied(err error) bool {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return ce.Code == codeWriteConflict
	}
	var we mongo.WriteException
	if errors.As(err, &we) {
		if we.WriteConcernError != nil || len(we.WriteErrors) == 0 {
			return false
		}
		for _, e := range we.WriteErrors {
			if e.Code != codeWriteConflict {
				return false
			}
		}
		return true
	}
	return false
}

// timedOut reports whether the server answered a deadline code (262, 50):
// the write may have committed.
func timedOut(err error) bool {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return ce.Code == codeExceededTimeLimit || ce.Code == codeMaxTimeMSExpired
	}
	var we mongo.WriteException
	if errors.As(err, &we) {
		for _, e := range we.WriteErrors {
			if e.Code == codeExceededTimeLimit || e.Code == codeMaxTimeMSExpired {
				return true
			}
		}
	}
	return false
}

// unknownOutcome reports whether, after err, the write may have been
// applied: a deadline code, a write concern error (the write ran; its
// durability is what failed), a connection that broke after the request
// may have been sent, or a context that ended mid-flight.
func unknownOutcome(err error) bool {
	if err == nil || notApplied(err) {
		return false
	}
	if timedOut(err) {
		return true
	}
	var we mongo.WriteException
	if errors.As(err, &we) && we.WriteConcernError != nil {
		return true
	}
	return mongo.IsNetworkError(err) || mongo.IsTimeout(err) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// retryWrite runs write up to WriteAttempts times while it fails with an
// error that says it was not applied (112). With afterTimeout set it also
// retries deadline codes (262, 50), which is right only for a write whose
// repetition after landing is harmless and recognisable: an insert with a
// deterministic _id, which then answers a duplicate key. A conditional
// update is never retried after one: had it landed, the retry would miss
// its own condition and the caller would hear "conflict" for its own
// write. It returns write's last error.
func retryWrite(ctx context.Context, afterTimeout bool, write func() error) error {
	for attempt := 0; ; attempt++ {
		err := write()
		if err == nil || attempt == WriteAttempts-1 {
			return err
		}
		if !notApplied(err) && (!afterTimeout || !timedOut(err)) {
			return err
		}
		d := retryBase << attempt
		t := time.NewTimer(d/2 + rand.N(d/2+1)) //nolint:gosec // jitter, not a secret: contending writers spread out
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (not retried: %v)", err, context.Cause(ctx)) //nolint:errorlint // the result is the write's error (see doc); the cause is only described, so callers' errors.Is on a context error is unchanged
		case <-t.C:
		}
	}
}

// writeError wraps err, a failed conditional write's error, naming the
// operation: with store.ErrUnknownOutcome when the write may have been
// applied, and with store.ErrContended (a conflict) when its last attempt
// was a 112 too. retryWrite stops at the first error that is not a 112
// (a conditional write is never retried after a deadline code), so a
// last 112 means no attempt was applied.
func (c *Collection) writeError(op string, err error) error {
	if notApplied(err) {
		return fmt.Errorf("store: %s %s: %w: %w", op, c.name, store.ErrContended, err)
	}
	return c.plainWriteError(op, err)
}

// plainWriteError is writeError without the contention case, for an
// insert: it has no condition, and its 112s are settled by reading back.
func (c *Collection) plainWriteError(op string, err error) error {
	if unknownOutcome(err) {
		return fmt.Errorf("store: %s %s: %w: %w", op, c.name, store.ErrUnknownOutcome, err)
	}
	return fmt.Errorf("store: %s %s: %w", op, c.name, err)
}

// sameKind reports whether stored, the document found under the _id of
// ours, is the same kind of document: every top-level field both hold
// has the same kind of BSON value (numbers are one kind; null matches
// anything). It is what the read-back after a failed insert compares.
// Equality would be wrong: a twin's insert carries its own timestamps,
// and a landed insert may have been claimed or updated since. A field's
// presence would be wrong too: updates $unset fields. What it catches is a
// different document under the same _id (another writer's id scheme), which
// must be an error rather than "already inserted".
func sameKind(ours, stored bson.Raw) (string, bool) {
	elems, err := ours.Elements()
	if err != nil {
		return "", false
	}
	for _, e := range elems {
		sv, err := stored.LookupErr(e.Key())
		if err != nil {
			continue
		}
		a, b := kindOf(e.Value().Type), kindOf(sv.Type)
		if a != b && a != bson.TypeNull && b != bson.TypeNull {
			return fmt.Sprintf("field %s holds %s, ours %s", e.Key(), sv.Type, e.Value().Type), false
		}
	}
	return "", true
}

// kindOf folds the numeric BSON types into one, and undefined into null.
func kindOf(t bson.Type) bson.Type {
	switch t {
	case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble, bson.TypeDecimal128:
		return bson.TypeDouble
	case bson.TypeUndefined:
		return bson.TypeNull
	}
	return t
}
