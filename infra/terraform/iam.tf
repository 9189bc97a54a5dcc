# One service account per deployable, each granted only what it uses.
# Storage roles are on the bucket, each narrowed by an IAM condition to the
# one prefix its holder uses, and invoker grants are on the exact Cloud Run
# service. The only project-level grants are those that cannot be made
# lower: roles/datastore.user (IAM grants it only there; a condition narrows
# it to baton's database), the build account's roles/logging.logWriter
# (likewise) and its read of the Cloud Functions source bucket, which does
# not exist before the first deploy (a condition narrows it to that
# bucket), and the opt-in Cloud Tasks agent role (tasks.tf).

resource "google_service_account" "function" {
  for_each = local.functions

  project      = var.project
  account_id   = each.value.name
  display_name = "baton ${each.key} function runtime"
  depends_on   = [terraform_data.apis_ready]
}

resource "google_service_account" "scheduler" {
  project      = var.project
  account_id   = "baton-scheduler"
  display_name = "baton Cloud Scheduler invoker of Tick"
  depends_on   = [terraform_data.apis_ready]
}

resource "google_service_account" "gpu_worker" {
  project      = var.project
  account_id   = "baton-gpu-worker"
  display_name = "baton GPU worker (Cloud Run)"
  depends_on   = [terraform_data.apis_ready]
}

# Cloud Build runs the function builds as this account instead of the
# default compute account, which new organisations no longer grant Editor.
resource "google_service_account" "build" {
  project      = var.project
  account_id   = "baton-build"
  display_name = "baton function builds"
  depends_on   = [terraform_data.apis_ready]
}

# What a Cloud Functions gen2 build needs of its account (functions docs,
# "Custom service account for Cloud Build"), and nothing more: the Cloud
# Build role roles/cloudbuild.builds.builder it had before also writes to
# every bucket and repository of the project.
# - Build logs: roles/logging.logWriter, which IAM grants on the project.
resource "google_project_iam_member" "build_logs" {
  project = var.project
  role    = "roles/logging.logWriter"
  member  = google_service_account.build.member
}

# - The image: push to baton's own repository (build_config.docker_repository)
#   only, not to gcf-artifacts or any other repository.
resource "google_artifact_registry_repository_iam_member" "build_writer" {
  project    = var.project
  location   = google_artifact_registry_repository.functions.location
  repository = google_artifact_registry_repository.functions.name
  role       = "roles/artifactregistry.writer"
  member     = google_service_account.build.member
}

# - The source: Cloud Functions copies storage_source into its own bucket,
#   gcf-v2-sources-PROJECT_NUMBER-REGION, and the build's fetch step reads
#   it from there ("Access to bucket gcf-v2-sources-… denied. You must grant
#   Storage Object Viewer permission to <build account>" otherwise). That
#   bucket is created by the service on the first deploy, so the grant is
#   made on the project, before it exists, with a condition naming it.
resource "google_project_iam_member" "build_sources" {
  project = var.project
  role    = "roles/storage.objectViewer"
  member  = google_service_account.build.member

  condition {
    title      = "Cloud Functions source bucket only"
    expression = "resource.name.startsWith(\"projects/_/buckets/gcf-v2-sources-${data.google_project.this.number}-${var.region}/\")"
  }

  # Adding or changing a condition replaces the grant: create the new one
  # before removing the old, so the holder never goes without access
  # (docs/deploy.md, upgrading).
  lifecycle {
    create_before_destroy = true
  }
}

# - And read of the uploaded zip itself in baton's bucket, under source/
#   only: never the leases or the job output. The copy above is made by the
#   Cloud Functions service agent, so a build may never read the original;
#   this grant is kept for a build that does (one read of the zip), since it
#   could not be checked against a live project here.
resource "google_storage_bucket_iam_member" "build_source" {
  bucket = google_storage_bucket.baton.name
  role   = "roles/storage.objectViewer"
  member = google_service_account.build.member

  condition {
    title      = "function source only"
    expression = "resource.name.startsWith(\"projects/_/buckets/${google_storage_bucket.baton.name}/objects/${local.source_prefix}\")"
  }

  # Adding or changing a condition replaces the grant: create the new one
  # before removing the old, so the holder never goes without access
  # (docs/deploy.md, upgrading).
  lifecycle {
    create_before_destroy = true
  }
}

locals {
  # Which function reads which resource (see local.functions[*].env).
  db_functions = toset([for k, f in local.functions : k if contains(keys(f.env), "BATON_MONGO_URI")])
  # The functions given the bucket for leases; the output readers are given
  # it for outputs/ alone, read-only (output_reader below).
  bucket_functions = toset([for k, f in local.functions : k if contains(keys(f.env), "BATON_BUCKET") && !contains(local.output_readers, k)])
  # GET /gpu/jobs/{id}/logs: the operators' GPU function reads job output.
  output_readers = toset(["GPU"])
  # GET /leases: the Schedules function lists leases/.
  lease_listers  = toset(["Schedules"])
  pool_functions = toset([for k, f in local.functions : k if contains(keys(f.env), "BATON_GPU_POOL")])
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

  # Adding or changing a condition replaces the grant: create the new one
  # before removing the old, so the holder never goes without access
  # (docs/deploy.md, upgrading).
  lifecycle {
    create_before_destroy = true
  }
}

# Object access narrowed by IAM conditions on the object name, which Cloud
# Storage evaluates only on buckets with uniform bucket-level access (the
# bucket has it: storage.tf). Object names in a condition have the form
# projects/_/buckets/BUCKET/objects/NAME (IAM docs, resource attributes).
# storage.objects.list is checked against the bucket, never an object, so
# these grants do not allow listing (the lease code reads, writes and
# compares generations of named objects). The one list baton deploys is
# GET /leases on Schedules, granted apart (lease_list) on the list
# request's prefix. What each one touches:
# - the functions (Tick, Run, Schedules: the scheduler engine): leases/
#   (functions.LeasePrefix), read and overwritten under generation
#   preconditions, which needs get, create and delete: objectUser;
# - the GPU worker: outputs/<job>/<attempt>/stdout and stderr, which a
#   repeated dispatch of one attempt overwrites (create and delete);
# - the GPU function (GET /gpu/jobs/{id}/logs): outputs/, read only;
# - none may touch source/, the zip the functions are built from.
locals {
  lease_prefix  = "leases/"
  output_prefix = "outputs/"
  source_prefix = "source/"
}

resource "google_storage_bucket_iam_member" "function_bucket" {
  for_each = local.bucket_functions

  bucket = google_storage_bucket.baton.name
  role   = "roles/storage.objectUser"
  member = google_service_account.function[each.key].member

  condition {
    title      = "leases only"
    expression = "resource.name.startsWith(\"projects/_/buckets/${google_storage_bucket.baton.name}/objects/${local.lease_prefix}\")"
  }

  # Adding or changing a condition replaces the grant: create the new one
  # before removing the old, so the holder never goes without access
  # (docs/deploy.md, upgrading).
  lifecycle {
    create_before_destroy = true
  }
}

# Read-only access to the job output for the logs route: get of an object
# under outputs/ (objectViewer's list is checked on the bucket, which the
# condition does not match, so it lists nothing).
resource "google_storage_bucket_iam_member" "output_reader" {
  for_each = local.output_readers

  bucket = google_storage_bucket.baton.name
  role   = "roles/storage.objectViewer"
  member = google_service_account.function[each.key].member

  condition {
    title      = "job output only, read-only"
    expression = "resource.name.startsWith(\"projects/_/buckets/${google_storage_bucket.baton.name}/objects/${local.output_prefix}\")"
  }

  # Adding or changing a condition replaces the grant: create the new one
  # before removing the old, so the holder never goes without access
  # (docs/deploy.md, upgrading).
  lifecycle {
    create_before_destroy = true
  }
}

# GET /leases lists the lease objects, a page at a time. storage.objects.list
# is checked against the bucket, where resource.name names no object, so it
# is narrowed by the list request's own prefix instead (the API attribute
# storage.googleapis.com/objectListPrefix, "" for any other request): a list
# of leases/ only, and no object read (the other grant reads the leases).
resource "google_storage_bucket_iam_member" "lease_list" {
  for_each = local.lease_listers

  bucket = google_storage_bucket.baton.name
  role   = "roles/storage.objectViewer"
  member = google_service_account.function[each.key].member

  condition {
    title      = "list leases/ only"
    expression = "api.getAttribute(\"storage.googleapis.com/objectListPrefix\", \"\").startsWith(\"${local.lease_prefix}\")"
  }

  # Adding or changing a condition replaces the grant: create the new one
  # before removing the old, so the holder never goes without access
  # (docs/deploy.md, upgrading).
  lifecycle {
    create_before_destroy = true
  }
}

resource "google_storage_bucket_iam_member" "worker_bucket" {
  bucket = google_storage_bucket.baton.name
  role   = "roles/storage.objectUser"
  member = google_service_account.gpu_worker.member

  condition {
    title      = "job output only"
    expression = "resource.name.startsWith(\"projects/_/buckets/${google_storage_bucket.baton.name}/objects/${local.output_prefix}\")"
  }

  # Adding or changing a condition replaces the grant: create the new one
  # before removing the old, so the holder never goes without access
  # (docs/deploy.md, upgrading).
  lifecycle {
    create_before_destroy = true
  }
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

# The same on every gpu_worker_types service, one grant per function and
# type (the default service keeps worker_invoker, and its addresses).
resource "google_cloud_run_v2_service_iam_member" "worker_type_invoker" {
  for_each = { for p in setproduct(sort(local.pool_functions), sort(keys(var.gpu_worker_types))) : "${p[0]}/${p[1]}" => { fn = p[0], type = p[1] } }

  project  = var.project
  location = var.region
  name     = google_cloud_run_v2_service.gpu_worker_type[each.value.type].name
  role     = "roles/run.invoker"
  member   = google_service_account.function[each.value.fn].member
}

# Who may call each function: the scheduler calls Tick (and, partitioned,
# baton-tick-tasks calls it back with each partition), the worker calls
# GPUCallback (heartbeat and complete, the only routes it serves), operators
# call Schedules and GPU (which refuses the callback routes), and Cloud
# Tasks calls Run as baton-tasks. Nobody else calls Run, operators
# included: a run must go through the queue, where it is named after the
# run and so deduplicated. The worker holds invoker on GPUCallback only, so
# code running in a job cannot enqueue, cancel or list jobs, and nobody but
# the worker reaches the callbacks.
locals {
  function_invokers = merge(
    { "Tick/scheduler" = { fn = "Tick", member = google_service_account.scheduler.member } },
    { "GPUCallback/worker" = { fn = "GPUCallback", member = google_service_account.gpu_worker.member } },
    { "Run/tasks" = { fn = "Run", member = google_service_account.tasks.member } },
    # Partition tasks call Tick back as baton-tick-tasks (ticks.tf), which
    # invokes nothing else.
    local.tick_queue_count > 0 ? { "Tick/tick-tasks" = { fn = "Tick", member = google_service_account.tick_tasks[0].member } } : {},
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

# IAM changes take effect in seconds but may take minutes to reach every
# check (IAM docs, "Access change propagation"). The grants that a build or
# a starting service needs are made first, then this waits, then the
# functions are built and the daemon and the worker deployed: a build whose
# account cannot yet write the image fails, and a daemon that cannot yet
# read the database crash-loops. Grants that need the deployable itself
# (invoker on a function, the functions' invoker on the worker) cannot come
# before it; their first calls are retried (Cloud Tasks, the dispatcher, the
# scheduler job), except the worker's invoker on GPUCallback, which has its
# own wait (terraform_data.callback_invoker_ready, below). The same sleep as terraform_data.apis_ready (apis.tf says
# why it is not time_sleep); it runs again whenever one of these grants is
# replaced.
resource "terraform_data" "iam_ready" {
  count = var.propagation_wait_seconds > 0 ? 1 : 0 # none at 0: see apis_ready

  triggers_replace = concat(
    [
      google_project_iam_member.build_logs.id,
      google_project_iam_member.build_sources.id,
      google_artifact_registry_repository_iam_member.build_writer.id,
      google_storage_bucket_iam_member.build_source.id,
      google_storage_bucket_iam_member.worker_bucket.id,
    ],
    [for g in google_project_iam_member.function_datastore : g.id],
    [for g in google_storage_bucket_iam_member.function_bucket : g.id],
    [for g in google_storage_bucket_iam_member.output_reader : g.id],
    [for g in google_storage_bucket_iam_member.lease_list : g.id],
    [for g in google_cloud_tasks_queue_iam_member.enqueuer : g.id],
    [for g in google_service_account_iam_member.tasks_actas : g.id],
    [for g in google_cloud_tasks_queue_iam_member.tick_enqueuer : g.id],
    [for g in google_service_account_iam_member.tick_tasks_actas : g.id],
    google_project_iam_member.daemon_datastore[*].id,
    [for g in google_project_iam_member.function_metrics : g.id],
    google_project_iam_member.daemon_metrics[*].id,
    [for g in google_pubsub_topic_iam_member.notify_publisher : g.id],
    [for g in google_pubsub_topic_iam_member.target_publisher : g.id],
    [for g in google_cloud_run_v2_job_iam_member.target_executor : g.id],
    google_storage_bucket_iam_member.daemon_bucket[*].id,
  )

  provisioner "local-exec" {
    command = "sleep ${var.propagation_wait_seconds}"
  }
}

# The worker's invoker grant on GPUCallback needs the function (it names
# its Cloud Run service), so iam_ready, which the functions wait for,
# cannot wait for it. It has this wait of its own, which the worker waits
# for: a worker deployed while the grant propagates would have its first
# heartbeats refused with 403. The chain has no cycle: the functions, then
# the grant, then this wait, then the worker (the functions name the worker
# by its deterministic URL, not by reference).
resource "terraform_data" "callback_invoker_ready" {
  count = var.propagation_wait_seconds > 0 ? 1 : 0 # none at 0: see apis_ready

  triggers_replace = [google_cloud_run_v2_service_iam_member.function_invoker["GPUCallback/worker"].id]

  provisioner "local-exec" {
    command = "sleep ${var.propagation_wait_seconds}"
  }
}
