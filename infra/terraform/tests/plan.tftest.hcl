# Offline plan of the whole configuration with a mocked google provider
# (terraform test, run by scripts/tf-check.sh). It evaluates what validate
# cannot: locals, for_each keys, references into nested blocks, and the
# variables' validation rules.

mock_provider "google" {
  mock_data "google_project" {
    defaults = {
      number = "123456789012"
    }
  }
  mock_resource "google_firestore_database" {
    defaults = {
      uid = "0123abcd-0123-4567-89ab-0123456789ab"
    }
  }
  mock_resource "google_cloudfunctions2_function" {
    defaults = {
      service_config = [{ uri = "https://fn-mock-uc.a.run.app", service = "projects/baton-test/locations/us-central1/services/fn-mock" }]
    }
  }
  # The provider computes these two from the configuration; the mock must be
  # told, at plan time, so that the asserts below check the wiring to them.
  mock_resource "google_cloud_tasks_queue" {
    override_during = plan
    defaults = {
      id = "projects/baton-test/locations/us-central1/queues/baton-runs"
    }
  }
  mock_resource "google_artifact_registry_repository" {
    override_during = plan
    defaults = {
      id           = "projects/baton-test/locations/us-central1/repositories/baton-functions"
      registry_uri = "us-central1-docker.pkg.dev/baton-test/baton-functions"
    }
  }
  mock_resource "google_service_account" {
    override_during = plan
    defaults = {
      email  = "sa-mock@baton-test.iam.gserviceaccount.com"
      member = "serviceAccount:sa-mock@baton-test.iam.gserviceaccount.com"
      name   = "projects/baton-test/serviceAccounts/sa-mock@baton-test.iam.gserviceaccount.com"
    }
  }
}

# GPUCallback's URL, known at plan, so that the worker's BATON_CONTROL_URL
# can be checked against it (and not against another function's).
override_resource {
  target          = google_cloudfunctions2_function.fn["GPUCallback"]
  override_during = plan
  values = {
    service_config = { uri = "https://baton-gpu-callback-mock-uc.a.run.app", service = "projects/baton-test/locations/us-central1/services/baton-gpu-callback" }
  }
}

variables {
  project          = "baton-test"
  bucket_name      = "baton-test-bucket"
  worker_image     = "us-central1-docker.pkg.dev/baton-test/baton/gpu-worker:v1"
  operator_members = ["user:ops@example.com"]
  source_zip       = "tests/fixture.zip"
  # A test value only, never a deployment's.
  page_token_secret = "tftest page token secret, 32+ bytes long"
}

run "plan" {
  command = plan

  assert {
    condition     = length(google_cloudfunctions2_function.fn) == 6
    error_message = "expected six functions: Tick, Run, Schedules, GPU, GPUCallback, Rent"
  }
  assert {
    condition     = [for k, v in local.function_invokers : k if v.fn == "GPUCallback"] == ["GPUCallback/worker"] && [for k, v in local.function_invokers : v.fn if v.member == google_service_account.gpu_worker.member && k == "GPUCallback/worker"] == ["GPUCallback"]
    error_message = "only the worker may invoke GPUCallback"
  }
  assert {
    condition     = [for k, v in local.function_invokers : k if v.fn == "GPU"] == ["GPU/user:ops@example.com"]
    error_message = "only the operators may invoke the operators' GPU function"
  }
  assert {
    condition     = one([for e in google_cloud_run_v2_service.gpu_worker.template[0].containers[0].env : e.value if e.name == "BATON_CONTROL_URL"]) == "https://baton-gpu-callback-mock-uc.a.run.app"
    error_message = "the worker must call back GPUCallback (BATON_CONTROL_URL)"
  }
  assert {
    condition     = alltrue([for f in google_cloudfunctions2_function.fn : f.build_config[0].docker_repository == "projects/baton-test/locations/us-central1/repositories/baton-functions"])
    error_message = "every function's image goes to baton's own Artifact Registry repository"
  }
  assert {
    condition = (google_artifact_registry_repository.functions.format == "DOCKER" && !google_artifact_registry_repository.functions.cleanup_policy_dry_run &&
      google_artifact_registry_repository.functions.repository_id != "baton" &&
      one([for p in google_artifact_registry_repository.functions.cleanup_policies : p.most_recent_versions[0].keep_count if p.action == "KEEP"]) == 10 &&
    one([for p in google_artifact_registry_repository.functions.cleanup_policies : p.condition[0].older_than if p.action == "DELETE"]) == "2592000s")
    error_message = "the image repository keeps the 10 most recent versions and deletes the rest after 30 days, for real (no dry run), and is not the hand-made worker repository baton (docs/deploy.md step 2), which the apply would collide with"
  }
  assert {
    condition = (google_storage_bucket_iam_member.worker_bucket.condition[0].expression == "resource.name.startsWith(\"projects/_/buckets/baton-test-bucket/objects/outputs/\")" &&
      alltrue([for g in google_storage_bucket_iam_member.function_bucket : g.condition[0].expression == "resource.name.startsWith(\"projects/_/buckets/baton-test-bucket/objects/leases/\")"]) &&
    google_storage_bucket_iam_member.build_source.condition[0].expression == "resource.name.startsWith(\"projects/_/buckets/baton-test-bucket/objects/source/\")")
    error_message = "bucket grants are narrowed to outputs/ (worker), leases/ (functions) and source/ (build)"
  }
  assert {
    condition     = startswith(google_storage_bucket_object.source.name, "source/") && keys(google_storage_bucket_iam_member.function_bucket) == ["Run", "Schedules", "Tick"]
    error_message = "the source zip lives under source/, and only the functions that take leases get the bucket"
  }
  assert {
    condition = (keys(google_storage_bucket_iam_member.output_reader) == ["GPU"] &&
      google_storage_bucket_iam_member.output_reader["GPU"].role == "roles/storage.objectViewer" &&
      google_storage_bucket_iam_member.output_reader["GPU"].condition[0].expression == "resource.name.startsWith(\"projects/_/buckets/baton-test-bucket/objects/outputs/\")" &&
      google_cloudfunctions2_function.fn["GPU"].service_config[0].environment_variables["BATON_BUCKET"] == "baton-test-bucket" &&
    !contains(keys(google_cloudfunctions2_function.fn["GPUCallback"].service_config[0].environment_variables), "BATON_BUCKET"))
    error_message = "the GPU function (its logs route) gets the bucket and reads outputs/ only, read-only; GPUCallback gets neither"
  }
  assert {
    condition = (keys(google_storage_bucket_iam_member.lease_list) == ["Schedules"] &&
      google_storage_bucket_iam_member.lease_list["Schedules"].role == "roles/storage.objectViewer" &&
    google_storage_bucket_iam_member.lease_list["Schedules"].condition[0].expression == "api.getAttribute(\"storage.googleapis.com/objectListPrefix\", \"\").startsWith(\"leases/\")")
    error_message = "only Schedules (GET /leases) lists the bucket, and only under leases/"
  }
  assert {
    condition     = google_project_iam_member.build_sources.condition[0].expression == "resource.name.startsWith(\"projects/_/buckets/gcf-v2-sources-123456789012-us-central1/\")" && google_project_iam_member.build_logs.role == "roles/logging.logWriter"
    error_message = "the build account reads only the Cloud Functions source bucket of this project and region, and writes logs"
  }
  assert {
    condition     = google_artifact_registry_repository_iam_member.build_writer.role == "roles/artifactregistry.writer" && google_artifact_registry_repository_iam_member.build_writer.repository == google_artifact_registry_repository.functions.name
    error_message = "the build account writes to baton's image repository only"
  }
  assert {
    condition = alltrue([for k, f in google_cloudfunctions2_function.fn :
      lookup(nonsensitive(f.service_config[0].environment_variables), "BATON_PAGE_TOKEN_SECRET", "") == (contains(["Schedules", "GPU"], k) ? "tftest page token secret, 32+ bytes long" : "")
    ])
    error_message = "page_token_secret must reach Schedules and GPU, the functions that hand out page tokens, and no other"
  }
  assert {
    condition = alltrue([for k in ["Tick", "Schedules", "Run"] :
    google_cloudfunctions2_function.fn[k].service_config[0].environment_variables["BATON_RUN_URL"] == "https://baton-run-123456789012.us-central1.run.app"])
    error_message = "BATON_RUN_URL must be the Run function's deterministic URL on Tick, Schedules and Run"
  }
  assert {
    condition     = output.run_url == "https://baton-run-123456789012.us-central1.run.app" && google_cloudfunctions2_function.fn["Run"].name == "baton-run"
    error_message = "the run_url output must be the deterministic URL of the function named baton-run"
  }
  assert {
    condition = alltrue([for k in ["Tick", "Schedules", "Run"] :
    google_cloudfunctions2_function.fn[k].service_config[0].environment_variables["BATON_TASKS_QUEUE"] == "projects/baton-test/locations/us-central1/queues/baton-runs"])
    error_message = "BATON_TASKS_QUEUE must be the queue's full ID on Tick, Schedules and Run"
  }
  assert {
    condition     = length(google_cloud_tasks_queue.runs) == 1 && google_cloud_tasks_queue.runs[0].name == "baton-runs" && google_cloud_tasks_queue.runs[0].retry_config[0].max_attempts == 5 && google_cloud_tasks_queue.runs[0].retry_config[0].min_backoff == "10s" && google_cloud_tasks_queue.runs[0].retry_config[0].max_backoff == "300s" && google_cloud_tasks_queue.runs[0].retry_config[0].max_doublings == 4
    error_message = "one queue, baton-runs, with 5 attempts, 10s..300s backoff, 4 doublings by default"
  }
  assert {
    condition     = google_cloudfunctions2_function.fn["Run"].service_config[0].timeout_seconds >= 1800 && google_cloudfunctions2_function.fn["Run"].service_config[0].ingress_settings == "ALLOW_INTERNAL_ONLY"
    error_message = "Run must outlive Cloud Tasks' 30-minute dispatch deadline and be internal only"
  }
  # The default execution plane (docs/deploy.md, "Sizing"): 1 vCPU and 80
  # requests per Run instance, one queue at 250 dispatches a second with
  # 1000 in flight, and ceil(1000 / 80) = 13 instances to hold them.
  assert {
    condition = (google_cloudfunctions2_function.fn["Run"].service_config[0].available_cpu == "1" &&
      google_cloudfunctions2_function.fn["Run"].service_config[0].available_memory == "1Gi" &&
      google_cloudfunctions2_function.fn["Run"].service_config[0].max_instance_request_concurrency == 80 &&
      google_cloudfunctions2_function.fn["Run"].service_config[0].max_instance_count == 13 &&
      google_cloud_tasks_queue.runs[0].rate_limits[0].max_dispatches_per_second == 250 &&
    google_cloud_tasks_queue.runs[0].rate_limits[0].max_concurrent_dispatches == 1000)
    error_message = "the default Run is 1 vCPU, 1Gi, 80 requests an instance, 13 instances, behind one queue of 250/s and 1000 in flight"
  }
  assert {
    condition     = google_cloudfunctions2_function.fn["Run"].service_config[0].max_instance_count * google_cloudfunctions2_function.fn["Run"].service_config[0].max_instance_request_concurrency >= sum([for q in google_cloud_tasks_queue.runs : q.rate_limits[0].max_concurrent_dispatches])
    error_message = "Run's instances × concurrency must hold every dispatch the queues may have in flight"
  }
  # docs/deploy.md's arithmetic, at its per-run latency of 0.7 s: runs a
  # minute = min(queues × rate, queues × in flight / latency, instances ×
  # concurrency / latency) × 60 must reach 10,000.
  assert {
    condition = 60 * min(
      sum([for q in google_cloud_tasks_queue.runs : q.rate_limits[0].max_dispatches_per_second]),
      sum([for q in google_cloud_tasks_queue.runs : q.rate_limits[0].max_concurrent_dispatches]) / 0.7,
      google_cloudfunctions2_function.fn["Run"].service_config[0].max_instance_count * google_cloudfunctions2_function.fn["Run"].service_config[0].max_instance_request_concurrency / 0.7,
    ) >= 10000
    error_message = "the default execution plane must drain at least 10,000 runs a minute by docs/deploy.md's arithmetic"
  }
  assert {
    condition     = keys(google_cloud_tasks_queue_iam_member.enqueuer) == ["Run/0", "Schedules/0", "Tick/0"] && keys(google_service_account_iam_member.tasks_actas) == ["Run", "Schedules", "Tick"]
    error_message = "exactly Tick, Schedules and Run enqueue and act as baton-tasks"
  }
  assert {
    condition     = length(google_cloud_run_v2_service.daemon) == 0 && google_cloudfunctions2_function.fn["Schedules"].service_config[0].environment_variables["BATON_SUBMINUTE"] == "false"
    error_message = "no daemon_image: no daemon, and Schedules refuses sub-minute crons"
  }
  assert {
    condition     = length(google_project_iam_member.tasks_service_agent) == 0
    error_message = "the Cloud Tasks service agent grant is opt-in"
  }
  assert {
    condition     = google_cloudfunctions2_function.fn["Tick"].service_config[0].environment_variables["BATON_GPU_POOL"] == "https://baton-gpu-worker-123456789012.us-central1.run.app=1@nvidia-l4"
    error_message = "BATON_GPU_POOL must be <deterministic worker URL>=<slots>@<gpu_accelerator>"
  }
  assert {
    condition     = google_cloud_run_v2_service.gpu_worker.template[0].scaling[0].max_instance_count == var.gpu_slots
    error_message = "max instances must equal gpu_slots"
  }
  assert {
    condition     = google_cloud_run_v2_service.gpu_worker.template[0].scaling[0].min_instance_count == 0
    error_message = "the GPU worker scales to zero by default (gpu_min_instances = 0)"
  }
  assert {
    condition     = length(google_firestore_index.baton) == length(local.firestore_indexes)
    error_message = "every entry of local.firestore_indexes must become one index (are two the same?)"
  }
  # The code's _id is declared as __name__ by default, the form Google's
  # admin API documents, and only ever as an index's last field.
  assert {
    condition     = google_firestore_index.baton["schedules(vshard ASCENDING,enabled ASCENDING,nextRunAt ASCENDING,_id ASCENDING)"].fields[3].field_path == "__name__" && google_firestore_index.baton["schedules(_id ASCENDING)"].fields[0].field_path == "__name__" && google_firestore_index.baton["schedule_versions(scheduleId ASCENDING,_id DESCENDING)"].fields[1].order == "DESCENDING"
    error_message = "by default (index_id_field = \"__name__\") the code's _id must be declared as the field path __name__, in the code's direction"
  }
  assert {
    condition     = length(flatten([for k, ix in google_firestore_index.baton : [for f in ix.fields : f if f.field_path == "_id"]])) == 0
    error_message = "by default no index may name _id"
  }
  assert {
    condition     = length(flatten([for k, ix in google_firestore_index.baton : [for f in ix.fields : f if f.field_path == "__name__"]])) == length([for ix in local.firestore_indexes : ix if anytrue([for f in ix.fields : f.path == "_id"])])
    error_message = "every index whose code names _id must name __name__ once, and no other"
  }
  assert {
    condition     = alltrue([for k, ix in google_firestore_index.baton : alltrue([for i, f in ix.fields : f.field_path != "__name__" || i == length(ix.fields) - 1])])
    error_message = "__name__ may only be an index's last field (the admin API's rule)"
  }
  assert {
    condition     = length(google_cloud_run_v2_service_iam_member.function_invoker) == 6
    error_message = "expected invokers: scheduler and baton-tick-tasks on Tick, worker on GPU, baton-tasks on Run, the operator on Schedules and GPU"
  }
  assert {
    condition     = [for k, v in local.function_invokers : k if v.fn == "Run"] == ["Run/tasks"]
    error_message = "only baton-tasks may invoke Run"
  }
  assert {
    condition     = length(google_cloud_run_v2_service_iam_member.rent_public) == 1 && google_cloud_run_v2_service_iam_member.rent_public[0].member == "allUsers"
    error_message = "Rent is public by default"
  }
  assert {
    condition     = google_firestore_database.baton.point_in_time_recovery_enablement == "POINT_IN_TIME_RECOVERY_ENABLED"
    error_message = "point-in-time recovery must be on by default"
  }
  assert {
    condition     = length(google_firestore_change_stream.schedules) == 1 && google_firestore_change_stream.schedules[0].collection_group_scope[0].collection_group_id == "schedules"
    error_message = "the change stream the daemon watches must cover the schedules collection"
  }
}

# An operator whose apply refuses __name__ as a field path switches every
# index to the MongoDB API's own name for it; the resource addresses stay.
run "index_id_field_mongo" {
  command = plan
  variables {
    index_id_field = "_id"
  }
  assert {
    condition     = google_firestore_index.baton["schedules(vshard ASCENDING,enabled ASCENDING,nextRunAt ASCENDING,_id ASCENDING)"].fields[3].field_path == "_id" && google_firestore_index.baton["schedules(_id ASCENDING)"].fields[0].field_path == "_id" && google_firestore_index.baton["gpu_jobs(status ASCENDING,preemptible ASCENDING,priority ASCENDING,startedAt DESCENDING,_id ASCENDING)"].fields[4].order == "ASCENDING"
    error_message = "index_id_field = \"_id\" must declare the code's _id as the field path _id, in the code's direction"
  }
  assert {
    condition     = length(flatten([for k, ix in google_firestore_index.baton : [for f in ix.fields : f if f.field_path == "__name__"]])) == 0
    error_message = "with index_id_field = \"_id\" no index may name __name__"
  }
  assert {
    condition     = length(google_firestore_index.baton) == length(local.firestore_indexes)
    error_message = "the variable must not add or drop indexes"
  }
}

run "bad_index_id_field_refused" {
  command = plan
  variables {
    index_id_field = "id"
  }
  expect_failures = [var.index_id_field]
}

# An organisation whose domain-restricted sharing refuses allUsers: Rent
# stays private, and the operators may call it.
run "rent_private" {
  command = plan
  variables {
    rent_public = false
  }
  assert {
    condition     = length(google_cloud_run_v2_service_iam_member.rent_public) == 0
    error_message = "rent_public = false must grant nothing to allUsers"
  }
  assert {
    condition     = [for k, v in local.function_invokers : k if v.fn == "Rent"] == ["Rent/user:ops@example.com"]
    error_message = "with Rent private, exactly the operators may invoke it"
  }
}

run "daemon" {
  command = plan
  variables {
    daemon_image = "us-central1-docker.pkg.dev/baton-test/baton/baton:v1"
  }

  assert {
    condition     = google_cloud_run_v2_service.daemon[0].template[0].scaling[0].min_instance_count == 1 && google_cloud_run_v2_service.daemon[0].template[0].scaling[0].max_instance_count == 1
    error_message = "the daemon runs exactly one instance"
  }
  assert {
    condition     = google_cloud_run_v2_service.daemon[0].template[0].containers[0].resources[0].cpu_idle == false && join(" ", google_cloud_run_v2_service.daemon[0].template[0].containers[0].args) == "daemon --poll=200ms"
    error_message = "the daemon runs `baton daemon` with its CPU always allocated"
  }
  assert {
    condition     = google_cloud_run_v2_service.daemon[0].ingress == "INGRESS_TRAFFIC_INTERNAL_ONLY"
    error_message = "the daemon takes no traffic from outside"
  }
  assert {
    condition     = google_cloudfunctions2_function.fn["Schedules"].service_config[0].environment_variables["BATON_SUBMINUTE"] == "true"
    error_message = "with the daemon, Schedules accepts sub-minute crons"
  }
}

run "old_project_service_agent" {
  command = plan
  variables {
    tasks_service_agent_grant = true
  }

  assert {
    condition     = google_project_iam_member.tasks_service_agent[0].member == "serviceAccount:service-123456789012@gcp-sa-cloudtasks.iam.gserviceaccount.com" && google_project_iam_member.tasks_service_agent[0].role == "roles/cloudtasks.serviceAgent"
    error_message = "the opt-in grant goes to the Cloud Tasks service agent of this project"
  }
}

run "too_fast_queue_refused" {
  command = plan
  variables {
    tasks_max_dispatches_per_second = 501
    tasks_max_concurrent_dispatches = 5001
  }
  expect_failures = [var.tasks_max_dispatches_per_second, var.tasks_max_concurrent_dispatches]
}

run "job_lease_store_default_firestore" {
  command = plan

  assert {
    condition = alltrue([for k in ["Tick", "Run", "Schedules"] :
    google_cloudfunctions2_function.fn[k].service_config[0].environment_variables["BATON_JOB_LEASE_STORE"] == "firestore"])
    error_message = "the job leases default to Firestore documents (docs/cost.md) in every function that takes them"
  }
}

run "job_lease_store_gcs" {
  command = plan
  variables {
    job_lease_store = "gcs"
  }

  assert {
    condition = alltrue([for k in ["Tick", "Run", "Schedules"] :
    google_cloudfunctions2_function.fn[k].service_config[0].environment_variables["BATON_JOB_LEASE_STORE"] == "gcs"])
    error_message = "job_lease_store = gcs reaches every function that takes job leases"
  }
}

run "bad_job_lease_store_refused" {
  command = plan
  variables {
    job_lease_store = "s3"
  }
  expect_failures = [var.job_lease_store]
}

run "short_run_timeout_refused" {
  command = plan
  variables {
    run_timeout_seconds = 540
  }
  expect_failures = [var.run_timeout_seconds]
}

run "unlimited_attempts_refused" {
  command = plan
  variables {
    tasks_max_attempts = -1
  }
  expect_failures = [var.tasks_max_attempts]
}

run "backoff_inverted_refused" {
  command = plan
  variables {
    tasks_min_backoff_seconds = 600
    tasks_max_backoff_seconds = 60
  }
  expect_failures = [google_cloud_tasks_queue.runs[0]]
}

run "bad_daemon_image_refused" {
  command = plan
  variables {
    daemon_image = "baton"
  }
  expect_failures = [var.daemon_image]
}

run "bad_slots_refused" {
  command = plan
  variables {
    gpu_slots = 0
  }
  expect_failures = [var.gpu_slots]
}

run "min_instances_kept" {
  command = plan
  variables {
    gpu_slots         = 3
    gpu_min_instances = 1
  }
  assert {
    condition     = google_cloud_run_v2_service.gpu_worker.template[0].scaling[0].min_instance_count == 1
    error_message = "gpu_min_instances must become the worker's min instances"
  }
}

run "min_instances_over_slots_refused" {
  command = plan
  variables {
    gpu_slots         = 1
    gpu_min_instances = 2
  }
  expect_failures = [google_cloud_run_v2_service.gpu_worker]
}

run "bad_image_refused" {
  command = plan
  variables {
    worker_image = "gpu-worker"
  }
  expect_failures = [var.worker_image]
}

run "public_operator_refused" {
  command = plan
  variables {
    operator_members = ["allUsers"]
  }
  expect_failures = [var.operator_members]
}

run "short_page_token_secret_refused" {
  command = plan
  variables {
    page_token_secret = "baton page token v1"
  }
  expect_failures = [var.page_token_secret]
}

# GPU shapes the Cloud Run API refuses fail the plan, not the apply.
run "rtx_too_small_refused" {
  command = plan
  variables {
    gpu_accelerator = "nvidia-rtx-pro-6000"
    worker_cpu      = "8"
    worker_memory   = "32Gi"
  }
  expect_failures = [google_cloud_run_v2_service.gpu_worker]
}

run "l4_too_big_refused" {
  command = plan
  variables {
    worker_cpu    = "20"
    worker_memory = "80Gi"
  }
  expect_failures = [google_cloud_run_v2_service.gpu_worker]
}

run "l4_memory_without_cpu_refused" {
  command = plan
  variables {
    worker_cpu    = "4"
    worker_memory = "24Gi"
  }
  expect_failures = [google_cloud_run_v2_service.gpu_worker]
}

run "image_keep_zero_refused" {
  command = plan
  variables {
    image_keep_count = 0
  }
  expect_failures = [var.image_keep_count]
}

# No waits at 0: nothing runs `sleep` (a runner without it), and the
# resources that depend on the waits still plan.
run "no_wait" {
  command = plan
  variables {
    propagation_wait_seconds = 0
    daemon_image             = "us-central1-docker.pkg.dev/baton-test/baton/baton:v1"
  }
  assert {
    condition     = length(terraform_data.apis_ready) == 0 && length(terraform_data.iam_ready) == 0 && length(terraform_data.callback_invoker_ready) == 0
    error_message = "propagation_wait_seconds = 0 must create no wait (no sleep on the runner)"
  }
  assert {
    condition     = length(google_cloudfunctions2_function.fn) == 6 && length(google_cloud_run_v2_service.daemon) == 1 && google_cloud_run_v2_service.gpu_worker.name == "baton-gpu-worker"
    error_message = "without the waits, the functions, the daemon and the worker are still planned"
  }
}

# The default waits: one of each.
run "waits" {
  command = plan
  assert {
    condition     = length(terraform_data.apis_ready) == 1 && length(terraform_data.iam_ready) == 1 && length(terraform_data.callback_invoker_ready) == 1
    error_message = "propagation_wait_seconds > 0 must create the three waits"
  }
}

run "negative_wait_refused" {
  command = plan
  variables {
    propagation_wait_seconds = -1
  }
  expect_failures = [var.propagation_wait_seconds]
}

run "rtx_shape_accepted" {
  command = plan
  variables {
    gpu_accelerator = "nvidia-rtx-pro-6000"
    worker_cpu      = "20"
    worker_memory   = "80Gi"
  }
}

# Alerts reach the email channels made from alert_emails plus the existing
# channels, and the GPU budget exists only with a billing account and an
# amount.
run "alerts_and_budget" {
  command = plan
  variables {
    alert_emails          = ["oncall@example.com"]
    notification_channels = ["projects/baton-test/notificationChannels/123"]
    billing_account       = "0A0A0A-0B0B0B-0C0C0C"
    gpu_budget_amount     = 500
  }
  assert {
    condition     = length(google_monitoring_notification_channel.email) == 1 && google_monitoring_notification_channel.email["oncall@example.com"].labels.email_address == "oncall@example.com"
    error_message = "alert_emails must make one email channel per address"
  }
  assert {
    condition     = contains(google_monitoring_alert_policy.no_tick.notification_channels, "projects/baton-test/notificationChannels/123")
    error_message = "every alert must notify the existing channels too"
  }
  assert {
    condition     = length(google_billing_budget.gpu) == 1 && google_billing_budget.gpu[0].amount[0].specified_amount[0].units == "500"
    error_message = "billing_account with gpu_budget_amount must make the GPU budget"
  }
  assert {
    condition     = length(google_project_iam_member.function_metrics) == length(local.db_functions) && !contains(keys(google_project_iam_member.function_metrics), "Rent")
    error_message = "every function that records metrics, and not Rent, must be able to write them"
  }
}

run "no_budget_by_default" {
  command = plan
  assert {
    condition     = length(google_billing_budget.gpu) == 0 && length(google_monitoring_notification_channel.email) == 0
    error_message = "without billing_account and alert_emails, no budget and no channel are made"
  }
}

run "bad_alert_email_refused" {
  command = plan
  variables {
    alert_emails = ["oncall"]
  }
  expect_failures = [var.alert_emails]
}

# A default Pub/Sub channel: the three functions that deliver events may
# publish to that topic, and are told its name.
run "notify_topic" {
  command = plan
  variables {
    notify_topic = "projects/ops-project/topics/baton-events"
  }
  assert {
    condition     = toset(keys(google_pubsub_topic_iam_member.notify_publisher)) == toset(["Tick", "Run", "Schedules"]) && google_pubsub_topic_iam_member.notify_publisher["Run"].project == "ops-project"
    error_message = "notify_topic must grant Tick, Run and Schedules roles/pubsub.publisher on it, in its own project"
  }
  assert {
    condition     = local.functions.Run.env.BATON_NOTIFY_TOPIC == "projects/ops-project/topics/baton-events"
    error_message = "Run must be told the default topic"
  }
}

# pubsub targets: each listed topic is granted to the three functions that
# execute runs, in the topic's own project, and the functions are told the
# list; nothing is granted by default.
run "pubsub_target_topics" {
  command = plan
  variables {
    pubsub_target_topics = ["projects/data-proj/topics/nightly-export", "projects/ops-project/topics/cache-warm"]
  }
  assert {
    condition     = length(google_pubsub_topic_iam_member.target_publisher) == 6 && alltrue([for g in google_pubsub_topic_iam_member.target_publisher : g.role == "roles/pubsub.publisher" && g.project == split("/", g.topic)[1]])
    error_message = "pubsub_target_topics must grant roles/pubsub.publisher on each topic (2) to Tick, Run and Schedules (3), each in the topic's project"
  }
  assert {
    condition     = toset([for g in google_pubsub_topic_iam_member.target_publisher : g.topic]) == toset(["projects/data-proj/topics/nightly-export", "projects/ops-project/topics/cache-warm"])
    error_message = "pubsub_target_topics must grant on exactly the listed topics"
  }
  assert {
    condition     = local.functions.Run.env.BATON_ALLOWED_TOPICS == "projects/data-proj/topics/nightly-export,projects/ops-project/topics/cache-warm" && local.functions.Schedules.env.BATON_ALLOWED_TOPICS == local.functions.Run.env.BATON_ALLOWED_TOPICS && local.functions.Tick.env.BATON_ALLOWED_TOPICS == local.functions.Run.env.BATON_ALLOWED_TOPICS
    error_message = "Tick, Run and Schedules must be told the allowed topics"
  }
}

run "pubsub_target_topics_default_grants_nothing" {
  command = plan
  assert {
    condition     = length(google_pubsub_topic_iam_member.target_publisher) == 0 && local.functions.Run.env.BATON_ALLOWED_TOPICS == ""
    error_message = "without pubsub_target_topics nothing may be granted and no topic allowed"
  }
}

run "bad_pubsub_target_topic_refused" {
  command = plan
  variables {
    pubsub_target_topics = ["projects/p1-project/topics/goog-x"]
  }
  expect_failures = [var.pubsub_target_topics]
}

# cloudRunJob targets: each listed job is granted, in its own project and
# region, the executor-with-overrides and viewer roles for the three
# functions that execute runs, and the functions are told the list;
# nothing is granted by default.
run "cloud_run_target_jobs" {
  command = plan
  variables {
    cloud_run_target_jobs = ["projects/data-proj/locations/europe-west1/jobs/nightly-export", "projects/ops-project/locations/us-central1/jobs/reindex"]
  }
  assert {
    condition     = length(google_cloud_run_v2_job_iam_member.target_executor) == 12 && alltrue([for g in google_cloud_run_v2_job_iam_member.target_executor : contains(["roles/run.jobsExecutorWithOverrides", "roles/run.viewer"], g.role)])
    error_message = "cloud_run_target_jobs must grant exactly roles/run.jobsExecutorWithOverrides and roles/run.viewer on each job (2) to Tick, Run and Schedules (3)"
  }
  assert {
    condition     = toset([for g in google_cloud_run_v2_job_iam_member.target_executor : "projects/${g.project}/locations/${g.location}/jobs/${g.name}"]) == toset(["projects/data-proj/locations/europe-west1/jobs/nightly-export", "projects/ops-project/locations/us-central1/jobs/reindex"])
    error_message = "cloud_run_target_jobs must grant on exactly the listed jobs, each in its own project and region"
  }
  assert {
    condition     = local.functions.Run.env.BATON_ALLOWED_JOBS == "projects/data-proj/locations/europe-west1/jobs/nightly-export,projects/ops-project/locations/us-central1/jobs/reindex" && local.functions.Schedules.env.BATON_ALLOWED_JOBS == local.functions.Run.env.BATON_ALLOWED_JOBS && local.functions.Tick.env.BATON_ALLOWED_JOBS == local.functions.Run.env.BATON_ALLOWED_JOBS
    error_message = "Tick, Run and Schedules must be told the allowed jobs"
  }
}

run "cloud_run_target_jobs_default_grants_nothing" {
  command = plan
  assert {
    condition     = length(google_cloud_run_v2_job_iam_member.target_executor) == 0 && local.functions.Run.env.BATON_ALLOWED_JOBS == ""
    error_message = "without cloud_run_target_jobs nothing may be granted and no job allowed"
  }
}

run "bad_cloud_run_target_job_refused" {
  command = plan
  variables {
    cloud_run_target_jobs = ["projects/p1-project/locations/us-central1/jobs/Bad_Job"]
  }
  expect_failures = [var.cloud_run_target_jobs]
}

run "bad_notify_topic_refused" {
  command = plan
  variables {
    notify_topic = "baton-events"
  }
  expect_failures = [var.notify_topic]
}

# No gpu_worker_types: the single default service, as before, and nothing
# typed next to it.
run "gpu_types_default" {
  command = plan
  assert {
    condition     = length(google_cloud_run_v2_service.gpu_worker_type) == 0 && length(google_cloud_run_v2_service_iam_member.worker_type_invoker) == 0 && google_cloud_run_v2_service.gpu_worker.name == "baton-gpu-worker"
    error_message = "without gpu_worker_types, only the default worker service and its grants"
  }
  assert {
    condition     = keys(output.gpu_worker_urls) == ["default"] && local.gpu_pool == "https://baton-gpu-worker-123456789012.us-central1.run.app=1@nvidia-l4"
    error_message = "without gpu_worker_types, the pool is the single default entry and gpu_worker_urls names only it"
  }
  assert {
    condition     = google_logging_metric.gpu_worker_errors.filter == "resource.type = \"cloud_run_revision\" AND resource.labels.service_name = \"baton-gpu-worker\" AND severity >= ERROR"
    error_message = "without gpu_worker_types, the worker errors metric's filter is unchanged"
  }
}

# Two more types beside the default L4 one: an RTX Pro 6000 with its own
# shape and a second, bigger L4 (two entries may share an accelerator).
run "gpu_types_two" {
  command = plan
  variables {
    gpu_slots    = 2
    daemon_image = "us-central1-docker.pkg.dev/baton-test/baton/baton:v1"
    gpu_worker_types = {
      rtx   = { accelerator = "nvidia-rtx-pro-6000", slots = 3, min_instances = 1, cpu = "20", memory = "80Gi" }
      l4big = { accelerator = "nvidia-l4", slots = 4, cpu = "8", memory = "32Gi" }
    }
  }
  assert {
    condition = (google_cloud_run_v2_service.gpu_worker.name == "baton-gpu-worker" &&
      google_cloud_run_v2_service.gpu_worker_type["rtx"].name == "baton-gpu-worker-rtx" &&
    google_cloud_run_v2_service.gpu_worker_type["l4big"].name == "baton-gpu-worker-l4big")
    error_message = "the default service keeps its name; each type gets baton-gpu-worker-NAME"
  }
  assert {
    condition = (google_cloud_run_v2_service.gpu_worker_type["rtx"].template[0].node_selector[0].accelerator == "nvidia-rtx-pro-6000" &&
      google_cloud_run_v2_service.gpu_worker_type["rtx"].template[0].scaling[0].max_instance_count == 3 &&
      google_cloud_run_v2_service.gpu_worker_type["rtx"].template[0].scaling[0].min_instance_count == 1 &&
      google_cloud_run_v2_service.gpu_worker_type["rtx"].template[0].containers[0].resources[0].limits.cpu == "20" &&
      google_cloud_run_v2_service.gpu_worker_type["rtx"].template[0].containers[0].resources[0].limits.memory == "80Gi" &&
      google_cloud_run_v2_service.gpu_worker_type["l4big"].template[0].scaling[0].min_instance_count == 0 &&
    google_cloud_run_v2_service.gpu_worker.template[0].containers[0].resources[0].limits.cpu == "4")
    error_message = "each type has its own accelerator, scaling and shape; the default keeps worker_cpu"
  }
  assert {
    condition = alltrue([for s in google_cloud_run_v2_service.gpu_worker_type :
      s.template[0].service_account == google_service_account.gpu_worker.email && s.template[0].containers[0].image == var.worker_image &&
      s.template[0].max_instance_request_concurrency == 1 && s.template[0].containers[0].resources[0].cpu_idle == false &&
      s.template[0].containers[0].resources[0].limits["nvidia.com/gpu"] == "1" &&
    one([for e in s.template[0].containers[0].env : e.value if e.name == "BATON_CONTROL_URL"]) == "https://baton-gpu-callback-mock-uc.a.run.app"])
    error_message = "every type runs the same image as the worker account, one job per instance on one GPU, and calls back GPUCallback"
  }
  assert {
    condition = (google_cloudfunctions2_function.fn["Tick"].service_config[0].environment_variables["BATON_GPU_POOL"] == join(",", [
      "https://baton-gpu-worker-123456789012.us-central1.run.app=2@nvidia-l4",
      "https://baton-gpu-worker-l4big-123456789012.us-central1.run.app=4@nvidia-l4",
      "https://baton-gpu-worker-rtx-123456789012.us-central1.run.app=3@nvidia-rtx-pro-6000",
    ]) && one([for e in google_cloud_run_v2_service.daemon[0].template[0].containers[0].env : e.value if e.name == "BATON_GPU_POOL"]) == local.gpu_pool)
    error_message = "BATON_GPU_POOL must list every service as URL=slots@accelerator, the default first, on the functions and the daemon"
  }
  assert {
    condition = (toset(keys(google_cloud_run_v2_service_iam_member.worker_type_invoker)) == toset(flatten([for f in local.pool_functions : ["${f}/l4big", "${f}/rtx"]])) &&
      google_cloud_run_v2_service_iam_member.worker_type_invoker["Tick/rtx"].member == google_service_account.function["Tick"].member &&
      google_cloud_run_v2_service_iam_member.worker_type_invoker["Tick/rtx"].name == "baton-gpu-worker-rtx" &&
    toset(keys(google_cloud_run_v2_service_iam_member.worker_invoker)) == local.pool_functions)
    error_message = "every function told the pool may invoke every type; the default service keeps its own grants"
  }
  assert {
    condition     = keys(google_cloud_run_v2_service_iam_member.daemon_worker_type_invoker) == ["l4big", "rtx"] && google_cloud_run_v2_service_iam_member.daemon_worker_type_invoker["rtx"].name == "baton-gpu-worker-rtx" && length(google_cloud_run_v2_service_iam_member.daemon_worker_invoker) == 1
    error_message = "the daemon may invoke every type, and the default service"
  }
  assert {
    condition     = keys(output.gpu_worker_urls) == ["default", "l4big", "rtx"]
    error_message = "gpu_worker_urls must name every service"
  }
  assert {
    condition     = google_logging_metric.gpu_worker_errors.filter == "resource.type = \"cloud_run_revision\" AND (resource.labels.service_name = \"baton-gpu-worker\" OR resource.labels.service_name = \"baton-gpu-worker-l4big\" OR resource.labels.service_name = \"baton-gpu-worker-rtx\") AND severity >= ERROR"
    error_message = "the worker errors metric must count every worker service's errors"
  }
}

run "gpu_type_min_over_slots_refused" {
  command = plan
  variables {
    gpu_worker_types = { rtx = { accelerator = "nvidia-rtx-pro-6000", slots = 1, min_instances = 2, cpu = "20", memory = "80Gi" } }
  }
  expect_failures = [var.gpu_worker_types]
}

run "gpu_type_bad_accelerator_refused" {
  command = plan
  variables {
    gpu_worker_types = { h100 = { accelerator = "nvidia-h100", slots = 1 } }
  }
  expect_failures = [var.gpu_worker_types]
}

run "gpu_type_bad_slots_refused" {
  command = plan
  variables {
    gpu_worker_types = { l4 = { accelerator = "nvidia-l4", slots = 1.5 } }
  }
  expect_failures = [var.gpu_worker_types]
}

run "gpu_type_bad_name_refused" {
  command = plan
  variables {
    gpu_worker_types = { "L4_Big" = { accelerator = "nvidia-l4", slots = 1 } }
  }
  expect_failures = [var.gpu_worker_types]
}

run "gpu_type_bad_cpu_refused" {
  command = plan
  variables {
    gpu_worker_types = { l4 = { accelerator = "nvidia-l4", slots = 1, cpu = "2" } }
  }
  expect_failures = [var.gpu_worker_types]
}

# The shape rule per entry: an RTX type left on the default 4 vCPU / 16Gi
# is refused at plan, naming the entry.
run "gpu_type_bad_shape_refused" {
  command = plan
  variables {
    gpu_worker_types = { rtx = { accelerator = "nvidia-rtx-pro-6000", slots = 1 } }
  }
  expect_failures = [google_cloud_run_v2_service.gpu_worker_type]
}

# An L4 type too big for an L4, beside a default that fits.
run "gpu_type_l4_too_big_refused" {
  command = plan
  variables {
    gpu_worker_types = { l4 = { accelerator = "nvidia-l4", slots = 1, cpu = "20", memory = "80Gi" } }
  }
  expect_failures = [google_cloud_run_v2_service.gpu_worker_type]
}

# "default" names the gpu_accelerator service in gpu_worker_urls.
run "gpu_type_default_name_refused" {
  command = plan
  variables {
    gpu_worker_types = { default = { accelerator = "nvidia-l4", slots = 1 } }
  }
  expect_failures = [var.gpu_worker_types]
}

# Past one queue's 500 dispatches a second: three queues, named after
# tasks_queue_name, every enqueuer granted on each, the functions told all
# three in index order, and Run sized for all of their dispatches.
run "three_queues" {
  command = plan
  variables {
    tasks_queue_count               = 3
    tasks_max_dispatches_per_second = 500
    tasks_max_concurrent_dispatches = 2000
    run_concurrency                 = 250
  }
  assert {
    condition     = [for q in google_cloud_tasks_queue.runs : q.name] == ["baton-runs", "baton-runs-1", "baton-runs-2"]
    error_message = "queue 0 keeps tasks_queue_name and queue i is tasks_queue_name-i"
  }
  assert {
    condition     = length(google_cloud_tasks_queue_iam_member.enqueuer) == 9 && google_cloud_tasks_queue_iam_member.enqueuer["Tick/2"].name == "baton-runs-2"
    error_message = "each of Tick, Schedules and Run enqueues on each queue"
  }
  assert {
    condition     = alltrue([for k in ["Tick", "Schedules", "Run"] : length(split(",", google_cloudfunctions2_function.fn[k].service_config[0].environment_variables["BATON_TASKS_QUEUE"])) == 3])
    error_message = "BATON_TASKS_QUEUE must list the three queues"
  }
  assert {
    condition     = google_cloudfunctions2_function.fn["Run"].service_config[0].max_instance_count == 24
    error_message = "Run must have ceil(3 × 2000 / 250) = 24 instances"
  }
}

run "run_max_instances_set" {
  command = plan
  variables {
    run_max_instances = 40
  }
  assert {
    condition     = google_cloudfunctions2_function.fn["Run"].service_config[0].max_instance_count == 40
    error_message = "run_max_instances, when set, is Run's max instances"
  }
}

run "run_max_instances_too_few_refused" {
  command = plan
  variables {
    run_max_instances = 5
  }
  expect_failures = [google_cloudfunctions2_function.fn["Run"]]
}

run "concurrency_below_one_vcpu_refused" {
  command = plan
  variables {
    run_cpu = "0.583"
  }
  expect_failures = [google_cloudfunctions2_function.fn["Run"]]
}

run "one_request_below_one_vcpu" {
  command = plan
  variables {
    run_cpu         = "0.333"
    run_memory      = "512Mi"
    run_concurrency = 1
  }
  assert {
    condition     = google_cloudfunctions2_function.fn["Run"].service_config[0].max_instance_count == 1000
    error_message = "one request an instance needs an instance per dispatch in flight"
  }
}

run "bad_run_settings_refused" {
  command = plan
  variables {
    run_cpu           = "3"
    run_memory        = "1.5Gi"
    run_concurrency   = 1001
    run_max_instances = -1
    tasks_queue_count = 0
  }
  expect_failures = [var.run_cpu, var.run_memory, var.run_concurrency, var.run_max_instances, var.tasks_queue_count]
}
