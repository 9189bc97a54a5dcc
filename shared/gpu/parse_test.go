package gpu_test

import (
	"strings"
	"testing"

	"github.com/baton-cron/baton/shared/gpu"
)

// TestParsePoolTypes: "URL=slots@type" and "URL@type" type a pool entry,
// an entry without one is untyped, String round-trips, and a malformed
// type is refused naming the entry.
func TestParsePoolTypes(t *testing.T) {
	p, err := gpu.ParsePool("https://a.run.app=2@nvidia-l4, https://b.run.app@nvidia-rtx-pro-6000, https://c.run.app=3")
	if err != nil {
		t.Fatal(err)
	}
	want := gpu.Pool{{URL: "https://a.run.app", Slots: 2, Type: "nvidia-l4"}, {URL: "https://b.run.app", Slots: 1, Type: "nvidia-rtx-pro-6000"}, {URL: "https://c.run.app", Slots: 3}}
	if len(p) != 3 || p[0] != want[0] || p[1] != want[1] || p[2] != want[2] {
		t.Fatalf("pool %+v; want %+v", p, want)
	}
	if got := p.String(); got != "https://a.run.app=2@nvidia-l4,https://b.run.app=1@nvidia-rtx-pro-6000,https://c.run.app=3" {
		t.Errorf("String() = %s", got)
	}
	if again, err := gpu.ParsePool(p.String()); err != nil || again.String() != p.String() {
		t.Errorf("round trip: %v, %v", again, err)
	}
	if !p.HasType("nvidia-l4") || p.HasType("nvidia-h100") || strings.Join(p.Types(), ",") != "nvidia-l4,nvidia-rtx-pro-6000" {
		t.Errorf("types %v", p.Types())
	}
	for _, bad := range []string{"https://a.run.app=2@", "https://a.run.app=2@NVIDIA L4", "https://a.run.app=x@nvidia-l4"} {
		if _, err := gpu.ParsePool(bad); err == nil || !strings.Contains(err.Error(), "https://a.run.app") {
			t.Errorf("ParsePool(%q) = %v; want an error naming the entry", bad, err)
		}
	}
}

// TestParseShares: "a=3,b=1" parses; a bad tenant, a value out of range,
// a duplicate or a missing "=" is refused naming the variable.
func TestParseShares(t *testing.T) {
	m, err := gpu.ParseShares("BATON_GPU_WEIGHTS", " research=3, batch=1 ,", gpu.MaxWeight)
	if err != nil || len(m) != 2 || m["research"] != 3 || m["batch"] != 1 {
		t.Fatalf("ParseShares = %v, %v", m, err)
	}
	if m, err := gpu.ParseShares("BATON_GPU_WEIGHTS", "", gpu.MaxWeight); err != nil || len(m) != 0 {
		t.Errorf("empty = %v, %v; want an empty map", m, err)
	}
	for _, bad := range []string{"a=0", "a=1001", "a=x", "a", "a b=1", "a=1,a=2", "=1"} {
		if _, err := gpu.ParseShares("BATON_GPU_WEIGHTS", bad, gpu.MaxWeight); err == nil || !strings.Contains(err.Error(), "BATON_GPU_WEIGHTS") {
			t.Errorf("ParseShares(%q) = %v; want an error naming BATON_GPU_WEIGHTS", bad, err)
		}
	}
}
