output "function_urls" {
  description = "URL of each function."
  value       = { for k, f in google_cloudfunctions2_function.fn : k => f.service_config[0].uri }
}

output "run_url" {
  description = "URL of the Run function that every task targets and that is the audience of the tasks' OIDC tokens (BATON_RUN_URL): Cloud Run's deterministic URL of baton-run, which function_urls[\"Run\"] serves too."
  value       = local.run_url
}

output "tasks_queue" {
  description = "Full ID of the first Cloud Tasks queue runs are handed to, for gcloud tasks queues describe/pause/resume; tasks_queues lists them all."
  value       = google_cloud_tasks_queue.runs[0].id
}

output "tasks_queues" {
  description = "Full IDs of every run queue, in the order the enqueuer hashes over (BATON_TASKS_QUEUE)."
  value       = google_cloud_tasks_queue.runs[*].id
}

output "tick_queue" {
  description = "Full ID of the baton-ticks queue of the partition tasks (BATON_TICK_QUEUE), or null when decider_partitions is 0."
  value       = one(google_cloud_tasks_queue.ticks[*].id)
}

output "daemon_service" {
  description = "Name of the baton daemon's Cloud Run service, or null when daemon_image is empty."
  value       = one(google_cloud_run_v2_service.daemon[*].name)
}

output "gpu_worker_url" {
  description = "URL of the GPU worker service of gpu_accelerator (the default one; see gpu_worker_urls for all of them)."
  value       = google_cloud_run_v2_service.gpu_worker.uri
}

output "gpu_worker_urls" {
  description = "URL of every GPU worker service, by type: \"default\" is the gpu_accelerator one (gpu_worker_url), the others are gpu_worker_types' names."
  value       = merge({ default = google_cloud_run_v2_service.gpu_worker.uri }, { for k, s in google_cloud_run_v2_service.gpu_worker_type : k => s.uri })
}

output "rent_url" {
  description = "Public URL of the Rent calculator."
  value       = google_cloudfunctions2_function.fn["Rent"].service_config[0].uri
}

output "image_repository" {
  description = "Artifact Registry repository of the functions' images (REGION-docker.pkg.dev/PROJECT/baton-functions), with its cleanup policy."
  value       = google_artifact_registry_repository.functions.registry_uri
}

output "bucket" {
  description = "Bucket for leases, job output and the function source."
  value       = google_storage_bucket.baton.name
}

output "database" {
  description = "Firestore database ID."
  value       = google_firestore_database.baton.name
}

# Each gen2 function has its own URL, so the cloud has no single base for
# BATON_URL (locally one port serves /Schedules and /GPU, and the CLI appends
# those paths). The CLI must read BATON_SCHEDULES_URL and BATON_GPU_URL
# instead. BATON_TOKEN carries the operator's Google ID token as the bearer
# token: Cloud Run's IAM check accepts it, and the functions themselves have
# no BATON_TOKEN set in the cloud. ID tokens last an hour; eval again after.
output "cli_env" {
  description = "Environment lines for the baton CLI: eval \"$(terraform output -raw cli_env)\"."
  value = join("\n", [
    "export BATON_SCHEDULES_URL=${google_cloudfunctions2_function.fn["Schedules"].service_config[0].uri}",
    "export BATON_GPU_URL=${google_cloudfunctions2_function.fn["GPU"].service_config[0].uri}",
    "export BATON_BUCKET=${google_storage_bucket.baton.name}",
    "export BATON_DATABASE=${google_firestore_database.baton.name}",
    "export BATON_PROJECT=${var.project}",
    "export BATON_REGION=${var.region}",
    # The location the database was created in: firestore_location, or the
    # region when that is empty (main.tf's local), for baton doctor.
    "export BATON_FIRESTORE_LOCATION=${local.firestore_location}",
    "export BATON_TICK_URL=${google_cloudfunctions2_function.fn["Tick"].service_config[0].uri}",
    "export BATON_TOKEN=\"$(gcloud auth print-identity-token)\"",
    "",
  ])
}
