# Firestore Enterprise edition with the MongoDB-compatible API turned on.
resource "google_firestore_database" "baton" {
  project                             = var.project
  name                                = var.database_name
  location_id                         = local.firestore_location
  type                                = "FIRESTORE_NATIVE"
  database_edition                    = "ENTERPRISE"
  mongodb_compatible_data_access_mode = "DATA_ACCESS_MODE_ENABLED"
  delete_protection_state             = var.deletion_protection ? "DELETE_PROTECTION_ENABLED" : "DELETE_PROTECTION_DISABLED"
  point_in_time_recovery_enablement   = var.point_in_time_recovery ? "POINT_IN_TIME_RECOVERY_ENABLED" : "POINT_IN_TIME_RECOVERY_DISABLED"
  # Provider 8 abandons a database on destroy unless told to delete it.
  deletion_policy = var.deletion_protection ? "ABANDON" : "DELETE"

  depends_on = [terraform_data.apis_ready]
}

locals {
  # The indexes baton's queries need: exactly the mongostore.Index values the code
  # declares (mongostore.SchedulerIndexes, mongostore.GPUIndexes), which
  # tests/terraform_test.go compares with this list, in the code's own
  # spelling: `_id` stands for the document's id. In the Enterprise edition a
  # query without its index still runs, as a scan billed for every document
  # it reads, and no index exists until one is declared, not even on `_id`:
  #
  #   "Cloud Firestore with MongoDB compatibility does not automatically
  #   create an index on _id, but it ensures values of _id are unique within
  #   a collection."
  #   https://firebase.google.com/docs/firestore/enterprise/behavior-differences#indexes
  #
  # 22 of these name `_id`, always as the last field: the whole key of the
  # schedule and calendar lists, the keyset order or its tie-breaker in the
  # other 20. The resource
  # below declares it as var.index_id_field, by default `__name__`, the field
  # path the admin API documents for the document name, from which Firestore
  # computes `_id` (Query Explain: `$__id__1: _id($__key__)`):
  #
  #   "The last field entry is always for the field path __name__. If, on
  #   creation, __name__ was not specified as the last field, it will be added
  #   automatically with the same direction as that of the last field
  #   defined."
  #   https://firebase.google.com/docs/firestore/reference/rest/v1/projects.databases.collectionGroups.indexes
  #
  # No Google page shows `_id` as a field_path of google_firestore_index; an
  # operator whose apply refuses `__name__` sets index_id_field = "_id" (the
  # name the MongoDB API's createIndex uses). baton doctor matches either.
  #
  # Equality lookups by `_id` alone (a run, a GPU job or slot, a schedule
  # version, read or written by its id) have no index here: `_id` is the
  # document's own key, and Firestore reads a document by key from primary
  # storage, as its $lookup does. Query Explain's reference has the nodes:
  # "LookupById: Performs a join by looking up documents in a foreign
  # collection by their ID"; "Values: ... Used primarily when a set list of
  # documents is provided as the input to a query"; "TableAccess: Back-joins
  # the supplied row's identifier to the actual row contents from primary
  # storage"
  # (https://firebase.google.com/docs/firestore/enterprise/query-explain-reference).
  # Google does not state it for find({_id: x}) in as many words; an explain
  # of such a lookup on the real database settles it.
  firestore_indexes = [
    # scheduler: due schedules, one decider shard (vshard) at a time, keyset on (nextRunAt, _id): a partition reads its shards,
    # the unpartitioned tick walks them all. No unsharded due index: it would take every advance of a tick in one range.
    { collection = "schedules", fields = [{ path = "vshard", order = "ASCENDING" }, { path = "enabled", order = "ASCENDING" }, { path = "nextRunAt", order = "ASCENDING" }, { path = "_id", order = "ASCENDING" }] },
    # catalog.List: the schedule list, keyset on _id alone.
    { collection = "schedules", fields = [{ path = "_id", order = "ASCENDING" }] },
    # catalog.List with labelSelector: labels is an array of "key=value" pairs, keyset on _id.
    { collection = "schedules", fields = [{ path = "labels", order = "ASCENDING" }, { path = "_id", order = "ASCENDING" }] },
    # scheduler: the daemon's edit poll, keyset on (updatedAt, _id).
    { collection = "schedules", fields = [{ path = "updatedAt", order = "ASCENDING" }, { path = "_id", order = "ASCENDING" }] },
    # scheduler: run history of a schedule, newest first.
    { collection = "runs", fields = [{ path = "scheduleId", order = "ASCENDING" }, { path = "fireTime", order = "DESCENDING" }, { path = "_id", order = "DESCENDING" }] },
    # catalog.ListAllRuns: runs across schedules, newest first; unfiltered, by status, by source (each led by the
    # decider shard vshard, so that a minute's run inserts write V ranges, not one; the list merges the shards), a schedule's by status.
    { collection = "runs", fields = [{ path = "vshard", order = "ASCENDING" }, { path = "fireTime", order = "DESCENDING" }, { path = "_id", order = "DESCENDING" }] },
    { collection = "runs", fields = [{ path = "vshard", order = "ASCENDING" }, { path = "status", order = "ASCENDING" }, { path = "fireTime", order = "DESCENDING" }, { path = "_id", order = "DESCENDING" }] },
    { collection = "runs", fields = [{ path = "vshard", order = "ASCENDING" }, { path = "source", order = "ASCENDING" }, { path = "fireTime", order = "DESCENDING" }, { path = "_id", order = "DESCENDING" }] },
    { collection = "runs", fields = [{ path = "scheduleId", order = "ASCENDING" }, { path = "status", order = "ASCENDING" }, { path = "fireTime", order = "DESCENDING" }, { path = "_id", order = "DESCENDING" }] },
    # scheduler: the sweeps (pending runs due, running runs whose heartbeat expired), one decider shard at a time.
    { collection = "runs", fields = [{ path = "vshard", order = "ASCENDING" }, { path = "status", order = "ASCENDING" }, { path = "sweepAt", order = "ASCENDING" }] },
    # scheduler: the recovery sweep's check for a live sibling decided by the same tick.
    { collection = "runs", fields = [{ path = "scheduleId", order = "ASCENDING" }, { path = "status", order = "ASCENDING" }, { path = "createdAt", order = "ASCENDING" }, { path = "sweepAt", order = "DESCENDING" }] },
    # scheduler: the job lease holder's look for retries that waited for it, oldest fire first.
    { collection = "runs", fields = [{ path = "scheduleId", order = "ASCENDING" }, { path = "status", order = "ASCENDING" }, { path = "waiting", order = "ASCENDING" }, { path = "fireTime", order = "ASCENDING" }] },
    # scheduler: a concurrency group's line, oldest fire first (groupAt: only waiting runs carry it, so the other runs' entries are not time-ordered).
    { collection = "runs", fields = [{ path = "group", order = "ASCENDING" }, { path = "status", order = "ASCENDING" }, { path = "groupAt", order = "ASCENDING" }, { path = "_id", order = "ASCENDING" }] },
    # scheduler: the timed-pause sweep (paused schedules whose pausedUntil has come).
    { collection = "schedules", fields = [{ path = "enabled", order = "ASCENDING" }, { path = "pausedUntil", order = "ASCENDING" }] },
    # scheduler: the stranded-misfire sweep (misfire flag set, holder gone), paged by _id across sweeps.
    { collection = "schedules", fields = [{ path = "misfire", order = "ASCENDING" }, { path = "_id", order = "ASCENDING" }] },
    # scheduler: the highest fence a lease wrote, read when its lease object is missing (EpochFloor).
    { collection = "schedules", fields = [{ path = "fence", order = "DESCENDING" }] },
    { collection = "runs", fields = [{ path = "scheduleId", order = "ASCENDING" }, { path = "fence", order = "DESCENDING" }] },
    # scheduler: the notification sweep (runs with an event still to deliver, oldest first).
    { collection = "runs", fields = [{ path = "notifyAt", order = "ASCENDING" }] },
    # catalog: the calendar list, keyset on _id alone (as the schedule list).
    { collection = "calendars", fields = [{ path = "_id", order = "ASCENDING" }] },
    # catalog.ListCalendars with labelSelector, as the schedules'.
    { collection = "calendars", fields = [{ path = "labels", order = "ASCENDING" }, { path = "_id", order = "ASCENDING" }] },
    # retention: the local sweep's delete of expired runs and change records (the TTL policies below do it in the cloud).
    { collection = "runs", fields = [{ path = "expireAt", order = "ASCENDING" }] },
    { collection = "schedule_versions", fields = [{ path = "expireAt", order = "ASCENDING" }] },
    # catalog: a schedule's history of changes, newest first, and its per-schedule bound.
    { collection = "schedule_versions", fields = [{ path = "scheduleId", order = "ASCENDING" }, { path = "_id", order = "DESCENDING" }] },
    # gpu: the queue, best job first (priority, then age).
    { collection = "gpu_jobs", fields = [{ path = "status", order = "ASCENDING" }, { path = "priority", order = "DESCENDING" }, { path = "createdAt", order = "ASCENDING" }, { path = "_id", order = "ASCENDING" }] },
    # gpu: the per-tenant head of the queue, per GPU type (a skip scan).
    { collection = "gpu_jobs", fields = [{ path = "status", order = "ASCENDING" }, { path = "gpuType", order = "ASCENDING" }, { path = "tenant", order = "ASCENDING" }, { path = "priority", order = "DESCENDING" }, { path = "createdAt", order = "ASCENDING" }, { path = "_id", order = "ASCENDING" }] },
    # gpu: the last tenant with a queued job of a type, where that scan stops.
    { collection = "gpu_jobs", fields = [{ path = "status", order = "ASCENDING" }, { path = "gpuType", order = "ASCENDING" }, { path = "tenant", order = "DESCENDING" }] },
    # gpu: expired job leases.
    { collection = "gpu_jobs", fields = [{ path = "status", order = "ASCENDING" }, { path = "leaseUntil", order = "ASCENDING" }] },
    # gpu: job listing, newest first, with and without a status filter.
    { collection = "gpu_jobs", fields = [{ path = "createdAt", order = "DESCENDING" }, { path = "_id", order = "DESCENDING" }] },
    { collection = "gpu_jobs", fields = [{ path = "status", order = "ASCENDING" }, { path = "createdAt", order = "DESCENDING" }, { path = "_id", order = "DESCENDING" }] },
    # gpu: job listing by tenant, with and without a status filter.
    { collection = "gpu_jobs", fields = [{ path = "tenant", order = "ASCENDING" }, { path = "createdAt", order = "DESCENDING" }, { path = "_id", order = "DESCENDING" }] },
    { collection = "gpu_jobs", fields = [{ path = "status", order = "ASCENDING" }, { path = "tenant", order = "ASCENDING" }, { path = "createdAt", order = "DESCENDING" }, { path = "_id", order = "DESCENDING" }] },
    # gpu: the running preemptible jobs, cheapest to preempt first.
    { collection = "gpu_jobs", fields = [{ path = "status", order = "ASCENDING" }, { path = "preemptible", order = "ASCENDING" }, { path = "priority", order = "ASCENDING" }, { path = "startedAt", order = "DESCENDING" }, { path = "_id", order = "ASCENDING" }] },
    # gpu: claiming a free or expired slot.
    { collection = "gpu_slots", fields = [{ path = "leaseUntil", order = "ASCENDING" }, { path = "_id", order = "ASCENDING" }] },
  ]
}

resource "google_firestore_index" "baton" {
  # Keyed by the code's spelling, so that the addresses (which baton doctor
  # prints) stay the same whatever index_id_field says.
  for_each = { for ix in local.firestore_indexes : "${ix.collection}(${join(",", [for f in ix.fields : "${f.path} ${f.order}"])})" => ix }

  project     = var.project
  database    = google_firestore_database.baton.name
  collection  = each.value.collection
  api_scope   = "MONGODB_COMPATIBLE_API"
  query_scope = "COLLECTION_GROUP"
  # DENSE indexes documents that lack a field, as a MongoDB index does.
  density = "DENSE"

  dynamic "fields" {
    for_each = each.value.fields
    content {
      # The code's `_id` is declared as index_id_field (see above).
      field_path = fields.value.path == "_id" ? var.index_id_field : fields.value.path
      order      = fields.value.order
    }
  }
}

# The change stream that lets `baton daemon` watch schedule edits instead of
# polling for them (Firestore's change streams are a preview, created before
# any client can open one). Scoped to the schedules collection, the only one
# the daemon watches; a day of retention covers a daemon restart.
resource "google_firestore_change_stream" "schedules" {
  count = var.change_stream ? 1 : 0

  project          = var.project
  database         = google_firestore_database.baton.name
  name             = "baton-schedules"
  retention_period = "86400s"

  collection_group_scope {
    collection_group_id = "schedules"
  }
}

# Retention (history.keep, BATON_HISTORY_KEEP): every finished run and every
# change record carries expireAt, computed when it is written, and
# Firestore's TTL policy deletes the documents past it (within a day or so
# of the time; the API never depends on the exact moment). Runs that are
# not finished carry no expireAt and are never deleted.
resource "google_firestore_field" "runs_expire" {
  project    = var.project
  database   = google_firestore_database.baton.name
  collection = "runs"
  field      = "expireAt"

  ttl_config {}

  depends_on = [terraform_data.apis_ready]
}

resource "google_firestore_field" "versions_expire" {
  project    = var.project
  database   = google_firestore_database.baton.name
  collection = "schedule_versions"
  field      = "expireAt"

  ttl_config {}

  depends_on = [terraform_data.apis_ready]
}
