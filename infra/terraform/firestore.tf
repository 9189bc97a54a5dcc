# Firestore Enterprise edition with the MongoDB-compatible API turned on.
resource "google_firestore_database" "baton" {
  project                             = var.project
  name                                = var.database_name
  location_id                         = local.firestore_location
  type                                = "FIRESTORE_NATIVE"
  database_edition                    = "ENTERPRISE"
  mongodb_compatible_data_access_mode = "DATA_ACCESS_MODE_ENABLED"
  delete_protection_state             = var.deletion_protection ? "DELETE_PROTECTION_ENABLED" : "DELETE_PROTECTION_DISABLED"
  # Provider 8 abandons a database on destroy unless told to delete it.
  deletion_policy = var.deletion_protection ? "ABANDON" : "DELETE"

  depends_on = [google_project_service.api]
}

locals {
  # The indexes baton's queries need, in the order the code declares them
  # (store.Index values in shared/). Keep this list and the code in step:
  # a query without its index is refused by Firestore. `_id` is the
  # keyset tie-breaker; this was checked against the provider schema and
  # validate, not against a live database (there is no cloud access here):
  # if Firestore refuses `_id` as an index field, drop it, since Firestore
  # orders by the document name last anyway.
  firestore_indexes = [
    # Tick: due schedules, keyset by (nextRunAt, _id).
    { collection = "schedules", fields = [{ path = "enabled", order = "ASCENDING" }, { path = "nextRunAt", order = "ASCENDING" }, { path = "_id", order = "ASCENDING" }] },
    # Daemon fallback: changed schedules, polled by (updatedAt, _id).
    { collection = "schedules", fields = [{ path = "updatedAt", order = "ASCENDING" }, { path = "_id", order = "ASCENDING" }] },
    # Run history of a schedule, newest first.
    { collection = "runs", fields = [{ path = "scheduleId", order = "ASCENDING" }, { path = "fireTime", order = "DESCENDING" }, { path = "_id", order = "DESCENDING" }] },
    # Sweep: running runs whose heartbeat stopped.
    { collection = "runs", fields = [{ path = "status", order = "ASCENDING" }, { path = "heartbeatAt", order = "ASCENDING" }] },
    # Dispatch: best queued job (priority, then age).
    { collection = "gpu_jobs", fields = [{ path = "status", order = "ASCENDING" }, { path = "priority", order = "DESCENDING" }, { path = "createdAt", order = "ASCENDING" }, { path = "_id", order = "ASCENDING" }] },
    # Dispatch and sweep: free or expired slots.
    { collection = "gpu_slots", fields = [{ path = "leaseUntil", order = "ASCENDING" }] },
  ]
}

resource "google_firestore_index" "baton" {
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
      field_path = fields.value.path
      order      = fields.value.order
    }
  }
}
