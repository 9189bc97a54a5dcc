package mongostore

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/schedule"
)

// Collection names of the GPU queue. (The schedule and run collections are
// named in shared/schedule, which the HTTP surface shares.)
const (
	// GPUJobsCollection holds the GPU jobs.
	GPUJobsCollection = "gpu_jobs"
	// GPUSlotsCollection holds one document per GPU worker slot.
	GPUSlotsCollection = "gpu_slots"
)

// The indexes are the implementation's, because the queries that need them
// are: each one names the query it serves. Terraform declares the same ones
// as google_firestore_index resources (infra/terraform/firestore.tf), and
// tests hold the two lists equal. A key "_id" is the document id, and only
// ever an index's last key (tests/terraform_test.go): Terraform declares it
// as the field path var.index_id_field, by default __name__, the document
// name Google's admin API documents as every index's last field, and
// baton doctor matches either spelling. Locally the emulator speaks the
// MongoDB API, where the field is _id.

// SchedulerIndexes are the indexes the scheduler's and the catalog's queries
// need. EnsureIndexes them
// locally; Terraform declares the same ones.
var SchedulerIndexes = []Index{
	// The due query, one decider shard at a time: {vshard, enabled: true,
	// nextRunAt <= now} sorted by (nextRunAt, _id). A partition reads its
	// shards (DueInShard); the unpartitioned tick walks all of them and
	// the schedules without a shard (Due), and NextDue takes the earliest
	// of each shard's first. Led by vshard so that every shard's advances
	// (which all move nextRunAt to the same next minute) write their own
	// index range, not one hot one; there is no unsharded due index, which
	// would take every advance of a tick in one range.
	{Collection: schedule.SchedulesCollection, Name: "due_vshard", Keys: bson.D{{Key: "vshard", Value: 1}, {Key: "enabled", Value: 1}, {Key: "nextRunAt", Value: 1}, {Key: "_id", Value: 1}}},
	// The schedule list (catalog.List): keyset on _id alone. MongoDB
	// indexes _id by itself; Firestore with MongoDB compatibility does not
	// (it only keeps _id unique), and without this index every page is a
	// scan billed for every schedule. Here and locally, creating it is a
	// no-op over the built-in _id index.
	{Collection: schedule.SchedulesCollection, Name: "list", Keys: bson.D{{Key: "_id", Value: 1}}},
	// The schedule list by label (catalog.List with labelSelector):
	// labels is an array of "key=value" pairs (schedule.Labels), so one
	// multikey index serves equality on any label, keyset on _id.
	{Collection: schedule.SchedulesCollection, Name: "labels", Keys: bson.D{{Key: "labels", Value: 1}, {Key: "_id", Value: 1}}},
	// The daemon's edit poll: keyset on (updatedAt, _id).
	{Collection: schedule.SchedulesCollection, Name: "updated", Keys: bson.D{{Key: "updatedAt", Value: 1}, {Key: "_id", Value: 1}}},
	// Run history and the latest-run lookups, newest first; also the order
	// rule's StartedAfter (a range on fireTime within one schedule).
	{Collection: schedule.RunsCollection, Name: "history", Keys: bson.D{{Key: "scheduleId", Value: 1}, {Key: "fireTime", Value: -1}, {Key: "_id", Value: -1}}},
	// The runs list across schedules (catalog.ListAllRuns), newest first:
	// unfiltered, by status, by source, and a schedule's runs by status
	// (history_status also serves PendingOf, the failover's wake).
	// Each is the filter's equality fields, then the keyset order; a
	// filter on fireTime (since) is a range on the sort key, which each
	// serves. runIndexes maps the filters to these.
	//
	// all, by_status and by_source lead with the decider shard (vshard,
	// stamped on every run by Insert): every run a tick inserts has the
	// same fireTime, and an index on a time field that only grows takes
	// 500 writes a second in all
	// (https://cloud.google.com/firestore/docs/best-practices#high_read_write_and_delete_rates_to_a_narrow_document_range);
	// led by vshard, a minute's inserts write V ranges. The list, which
	// does not know the shard, merges the V+1 shards' pages
	// (catalog.ListAllRuns). The indexes led by scheduleId need no vshard:
	// one schedule's runs are a few a minute.
	{Collection: schedule.RunsCollection, Name: "all", Keys: bson.D{{Key: "vshard", Value: 1}, {Key: "fireTime", Value: -1}, {Key: "_id", Value: -1}}},
	{Collection: schedule.RunsCollection, Name: "by_status", Keys: bson.D{{Key: "vshard", Value: 1}, {Key: "status", Value: 1}, {Key: "fireTime", Value: -1}, {Key: "_id", Value: -1}}},
	{Collection: schedule.RunsCollection, Name: "by_source", Keys: bson.D{{Key: "vshard", Value: 1}, {Key: "source", Value: 1}, {Key: "fireTime", Value: -1}, {Key: "_id", Value: -1}}},
	{Collection: schedule.RunsCollection, Name: "history_status", Keys: bson.D{{Key: "scheduleId", Value: 1}, {Key: "status", Value: 1}, {Key: "fireTime", Value: -1}, {Key: "_id", Value: -1}}},
	// The sweeps (Runs.Stale): pending runs that are due or orphaned,
	// running runs whose heartbeat expired, one decider shard at a time.
	// sweepAt is when the sweeper should look at a run; every insert sets
	// it about a minute ahead, so it leads with vshard as the list's do,
	// and a partition reads its own shards' runs.
	{Collection: schedule.RunsCollection, Name: "sweep", Keys: bson.D{{Key: "vshard", Value: 1}, {Key: "status", Value: 1}, {Key: "sweepAt", Value: 1}}},
	// The recovery sweep's check for a live sibling: a running run decided
	// by the same tick (same createdAt) as a pending one.
	{Collection: schedule.RunsCollection, Name: "siblings", Keys: bson.D{{Key: "scheduleId", Value: 1}, {Key: "status", Value: 1}, {Key: "createdAt", Value: 1}, {Key: "sweepAt", Value: -1}}},
	// The job lease holder's look for retries that waited for it
	// (drainWaiting), oldest fire first.
	{Collection: schedule.RunsCollection, Name: "waiting", Keys: bson.D{{Key: "scheduleId", Value: 1}, {Key: "status", Value: 1}, {Key: "waiting", Value: 1}, {Key: "fireTime", Value: 1}}},
	// A concurrency group's line (OldestGroupWaiting): its waiting runs,
	// oldest fire first. Only waiting runs carry group and groupAt (their
	// fire time): the index is DENSE, and every other run is in it under
	// (null, status, null, _id), which a tick's inserts spread by run id;
	// ordered by fireTime, they would all write one time-ordered range.
	{Collection: schedule.RunsCollection, Name: "group_waiting", Keys: bson.D{{Key: "group", Value: 1}, {Key: "status", Value: 1}, {Key: "groupAt", Value: 1}, {Key: "_id", Value: 1}}},
	// The timed-pause sweep (PausedUntil): paused schedules whose pause is
	// over, oldest first. Only timed pauses carry pausedUntil.
	{Collection: schedule.SchedulesCollection, Name: "paused_until", Keys: bson.D{{Key: "enabled", Value: 1}, {Key: "pausedUntil", Value: 1}}},
	// The stranded-misfire sweep: schedules whose misfire flag is set,
	// paged by _id (a keyset that advances across sweeps, so that flagged
	// schedules the sweep leaves alone cannot head every page).
	{Collection: schedule.SchedulesCollection, Name: "misfire", Keys: bson.D{{Key: "misfire", Value: 1}, {Key: "_id", Value: 1}}},
	// EpochFloor: the highest fence a lease wrote, read when its object
	// is missing.
	{Collection: schedule.SchedulesCollection, Name: "fence", Keys: bson.D{{Key: "fence", Value: -1}}},
	{Collection: schedule.RunsCollection, Name: "fence", Keys: bson.D{{Key: "scheduleId", Value: 1}, {Key: "fence", Value: -1}}},
	// The notification sweep (PendingNotices): runs whose event is still
	// to be delivered, oldest first. Only runs with an event owed carry
	// notifyAt, so the read grows with pending events, not with runs.
	{Collection: schedule.RunsCollection, Name: "notify", Keys: bson.D{{Key: "notifyAt", Value: 1}}},
	// The calendar list (catalog.ListCalendars): keyset on _id alone, for
	// Firestore as the schedule list's. The tick reads calendars by _id
	// ($in), which needs no index of its own.
	{Collection: schedule.CalendarsCollection, Name: "list", Keys: bson.D{{Key: "_id", Value: 1}}},
	// The calendar list by label, as the schedules' "labels".
	{Collection: schedule.CalendarsCollection, Name: "labels", Keys: bson.D{{Key: "labels", Value: 1}, {Key: "_id", Value: 1}}},
	// Retention: the local sweep's delete of expired runs and change
	// records, oldest first (Firestore's TTL policy does it in the cloud).
	// Only finished runs carry expireAt.
	{Collection: schedule.RunsCollection, Name: "expire", Keys: bson.D{{Key: "expireAt", Value: 1}}},
	{Collection: schedule.VersionsCollection, Name: "expire", Keys: bson.D{{Key: "expireAt", Value: 1}}},
	// A schedule's history of changes, newest first (catalog.ListVersions),
	// and the per-schedule bound (PruneVersions).
	{Collection: schedule.VersionsCollection, Name: "history", Keys: bson.D{{Key: "scheduleId", Value: 1}, {Key: "_id", Value: -1}}},
}

// GPUIndexes are the indexes the GPU dispatcher's queries need.
var GPUIndexes = []Index{
	{Collection: GPUJobsCollection, Name: "queue", Keys: bson.D{{Key: "status", Value: 1}, {Key: "priority", Value: -1}, {Key: "createdAt", Value: 1}, {Key: "_id", Value: 1}}},
	// The per-tenant head-of-queue skip scan (QueueHeads).
	{Collection: GPUJobsCollection, Name: "queue_tenant", Keys: bson.D{{Key: "status", Value: 1}, {Key: "gpuType", Value: 1}, {Key: "tenant", Value: 1}, {Key: "priority", Value: -1}, {Key: "createdAt", Value: 1}, {Key: "_id", Value: 1}}},
	// The last tenant with a queued job of a type, where that scan stops.
	{Collection: GPUJobsCollection, Name: "queue_tenant_last", Keys: bson.D{{Key: "status", Value: 1}, {Key: "gpuType", Value: 1}, {Key: "tenant", Value: -1}}},
	{Collection: GPUJobsCollection, Name: "leases", Keys: bson.D{{Key: "status", Value: 1}, {Key: "leaseUntil", Value: 1}}},
	{Collection: GPUJobsCollection, Name: "list", Keys: bson.D{{Key: "createdAt", Value: -1}, {Key: "_id", Value: -1}}},
	{Collection: GPUJobsCollection, Name: "list_status", Keys: bson.D{{Key: "status", Value: 1}, {Key: "createdAt", Value: -1}, {Key: "_id", Value: -1}}},
	// GET /gpu/jobs?tenant=, with and without status (and the pool
	// view's per-tenant queued count).
	{Collection: GPUJobsCollection, Name: "list_tenant", Keys: bson.D{{Key: "tenant", Value: 1}, {Key: "createdAt", Value: -1}, {Key: "_id", Value: -1}}},
	{Collection: GPUJobsCollection, Name: "list_status_tenant", Keys: bson.D{{Key: "status", Value: 1}, {Key: "tenant", Value: 1}, {Key: "createdAt", Value: -1}, {Key: "_id", Value: -1}}},
	// The running preemptible jobs, cheapest to preempt first
	// (RunningPreemptible).
	{Collection: GPUJobsCollection, Name: "preemptible", Keys: bson.D{{Key: "status", Value: 1}, {Key: "preemptible", Value: 1}, {Key: "priority", Value: 1}, {Key: "startedAt", Value: -1}, {Key: "_id", Value: 1}}},
	{Collection: GPUSlotsCollection, Name: "claim", Keys: bson.D{{Key: "leaseUntil", Value: 1}, {Key: "_id", Value: 1}}},
}

// Indexes is every index baton's queries need: SchedulerIndexes, then
// GPUIndexes. EnsureIndexes them locally; `baton doctor` checks them in the
// cloud.
func Indexes() []Index {
	return append(append([]Index(nil), SchedulerIndexes...), GPUIndexes...)
}
