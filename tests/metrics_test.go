package tests

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/stack"
)

// TestLocalMetrics is the metrics acceptance on the local stack: a
// schedule whose target answers 500 shows up in /metrics as failed runs,
// with a lateness histogram, ticks are counted, and the GPU gauges read the
// pool, all without a token (like /healthz).
func TestLocalMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: time.Second, GPUWorkers: 1})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	t.Cleanup(down.Close)
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", httpSchedule("flaky", "*/2 * * * * *", down.URL, "5s"), nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}

	failed := regexp.MustCompile(`(?m)^baton_runs_total\{schedule="flaky",source="scheduled",status="failed"\} (\d+)`)
	lateness := regexp.MustCompile(`(?m)^baton_run_start_lateness_seconds_count\{schedule="flaky",source="scheduled"\} (\d+)`)
	ticks := regexp.MustCompile(`(?m)^baton_ticks_total\{result="ok"\} (\d+)`)
	slots := regexp.MustCompile(`(?m)^baton_gpu_slots\{state="free"\} 1$`)
	queue := regexp.MustCompile(`(?m)^baton_gpu_queue_depth 0$`)
	count := func(re *regexp.Regexp, text string) int {
		m := re.FindStringSubmatch(text)
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	var text string
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(s.URL + "/metrics") // no token: open, like /healthz
		if err != nil {
			t.Fatalf("GET /metrics: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /metrics: %d %s", resp.StatusCode, body)
		}
		text = string(body)
		if count(failed, text) >= 2 && count(lateness, text) >= 2 && count(ticks, text) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s /metrics lacks two failed runs of flaky with their lateness, or two ok ticks:\n%s", text)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if !slots.MatchString(text) || !queue.MatchString(text) {
		t.Errorf("/metrics lacks the GPU gauges (one free slot, an empty queue):\n%s", text)
	}
}
