package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/stack"
	"github.com/baton-cron/baton/shared/config"
)

// TestLocalGPUTenants drives the local stack's GPU function with tenants,
// end to end: BATON_GPU_WEIGHTS and BATON_GPU_QUOTAS reach its dispatcher,
// GET /gpu/pool reports each tenant's weight and quota, a tenant with a
// quota of 1 never holds two of the 2 local workers while the other
// tenant's jobs wait, GET /gpu/jobs?tenant= filters, and a gpuType the
// (untyped) local pool lacks is a 400 naming gpuType.
func TestLocalGPUTenants(t *testing.T) {
	t.Setenv(config.EnvGPUWeights, "research=3")
	t.Setenv(config.EnvGPUQuotas, "batch=1")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: -1, GPUWorkers: 2})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	defer func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	do := func(method, path, body string, out any) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, s.URL+"/GPU"+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+s.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		if out != nil {
			_ = json.NewDecoder(resp.Body).Decode(out)
		}
		return resp.StatusCode
	}
	var e struct {
		Error struct{ Field string } `json:"error"`
	}
	if code := do("POST", "/gpu/jobs", `{"payload":"true","gpuType":"nvidia-l4"}`, &e); code != 400 || e.Error.Field != "gpuType" {
		t.Errorf("enqueue with a type the pool lacks: HTTP %d naming %q; want 400 naming gpuType", code, e.Error.Field)
	}
	type pool struct {
		Tenants []struct {
			Tenant                 string
			Running, Weight, Quota int
		}
	}
	var ids []string
	for i, ten := range []string{"batch", "batch", "batch", "research"} {
		var j struct{ ID string }
		body := `{"payload":"sleep 0.4","tenant":"` + ten + `","id":"` + ten + `-` + string(rune('0'+i)) + `"}`
		if code := do("POST", "/gpu/jobs", body, &j); code/100 != 2 {
			t.Fatalf("enqueue %s: HTTP %d", body, code)
		}
		ids = append(ids, j.ID)
	}
	for _, id := range ids {
		for {
			var p pool
			if do("GET", "/gpu/pool", "", &p) == 200 {
				for _, tv := range p.Tenants {
					if tv.Tenant == "batch" && tv.Running > 1 {
						t.Errorf("batch holds %d slots; its quota is 1", tv.Running)
					}
				}
			}
			var j struct{ Status string }
			do("GET", "/gpu/jobs/"+id, "", &j)
			if j.Status == "succeeded" {
				break
			}
			if ctx.Err() != nil || j.Status == "failed" || j.Status == "dead" {
				t.Fatalf("job %s: %s (%v)", id, j.Status, ctx.Err())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	var p pool
	do("GET", "/gpu/pool", "", &p)
	got := map[string][2]int{}
	for _, tv := range p.Tenants {
		got[tv.Tenant] = [2]int{tv.Weight, tv.Quota}
	}
	if got["research"] != [2]int{3, 0} || got["batch"] != [2]int{1, 1} {
		t.Errorf("pool tenants (weight, quota) = %v; want research (3, none) and batch (1, 1)", got)
	}
	var page struct{ Jobs []struct{ ID, Tenant string } }
	if code := do("GET", "/gpu/jobs?tenant=batch", "", &page); code != 200 || len(page.Jobs) != 3 {
		t.Errorf("list ?tenant=batch: HTTP %d, %d jobs; want 3", code, len(page.Jobs))
	}
	for _, j := range page.Jobs {
		if j.Tenant != "batch" {
			t.Errorf("list ?tenant=batch returned %s of %s", j.ID, j.Tenant)
		}
	}
	if code := do("GET", "/gpu/jobs?tenant=no%20spaces", "", &e); code != 400 || e.Error.Field != "tenant" {
		t.Errorf("list ?tenant='no spaces': HTTP %d naming %q; want 400 naming tenant", code, e.Error.Field)
	}
}
