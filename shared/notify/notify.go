package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Header names of a webhook request.
const (
	HeaderEvent          = "X-Baton-Event"
	HeaderTimestamp      = "X-Baton-Timestamp"
	HeaderIdempotencyKey = "X-Baton-Idempotency-Key"
	HeaderSignature      = "X-Baton-Signature"
)

// DefaultTolerance is how old a timestamp Verify accepts by default in
// the examples: long enough for a delivery retried by a slow network,
// short enough that a captured request cannot be replayed for long.
const DefaultTolerance = 5 * time.Minute

// Payload is the JSON body of one event.
type Payload struct {
	// Event is failed, skipped, misfire or recovered.
	Event string `json:"event"`
	// Schedule and Run are the ids.
	Schedule string `json:"schedule"`
	Run      string `json:"run"`
	// FireTime is the run's fire time, in UTC.
	FireTime time.Time `json:"fireTime"`
	// Status is the run's status (failed, skipped, succeeded).
	Status string `json:"status"`
	// Reason is the run's error (failed) or reason (skipped), if any.
	Reason string `json:"reason,omitempty"`
	// Source is why the run exists (scheduled, catchup, retry, misfire,
	// manual).
	Source string `json:"source"`
	// Attempt counts from 1.
	Attempt int `json:"attempt"`
	// ConsoleURL links to the run in the console, when
	// BATON_CONSOLE_URL names it.
	ConsoleURL string `json:"consoleUrl,omitempty"`
}

// IdempotencyKey is the key of the event of run runID: one per run and
// event, however often it is delivered.
func IdempotencyKey(runID, event string) string { return runID + ":" + event }

// Sign returns the X-Baton-Signature value of body sent at timestamp (unix
// seconds) with secret.
func Sign(secret string, timestamp int64, body []byte) string {
	return "v1=" + hex.EncodeToString(mac(secret, strconv.FormatInt(timestamp, 10), body))
}

func mac(secret, timestamp string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp))
	m.Write([]byte("."))
	m.Write(body)
	return m.Sum(nil)
}

// Errors of Verify.
var (
	// ErrBadSignature means the signature is missing, malformed, or not
	// the one the secret makes of this timestamp and body.
	ErrBadSignature = errors.New("notify: bad signature")
	// ErrStale means the timestamp is further from now than the tolerance
	// allows: a replay, or a clock far off.
	ErrStale = errors.New("notify: timestamp outside the tolerance")
)

// Verify checks a webhook request: signature (X-Baton-Signature) must be
// the HMAC-SHA256 that secret makes of timestamp (X-Baton-Timestamp, unix
// seconds) "." body, and timestamp within tolerance of now. The comparison
// is constant-time. Receivers may copy this function.
func Verify(secret, timestamp string, body []byte, signature string, now time.Time, tolerance time.Duration) error {
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("notify: verify: timestamp %q: %w", timestamp, ErrBadSignature)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("notify: verify: timestamp %d is %s from now: %w", ts, d, ErrStale)
	}
	hexSig, ok := strings.CutPrefix(signature, "v1=")
	if !ok {
		return fmt.Errorf("notify: verify: signature has no v1= scheme: %w", ErrBadSignature)
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return fmt.Errorf("notify: verify: signature is not hex: %w", ErrBadSignature)
	}
	if !hmac.Equal(got, mac(secret, timestamp, body)) {
		return fmt.Errorf("notify: verify: %w", ErrBadSignature)
	}
	return nil
}
