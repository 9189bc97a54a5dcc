# Partitioned deciders (ticks.tf, issue 28): the baton-ticks queue, its
# task identity and grants, and the Tick environment, at the default, off,
# with the daemon, and refused where the code or Cloud Tasks would refuse
# them; then V's guard, which needs a state (an apply against the mock), so
# it lives in this file of its own rather than beside plan.tftest.hcl's
# plans of an empty state.

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

# The tick queue and its task identity, told apart from the run queue's
# and baton-tasks' mocked IDs, so the wiring below is checked to them.
override_resource {
  target          = google_cloud_tasks_queue.ticks[0]
  override_during = plan
  values = {
    id = "projects/baton-test/locations/us-central1/queues/baton-ticks"
  }
}
override_resource {
  target          = google_service_account.tick_tasks[0]
  override_during = plan
  values = {
    email  = "baton-tick-tasks@baton-test.iam.gserviceaccount.com"
    member = "serviceAccount:baton-tick-tasks@baton-test.iam.gserviceaccount.com"
    name   = "projects/baton-test/serviceAccounts/baton-tick-tasks@baton-test.iam.gserviceaccount.com"
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


# The default: P = 8 partitions over V = 64 shards, on baton-ticks.
run "partitions_default" {
  command = plan

  assert {
    condition = (length(google_cloud_tasks_queue.ticks) == 1 && google_cloud_tasks_queue.ticks[0].name == "baton-ticks" &&
      google_cloud_tasks_queue.ticks[0].rate_limits[0].max_dispatches_per_second == 8 &&
    google_cloud_tasks_queue.ticks[0].rate_limits[0].max_concurrent_dispatches == 8)
    error_message = "the default deploys one queue, baton-ticks, dispatching the 8 partition tasks of a minute at once and no more"
  }
  assert {
    condition     = google_cloud_tasks_queue.ticks[0].deletion_policy == "DELETE" && google_cloud_tasks_queue.runs[0].deletion_policy == "PREVENT"
    error_message = "baton-ticks is deletable under deletion_protection (its tasks are the current minute's, and turning P to 0 must not stop the apply halfway), while baton-runs stays protected"
  }
  assert {
    condition = (google_cloud_tasks_queue.ticks[0].retry_config[0].max_attempts == 3 &&
      google_cloud_tasks_queue.ticks[0].retry_config[0].max_retry_duration == "50s" &&
    google_cloud_tasks_queue.ticks[0].retry_config[0].max_backoff == "20s")
    error_message = "a failed partition is retried within its minute (3 attempts, backoff to 20 s, 50 s in all), as the scheduler job retries a tick"
  }
  assert {
    condition = (google_cloudfunctions2_function.fn["Tick"].service_config[0].environment_variables["BATON_PARTITIONS"] == "8" &&
      google_cloudfunctions2_function.fn["Tick"].service_config[0].environment_variables["BATON_TICK_QUEUE"] == "projects/baton-test/locations/us-central1/queues/baton-ticks" &&
    google_cloudfunctions2_function.fn["Tick"].service_config[0].environment_variables["BATON_TICK_TASKS_SERVICE_ACCOUNT"] == "baton-tick-tasks@baton-test.iam.gserviceaccount.com")
    error_message = "Tick must be told P = 8, the baton-ticks queue's full ID and baton-tick-tasks' email (never baton-tasks', which invokes Run only)"
  }
  assert {
    condition     = alltrue([for k in ["Tick", "Schedules", "Run"] : google_cloudfunctions2_function.fn[k].service_config[0].environment_variables["BATON_DECIDER_SHARDS"] == "64"])
    error_message = "Tick, Schedules and Run must agree on V = 64 (BATON_DECIDER_SHARDS): each stores or reads a schedule's decider shard"
  }
  assert {
    condition     = alltrue([for k in ["Schedules", "Run", "GPU", "GPUCallback", "Rent"] : !contains(keys(google_cloudfunctions2_function.fn[k].service_config[0].environment_variables), "BATON_PARTITIONS") && !contains(keys(google_cloudfunctions2_function.fn[k].service_config[0].environment_variables), "BATON_TICK_QUEUE")])
    error_message = "only Tick is told the partitions and the tick queue"
  }
  assert {
    condition     = google_service_account.tick_tasks[0].account_id == "baton-tick-tasks"
    error_message = "the partition tasks' OIDC identity is baton-tick-tasks, an account of its own"
  }
  assert {
    condition = (keys(google_cloud_tasks_queue_iam_member.tick_enqueuer) == ["Tick"] &&
      google_cloud_tasks_queue_iam_member.tick_enqueuer["Tick"].name == "baton-ticks" &&
    google_cloud_tasks_queue_iam_member.tick_enqueuer["Tick"].role == "roles/cloudtasks.enqueuer")
    error_message = "Tick alone enqueues on baton-ticks, with roles/cloudtasks.enqueuer on that queue"
  }
  assert {
    condition = (keys(google_service_account_iam_member.tick_tasks_actas) == ["Tick"] &&
      google_service_account_iam_member.tick_tasks_actas["Tick"].service_account_id == "projects/baton-test/serviceAccounts/baton-tick-tasks@baton-test.iam.gserviceaccount.com" &&
    google_service_account_iam_member.tick_tasks_actas["Tick"].role == "roles/iam.serviceAccountUser")
    error_message = "Tick alone acts as baton-tick-tasks (roles/iam.serviceAccountUser on that one account), to create tasks carrying its token"
  }
  assert {
    condition     = [for k, v in local.function_invokers : v.fn if v.member == google_service_account.tick_tasks[0].member] == ["Tick"]
    error_message = "baton-tick-tasks may invoke Tick and nothing else"
  }
  assert {
    condition     = [for k, v in local.function_invokers : k if v.fn == "Tick"] == ["Tick/scheduler", "Tick/tick-tasks"]
    error_message = "Tick is invoked by the scheduler and baton-tick-tasks only"
  }
  assert {
    condition     = google_cloudfunctions2_function.fn["Tick"].service_config[0].max_instance_count >= google_cloud_tasks_queue.ticks[0].rate_limits[0].max_concurrent_dispatches + 2
    error_message = "Tick's instances must hold every partition task in flight, the coordinator and its retry (one request an instance)"
  }
  # docs/deploy.md, "Sizing", deciders: a partition decides
  # min(BATON_SHARD_CONCURRENCY = 4, ceil(V / P)) shards at once, each with
  # BATON_DECIDE_CONCURRENCY = 32 decisions in flight, and a decision is two
  # writes. At Firestore's slow end, 50 ms a write, the default must decide
  # the execution plane's runs a minute (10,000 at least) within the first
  # 10 s of the minute.
  assert {
    condition = 10 * tonumber(google_cloudfunctions2_function.fn["Tick"].service_config[0].environment_variables["BATON_PARTITIONS"]) * min(4, ceil(tonumber(google_cloudfunctions2_function.fn["Tick"].service_config[0].environment_variables["BATON_DECIDER_SHARDS"]) / tonumber(google_cloudfunctions2_function.fn["Tick"].service_config[0].environment_variables["BATON_PARTITIONS"]))) * 32 / (2 * 0.05) >= max(10000, 60 * min(
      sum([for q in google_cloud_tasks_queue.runs : q.rate_limits[0].max_dispatches_per_second]),
      sum([for q in google_cloud_tasks_queue.runs : q.rate_limits[0].max_concurrent_dispatches]) / 0.7,
      google_cloudfunctions2_function.fn["Run"].service_config[0].max_instance_count * google_cloudfunctions2_function.fn["Run"].service_config[0].max_instance_request_concurrency / 0.7,
    ))
    error_message = "the default deciders must decide what the execution plane drains a minute (and at least 10,000) within 10 s of the minute at 50 ms a write (docs/deploy.md's arithmetic)"
  }
}

# P = 0: the single decider, as before partitions; nothing of ticks.tf.
run "partitions_off" {
  command = plan
  variables {
    decider_partitions = 0
  }
  assert {
    condition     = length(google_cloud_tasks_queue.ticks) == 0 && length(google_service_account.tick_tasks) == 0 && length(google_cloud_tasks_queue_iam_member.tick_enqueuer) == 0 && length(google_service_account_iam_member.tick_tasks_actas) == 0
    error_message = "decider_partitions = 0 deploys no tick queue, no baton-tick-tasks and no grant for them"
  }
  assert {
    condition = (google_cloudfunctions2_function.fn["Tick"].service_config[0].environment_variables["BATON_PARTITIONS"] == "0" &&
      google_cloudfunctions2_function.fn["Tick"].service_config[0].environment_variables["BATON_TICK_QUEUE"] == "" &&
    google_cloudfunctions2_function.fn["Tick"].service_config[0].environment_variables["BATON_TICK_TASKS_SERVICE_ACCOUNT"] == "")
    error_message = "with P = 0 Tick is told 0 partitions and no tick queue, so it decides everything under leases/tick.json"
  }
  assert {
    condition     = [for k, v in local.function_invokers : k if v.fn == "Tick"] == ["Tick/scheduler"] && length(google_cloud_run_v2_service_iam_member.function_invoker) == 5
    error_message = "with P = 0 only the scheduler invokes Tick"
  }
  assert {
    condition     = google_cloudfunctions2_function.fn["Tick"].service_config[0].max_instance_count == 10 && output.tick_queue == null
    error_message = "with P = 0 Tick keeps 10 instances and there is no tick_queue output"
  }
}

# The daemon decides under leases/tick.json, so the default P follows it
# to 0, and an explicit P with it is refused.
run "daemon_keeps_one_decider" {
  command = plan
  variables {
    daemon_image = "us-central1-docker.pkg.dev/baton-test/baton/baton:v1"
  }
  assert {
    condition     = length(google_cloud_tasks_queue.ticks) == 0 && google_cloudfunctions2_function.fn["Tick"].service_config[0].environment_variables["BATON_PARTITIONS"] == "0"
    error_message = "with daemon_image and decider_partitions unset, Tick stays the single decider (the daemon's fallback on one lease)"
  }
}

run "daemon_with_partitions_refused" {
  command = plan
  variables {
    daemon_image       = "us-central1-docker.pkg.dev/baton-test/baton/baton:v1"
    decider_partitions = 4
  }
  expect_failures = [google_cloud_tasks_queue.ticks[0]]
}

# More partitions: the queue and Tick's instances follow P.
run "sixteen_partitions" {
  command = plan
  variables {
    decider_partitions = 16
  }
  assert {
    condition = (google_cloud_tasks_queue.ticks[0].rate_limits[0].max_dispatches_per_second == 16 &&
      google_cloud_tasks_queue.ticks[0].rate_limits[0].max_concurrent_dispatches == 16 &&
      google_cloudfunctions2_function.fn["Tick"].service_config[0].max_instance_count == 18 &&
    google_cloudfunctions2_function.fn["Tick"].service_config[0].environment_variables["BATON_PARTITIONS"] == "16")
    error_message = "P = 16: 16 dispatches a second and in flight, 18 Tick instances, BATON_PARTITIONS = 16"
  }
}

# One partition per shard is the most there can be.
run "partitions_equal_shards" {
  command = plan
  variables {
    decider_shards     = 16
    decider_partitions = 16
  }
  assert {
    condition     = google_cloudfunctions2_function.fn["Tick"].service_config[0].environment_variables["BATON_DECIDER_SHARDS"] == "16"
    error_message = "P = V is allowed"
  }
}

run "partitions_over_shards_refused" {
  command = plan
  variables {
    decider_shards     = 16
    decider_partitions = 17
  }
  expect_failures = [google_cloud_tasks_queue.ticks[0]]
}

run "negative_partitions_refused" {
  command = plan
  variables {
    decider_partitions = -1
  }
  expect_failures = [var.decider_partitions]
}

run "fractional_partitions_refused" {
  command = plan
  variables {
    decider_partitions = 2.5
  }
  expect_failures = [var.decider_partitions]
}

run "shards_over_max_refused" {
  command = plan
  variables {
    decider_shards = 4097
  }
  expect_failures = [var.decider_shards]
}

run "zero_shards_refused" {
  command = plan
  variables {
    decider_shards = 0
  }
  expect_failures = [var.decider_shards]
}

# V's guard. The first apply records V; a later plan with another V is
# refused (the offline migration, docs/deploy.md "Changing
# decider_shards"), the same V plans, and the migration's deliberate
# -replace of the record lets the new V through.
run "shards_recorded" {
  command = apply
  variables {
    propagation_wait_seconds = 0
  }
  # The record alone: the mock's plan-time values of the rest would not
  # survive a whole apply (they are drawn again), and the guard needs
  # only the record in the state.
  plan_options {
    target = [terraform_data.decider_shards]
  }
  assert {
    condition     = terraform_data.decider_shards.output == 64
    error_message = "the first apply records V = 64"
  }
}

run "shards_changed_refused" {
  command = plan
  variables {
    propagation_wait_seconds = 0
    decider_shards           = 32
  }
  expect_failures = [google_cloudfunctions2_function.fn["Tick"]]
}

run "shards_unchanged_plans" {
  command = plan
  variables {
    propagation_wait_seconds = 0
    decider_partitions       = 16
  }
  assert {
    condition     = terraform_data.decider_shards.output == 64
    error_message = "changing P alone is not a migration: the plan goes through with V as recorded"
  }
}

run "shards_migration_replaces_record" {
  command = plan
  variables {
    propagation_wait_seconds = 0
    decider_shards           = 32
  }
  plan_options {
    replace = [terraform_data.decider_shards]
  }
  assert {
    condition     = google_cloudfunctions2_function.fn["Tick"].service_config[0].environment_variables["BATON_DECIDER_SHARDS"] == "32"
    error_message = "with the record replaced, the new V reaches the functions"
  }
}
