# Partitioned deciders (docs/scheduler.md, "Partitioned deciders"; issue 28).
# With decider_partitions P >= 1, the Cloud Scheduler tick is a coordinator:
# Tick creates P partition tasks per schedule time on the baton-ticks queue,
# each an HTTP task back to Tick itself (its own URL, taken from the
# coordinating request) with an OIDC token of baton-tick-tasks. Partition p
# decides the decider shards v with v mod P == p, each under its own lease
# leases/tick-<v>.json. P = 0 deploys none of this: Tick decides everything
# itself under leases/tick.json, the mode the daemon needs.
#
# The grants mirror the run queues' (tasks.tf): Tick alone enqueues on
# baton-ticks and acts as baton-tick-tasks, and baton-tick-tasks may invoke
# Tick and nothing else (iam.tf, function_invokers), so neither account can
# reach what the other's queue reaches.
locals {
  # null (the default) is 8, or 0 when the daemon is deployed: the daemon
  # decides under leases/tick.json, which the shard leases do not exclude,
  # so Tick must stay its fallback on the same lease (docs/deploy.md,
  # "Sub-minute schedules"). docs/deploy.md, "Sizing", explains the 8.
  decider_partitions = var.decider_partitions != null ? var.decider_partitions : (var.daemon_image != "" ? 0 : 8)
  tick_queue_count   = local.decider_partitions > 0 ? 1 : 0

  # Who enqueues partition tasks: exactly the functions told the tick
  # queue (Tick), and none while there is no queue.
  tick_functions = toset([for k, f in local.functions : k if contains(keys(f.env), "BATON_TICK_QUEUE")])
  tick_enqueuers = local.tick_queue_count > 0 ? local.tick_functions : toset([])
}

resource "google_cloud_tasks_queue" "ticks" {
  count = local.tick_queue_count

  project  = var.project
  location = var.region
  name     = "baton-ticks"
  # Not protected, unlike the run queues: it holds only partition tasks of
  # the current minute, which the next minute's partitions make redundant,
  # and a protected queue would stop the apply that turns P to 0 (or adds
  # the daemon) halfway. The price: a deleted queue's name is held for days
  # (https://cloud.google.com/tasks/docs/reference/rest/v2/projects.locations.queues/delete),
  # so P cannot go above 0 again until then (docs/deploy.md).
  deletion_policy = "DELETE"

  # A partition task is worth retrying only until the next tick's partition
  # decides what is still due, so the retries fit in the minute, as the
  # Cloud Scheduler job's do (scheduler.tf). A partition whose shard leases
  # are held by another delivery answers 200 (the shard is skipped, not
  # failed), so only a real failure (a 500: the database or the bucket) is
  # retried. Cloud Tasks stops once both max_attempts and
  # max_retry_duration are used up: at most 5 attempts (0, 5, 15, 35, 55 s).
  retry_config {
    max_attempts       = 3
    min_backoff        = "5s"
    max_backoff        = "20s"
    max_doublings      = 2
    max_retry_duration = "50s"
  }

  # P tasks a minute: all P of one schedule time are dispatched within a
  # second, and at most P are in flight, so a slow minute's partitions are
  # not joined by the next minute's (those would only skip the held shards)
  # and Tick's instances (P + 2, main.tf) hold every dispatch. Cloud Tasks
  # allows at most 500 dispatches a second and 5,000 in flight per queue
  # (https://cloud.google.com/tasks/docs/quotas).
  rate_limits {
    max_dispatches_per_second = min(local.decider_partitions, 500)
    max_concurrent_dispatches = local.decider_partitions
  }

  # P entries a minute: log them all (the only record of a partition task
  # refused before Tick's code, a 403 or a 429).
  stackdriver_logging_config {
    sampling_ratio = 1
  }

  lifecycle {
    # A variable's validation cannot see another variable in Terraform 1.5.
    precondition {
      condition     = local.decider_partitions <= var.decider_shards
      error_message = "decider_partitions must be at most decider_shards: a partition decides the shards v with v mod P == p, so a partition beyond the shards would decide none (Tick refuses BATON_PARTITIONS > BATON_DECIDER_SHARDS at start)."
    }
    precondition {
      condition     = var.daemon_image == "" || local.decider_partitions == 0
      error_message = "decider_partitions must be 0 (or unset) when daemon_image is set: the daemon decides under leases/tick.json and the partitions under leases/tick-<v>.json, which do not exclude each other (docs/deploy.md, \"Sub-minute schedules\")."
    }
  }

  depends_on = [terraform_data.apis_ready]
}

# The identity of every partition task's OIDC token. It only ever invokes
# Tick; baton-tasks (which invokes Run only) is never used for it.
resource "google_service_account" "tick_tasks" {
  count = local.tick_queue_count

  project      = var.project
  account_id   = "baton-tick-tasks"
  display_name = "baton Cloud Tasks dispatcher of partition tasks (OIDC identity of tasks calling Tick)"
  depends_on   = [terraform_data.apis_ready]
}

# Enqueuing partition tasks is granted on baton-ticks only.
resource "google_cloud_tasks_queue_iam_member" "tick_enqueuer" {
  for_each = local.tick_enqueuers

  project  = var.project
  location = var.region
  name     = google_cloud_tasks_queue.ticks[0].name
  role     = "roles/cloudtasks.enqueuer"
  member   = google_service_account.function[each.key].member
}

# Creating a task with baton-tick-tasks' OIDC token needs actAs on that one
# account (as tasks_actas on baton-tasks).
resource "google_service_account_iam_member" "tick_tasks_actas" {
  for_each = local.tick_enqueuers

  service_account_id = google_service_account.tick_tasks[0].name
  role               = "roles/iam.serviceAccountUser"
  member             = google_service_account.function[each.key].member
}

# V, recorded at the first apply. Changing decider_shards re-homes almost
# every schedule, an offline migration (docs/deploy.md, "Changing
# decider_shards"), so the Tick function's precondition refuses a plan
# whose decider_shards differs from this record; ignore_changes keeps the
# record as it was. The migration's deliberate step replaces it:
#   terraform apply -replace=terraform_data.decider_shards -var decider_shards=N
resource "terraform_data" "decider_shards" {
  input = var.decider_shards

  lifecycle {
    ignore_changes = [input]
  }
}
