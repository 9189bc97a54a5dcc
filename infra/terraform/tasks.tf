# The hand-off from deciding to executing (DESIGN.md flow 1, step 6). Tick
# and Schedules create one task per decided run, named after the run, on one
# of these queues; Run enqueues its retries there too. Every task is an HTTP
# task to Run carrying an OIDC token of baton-tasks, so what the queues may
# call is decided by one grant: run.invoker for baton-tasks on Run.
#
# One queue dispatches at most 500 tasks a second
# (https://cloud.google.com/tasks/docs/quotas), 30,000 runs a minute. Past
# that, tasks_queue_count queues share the load: the enqueuer picks a
# schedule's queue by a stable hash of its id (shared/taskqueue), so all of
# one schedule's tasks, retries included, stay in one queue. Queue 0 keeps
# the name tasks_queue_name (a deployment from before count existed keeps
# its queue: Terraform moves runs to runs[0] by itself); queue i > 0 is
# named tasks_queue_name-i. docs/deploy.md, "Sizing", has the arithmetic.
resource "google_cloud_tasks_queue" "runs" {
  count = var.tasks_queue_count

  project  = var.project
  location = var.region
  name     = count.index == 0 ? var.tasks_queue_name : "${var.tasks_queue_name}-${count.index}"
  # A deleted queue's name cannot be reused for 7 days, so a protected
  # deployment refuses to delete it by accident.
  deletion_policy = var.deletion_protection ? "PREVENT" : "DELETE"

  # Cloud Tasks retries a failed dispatch (non-2xx, or no answer within the
  # task's dispatch deadline) on its own; once max_attempts are used up,
  # Tick's sweep is the safety net for the lost task or the dead Run.
  retry_config {
    max_attempts  = var.tasks_max_attempts
    min_backoff   = "${var.tasks_min_backoff_seconds}s"
    max_backoff   = "${var.tasks_max_backoff_seconds}s"
    max_doublings = var.tasks_max_doublings
    # Cloud Tasks stops only when both max_attempts and max_retry_duration
    # are used up, so 0 (no age limit) lets max_attempts alone decide.
    max_retry_duration = "${var.tasks_max_retry_duration_seconds}s"
  }

  rate_limits {
    max_dispatches_per_second = var.tasks_max_dispatches_per_second
    max_concurrent_dispatches = var.tasks_max_concurrent_dispatches
  }

  # One log entry per dispatch attempt, with its response code: the only
  # record of a task that Run never saw (a 403 or a 429 before the code).
  stackdriver_logging_config {
    sampling_ratio = var.tasks_log_sampling_ratio
  }

  lifecycle {
    # A variable's validation cannot see another variable in Terraform 1.5,
    # and Cloud Tasks would refuse the pair only at apply.
    precondition {
      condition     = var.tasks_max_backoff_seconds >= var.tasks_min_backoff_seconds
      error_message = "tasks_max_backoff_seconds must be at least tasks_min_backoff_seconds."
    }
  }

  depends_on = [terraform_data.apis_ready]
}

# The identity of every task's OIDC token. It only ever invokes Run, so a
# stolen ability to enqueue reaches Run and nothing else.
resource "google_service_account" "tasks" {
  project      = var.project
  account_id   = "baton-tasks"
  display_name = "baton Cloud Tasks dispatcher (OIDC identity of tasks calling Run)"
  depends_on   = [terraform_data.apis_ready]
}

locals {
  # Who enqueues: exactly the functions that are told the queues.
  tasks_functions = toset([for k, f in local.functions : k if contains(keys(f.env), "BATON_TASKS_QUEUE")])
  # BATON_TASKS_QUEUE: every run queue's full ID, comma-separated, in index
  # order. The order is part of the hash's contract (a schedule's queue is
  # hash mod count, by position), so it must not be sorted by name.
  tasks_queues = join(",", google_cloud_tasks_queue.runs[*].id)
  # One grant per enqueuing function and queue, "Fn/i".
  tasks_enqueuers = { for p in setproduct(sort(tolist(local.tasks_functions)), range(var.tasks_queue_count)) : "${p[0]}/${p[1]}" => { fn = p[0], queue = p[1] } }
}

# Enqueuing is granted on baton's queues only, not project-wide, so these
# accounts cannot create tasks on other queues of the project.
resource "google_cloud_tasks_queue_iam_member" "enqueuer" {
  for_each = local.tasks_enqueuers

  project  = var.project
  location = var.region
  name     = google_cloud_tasks_queue.runs[each.value.queue].name
  role     = "roles/cloudtasks.enqueuer"
  member   = google_service_account.function[each.value.fn].member
}

# The grants of a deployment from before tasks_queue_count were keyed by
# function alone; they are queue 0's, kept in place rather than replaced
# (a replace would leave the function unable to enqueue for a moment).
moved {
  from = google_cloud_tasks_queue_iam_member.enqueuer["Tick"]
  to   = google_cloud_tasks_queue_iam_member.enqueuer["Tick/0"]
}
moved {
  from = google_cloud_tasks_queue_iam_member.enqueuer["Run"]
  to   = google_cloud_tasks_queue_iam_member.enqueuer["Run/0"]
}
moved {
  from = google_cloud_tasks_queue_iam_member.enqueuer["Schedules"]
  to   = google_cloud_tasks_queue_iam_member.enqueuer["Schedules/0"]
}

# Creating a task with an OIDC token for baton-tasks needs
# iam.serviceAccounts.actAs on baton-tasks (the OidcToken docs), granted on
# that one account so the enqueuers cannot act as any other.
resource "google_service_account_iam_member" "tasks_actas" {
  for_each = local.tasks_functions

  service_account_id = google_service_account.tasks.name
  role               = "roles/iam.serviceAccountUser"
  member             = google_service_account.function[each.key].member
}

# Cloud Tasks' own service agent mints each task's OIDC token; it can do so
# through roles/cloudtasks.serviceAgent (iam.serviceAccounts.getOpenIdToken),
# which Google grants it when the API is enabled. Projects that enabled the
# Cloud Tasks API before 19 March 2019 lack that grant and must add it, so
# this is opt-in: on a newer project Terraform would own Google's own
# binding, and a destroy would remove it from every queue of the project.
resource "google_project_iam_member" "tasks_service_agent" {
  count = var.tasks_service_agent_grant ? 1 : 0

  project = var.project
  role    = "roles/cloudtasks.serviceAgent"
  member  = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-cloudtasks.iam.gserviceaccount.com"

  depends_on = [terraform_data.apis_ready]
}
