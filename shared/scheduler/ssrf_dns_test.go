package scheduler_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// TestHTTPTargetNameResolvingToLoopback: an allowlisted name (here under a
// wildcard) whose DNS points at a loopback address must not reach it. DNS
// has no emulator, so Config.LookupIP plays the resolver (the edge double):
// every name resolves to 127.0.0.1, where the test server listens, as a
// hostile record for "metadata.example.com" would to 169.254.169.254.
func TestHTTPTargetNameResolvingToLoopback(t *testing.T) {
	hit := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hit <- r.Host }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	toLoopback := func(context.Context, string) ([]net.IPAddr, error) {
		return []net.IPAddr{{IP: net.IPv4(127, 0, 0, 1)}}, nil
	}

	for _, tc := range []struct {
		name    string
		allowed []string
		wantOK  bool
	}{
		{"wildcard name to loopback", []string{"*.example.com"}, false},
		{"loopback address listed", []string{"*.example.com", "127.0.0.1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t, func(c *scheduler.Config) {
				c.AllowedTargets = tc.allowed
				c.LookupIP = toLoopback
			})
			s := schedule.Schedule{ID: "dns", Cron: "* * * * *", Target: schedule.Target{Type: schedule.TargetHTTP,
				HTTP: &schedule.HTTPTarget{URL: "http://metadata.example.com:" + port + "/computeMetadata/v1/"}}}
			if err := s.Normalize(schedule.ValidateOptions{AllowedHosts: tc.allowed}); err != nil {
				t.Fatalf("normalize: %v", err)
			}
			now := b.clock.Now()
			next, _ := schedule.NextFire(s.Cron, s.TimeZone, now)
			s.NextRunAt, s.Enabled, s.Version, s.CreatedAt, s.UpdatedAt = next.UTC(), true, 1, now, now
			if ok, err := b.store.Collection(schedule.SchedulesCollection).InsertIdempotent(context.Background(), s); err != nil || !ok {
				t.Fatalf("insert schedule: %v %v", ok, err)
			}
			b.clock.Set(t0.Add(time.Minute + time.Second))
			b.tick(t)
			runs := b.runs(t, "dns")
			if len(runs) != 1 {
				t.Fatalf("runs %+v", runs)
			}
			got := runs[0].Status == schedule.RunSucceeded
			if got != tc.wantOK {
				t.Fatalf("run succeeded (-want,+got): -%v +%v; error %q", tc.wantOK, got, runs[0].Error)
			}
			if !tc.wantOK {
				if !strings.Contains(runs[0].Error, "loopback") {
					t.Errorf("run error %q does not say why", runs[0].Error)
				}
				select {
				case h := <-hit:
					t.Errorf("a request for %s reached a loopback address the allowlist does not list", h)
				default:
				}
			}
		})
	}
}
