package gpu_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-cron/baton/shared/gpu"
)

type apiAnswer struct {
	Status int
	Code   string
	Field  string
}

func (b *bundle) call(method, path, body string) (apiAnswer, []byte) {
	b.t.Helper()
	req, err := http.NewRequest(method, b.api.URL+path, strings.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct{ Code, Field string } `json:"error"`
	}
	_ = json.Unmarshal(raw, &e)
	return apiAnswer{Status: resp.StatusCode, Code: e.Error.Code, Field: e.Error.Field}, raw
}

// TestAPIErrors: bad input is a 400 naming the field, with nothing
// written; fences and missing jobs map to 409 and 404.
func TestAPIErrors(t *testing.T) {
	b := setup(t, setupOpts{workers: 0})
	b.enqueue(gpu.EnqueueRequest{ID: "held", Payload: "true"})
	big := strings.Repeat("x", gpu.MaxPayloadBytes+1)
	tests := []struct {
		name, method, path, body string
		want                     apiAnswer
	}{
		{"negative priority", "POST", "/gpu/jobs", `{"payload":"x","priority":-1}`, apiAnswer{400, "invalid_argument", "priority"}},
		{"payload over the limit", "POST", "/gpu/jobs", `{"payload":"` + big + `"}`, apiAnswer{400, "invalid_argument", "payload"}},
		{"unknown field", "POST", "/gpu/jobs", `{"payload":"x","gpus":2}`, apiAnswer{400, "invalid_argument", "gpus"}},
		{"duplicate field", "POST", "/gpu/jobs", `{"payload":"x","priority":1,"priority":900}`, apiAnswer{400, "invalid_argument", "priority"}},
		{"wrong-case field", "POST", "/gpu/jobs", `{"Payload":"x"}`, apiAnswer{400, "invalid_argument", "Payload"}},
		{"duplicate fence field", "POST", "/gpu/jobs/held:complete", `{"slot":"x#0","epoch":7,"epoch":1,"exitCode":0}`, apiAnswer{400, "invalid_argument", "epoch"}},
		{"bad timeout", "POST", "/gpu/jobs", `{"payload":"x","timeout":"5ms"}`, apiAnswer{400, "invalid_argument", "timeout"}},
		{"unparseable timeout", "POST", "/gpu/jobs", `{"payload":"x","timeout":"soon"}`, apiAnswer{400, "invalid_argument", "timeout"}},
		{"bad maxAttempts", "POST", "/gpu/jobs", `{"payload":"x","maxAttempts":-3}`, apiAnswer{400, "invalid_argument", "maxAttempts"}},
		{"preemptible not a bool", "POST", "/gpu/jobs", `{"payload":"x","preemptible":"yes"}`, apiAnswer{400, "invalid_argument", "preemptible"}},
		{"bad id", "POST", "/gpu/jobs", `{"id":"a:b","payload":"x"}`, apiAnswer{400, "invalid_argument", "id"}},
		{"bad status filter", "GET", "/gpu/jobs?status=done", "", apiAnswer{400, "invalid_argument", "status"}},
		{"bad page token", "GET", "/gpu/jobs?pageToken=zzz", "", apiAnswer{400, "invalid_argument", "pageToken"}},
		{"misspelt filter", "GET", "/gpu/jobs?state=queued", "", apiAnswer{400, "invalid_argument", "state"}},
		{"unknown logs parameter", "GET", "/gpu/jobs/held/logs?tail=10", "", apiAnswer{400, "invalid_argument", "tail"}},
		{"missing job", "GET", "/gpu/jobs/nope", "", apiAnswer{404, "not_found", ""}},
		{"heartbeat without slot", "POST", "/gpu/jobs/held:heartbeat", `{"epoch":1}`, apiAnswer{400, "invalid_argument", "slot"}},
		{"heartbeat stale fence", "POST", "/gpu/jobs/held:heartbeat", `{"slot":"x#0","epoch":7}`, apiAnswer{409, "conflict", ""}},
		{"complete stale fence", "POST", "/gpu/jobs/held:complete", `{"slot":"x#0","epoch":7,"exitCode":0}`, apiAnswer{409, "conflict", ""}},
		{"unknown action", "POST", "/gpu/jobs/held:explode", "", apiAnswer{404, "not_found", ""}},
		{"wrong method", "DELETE", "/gpu/jobs/held", "", apiAnswer{405, "method_not_allowed", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, raw := b.call(tt.method, tt.path, tt.body)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s %s (-want,+got):\n%s\nbody: %.300s", tt.method, tt.path, diff, raw)
			}
		})
	}
	jobs, _, err := b.d.List(b.ctx, gpu.ListQuery{})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("after bad requests there are %d jobs (%v), want only the one enqueued", len(jobs), err)
	}
	if j := b.job("held"); j.Status != gpu.StatusQueued {
		t.Errorf("stale callbacks changed the job to %s", j.Status)
	}
}

// TestAPIFlow enqueues over HTTP, pages the list with the cursor, cancels
// and reads the pool.
func TestAPIFlow(t *testing.T) {
	b := setup(t, setupOpts{workers: 0, extraPool: "http://127.0.0.1:1=2"})
	for i := 0; i < 5; i++ {
		ans, raw := b.call("POST", "/gpu/jobs", fmt.Sprintf(`{"id":"api-%d","payload":"true","priority":%d}`, i, i))
		if ans.Status != http.StatusCreated {
			t.Fatalf("enqueue %d: %d %s", i, ans.Status, raw)
		}
		b.clock.Advance(1e6)
	}
	if ans, _ := b.call("POST", "/gpu/jobs", `{"id":"api-0","payload":"true"}`); ans.Status != http.StatusOK {
		t.Errorf("re-enqueue of the same id: %d, want 200", ans.Status)
	}
	var seen []string
	token := ""
	for page := 0; ; page++ {
		ans, raw := b.call("GET", "/gpu/jobs?pageSize=2&status=queued&pageToken="+token, "")
		if ans.Status != http.StatusOK {
			t.Fatalf("list: %d %s", ans.Status, raw)
		}
		var out struct {
			Jobs          []gpu.Job `json:"jobs"`
			NextPageToken string    `json:"nextPageToken"`
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatal(err)
		}
		for _, j := range out.Jobs {
			seen = append(seen, j.ID)
		}
		if token = out.NextPageToken; token == "" || page > 5 {
			break
		}
	}
	if diff := cmp.Diff([]string{"api-4", "api-3", "api-2", "api-1", "api-0"}, seen); diff != "" {
		t.Errorf("listed, newest first (-want,+got):\n%s", diff)
	}
	if ans, raw := b.call("POST", "/gpu/jobs/api-2:cancel", ""); ans.Status != http.StatusOK || !strings.Contains(string(raw), `"cancelled"`) {
		t.Errorf("cancel: %d %s", ans.Status, raw)
	}
	if ans, _ := b.call("POST", "/gpu/jobs/api-2:cancel", ""); ans.Status != http.StatusConflict {
		t.Errorf("second cancel: %d, want 409", ans.Status)
	}
	ans, raw := b.call("GET", "/gpu/pool", "")
	var pool struct {
		Slots []gpu.SlotView `json:"slots"`
	}
	if err := json.Unmarshal(raw, &pool); err != nil || ans.Status != 200 || len(pool.Slots) != 2 {
		t.Fatalf("pool: %d %s", ans.Status, raw)
	}
	// The unreachable worker refused every dispatch, so its slots back off.
	for _, s := range pool.Slots {
		if s.Worker != "http://127.0.0.1:1" || s.JobID != "" {
			t.Errorf("slot %+v", s)
		}
	}
}

func TestParsePool(t *testing.T) {
	p, err := gpu.ParsePool(" http://a:1=2, https://b.run.app/ ,")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(gpu.Pool{{URL: "http://a:1", Slots: 2}, {URL: "https://b.run.app", Slots: 1}}, p); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
	for _, bad := range []string{"a=1", "http://a=0", "http://a=x", "http://a,http://a", "ftp://a=1"} {
		if _, err := gpu.ParsePool(bad); err == nil {
			t.Errorf("ParsePool(%q) succeeded, want an error", bad)
		}
	}
}

// TestStaleFenceAnswerHidesTheJob: a callback whose fence does not hold
// gets 409, and the answer says nothing of the job's state: not its
// status, nor the slot and epoch that hold it now. Workers cannot read
// jobs (GPUCallback serves no GET), and a stale or forged caller must not
// learn where the job runs. The state is in the server's log instead.
func TestStaleFenceAnswerHidesTheJob(t *testing.T) {
	b := setup(t, setupOpts{workers: 1})
	b.enqueue(gpu.EnqueueRequest{ID: "hidden", Payload: b.gate("hidden")})
	j := b.waitStatus("hidden", gpu.StatusRunning)
	t.Cleanup(func() { b.release("hidden") })
	if j.Slot == "" || j.Epoch < 1 {
		t.Fatalf("running job without a fence: %+v", j)
	}
	forged := fmt.Sprintf(`{"slot":"forged#0","epoch":%d}`, j.Epoch+41)
	for _, action := range []string{"heartbeat", "complete"} {
		ans, raw := b.call("POST", "/gpu/jobs/hidden:"+action, forged)
		if ans.Status != http.StatusConflict {
			t.Fatalf("%s with a forged fence: %d %s, want 409", action, ans.Status, raw)
		}
		body := string(raw)
		for _, leak := range []string{j.Slot, fmt.Sprintf("@%d", j.Epoch), string(gpu.StatusRunning)} {
			if strings.Contains(body, leak) {
				t.Errorf("%s: the 409 body tells the caller %q (the job's slot %s, epoch %d, status %s): %s", action, leak, j.Slot, j.Epoch, j.Status, body)
			}
		}
	}
}
