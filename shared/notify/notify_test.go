package notify_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/notify"
)

func TestVerify(t *testing.T) {
	t.Parallel()
	const secret = "0123456789abcdef"
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"event":"failed"}`)
	ts := now.Unix()
	good := notify.Sign(secret, ts, body)
	cases := []struct {
		name            string
		secret, ts, sig string
		body            []byte
		now             time.Time
		want            error
	}{
		{"valid", secret, strconv.FormatInt(ts, 10), good, body, now, nil},
		{"valid at the tolerance's edge", secret, strconv.FormatInt(ts, 10), good, body, now.Add(notify.DefaultTolerance), nil},
		{"wrong secret", "fedcba9876543210", strconv.FormatInt(ts, 10), good, body, now, notify.ErrBadSignature},
		{"body changed", secret, strconv.FormatInt(ts, 10), good, []byte(`{"event":"recovered"}`), now, notify.ErrBadSignature},
		{"timestamp changed", secret, strconv.FormatInt(ts+1, 10), good, body, now, notify.ErrBadSignature},
		{"replayed late", secret, strconv.FormatInt(ts, 10), good, body, now.Add(notify.DefaultTolerance + time.Second), notify.ErrStale},
		{"from the future", secret, strconv.FormatInt(ts, 10), good, body, now.Add(-notify.DefaultTolerance - time.Second), notify.ErrStale},
		{"no scheme", secret, strconv.FormatInt(ts, 10), good[3:], body, now, notify.ErrBadSignature},
		{"not hex", secret, strconv.FormatInt(ts, 10), "v1=zz", body, now, notify.ErrBadSignature},
		{"empty", secret, strconv.FormatInt(ts, 10), "", body, now, notify.ErrBadSignature},
		{"timestamp not a number", secret, "soon", good, body, now, notify.ErrBadSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := notify.Verify(c.secret, c.ts, c.body, c.sig, c.now, notify.DefaultTolerance)
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("Verify = %v, want %v", err, c.want)
			}
		})
	}
}
