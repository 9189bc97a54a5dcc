# One service account per deployable, each granted only what it uses.
# Storage roles are on the bucket and invoker grants on the exact Cloud Run
# service. The only project-level grants are roles/datastore.user, which IAM
# only grants at project level (a condition narrows it to baton's database),
# and the build account's roles/cloudbuild.builds.builder.

resource "google_service_account" "function" {
  for_each = local.functions

  project      = var.project
  account_id   = each.value.name
  display_name = "baton ${each.key} function runtime"
  depends_on   = [google_project_service.api]
}

resource "google_service_account" "scheduler" {
  project      = var.project
  account_id   = "baton-scheduler"
  display_name = "baton Cloud Scheduler invoker of Tick"
  depends_on   = [google_project_service.api]
}

resource "google_service_account" "gpu_worker" {
  project      = var.project
  account_id   = "baton-gpu-worker"
  display_name = "baton GPU worker (Cloud Run)"
  depends_on   = [google_project_service.api]
}

# Cloud Build runs the function builds as this account instead of the
# default compute account, which new organisations no longer grant Editor.
resource "google_service_account" "build" {
  project      = var.project
  account_id   = "baton-build"
  display_name = "baton function builds"
  depends_on   = [google_project_service.api]
}

resource "google_project_iam_member" "build" {
  project = var.project
  role    = "roles/cloudbuild.builds.builder"
  member  = google_service_account.build.member
}

resource "google_storage_bucket_iam_member" "build_source" {
  bucket = google_storage_bucket.baton.name
  role   = "roles/storage.objectViewer"
  member = google_service_account.build.member
}

locals {
  # Which function reads which resource (see local.functions[*].env).
  db_functions     = toset([for k, f in local.functions : k if contains(keys(f.env), "BATON_MONGO_URI")])
  bucket_functions = toset([for k, f in local.functions : k if contains(keys(f.env), "BATON_BUCKET")])
  pool_functions   = toset([for k, f in local.functions : k if contains(keys(f.env), "BATON_GPU_POOL")])
}

resource "google_project_iam_member" "function_datastore" {
  for_each = local.db_functions

  project = var.project
  role    = "roles/datastore.user"
  member  = google_service_account.function[each.key].member

  condition {
    title      = "baton database only"
    expression = "resource.name == \"projects/${var.project}/databases/${var.database_name}\""
  }
}

resource "google_storage_bucket_iam_member" "function_bucket" {
  for_each = local.bucket_functions

  bucket = google_storage_bucket.baton.name
  role   = "roles/storage.objectUser"
  member = google_service_account.function[each.key].member
}

resource "google_storage_bucket_iam_member" "worker_bucket" {
  bucket = google_storage_bucket.baton.name
  role   = "roles/storage.objectUser"
  member = google_service_account.gpu_worker.member
}

# Every function told the pool dispatches jobs to the worker with an ID token.
resource "google_cloud_run_v2_service_iam_member" "worker_invoker" {
  for_each = local.pool_functions

  project  = var.project
  location = var.region
  name     = google_cloud_run_v2_service.gpu_worker.name
  role     = "roles/run.invoker"
  member   = google_service_account.function[each.key].member
}

# Who may call each function: the scheduler calls Tick, the worker calls GPU
# back, operators call Schedules and GPU, and Cloud Tasks calls Run as
# baton-tasks. Nobody else calls Run, operators included: a run must go
# through the queue, where it is named after the run and so deduplicated.
locals {
  function_invokers = merge(
    { "Tick/scheduler" = { fn = "Tick", member = google_service_account.scheduler.member } },
    { "GPU/worker" = { fn = "GPU", member = google_service_account.gpu_worker.member } },
    { "Run/tasks" = { fn = "Run", member = google_service_account.tasks.member } },
    { for m in var.operator_members : "Schedules/${m}" => { fn = "Schedules", member = m } },
    { for m in var.operator_members : "GPU/${m}" => { fn = "GPU", member = m } },
    # Rent kept private (rent_public = false): the operators may call it.
    var.rent_public ? {} : { for m in var.operator_members : "Rent/${m}" => { fn = "Rent", member = m } },
  )
}

resource "google_cloud_run_v2_service_iam_member" "function_invoker" {
  for_each = local.function_invokers

  project  = var.project
  location = var.region
  # A gen2 function is served by the Cloud Run service named here; run.invoker
  # on it is what authorises a call.
  name   = google_cloudfunctions2_function.fn[each.value.fn].service_config[0].service
  role   = "roles/run.invoker"
  member = each.value.member
}

# Rent is the only public endpoint: a calculator with no data behind it.
# An organisation with domain-restricted sharing
# (constraints/iam.allowedPolicyMemberDomains) refuses allUsers, and the
# apply would stop half done: set rent_public = false there.
resource "google_cloud_run_v2_service_iam_member" "rent_public" {
  count = var.rent_public ? 1 : 0

  project  = var.project
  location = var.region
  name     = google_cloudfunctions2_function.fn["Rent"].service_config[0].service
  role     = "roles/run.invoker"
  member   = "allUsers"
}
