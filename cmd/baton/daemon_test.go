package main

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

type fakeDaemon struct {
	leading bool
	mode    string
}

func (f *fakeDaemon) Leading() bool     { return f.leading }
func (f *fakeDaemon) WatchMode() string { return f.mode }

// TestDaemonHealth: the listener Cloud Run needs answers GET /healthz with
// the daemon's live state as JSON, refuses other methods and paths, and
// stops when asked.
func TestDaemonHealth(t *testing.T) {
	t.Parallel()
	d := &fakeDaemon{}
	stop, addr, err := startHealth("127.0.0.1:0", d)
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + addr + "/healthz"
	get := func() (int, map[string]any) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type = %q, want application/json", ct)
		}
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("body is not JSON: %v", err)
		}
		return resp.StatusCode, body
	}

	// A waiting daemon is healthy too.
	code, body := get()
	if code != 200 || body["status"] != "ok" || body["leading"] != false || body["watchMode"] != "" {
		t.Errorf("waiting: %d %v, want 200 {status:ok leading:false watchMode:\"\"}", code, body)
	}
	d.leading, d.mode = true, "poll"
	code, body = get()
	if code != 200 || body["leading"] != true || body["watchMode"] != "poll" {
		t.Errorf("leading: %d %v, want 200 {leading:true watchMode:poll}", code, body)
	}

	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{http.MethodPost, "/healthz", http.StatusMethodNotAllowed},
		{http.MethodGet, "/", http.StatusNotFound},
	} {
		req, _ := http.NewRequest(tc.method, "http://"+addr+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s = %d, want %d", tc.method, tc.path, resp.StatusCode, tc.want)
		}
	}

	stop()
	if resp, err := http.Get(url); err == nil {
		resp.Body.Close()
		t.Error("GET after stop succeeded; want the listener closed")
	}
}

// TestDaemonHealthBadPort: a port that cannot be bound fails at start.
func TestDaemonHealthBadPort(t *testing.T) {
	t.Parallel()
	if _, _, err := startHealth("127.0.0.1:notaport", &fakeDaemon{}); err == nil {
		t.Fatal("startHealth on a bad port succeeded")
	}
}
