package cost_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/baton-cron/baton/shared/cost"
)

// TestDefaultComputeIsTerraforms: the bench prices a run at the Run
// function's Terraform defaults, so DefaultCompute must be those defaults;
// a change to either side fails here until the other follows.
func TestDefaultComputeIsTerraforms(t *testing.T) {
	raw, err := os.ReadFile("../../infra/terraform/variables.tf")
	if err != nil {
		t.Fatal(err)
	}
	def := func(name string) string {
		t.Helper()
		m := regexp.MustCompile(`(?s)variable "` + name + `" \{.*?\n  default\s*=\s*"?([^"\n]+)"?\n`).FindSubmatch(raw)
		if m == nil {
			t.Fatalf("variables.tf has no default for %s", name)
		}
		return strings.TrimSpace(string(m[1]))
	}
	cpu, err := strconv.ParseFloat(def("run_cpu"), 64)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := strconv.ParseFloat(strings.TrimSuffix(def("run_memory"), "Gi"), 64)
	if err != nil {
		t.Fatalf("run_memory %q: want NGi: %v", def("run_memory"), err)
	}
	conc, err := strconv.Atoi(def("run_concurrency"))
	if err != nil {
		t.Fatal(err)
	}
	want := cost.Compute{VCPU: cpu, MemoryGiB: mem, Concurrency: conc}
	if cost.DefaultCompute != want {
		t.Errorf("cost.DefaultCompute = %+v; Terraform's defaults are %+v", cost.DefaultCompute, want)
	}
}
