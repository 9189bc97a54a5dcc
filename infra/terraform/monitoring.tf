# Metrics, alerts and the dashboard (docs/observability.md).
#
# The functions and the daemon export baton's OpenTelemetry metrics to
# Cloud Monitoring (shared/metrics), where they are
# workload.googleapis.com/<name>; tests/terraform_monitoring_test.go checks
# that every metric named here is one the code emits (metrics.Names) and
# that the dashboard shows each of them.

locals {
  # Every alert policy notifies the same channels: the email ones made
  # here and any the operator already has.
  alert_channels = concat(
    [for c in google_monitoring_notification_channel.email : c.id],
    var.notification_channels,
  )

  metric_prefix = "workload.googleapis.com/"
}

# The accounts that record metrics may write them: the functions that
# reach the database (Rent records nothing) and the daemon. The role is
# only grantable on the project; it writes time series and nothing else.
resource "google_project_iam_member" "function_metrics" {
  for_each = local.db_functions

  project    = var.project
  role       = "roles/monitoring.metricWriter"
  member     = google_service_account.function[each.key].member
  depends_on = [terraform_data.apis_ready]
}

resource "google_project_iam_member" "daemon_metrics" {
  count = local.daemon_count

  project    = var.project
  role       = "roles/monitoring.metricWriter"
  member     = google_service_account.daemon[0].member
  depends_on = [terraform_data.apis_ready]
}

resource "google_monitoring_notification_channel" "email" {
  for_each = toset(var.alert_emails)

  project      = var.project
  display_name = "baton alerts: ${each.value}"
  type         = "email"
  labels = {
    email_address = each.value
  }
  depends_on = [terraform_data.apis_ready]
}

# Ticks stopped: nothing baton does can report that, since baton is what
# stopped. Cloud Monitoring alerts on the absence of successful ticks.
resource "google_monitoring_alert_policy" "no_tick" {
  project               = var.project
  display_name          = "baton: no successful tick for ${var.alert_tick_absent_minutes} minutes"
  combiner              = "OR"
  notification_channels = local.alert_channels
  severity              = "CRITICAL"

  conditions {
    display_name = "baton_ticks_total{result=ok} absent"
    condition_absent {
      filter   = "metric.type = \"${local.metric_prefix}baton_ticks_total\" AND metric.labels.result = \"ok\""
      duration = "${var.alert_tick_absent_minutes * 60}s"
      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_DELTA"
        cross_series_reducer = "REDUCE_SUM"
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "No tick decided anything for ${var.alert_tick_absent_minutes} minutes: schedules are not firing. Check the Cloud Scheduler job (`baton doctor`), the Tick function's logs and its 5xx rate. See docs/observability.md, \"no successful tick\"."
  }
  depends_on = [terraform_data.apis_ready]
}

# Runs failing: the share of runs that ended failed, over 10 minutes.
resource "google_monitoring_alert_policy" "run_failures" {
  project               = var.project
  display_name          = "baton: more than ${var.alert_run_failure_ratio * 100}% of runs failed"
  combiner              = "OR"
  notification_channels = local.alert_channels
  severity              = "ERROR"

  conditions {
    display_name = "failed / all baton_runs_total"
    condition_threshold {
      filter = "metric.type = \"${local.metric_prefix}baton_runs_total\" AND metric.labels.status = \"failed\""
      aggregations {
        alignment_period     = "600s"
        per_series_aligner   = "ALIGN_DELTA"
        cross_series_reducer = "REDUCE_SUM"
      }
      denominator_filter = "metric.type = \"${local.metric_prefix}baton_runs_total\""
      denominator_aggregations {
        alignment_period     = "600s"
        per_series_aligner   = "ALIGN_DELTA"
        cross_series_reducer = "REDUCE_SUM"
      }
      comparison      = "COMPARISON_GT"
      threshold_value = var.alert_run_failure_ratio
      duration        = "0s"
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "Runs are failing. `baton runs list --status failed --since 1h` lists them with their errors; group by schedule on the dashboard. See docs/observability.md, \"run failures\"."
  }
  depends_on = [terraform_data.apis_ready]
}

# Tick answering 5xx: Cloud Run's own request metric, since a Tick that
# fails before recording anything records nothing.
resource "google_monitoring_alert_policy" "tick_errors" {
  project               = var.project
  display_name          = "baton: Tick answers 5xx"
  combiner              = "OR"
  notification_channels = local.alert_channels
  severity              = "ERROR"

  conditions {
    display_name = "Tick 5xx"
    condition_threshold {
      filter = "metric.type = \"run.googleapis.com/request_count\" AND resource.type = \"cloud_run_revision\" AND resource.labels.service_name = \"${local.functions.Tick.name}\" AND metric.labels.response_code_class = \"5xx\""
      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_DELTA"
        cross_series_reducer = "REDUCE_SUM"
      }
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "The Tick function answered 5xx: its JSON log lines (severity ERROR) say why, often the database or the bucket. `baton doctor` checks both. See docs/observability.md, \"Tick 5xx\"."
  }
  depends_on = [terraform_data.apis_ready]
}

# Missed runs: fire times nothing decided that the catch-up policy did not
# run (ticks stopped or failed, and came back). Each tick that finds them
# counts them once.
resource "google_monitoring_alert_policy" "missed_runs" {
  project               = var.project
  display_name          = "baton: fire times missed"
  combiner              = "OR"
  notification_channels = local.alert_channels
  severity              = "ERROR"

  conditions {
    display_name = "baton_runs_missed_total"
    condition_threshold {
      filter = "metric.type = \"${local.metric_prefix}baton_runs_missed_total\""
      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_DELTA"
        cross_series_reducer = "REDUCE_SUM"
      }
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "Fire times came and went with nothing deciding them, and their schedules' catch-up policy does not run them. `baton runs list --source catchup --status skipped` shows each window (`<schedule>@<fire>-missed`); `baton schedules backfill` runs them if they are still wanted. Look at why ticks stopped: the no-tick and Tick 5xx alerts. See docs/observability.md, \"missed runs\"."
  }
  depends_on = [terraform_data.apis_ready]
}

# GPU jobs waiting too long for a slot.
resource "google_monitoring_alert_policy" "gpu_wait" {
  project               = var.project
  display_name          = "baton: GPU queue wait p99 over ${var.alert_gpu_wait_p99_seconds}s"
  combiner              = "OR"
  notification_channels = local.alert_channels
  severity              = "WARNING"

  conditions {
    display_name = "baton_gpu_wait_seconds p99"
    condition_threshold {
      filter = "metric.type = \"${local.metric_prefix}baton_gpu_wait_seconds\""
      aggregations {
        alignment_period     = "600s"
        per_series_aligner   = "ALIGN_DELTA"
        cross_series_reducer = "REDUCE_PERCENTILE_99"
      }
      comparison      = "COMPARISON_GT"
      threshold_value = var.alert_gpu_wait_p99_seconds
      duration        = "0s"
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "GPU jobs wait longer than ${var.alert_gpu_wait_p99_seconds}s for a slot: the pool is too small for the load, or slots are stuck (`baton gpu pool`). See docs/observability.md, \"GPU wait\"."
  }
  depends_on = [terraform_data.apis_ready]
}

# The GPU worker logs its errors (a callback refused, an output upload
# failed) but has no database to record them in: a log-based metric
# counts them.
locals {
  # Every worker service's logs; with no gpu_worker_types, the single
  # clause it always was (the metric's filter unchanged).
  worker_service_filter = (length(local.worker_names) == 1 ? "resource.labels.service_name = \"${local.worker_name}\"" :
  "(${join(" OR ", [for n in values(local.worker_names) : "resource.labels.service_name = \"${n}\""])})")
}

resource "google_logging_metric" "gpu_worker_errors" {
  project    = var.project
  name       = "baton_gpu_worker_errors"
  filter     = "resource.type = \"cloud_run_revision\" AND ${local.worker_service_filter} AND severity >= ERROR"
  depends_on = [terraform_data.apis_ready]

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
  }
}

resource "google_monitoring_alert_policy" "gpu_worker_errors" {
  project               = var.project
  display_name          = "baton: GPU worker errors"
  combiner              = "OR"
  notification_channels = local.alert_channels
  severity              = "ERROR"

  conditions {
    display_name = "GPU worker ERROR log lines"
    condition_threshold {
      filter = "metric.type = \"logging.googleapis.com/user/${google_logging_metric.gpu_worker_errors.name}\" AND resource.type = \"cloud_run_revision\""
      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_DELTA"
        cross_series_reducer = "REDUCE_SUM"
      }
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "The GPU worker logged errors. Its log lines (service ${join(" or ", values(local.worker_names))}, severity ERROR) name the job; a 421 wrong_function means its BATON_CONTROL_URL names the wrong function. See docs/observability.md, \"GPU worker errors\"."
  }
  depends_on = [terraform_data.apis_ready]
}

resource "google_monitoring_dashboard" "baton" {
  project = var.project
  dashboard_json = templatefile("${path.module}/dashboards/baton.json", {
    prefix = local.metric_prefix
  })
  depends_on = [terraform_data.apis_ready]
}

# GPU spend, optional: a budget on Cloud Run (where the GPU worker runs)
# in this project, alerting at half, 90% and all of it. It needs the
# billing account's id and, for whoever applies, billing.budgets.create on
# that account.
resource "google_billing_budget" "gpu" {
  count = var.billing_account != "" && var.gpu_budget_amount > 0 ? 1 : 0

  billing_account = var.billing_account
  display_name    = "baton GPU (Cloud Run) spend"

  budget_filter {
    projects = ["projects/${data.google_project.this.number}"]
    services = var.gpu_budget_services
  }

  amount {
    specified_amount {
      currency_code = var.gpu_budget_currency
      units         = tostring(var.gpu_budget_amount)
    }
  }

  threshold_rules {
    threshold_percent = 0.5
  }
  threshold_rules {
    threshold_percent = 0.9
  }
  threshold_rules {
    threshold_percent = 1.0
  }

  all_updates_rule {
    monitoring_notification_channels = local.alert_channels
    disable_default_iam_recipients   = length(local.alert_channels) > 0
  }
  depends_on = [terraform_data.apis_ready]
}

# The default Pub/Sub notification channel (notify_topic), when set: the
# accounts that deliver notifications may publish to that topic, and only
# to it.
locals {
  notify_publishers = var.notify_topic == "" ? {} : merge(
    { for k in ["Tick", "Run", "Schedules"] : k => google_service_account.function[k].member },
    local.daemon_count > 0 ? { daemon = google_service_account.daemon[0].member } : {},
  )
}

# pubsub targets (pubsub_target_topics): the accounts that execute runs may
# publish to each listed topic, and only to those. Same accounts as
# notifications: Run executes handed-off runs; Tick and Schedules decide
# and may execute inline (trigger-now without a queue, the daemon).
locals {
  target_publishers = merge(
    { for k in ["Tick", "Run", "Schedules"] : k => google_service_account.function[k].member },
    local.daemon_count > 0 ? { daemon = google_service_account.daemon[0].member } : {},
  )
  target_topic_grants = {
    for pair in setproduct(var.pubsub_target_topics, keys(local.target_publishers)) :
    "${pair[0]} ${pair[1]}" => { topic = pair[0], member = local.target_publishers[pair[1]] }
  }
}

resource "google_pubsub_topic_iam_member" "target_publisher" {
  for_each = local.target_topic_grants

  project    = split("/", each.value.topic)[1]
  topic      = each.value.topic
  role       = "roles/pubsub.publisher"
  member     = each.value.member
  depends_on = [terraform_data.apis_ready]
}

# cloudRunJob targets (cloud_run_target_jobs): the accounts that execute
# runs may run each listed job with overrides, cancel its executions and
# read them, and nothing else. roles/run.jobsExecutorWithOverrides is the
# narrowest predefined role with run.jobs.runWithOverrides and
# run.executions.cancel; reading executions (run.executions.get, .list) is
# roles/run.viewer's, granted on the job alone
# (https://cloud.google.com/iam/docs/roles-permissions/run).
locals {
  run_job_roles = ["roles/run.jobsExecutorWithOverrides", "roles/run.viewer"]
  run_job_grants = {
    for t in setproduct(var.cloud_run_target_jobs, keys(local.target_publishers), local.run_job_roles) :
    "${t[0]} ${t[1]} ${t[2]}" => { job = t[0], member = local.target_publishers[t[1]], role = t[2] }
  }
}

resource "google_cloud_run_v2_job_iam_member" "target_executor" {
  for_each = local.run_job_grants

  project    = split("/", each.value.job)[1]
  location   = split("/", each.value.job)[3]
  name       = split("/", each.value.job)[5]
  role       = each.value.role
  member     = each.value.member
  depends_on = [terraform_data.apis_ready]
}

resource "google_pubsub_topic_iam_member" "notify_publisher" {
  for_each = local.notify_publishers

  project    = split("/", var.notify_topic)[1]
  topic      = var.notify_topic
  role       = "roles/pubsub.publisher"
  member     = each.value
  depends_on = [terraform_data.apis_ready]
}
