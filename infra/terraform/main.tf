data "google_project" "this" {
  project_id = var.project
}

locals {
  firestore_location = var.firestore_location != "" ? var.firestore_location : var.region

  # Cloud Run gives every service a deterministic URL,
  # https://SERVICE-PROJECT_NUMBER.REGION.run.app. The GPU function needs the
  # worker's URL (BATON_GPU_POOL) and the worker needs the GPU function's URL
  # (BATON_CONTROL_URL); computing this one breaks the cycle.
  worker_name = "baton-gpu-worker"
  worker_url  = "https://${local.worker_name}-${data.google_project.this.number}.${var.region}.run.app"
  gpu_pool    = "${local.worker_url}=${var.gpu_slots}"

  # MONGODB-OIDC with the runtime service account (ENVIRONMENT:gcp,
  # TOKEN_RESOURCE:FIRESTORE): the driver fetches a token from the metadata
  # server, so there is no password to store, leak or rotate, and access is
  # granted and revoked with IAM (roles/datastore.user below). SCRAM would
  # need a generated password in Secret Manager and a rotation procedure.
  # retryWrites=false: Firestore does not support retryable writes
  # (DESIGN.md section 5; shared/store refuses retryWrites=true).
  mongo_uri = join("", [
    "mongodb://${google_firestore_database.baton.uid}.${google_firestore_database.baton.location_id}.firestore.goog:443/${var.database_name}",
    "?loadBalanced=true&tls=true&retryWrites=false",
    "&authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:gcp,TOKEN_RESOURCE:FIRESTORE",
  ])

  # The functions, all built from one source zip. env is the complete runtime
  # environment of each; tests/terraform_test.go checks it against
  # shared/config.Vars. STORAGE_EMULATOR_HOST and BATON_TOKEN are never set
  # in the cloud: IAM invoker checks authenticate callers.
  functions = {
    Tick = {
      name        = "baton-tick"
      description = "baton tick: decides due runs, sweeps leases, dispatches GPU jobs (called by Cloud Scheduler)"
      # Cloud Run's ingress docs (run/docs/securing/ingress) count Cloud
      # Scheduler in the same project, calling the default run.app URL, as
      # internal; nothing else needs to reach Tick.
      ingress = "ALLOW_INTERNAL_ONLY"
      timeout = var.tick_timeout_seconds
      memory  = "512Mi"
      env = {
        BATON_MONGO_URI       = local.mongo_uri
        BATON_DATABASE        = var.database_name
        BATON_BUCKET          = google_storage_bucket.baton.name
        BATON_ALLOWED_TARGETS = join(",", var.allowed_targets)
        BATON_GPU_POOL        = local.gpu_pool
        BATON_TICK_LEASE_TTL  = var.tick_lease_ttl
        BATON_CLOCK_SKEW      = var.clock_skew
        BATON_TARGET_ID_TOKEN = "true"
        BATON_LOG_LEVEL       = var.log_level
      }
    }
    Schedules = {
      name        = "baton-schedules"
      description = "baton schedules API (CRUD, pause, resume, trigger, run history)"
      ingress     = "ALLOW_ALL" # operators and the CLI; IAM decides who may call.
      timeout     = 60
      memory      = "256Mi"
      env = {
        BATON_MONGO_URI       = local.mongo_uri
        BATON_DATABASE        = var.database_name
        BATON_BUCKET          = google_storage_bucket.baton.name
        BATON_ALLOWED_TARGETS = join(",", var.allowed_targets)
        # Trigger-now runs a schedule through the same engine as Tick.
        BATON_GPU_POOL        = local.gpu_pool
        BATON_CLOCK_SKEW      = var.clock_skew
        BATON_TARGET_ID_TOKEN = "true"
        BATON_LOG_LEVEL       = var.log_level
      }
    }
    GPU = {
      name        = "baton-gpu"
      description = "baton GPU control plane: enqueue, queue view, worker heartbeat and completion callbacks"
      ingress     = "ALLOW_ALL" # the worker calls back over the internet; IAM decides who may call.
      timeout     = 60
      memory      = "256Mi"
      env = {
        BATON_MONGO_URI  = local.mongo_uri
        BATON_DATABASE   = var.database_name
        BATON_BUCKET     = google_storage_bucket.baton.name
        BATON_GPU_POOL   = local.gpu_pool
        BATON_CLOCK_SKEW = var.clock_skew
        BATON_LOG_LEVEL  = var.log_level
      }
    }
    Rent = {
      name        = "baton-rent"
      description = "jeonse / monthly rent calculator (public)"
      ingress     = "ALLOW_ALL"
      timeout     = 10
      memory      = "128Mi"
      env = {
        BATON_LOG_LEVEL = var.log_level
      }
    }
  }

  # Environment of the GPU worker service (cmd/gpu-worker).
  worker_env = {
    BATON_BUCKET         = google_storage_bucket.baton.name
    BATON_CONTROL_URL    = google_cloudfunctions2_function.fn["GPU"].service_config[0].uri
    BATON_WORKER_COMMAND = jsonencode(var.worker_command)
    BATON_LOG_LEVEL      = var.log_level
  }
}
