package notify_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/baton-cron/baton/shared/notify"
)

// A receiver checks every request before it trusts it, and drops a second
// delivery of the same idempotency key.
func ExampleVerify() {
	const secret = "0123456789abcdef-example"
	seen := map[string]bool{}
	receiver := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		err = notify.Verify(secret, r.Header.Get(notify.HeaderTimestamp), body,
			r.Header.Get(notify.HeaderSignature), time.Now(), notify.DefaultTolerance)
		if err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		key := r.Header.Get(notify.HeaderIdempotencyKey)
		if seen[key] {
			fmt.Println("duplicate dropped:", key)
			return
		}
		seen[key] = true
		fmt.Println("accepted:", r.Header.Get(notify.HeaderEvent), key)
	})

	// What baton sends, signed with the same secret; then a forgery.
	body := []byte(`{"event":"failed","schedule":"nightly","run":"nightly@20260101T000000Z","status":"failed"}`)
	send := func(secret string) int {
		ts := time.Now().Unix()
		req := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(string(body)))
		req.Header.Set(notify.HeaderEvent, "failed")
		req.Header.Set(notify.HeaderTimestamp, strconv.FormatInt(ts, 10))
		req.Header.Set(notify.HeaderIdempotencyKey, notify.IdempotencyKey("nightly@20260101T000000Z", "failed"))
		req.Header.Set(notify.HeaderSignature, notify.Sign(secret, ts, body))
		w := httptest.NewRecorder()
		receiver.ServeHTTP(w, req)
		return w.Code
	}
	fmt.Println(send(secret))
	fmt.Println(send(secret))
	fmt.Println(send("not-the-secret-at-all"))
	// Output:
	// accepted: failed nightly@20260101T000000Z:failed
	// 200
	// duplicate dropped: nightly@20260101T000000Z:failed
	// 200
	// 401
}
