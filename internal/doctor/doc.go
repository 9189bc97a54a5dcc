// Package doctor checks that a baton deployment is fit to run: that the
// things Terraform (or `baton local`) should have made exist, are set up the
// way the code assumes, and are reachable. `baton doctor` prints its Report.
//
// # Cloud
//
// Cloud reads, and never changes:
//
//   - the Firestore database, through the Firestore admin API
//     (cloud.google.com/go/firestore/apiv1/admin): Enterprise edition, the
//     MongoDB-compatible data access mode on, the expected location, and
//     point-in-time recovery (off is a WARN: Terraform may choose it);
//   - every index the code declares (Needed: mongostore.SchedulerIndexes and
//     mongostore.GPUIndexes, the same list infra/terraform/firestore.tf declares),
//     present with the MongoDB-compatible API scope and READY. A CREATING
//     index fails too: until it is READY, its queries are billed scans;
//   - the change stream on schedules. The admin client this module pins has
//     no change stream API, so the check opens one through the MongoDB API
//     (as `baton daemon` does) when a connection string is given. A server
//     that refuses one is a WARN (the daemon polls); a connection that
//     fails, or no connection string, is a SKIP saying why;
//   - the bucket: uniform bucket-level access on (leases compare-and-swap
//     on generations and IAM is the only permission model), versioning off
//     (a deleted lease would otherwise linger as a noncurrent version), no
//     retention policy or default event-based hold (either stops leases
//     from being overwritten or deleted), and no lifecycle rule that could
//     delete objects under leases/;
//   - the Cloud Scheduler job that calls Tick: present, enabled, its last
//     attempt answered OK and no older than two intervals of its cron, a
//     POST to the Tick function with an OIDC token for it as Terraform's
//     scheduler account (a WARN when only the host prefix could be
//     compared).
//
// # Local
//
// Local checks what `baton local` starts: the MongoDB API emulator answers
// and holds every needed index (listed through the driver), the bucket
// exists in the GCS emulator, the Cloud Tasks emulator serves the queue, and
// the functions' /healthz answers 200.
//
// # Deep
//
// Deep (baton doctor --deep) proves a deployment by using it, with the
// settings the functions read, in scratch collections and objects
// (ScratchPrefix) that it removes on every path: a probe per store
// operation through the methods baton calls (every command shape baton
// sends; a refusal names the command, its operators and options), explain
// of the hot queries on the real collections (a TableScan fails, naming
// the index), 20 conditional writers racing on one document (one wins, the
// rest get ErrConflict), the p50 and p99 of a conditional write, and the
// bucket's create-if-absent, generation match, 412 and per-object rate
// answer. The last row states the run's cost, counted.
//
// Each Result names its check, and a failing one says what to do: the
// terraform or gcloud command that fixes it.
package doctor
