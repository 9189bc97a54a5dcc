package scheduler

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
)

// TestCheckAddressRanges: which resolved addresses an http target may reach.
func TestCheckAddressRanges(t *testing.T) {
	for _, tc := range []struct {
		ip      string
		allowed []string
		ok      bool
	}{
		{"8.8.8.8", []string{"*.corp.example"}, true},
		{"10.1.2.3", []string{"*.corp.example"}, false},
		{"172.20.0.1", []string{"*.corp.example"}, false},
		{"192.168.1.1", []string{"*.corp.example"}, false},
		{"100.64.0.9", []string{"*.corp.example"}, false},       // CGNAT
		{"64:ff9b::a01:203", []string{"*.corp.example"}, false}, // NAT64 of 10.1.2.3
		{"fd00::1", []string{"*.corp.example"}, false},          // ULA
		{"169.254.169.254", []string{"*.corp.example"}, false},  // metadata
		{"127.0.0.1", []string{"*.corp.example"}, false},
		{"10.1.2.3", []string{"private:*.corp.example"}, true},
		{"fd00::1", []string{"private:*.corp.example"}, true},
		{"10.1.2.3", []string{"10.1.2.3"}, true},                       // the address itself listed
		{"169.254.169.254", []string{"private:*.corp.example"}, false}, // private: is not link-local
		{"10.1.2.3", []string{"private:other.example", "*.corp.example"}, false},
	} {
		err := checkAddress("svc.corp.example", net.ParseIP(tc.ip), "443", tc.allowed)
		if (err == nil) != tc.ok {
			t.Errorf("svc.corp.example → %s with %v: err %v, want ok=%v", tc.ip, tc.allowed, err, tc.ok)
		}
	}
	if err := schedule.CheckAllowlist([]string{"private:*.corp.example", "private:10.0.0.7:8080"}); err != nil {
		t.Errorf("CheckAllowlist refuses private: entries: %v", err)
	}
}

// TestRefusedAddressLooksTheSameOpenOrClosed: an address the allowlist does
// not open is refused before the connect, so the run's error is the same
// whether a port there is open or closed. Checked after the connect, a
// closed port said "connection refused" and an open one did not: a
// schedule could map the host's ports through its runs' errors. DNS has no
// emulator: the lookup double resolves every name to 127.0.0.1.
func TestRefusedAddressLooksTheSameOpenOrClosed(t *testing.T) {
	hits := 0
	open := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits++ }))
	defer open.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := l.Addr().String()
	_ = l.Close()
	allowed := []string{"*.example.com"}
	lookup := func(context.Context, string) ([]net.IPAddr, error) {
		return []net.IPAddr{{IP: net.IPv4(127, 0, 0, 1)}}, nil
	}
	c := guardClient(&http.Client{Timeout: 5 * time.Second}, allowed, lookup)
	errFor := func(addr string) string {
		_, port, _ := net.SplitHostPort(addr)
		resp, err := c.Get("http://svc.example.com:" + port + "/")
		if err == nil {
			resp.Body.Close()
			t.Fatalf("a request to svc.example.com:%s (→ 127.0.0.1) got through", port)
		}
		return strings.ReplaceAll(err.Error(), port, "PORT")
	}
	openErr, closedErr := errFor(open.Listener.Addr().String()), errFor(closedAddr)
	if openErr != closedErr {
		t.Errorf("errors differ for an open and a closed port:\nopen:   %s\nclosed: %s", openErr, closedErr)
	}
	if !strings.Contains(openErr, "before connecting") || hits != 0 {
		t.Errorf("error %q, %d requests reached the server; want a refusal before connecting", openErr, hits)
	}
}

// TestCrossHostRedirectDropsScheduleHeaders: the schedule's own headers (an
// API key, say) are for the target's host; a redirect to another allowed
// host gets baton's headers only. net/http drops Authorization and Cookie
// on such a redirect, not custom headers.
func TestCrossHostRedirectDropsScheduleHeaders(t *testing.T) {
	got := make(chan http.Header, 1)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() }))
	defer other.Close()
	ou, _ := url.Parse(other.URL)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != "k-123" {
			t.Errorf("the target itself did not get the schedule's header: %v", r.Header)
		}
		http.Redirect(w, r, "http://localhost:"+ou.Port()+"/next", http.StatusFound)
	}))
	defer target.Close()
	allowed := []string{"127.0.0.1", "localhost"}
	e := &Engine{cfg: Config{AllowedTargets: allowed}, http: guardClient(&http.Client{}, allowed, nil)}
	run := &schedule.Run{ID: "r@1", FireTime: time.Now()}
	if _, err := e.callHTTP(context.Background(), run, &schedule.HTTPTarget{URL: target.URL + "/run", Method: http.MethodGet,
		Headers: map[string]string{"X-Api-Key": "k-123"}}); err != nil {
		t.Fatalf("call: %v", err)
	}
	h := <-got
	if h.Get("X-Api-Key") != "" || h.Get(HeaderRunID) != "r@1" {
		t.Errorf("the other host got X-Api-Key %q and %s %q; want none, and baton's run id", h.Get("X-Api-Key"), HeaderRunID, h.Get(HeaderRunID))
	}
}

// TestFailingAnswerBodyIsNotKept: a failing answer's body is not copied
// into the run's error (which the API returns and the logs keep) unless the
// target opts in, and then only a short excerpt with credentials redacted.
func TestFailingAnswerBodyIsNotKept(t *testing.T) {
	body := `{"error":"upstream said no","access_token":"ya29.a0AfH6SMBleak","debug":"Authorization: Bearer eyJhbGciOi.eyJzdWIiOi.sig"} ` + strings.Repeat("x", 2000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	allowed := []string{"127.0.0.1"}
	e := &Engine{cfg: Config{AllowedTargets: allowed}, http: guardClient(&http.Client{}, allowed, nil)}
	run := &schedule.Run{ID: "r@1", FireTime: time.Now()}
	_, err := e.callHTTP(context.Background(), run, &schedule.HTTPTarget{URL: srv.URL, Method: http.MethodPost})
	if err == nil || err.Error() != "http target answered 500 Internal Server Error" {
		t.Errorf("error without the opt-in: %v; want the status line only", err)
	}
	_, err = e.callHTTP(context.Background(), run, &schedule.HTTPTarget{URL: srv.URL, Method: http.MethodPost, ErrorExcerpt: true})
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	for _, leak := range []string{"ya29", "eyJ", "Bearer e"} {
		if strings.Contains(msg, leak) {
			t.Errorf("excerpt leaks %q: %s", leak, msg)
		}
	}
	if !strings.Contains(msg, "upstream said no") || !strings.Contains(msg, "[redacted]") || len(msg) > 300 {
		t.Errorf("excerpt %q (%d bytes): want the body's start, redacted, under 300 bytes", msg, len(msg))
	}
}
