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
  # One more service per gpu_worker_types entry, named after it, with its
  # deterministic URL the same way.
  worker_type_names = { for k, t in var.gpu_worker_types : k => "${local.worker_name}-${k}" }
  worker_type_urls  = { for k, n in local.worker_type_names : k => "https://${n}-${data.google_project.this.number}.${var.region}.run.app" }
  # Every service by its gpu_worker_urls key ("default" is the
  # gpu_accelerator one), for the grants and outputs that cover them all.
  worker_names = merge({ default = local.worker_name }, local.worker_type_names)
  # Each pool entry declares its GPU type, so a job may ask for it
  # (gpuType): the default service first, then the types by name. With no
  # gpu_worker_types this is the single default entry, as before.
  gpu_pool = join(",", concat(
    ["${local.worker_url}=${var.gpu_slots}@${var.gpu_accelerator}"],
    [for k in sort(keys(var.gpu_worker_types)) : "${local.worker_type_urls[k]}=${var.gpu_worker_types[k].slots}@${var.gpu_worker_types[k].accelerator}"],
  ))
  # Tenants' weights and quotas, in BATON_GPU_WEIGHTS' and
  # BATON_GPU_QUOTAS' "tenant=N,..." form (docs/gpu.md, "Tenants").
  gpu_weights = join(",", [for t in sort(keys(var.gpu_weights)) : "${t}=${var.gpu_weights[t]}"])
  gpu_quotas  = join(",", [for t in sort(keys(var.gpu_quotas)) : "${t}=${var.gpu_quotas[t]}"])

  # The same for the Run function (a gen2 function is a Cloud Run service of
  # the same name): Run enqueues its own retries with BATON_RUN_URL as target
  # and OIDC audience, so taking its own resource's uri would be a cycle.
  # Cloud Run wants the token's audience to be the service's *.run.app URL
  # (run/docs/configuring/custom-audiences); this deterministic URL is one of
  # the service's run.app URLs, beside service_config.uri. Not yet checked
  # against a live project (no cloud access here).
  run_name = "baton-run"
  run_url  = "https://${local.run_name}-${data.google_project.this.number}.${var.region}.run.app"

  # Run's instances: enough for every dispatch in flight on every queue at
  # run_concurrency each, unless run_max_instances says more.
  run_instances_needed = ceil(var.tasks_queue_count * var.tasks_max_concurrent_dispatches / var.run_concurrency)
  run_max_instances    = var.run_max_instances > 0 ? var.run_max_instances : local.run_instances_needed

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
  # in the cloud: IAM invoker checks authenticate callers. max_instances is
  # per function because Run's must follow the queue (see Run).
  functions = {
    Tick = {
      name        = "baton-tick"
      description = "baton tick: decides due runs (or, partitioned, coordinates partition tasks and decides each) and hands each run to the Run function through Cloud Tasks, sweeps leases, dispatches GPU jobs (called by Cloud Scheduler and the baton-ticks queue)"
      # Cloud Run's ingress docs (run/docs/securing/ingress) count Cloud
      # Scheduler and Cloud Tasks in the same project, calling the default
      # run.app URL, as internal: the tick and its partition tasks (which
      # target the URL the tick reached) are all that needs to reach Tick.
      ingress = "ALLOW_INTERNAL_ONLY"
      timeout = var.tick_timeout_seconds
      memory  = "512Mi"
      # One request an instance (0.33 vCPU): the P partition tasks the tick
      # queue may have in flight, the coordinator and a retry of it. Fewer
      # would answer partition tasks 429, which use up their attempts.
      max_instances = max(10, local.decider_partitions + 2)
      env = {
        # The default notification channel (docs/notifications.md).
        BATON_NOTIFY_WEBHOOK_URL    = var.notify_webhook_url
        BATON_NOTIFY_WEBHOOK_SECRET = var.notify_webhook_secret
        BATON_NOTIFY_ON             = var.notify_on
        BATON_CONSOLE_URL           = var.console_url
        BATON_NOTIFY_TOPIC          = var.notify_topic

        BATON_MONGO_URI             = local.mongo_uri
        BATON_DATABASE              = var.database_name
        BATON_BUCKET                = google_storage_bucket.baton.name
        BATON_ALLOWED_TARGETS       = join(",", var.allowed_targets)
        BATON_ALLOWED_TOPICS        = join(",", var.pubsub_target_topics)
        BATON_ALLOWED_JOBS          = join(",", var.cloud_run_target_jobs)
        BATON_GPU_FAIR_HALFLIFE     = var.gpu_fair_halflife
        BATON_GPU_POOL              = local.gpu_pool
        BATON_GPU_WEIGHTS           = local.gpu_weights
        BATON_GPU_QUOTAS            = local.gpu_quotas
        BATON_TICK_LEASE_TTL        = var.tick_lease_ttl
        BATON_CLOCK_SKEW            = var.clock_skew
        BATON_HISTORY_KEEP          = var.history_keep
        BATON_JOB_LEASE_STORE       = var.job_lease_store
        BATON_TARGET_ID_TOKEN       = "true"
        BATON_LOG_LEVEL             = var.log_level
        BATON_TASKS_QUEUE           = local.tasks_queues
        BATON_RUN_URL               = local.run_url
        BATON_TASKS_SERVICE_ACCOUNT = google_service_account.tasks.email
        # Partitioned deciding (ticks.tf): P, the tick queue and the
        # identity of the partition tasks, empty when P is 0; and V, which
        # every function that writes schedules must agree on.
        BATON_PARTITIONS                 = tostring(local.decider_partitions)
        BATON_TICK_QUEUE                 = join("", google_cloud_tasks_queue.ticks[*].id)
        BATON_TICK_TASKS_SERVICE_ACCOUNT = join("", google_service_account.tick_tasks[*].email)
        BATON_DECIDER_SHARDS             = tostring(var.decider_shards)
      }
    }
    # Run executes the runs that Tick and Schedules hand over, one Cloud Task
    # each, and enqueues its own retries on the same queue.
    Run = {
      name        = local.run_name
      description = "baton run: executes one decided run under its job lease (called by Cloud Tasks)"
      # Cloud Run's ingress docs (run/docs/securing/ingress) list Cloud Tasks
      # in the same project, calling the default run.app URL, among the
      # internal sources, and Cloud Tasks is Run's only caller.
      ingress = "ALLOW_INTERNAL_ONLY"
      # Cloud Tasks waits at most 30 minutes (the longest dispatch deadline)
      # for an answer; a function that timed out first would be killed
      # mid-run, with its job lease still held, and the task retried.
      timeout = var.run_timeout_seconds
      # Run serves run_concurrency requests per instance, which Cloud Run
      # allows only with at least 1 vCPU (the precondition in functions.tf).
      # Its instances must hold every dispatch the queues may have in
      # flight: a dispatch beyond them gets a 429, which uses up an attempt
      # of the task. docs/deploy.md, "Sizing", explains the defaults.
      memory        = var.run_memory
      cpu           = var.run_cpu
      concurrency   = var.run_concurrency
      max_instances = local.run_max_instances
      env = {
        # The default notification channel (docs/notifications.md).
        BATON_NOTIFY_WEBHOOK_URL    = var.notify_webhook_url
        BATON_NOTIFY_WEBHOOK_SECRET = var.notify_webhook_secret
        BATON_NOTIFY_ON             = var.notify_on
        BATON_CONSOLE_URL           = var.console_url
        BATON_NOTIFY_TOPIC          = var.notify_topic

        BATON_MONGO_URI             = local.mongo_uri
        BATON_DATABASE              = var.database_name
        BATON_BUCKET                = google_storage_bucket.baton.name
        BATON_ALLOWED_TARGETS       = join(",", var.allowed_targets)
        BATON_ALLOWED_TOPICS        = join(",", var.pubsub_target_topics)
        BATON_ALLOWED_JOBS          = join(",", var.cloud_run_target_jobs)
        BATON_GPU_FAIR_HALFLIFE     = var.gpu_fair_halflife
        BATON_GPU_POOL              = local.gpu_pool
        BATON_GPU_WEIGHTS           = local.gpu_weights
        BATON_GPU_QUOTAS            = local.gpu_quotas
        BATON_CLOCK_SKEW            = var.clock_skew
        BATON_HISTORY_KEEP          = var.history_keep
        BATON_JOB_LEASE_STORE       = var.job_lease_store
        BATON_TARGET_ID_TOKEN       = "true"
        BATON_LOG_LEVEL             = var.log_level
        BATON_TASKS_QUEUE           = local.tasks_queues
        BATON_RUN_URL               = local.run_url
        BATON_TASKS_SERVICE_ACCOUNT = google_service_account.tasks.email
        BATON_DECIDER_SHARDS        = tostring(var.decider_shards)
      }
    }
    Schedules = {
      name          = "baton-schedules"
      description   = "baton schedules API (CRUD, pause, resume, trigger, run history)"
      ingress       = "ALLOW_ALL" # operators and the CLI; IAM decides who may call.
      timeout       = 60
      memory        = "256Mi"
      max_instances = 10
      env = {
        # The default notification channel (docs/notifications.md).
        BATON_NOTIFY_WEBHOOK_URL    = var.notify_webhook_url
        BATON_NOTIFY_WEBHOOK_SECRET = var.notify_webhook_secret
        BATON_NOTIFY_ON             = var.notify_on
        BATON_CONSOLE_URL           = var.console_url
        BATON_NOTIFY_TOPIC          = var.notify_topic

        BATON_MONGO_URI       = local.mongo_uri
        BATON_DATABASE        = var.database_name
        BATON_BUCKET          = google_storage_bucket.baton.name
        BATON_ALLOWED_TARGETS = join(",", var.allowed_targets)
        BATON_ALLOWED_TOPICS  = join(",", var.pubsub_target_topics)
        BATON_ALLOWED_JOBS    = join(",", var.cloud_run_target_jobs)
        # Trigger-now decides a run through the same engine as Tick and
        # hands it to Run the same way.
        BATON_GPU_FAIR_HALFLIFE     = var.gpu_fair_halflife
        BATON_GPU_POOL              = local.gpu_pool
        BATON_GPU_WEIGHTS           = local.gpu_weights
        BATON_GPU_QUOTAS            = local.gpu_quotas
        BATON_CLOCK_SKEW            = var.clock_skew
        BATON_HISTORY_KEEP          = var.history_keep
        BATON_JOB_LEASE_STORE       = var.job_lease_store
        BATON_TARGET_ID_TOKEN       = "true"
        BATON_LOG_LEVEL             = var.log_level
        BATON_TASKS_QUEUE           = local.tasks_queues
        BATON_RUN_URL               = local.run_url
        BATON_TASKS_SERVICE_ACCOUNT = google_service_account.tasks.email
        # Seconds-level crons fire only where something ticks every second;
        # without the daemon they are refused rather than fired once a minute.
        # The daemon is deployed exactly when daemon_image is set; naming its
        # resource here would be a cycle (it waits for the functions' grants
        # in terraform_data.iam_ready).
        BATON_SUBMINUTE = var.daemon_image != "" ? "true" : "false"
        # A schedule's decider shard is stored on every write.
        BATON_DECIDER_SHARDS = tostring(var.decider_shards)
        # Signs the schedule and run lists' page tokens; every instance must
        # share it, so it is one secret per deployment.
        BATON_PAGE_TOKEN_SECRET = var.page_token_secret
      }
    }
    # The operators' GPU API. It refuses the workers' callbacks (421 wrong_function): those
    # are GPUCallback's, so the two have different invokers (iam.tf).
    GPU = {
      name          = "baton-gpu"
      description   = "baton GPU control plane for operators: enqueue, list, read, cancel, logs, pool view"
      ingress       = "ALLOW_ALL" # operators and the CLI; IAM decides who may call.
      timeout       = 60
      memory        = "256Mi"
      max_instances = 10
      env = {
        BATON_MONGO_URI         = local.mongo_uri
        BATON_DATABASE          = var.database_name
        BATON_GPU_FAIR_HALFLIFE = var.gpu_fair_halflife
        BATON_GPU_POOL          = local.gpu_pool
        BATON_GPU_WEIGHTS       = local.gpu_weights
        BATON_GPU_QUOTAS        = local.gpu_quotas
        BATON_CLOCK_SKEW        = var.clock_skew
        BATON_LOG_LEVEL         = var.log_level
        # GET /gpu/jobs/{id}/logs reads the workers' outputs/ objects; its
        # grant is read-only and on outputs/ alone (iam.tf, output_readers).
        BATON_BUCKET = google_storage_bucket.baton.name
        # Signs the job list's page tokens (as on Schedules).
        BATON_PAGE_TOKEN_SECRET = var.page_token_secret
      }
    }
    # The workers' callbacks, :heartbeat and :complete, and nothing else. A
    # completion dispatches the next queued job, hence the pool.
    GPUCallback = {
      name          = "baton-gpu-callback"
      description   = "baton GPU worker callbacks: heartbeat and completion only (called by the GPU worker)"
      ingress       = "ALLOW_ALL" # the worker calls back over the internet; IAM decides who may call.
      timeout       = 60
      memory        = "256Mi"
      max_instances = 10
      env = {
        BATON_MONGO_URI         = local.mongo_uri
        BATON_DATABASE          = var.database_name
        BATON_GPU_FAIR_HALFLIFE = var.gpu_fair_halflife
        BATON_GPU_POOL          = local.gpu_pool
        BATON_GPU_WEIGHTS       = local.gpu_weights
        BATON_GPU_QUOTAS        = local.gpu_quotas
        BATON_CLOCK_SKEW        = var.clock_skew
        BATON_LOG_LEVEL         = var.log_level
      }
    }
    Rent = {
      name          = "baton-rent"
      description   = "jeonse / monthly rent calculator (public)"
      ingress       = "ALLOW_ALL"
      timeout       = 10
      memory        = "128Mi"
      max_instances = 10
      env = {
        BATON_LOG_LEVEL = var.log_level
      }
    }
  }

  # Environment of the GPU worker service (cmd/gpu-worker).
  worker_env = {
    BATON_BUCKET         = google_storage_bucket.baton.name
    BATON_CONTROL_URL    = google_cloudfunctions2_function.fn["GPUCallback"].service_config[0].uri
    BATON_WORKER_COMMAND = jsonencode(var.worker_command)
    BATON_LOG_LEVEL      = var.log_level
  }
}
