package cost

import (
	"math"
	"sort"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
)

// PerRun is what one run uses, measured: averages over the runs of a bench.
type PerRun struct {
	// ReadUnits and WriteUnits are Firestore's billing units.
	ReadUnits, WriteUnits float64
	// StoredBytes is what a run leaves in Firestore (its document and
	// index entries) for the retention; DeleteUnits the write units of
	// its deletion by the TTL policy at the retention's end.
	StoredBytes, DeleteUnits float64
	// Retention is how long the run is kept (history.keep; Terraform's
	// history_keep, 30 days by default).
	Retention time.Duration
	// ClassA and ClassB are Cloud Storage operations.
	ClassA, ClassB float64
	// TaskOps are Cloud Tasks operations (creates and deliveries).
	TaskOps float64
	// Requests are function invocations; InstanceSeconds the instance
	// time they were billed (Billed).
	Requests, InstanceSeconds float64
	// LogBytes is what the functions logged.
	LogBytes float64
}

// Part is one line of the bill.
type Part struct {
	// Name is short and stable (it is a key of the bench's last line).
	Name string
	// USDPerMillion is the cost of a million runs.
	USDPerMillion float64
}

// DefaultRetention is Terraform's history_keep default: finished runs are
// kept 30 days, then deleted by Firestore's TTL policy.
const DefaultRetention = schedule.DefaultKeep

// Bill prices p at compute c: the parts, in a fixed order.
func Bill(p PerRun, c Compute) []Part {
	m := 1e6
	hours := p.Retention.Hours()
	return []Part{
		{"firestore_writes", m * p.WriteUnits * FirestoreWrite.Each()},
		{"firestore_reads", m * p.ReadUnits * FirestoreRead.Each()},
		{"firestore_storage", m * p.StoredBytes / (1 << 30) * hours * FirestoreStorage.Each()},
		{"firestore_ttl_deletes", m * p.DeleteUnits * FirestoreWrite.Each()},
		{"gcs_ops", m * (p.ClassA*GCSClassA.Each() + p.ClassB*GCSClassB.Each())},
		{"cloud_tasks", m * p.TaskOps * TasksOp.Each()},
		{"compute", m * (p.InstanceSeconds*(c.VCPU*RunVCPU.Each()+c.MemoryGiB*RunMemory.Each()) + p.Requests*RunRequest.Each())},
		{"logging", m * p.LogBytes / (1 << 30) * LoggingIngest.Each()},
	}
}

// Total sums parts.
func Total(parts []Part) float64 {
	var t float64
	for _, p := range parts {
		t += p.USDPerMillion
	}
	return t
}

// Alternative is a managed scheduler priced per million runs.
type Alternative struct {
	Name string
	// EveryMinute and Daily are USD per million runs of one schedule
	// firing every minute and once a day.
	EveryMinute, Daily float64
	// Note says what is and is not included.
	Note string
}

// Alternatives prices the managed schedulers the way Bill prices baton.
func Alternatives() []Alternative {
	perJob := func(fires float64) float64 { return 1e6 / fires * SchedulerJob.Each() }
	ev := 1e6 * EventBridgeInvocation.Each()
	tp := 1e6 * TemporalActionsPerRun * TemporalAction.Each()
	return []Alternative{
		{"Cloud Scheduler", perJob(MinutesPerMonth), perJob(DaysPerMonth), "one job per schedule; the target's cost is extra; 5,000 jobs a region"},
		{"EventBridge Scheduler", ev, ev, "invocations only; the target (a Lambda, say) is extra"},
		{"Temporal Cloud", tp, tp, "4 actions a scheduled run; workers are extra"},
	}
}

// Interval is one request's time on an instance.
type Interval struct{ Start, End time.Time }

// Billed is the instance time Cloud Run bills for requests at a
// concurrency: one request at a time, each request's own time rounded up
// to 100 ms; more at a time, the requests that overlap share an instance,
// so the bill is the time any request was in flight (each busy stretch
// rounded up), but never less than the requests' time over the
// concurrency.
func Billed(reqs []Interval, concurrency int) time.Duration {
	if len(reqs) == 0 {
		return 0
	}
	round := func(d time.Duration) time.Duration {
		return time.Duration(math.Ceil(float64(d)/float64(100*time.Millisecond))) * 100 * time.Millisecond
	}
	var sum time.Duration
	for _, r := range reqs {
		sum += round(r.End.Sub(r.Start))
	}
	if concurrency <= 1 {
		return sum
	}
	s := append([]Interval(nil), reqs...)
	sort.Slice(s, func(i, j int) bool { return s[i].Start.Before(s[j].Start) })
	var union time.Duration
	cur := s[0]
	for _, r := range s[1:] {
		if r.Start.After(cur.End) {
			union += round(cur.End.Sub(cur.Start))
			cur = r
			continue
		}
		if r.End.After(cur.End) {
			cur.End = r.End
		}
	}
	union += round(cur.End.Sub(cur.Start))
	return max(union, sum/time.Duration(concurrency))
}
