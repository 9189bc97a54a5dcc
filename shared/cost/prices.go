package cost

// Price is one published unit price.
type Price struct {
	// USD is the price of Per units.
	USD float64
	// Per is the number of units USD buys (1,000,000 for "per million").
	Per float64
	// Unit names what is counted.
	Unit string
	// Source is the page the price was read from, Read the date.
	Source, Read string
}

// Each is the price of one unit.
func (p Price) Each() float64 { return p.USD / p.Per }

// PricesRead is when the prices below were read (the date docs/cost.md
// and the README quote).
const PricesRead = "2026-12-03"

// The prices.
var (
	// FirestoreRead: Firestore Enterprise edition (which serves the
	// MongoDB compatible API), read units of 4 KiB.
	FirestoreRead = Price{USD: 0.05, Per: 1e6, Unit: "read unit (4 KiB)",
		Source: "https://cloud.google.com/firestore/enterprise/pricing", Read: PricesRead}
	// FirestoreWrite: write units of 1 KiB, index entries included;
	// deletes are write units too.
	FirestoreWrite = Price{USD: 0.26, Per: 1e6, Unit: "write unit (1 KiB)",
		Source: "https://cloud.google.com/firestore/enterprise/pricing", Read: PricesRead}
	// FirestoreStorage: stored data, documents and index entries.
	FirestoreStorage = Price{USD: 0.0002, Per: 1, Unit: "GiB-hour",
		Source: "https://cloud.google.com/firestore/enterprise/pricing", Read: PricesRead}
	// GCSClassA: Standard storage, regional: object writes, lists,
	// metadata updates.
	GCSClassA = Price{USD: 0.005, Per: 1000, Unit: "Class A operation",
		Source: "https://cloud.google.com/storage/pricing#operations-pricing", Read: PricesRead}
	// GCSClassB: object and metadata reads. Deletes are free.
	GCSClassB = Price{USD: 0.0004, Per: 1000, Unit: "Class B operation",
		Source: "https://cloud.google.com/storage/pricing#operations-pricing", Read: PricesRead}
	// TasksOp: Cloud Tasks operations (an API call or a push delivery
	// attempt, per 32 KiB chunk), beyond the first million a month.
	TasksOp = Price{USD: 0.40, Per: 1e6, Unit: "operation",
		Source: "https://cloud.google.com/tasks/pricing", Read: PricesRead}
	// RunVCPU: Cloud Run (Cloud Run functions gen2), CPU allocated only
	// during requests, Tier 1; billed time is rounded up to 100 ms.
	RunVCPU = Price{USD: 0.000024, Per: 1, Unit: "vCPU-second",
		Source: "https://cloud.google.com/run/pricing", Read: PricesRead}
	// RunMemory: the same, memory.
	RunMemory = Price{USD: 0.0000025, Per: 1, Unit: "GiB-second",
		Source: "https://cloud.google.com/run/pricing", Read: PricesRead}
	// RunRequest: the same, requests.
	RunRequest = Price{USD: 0.40, Per: 1e6, Unit: "request",
		Source: "https://cloud.google.com/run/pricing", Read: PricesRead}
	// LoggingIngest: Cloud Logging ingestion beyond 50 GiB a project a
	// month.
	LoggingIngest = Price{USD: 0.50, Per: 1, Unit: "GiB ingested",
		Source: "https://cloud.google.com/stackdriver/pricing", Read: PricesRead}
	// SchedulerJob: Cloud Scheduler, a job a month (3 free a billing
	// account).
	SchedulerJob = Price{USD: 0.10, Per: 1, Unit: "job-month",
		Source: "https://cloud.google.com/scheduler/pricing", Read: PricesRead}
	// EventBridgeInvocation: Amazon EventBridge Scheduler, invocations
	// beyond 14 million a month; the target is extra.
	EventBridgeInvocation = Price{USD: 1.00, Per: 1e6, Unit: "invocation",
		Source: "https://aws.amazon.com/eventbridge/pricing/", Read: PricesRead}
	// TemporalAction: Temporal Cloud, actions, the first tier ($25 per
	// million; $50 at the smallest commitment).
	TemporalAction = Price{USD: 25, Per: 1e6, Unit: "action",
		Source: "https://temporal.io/pricing", Read: PricesRead}
)

// TemporalActionsPerRun is the actions one scheduled workflow run takes on
// Temporal Cloud: the schedule's start, the workflow start, one activity
// and its completion (https://docs.temporal.io/cloud/actions).
const TemporalActionsPerRun = 4

// Compute is the shape of the Run function's instances. Its defaults are
// Terraform's (infra/terraform/variables.tf: run_cpu, run_memory,
// run_concurrency); TestDefaultComputeIsTerraforms keeps them in step.
type Compute struct {
	// VCPU and MemoryGiB are one instance's allocation.
	VCPU, MemoryGiB float64
	// Concurrency is how many requests one instance serves at once.
	Concurrency int
}

// DefaultCompute is the Terraform default of the Run function.
var DefaultCompute = Compute{VCPU: 1, MemoryGiB: 1, Concurrency: 80}

// SecondsPerMonth is a 30-day month, for per-month prices.
const SecondsPerMonth = 30 * 24 * 3600

// MinutesPerMonth and DaysPerMonth: fires of an every-minute and a daily
// schedule in a 30-day month.
const (
	MinutesPerMonth = 30 * 24 * 60
	DaysPerMonth    = 30
)
