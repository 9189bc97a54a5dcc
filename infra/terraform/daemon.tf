# baton daemon (cmd/baton daemon), for schedules finer than Cloud
# Scheduler's one minute: deployed only when daemon_image is set. It holds
# the tick lease and ticks every second, so it must never sleep: exactly one
# instance (min = max = 1; a second one would only wait for the lease), with
# its CPU allocated while no request arrives (it gets none). It executes the
# runs it decides itself (it has no BATON_TASKS_QUEUE), as a process that
# never waits for the next tick can. Tick keeps running every minute and
# takes over when the daemon's lease lapses.
locals {
  daemon_count = var.daemon_image == "" ? 0 : 1

  # Environment of the daemon: what cmd/baton/daemon.go reads
  # (tests/terraform_test.go compares the two), minus BATON_TOKEN and
  # STORAGE_EMULATOR_HOST (never in the cloud) and PORT (Cloud Run sets it).
  daemon_env = {
    # The default notification channel (docs/notifications.md).
    BATON_NOTIFY_WEBHOOK_URL    = var.notify_webhook_url
    BATON_NOTIFY_WEBHOOK_SECRET = var.notify_webhook_secret
    BATON_NOTIFY_ON             = var.notify_on
    BATON_CONSOLE_URL           = var.console_url
    BATON_NOTIFY_TOPIC          = var.notify_topic

    BATON_MONGO_URI         = local.mongo_uri
    BATON_DATABASE          = var.database_name
    BATON_BUCKET            = google_storage_bucket.baton.name
    BATON_ALLOWED_TARGETS   = join(",", var.allowed_targets)
    BATON_ALLOWED_TOPICS    = join(",", var.pubsub_target_topics)
    BATON_ALLOWED_JOBS      = join(",", var.cloud_run_target_jobs)
    BATON_GPU_POOL          = local.gpu_pool
    BATON_GPU_WEIGHTS       = local.gpu_weights
    BATON_GPU_QUOTAS        = local.gpu_quotas
    BATON_GPU_FAIR_HALFLIFE = var.gpu_fair_halflife
    BATON_TICK_LEASE_TTL    = var.tick_lease_ttl
    BATON_CLOCK_SKEW        = var.clock_skew
    BATON_HISTORY_KEEP      = var.history_keep
    BATON_JOB_LEASE_STORE   = var.job_lease_store
    BATON_TARGET_ID_TOKEN   = "true"
    BATON_LOG_LEVEL         = var.log_level
  }
}

resource "google_service_account" "daemon" {
  count = local.daemon_count

  project      = var.project
  account_id   = "baton-daemon"
  display_name = "baton daemon (Cloud Run, sub-minute schedules)"
  depends_on   = [terraform_data.apis_ready]
}

# The daemon reads and writes what Tick does: the database and the leases.
resource "google_project_iam_member" "daemon_datastore" {
  count = local.daemon_count

  project = var.project
  role    = "roles/datastore.user"
  member  = google_service_account.daemon[0].member

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

resource "google_storage_bucket_iam_member" "daemon_bucket" {
  count = local.daemon_count

  bucket = google_storage_bucket.baton.name
  role   = "roles/storage.objectUser"
  member = google_service_account.daemon[0].member

  # The leases only, as for the functions (iam.tf).
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

# gpu targets and the GPU sweep dispatch to the worker, as Tick does.
resource "google_cloud_run_v2_service_iam_member" "daemon_worker_invoker" {
  count = local.daemon_count

  project  = var.project
  location = var.region
  name     = google_cloud_run_v2_service.gpu_worker.name
  role     = "roles/run.invoker"
  member   = google_service_account.daemon[0].member
}

# And to every gpu_worker_types service.
resource "google_cloud_run_v2_service_iam_member" "daemon_worker_type_invoker" {
  for_each = local.daemon_count == 1 ? var.gpu_worker_types : {}

  project  = var.project
  location = var.region
  name     = google_cloud_run_v2_service.gpu_worker_type[each.key].name
  role     = "roles/run.invoker"
  member   = google_service_account.daemon[0].member
}

# No run.invoker on this service for anyone: nothing calls the daemon. Its
# only listener is /healthz on $PORT, which Cloud Run requires of a
# container and probes from inside.
resource "google_cloud_run_v2_service" "daemon" {
  count = local.daemon_count

  project             = var.project
  location            = var.region
  name                = "baton-daemon"
  description         = "baton daemon: ticks every second for sub-minute schedules (cmd/baton daemon)"
  ingress             = "INGRESS_TRAFFIC_INTERNAL_ONLY"
  deletion_protection = var.deletion_protection

  template {
    service_account = google_service_account.daemon[0].email

    scaling {
      min_instance_count = 1
      max_instance_count = 1
    }

    containers {
      image = var.daemon_image
      args  = ["daemon", "--poll=${var.daemon_poll}"]

      resources {
        limits = {
          cpu    = "1"
          memory = "512Mi"
        }
        cpu_idle          = false
        startup_cpu_boost = true
      }

      startup_probe {
        http_get {
          path = "/healthz"
        }
      }

      dynamic "env" {
        for_each = local.daemon_env
        content {
          name  = env.key
          value = env.value
        }
      }
    }
  }

  # The daemon takes the lease and reads the database as soon as it starts;
  # without its grants in place (and propagated: terraform_data.iam_ready)
  # its first instance would crash-loop. Its invoker grant on the worker
  # follows the functions, so it is made first but not waited for.
  depends_on = [
    terraform_data.apis_ready,
    terraform_data.iam_ready,
    google_project_iam_member.daemon_datastore,
    google_storage_bucket_iam_member.daemon_bucket,
    google_cloud_run_v2_service_iam_member.daemon_worker_invoker,
    google_cloud_run_v2_service_iam_member.daemon_worker_type_invoker,
  ]
}
