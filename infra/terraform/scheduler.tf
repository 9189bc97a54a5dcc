# One job calls Tick every minute with an OIDC token for the scheduler's own
# service account. Delivery is at least once; Tick is idempotent per
# scheduled time (X-CloudScheduler-ScheduleTime), so retries are safe.
resource "google_cloud_scheduler_job" "tick" {
  project          = var.project
  region           = var.region
  name             = "baton-tick"
  description      = "Calls baton's Tick function"
  schedule         = var.tick_schedule
  time_zone        = var.tick_time_zone
  attempt_deadline = "${var.tick_timeout_seconds}s"

  retry_config {
    retry_count          = 2
    min_backoff_duration = "5s"
    max_backoff_duration = "20s"
    max_doublings        = 2
    # Stop retrying before the next tick is due.
    max_retry_duration = "50s"
  }

  http_target {
    http_method = "POST"
    uri         = google_cloudfunctions2_function.fn["Tick"].service_config[0].uri
    headers     = { "Content-Type" = "application/json" }
    body        = base64encode("{}")

    oidc_token {
      service_account_email = google_service_account.scheduler.email
      audience              = google_cloudfunctions2_function.fn["Tick"].service_config[0].uri
    }
  }

  depends_on = [google_cloud_run_v2_service_iam_member.function_invoker]
}
