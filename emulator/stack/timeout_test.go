package stack_test

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/stack"
	"github.com/baton-cron/baton/shared/httpapi"
)

// TestSlowBodyIsCutOff: a client that sends its headers and then trickles
// the body must not hold a connection for ever, on the functions' server or
// a GPU worker's. With ReadHeaderTimeout alone, both waited as long as the
// client kept sending.
func TestSlowBodyIsCutOff(t *testing.T) {
	s := start(t, stack.Config{Tick: -1, GPUWorkers: 1, ServerTimeouts: httpapi.Timeouts{
		ReadHeader: 5 * time.Second, Read: 300 * time.Millisecond, Idle: 5 * time.Second,
	}})
	defer closeStack(t, s)
	worker, _, _ := strings.Cut(s.Deps.GPUPool, "=")
	for name, target := range map[string]string{"functions": s.URL + "/Schedules/schedules", "gpu worker": worker + "/run"} {
		t.Run(name, func(t *testing.T) { trickle(t, target, s.Token) })
	}
}

// trickle POSTs a 1000-byte body to target one byte every 100ms (100 s in
// all) and fails unless the server closes the connection within 20 s.
func trickle(t *testing.T, target, token string) {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const size = 1000
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", u.Path, u.Host, token, size); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		// Whatever the server answers, it must then hang up.
		_, _ = io.Copy(io.Discard, conn)
		close(closed)
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	bound := time.After(20 * time.Second)
	for sent := 1; ; {
		select {
		case <-closed:
			return
		case <-bound:
			t.Fatalf("%s: still open after 20 s of a trickled body (%d of %d bytes sent)", target, sent, size)
		case <-tick.C:
			if sent < size-1 {
				if _, err := conn.Write([]byte(" ")); err == nil {
					sent++
				}
			}
		}
	}
}
