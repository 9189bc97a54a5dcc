package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/cost"
	"github.com/baton-cron/baton/shared/schedule"
)

// TestBenchCostShort runs `baton bench cost --short` end to end (make test
// runs it): every http run succeeds, the report prices every part and
// compares, and the last line carries usd_per_million_runs and the parts.
// It also holds the job lease's Cloud Storage writes per run to what the
// lease costs now (its acquire; the release marker is a Firestore
// document), so that a change that adds a Class A write per run fails
// here, not on the bill.
func TestBenchCostShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the local stack")
	}
	cmd := newBenchCostCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--short"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("bench cost: %v\n%s", err, out.String())
	}
	report := out.String()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^  Cloud Scheduler +2\.31 +3333\.33 `),
		regexp.MustCompile(`(?m)^  Temporal Cloud +100\.00 +100\.00 `),
		regexp.MustCompile(`(?m)^  total +[0-9.]+$`),
	} {
		if !want.MatchString(report) {
			t.Errorf("report has no line matching %s:\n%s", want, report)
		}
	}
	// Four schedules fire three (or, by the tick's phase, four) times
	// each, and every run succeeds.
	m := regexp.MustCompile(`(?m)^http: ([0-9]+) runs \(succeeded ([0-9]+)\), `).FindStringSubmatch(report)
	if m == nil || m[1] != m[2] || (m[1] != "12" && m[1] != "13" && m[1] != "14" && m[1] != "15" && m[1] != "16") {
		t.Errorf("want 12 to 16 http runs, all succeeded:\n%s", report)
	}
	// The headline's Firestore writes by collection: a run's insert,
	// claim and finish are two write units each (the finish under the
	// claim's epoch leaves the fence index alone: three units with it),
	// and the advance of a schedule whose create's change has left its
	// document is one (two with it). A write more, or a larger one, fails
	// here.
	httpAt := strings.Index(report, "\nhttp per run:")
	for coll, most := range map[string]float64{"runs": 6.5, "schedules": 1.5} {
		re := regexp.MustCompile(`(?m)^  ` + coll + ` +per run \(ticks included\): [0-9.]+ read units \([0-9.]+ queries\), ([0-9.]+) write units`)
		loc := re.FindStringSubmatchIndex(report[max(httpAt, 0):])
		if httpAt < 0 || loc == nil {
			t.Errorf("report has no %s line after the http phase's:\n%s", coll, report)
			continue
		}
		w, _ := strconv.ParseFloat(report[httpAt+loc[2]:httpAt+loc[3]], 64)
		if w > most {
			t.Errorf("http runs: %s write units per run %.2f; want at most %.1f", coll, w, most)
		}
	}
	// A job lease's release writes its marker without reading the lease
	// (lease.Options.ReleaseUnread), and its acquire knows the state its
	// own release left: a run reads no job_leases document. Before, the
	// release's read was one a run, and one a busy shard.
	re := regexp.MustCompile(`(?m)^  job_leases +per run \(ticks included\): ([0-9.]+) read units`)
	if loc := re.FindStringSubmatchIndex(report[max(httpAt, 0):]); httpAt < 0 || loc == nil {
		t.Errorf("report has no job_leases line after the http phase's:\n%s", report)
	} else if r, _ := strconv.ParseFloat(report[httpAt+loc[2]:httpAt+loc[3]], 64); r > 0.5 {
		t.Errorf("http runs: job_leases read units per run %.2f; want at most 0.5", r)
	}
	lines := strings.Split(strings.TrimSpace(report), "\n")
	last := lines[len(lines)-1]
	kv := map[string]float64{}
	for _, f := range strings.Fields(last) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			t.Fatalf("last line %q: %q is not key=value", last, f)
		}
		if k == "job_lease_store" {
			if v != "firestore" {
				t.Errorf("job_lease_store=%s; want firestore, Terraform's default", v)
			}
			continue
		}
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("last line %q: %s: %v", last, f, err)
		}
		kv[k] = n
	}
	var sum float64
	for _, p := range []string{"firestore_writes", "firestore_reads", "firestore_storage", "firestore_ttl_deletes", "gcs_ops", "cloud_tasks", "compute", "logging"} {
		v, ok := kv["usd_"+p]
		// With the job leases in Firestore, Cloud Storage keeps only the
		// tick's lease: a share of a cent.
		if !ok || v <= 0 && p != "gcs_ops" {
			t.Errorf("last line has no positive usd_%s: %q", p, last)
		}
		sum += v
	}
	if total := kv["usd_per_million_runs"]; total <= 0 || total-sum > 0.011 || sum-total > 0.011 {
		t.Errorf("usd_per_million_runs=%.2f, the parts sum to %.2f: %q", total, sum, last)
	}
	for _, k := range []string{"usd_per_million_runs_c80", "usd_per_million_runs_cheapest", "usd_per_million_runs_lease_gcs"} {
		if _, ok := kv[k]; !ok {
			t.Errorf("last line has no %s: %q", k, last)
		}
	}
	// With the job leases in Firestore (the default) a run writes no
	// Cloud Storage object: what is left is a share of the tick's lease
	// (none, partitioned: the shard leases are in Firestore as well).
	if a := kv["classA_per_run"]; a > 0.2 {
		t.Errorf("classA_per_run=%.2f with the job leases in Firestore, want a share of the tick's only", a)
	}
	// With them in the bucket, the decider shards' leases are there too
	// (they follow the job leases): the short bench's four schedules are
	// each alone in their shard, so a run pays its shard's acquire too.
	if a := kv["classA_per_run_lease_gcs"]; a < 1.9 || a > 2.5 {
		t.Errorf("classA_per_run_lease_gcs=%.2f, want 2 (the job lease's acquire and its shard's) and a share of the tick's", a)
	}
	if g, f := kv["usd_per_million_runs_lease_gcs"], kv["usd_per_million_runs"]; g-f < 4 {
		t.Errorf("usd_per_million_runs_lease_gcs=%.2f, usd_per_million_runs=%.2f: the bucket's acquire ($5.00 per million, less the Firestore write it replaces) should be the difference", g, f)
	}
	if w := kv["writes_per_run"]; w <= 0 {
		t.Errorf("writes_per_run=%.2f, want the run's Firestore writes", w)
	}
}

// BenchmarkCostPerRun reports what one successful http run uses, per run,
// from the short bench: Firestore read and write units, Cloud Storage
// Class A and B operations, Cloud Tasks operations, billed instance
// seconds, log bytes and the USD per million runs at Terraform's defaults.
// A change that adds a write shows up in writes/run or classA/run. One
// iteration is a whole short bench (about ten seconds).
//
//	go test -run '^$' -bench CostPerRun -benchtime 1x ./cmd/baton/
func BenchmarkCostPerRun(b *testing.B) {
	o := defaultCostOptions()
	o.Schedules, o.Fires, o.Mix, o.CompareLeaseStore = 4, 3, false, false
	var pr cost.PerRun
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		rep, err := measureCost(ctx, o)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		pr = rep.http.perRun(settings{compute: o.Compute, retention: o.Retention}, rep.tick, o.PerTick)
	}
	b.ReportMetric(pr.ReadUnits, "reads/run")
	b.ReportMetric(pr.WriteUnits, "writes/run")
	b.ReportMetric(pr.ClassA, "classA/run")
	b.ReportMetric(pr.ClassB, "classB/run")
	b.ReportMetric(pr.TaskOps, "taskops/run")
	b.ReportMetric(pr.InstanceSeconds, "instance-s/run")
	b.ReportMetric(pr.LogBytes, "logB/run")
	b.ReportMetric(cost.Total(cost.Bill(pr, o.Compute)), "usd/1Mruns")
}

// TestBenchIDLength holds --id-length to what it promises: every padded
// id is exactly that long, distinct, and a valid schedule id, and a
// length no schedule id can have is refused before any stack starts.
func TestBenchIDLength(t *testing.T) {
	for _, n := range []int{0, 20, 40, maxScheduleID} {
		o := defaultCostOptions()
		o.IDLength = n
		seen := map[string]bool{}
		for i := range 120 {
			id := benchID(o, "cost-allow", i)
			if n > 0 && len(id) != n {
				t.Errorf("--id-length %d: %q is %d characters", n, id, len(id))
			}
			if !schedule.IDPattern.MatchString(id) {
				t.Errorf("--id-length %d: %q is not a valid schedule id", n, id)
			}
			if seen[id] {
				t.Errorf("--id-length %d: %q twice", n, id)
			}
			seen[id] = true
		}
	}
	cmd := newBenchCostCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--id-length", "64"})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "--id-length") {
		t.Fatalf("--id-length 64: err %v; want a usage error naming --id-length", err)
	}
}
