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
}

variables {
  project          = "baton-test"
  bucket_name      = "baton-test-bucket"
  worker_image     = "us-central1-docker.pkg.dev/baton-test/baton/gpu-worker:v1"
  operator_members = ["user:ops@example.com"]
  source_zip       = "tests/fixture.zip"
}

run "plan" {
  command = plan

  assert {
    condition     = length(google_cloudfunctions2_function.fn) == 4
    error_message = "expected four functions"
  }
  assert {
    condition     = google_cloudfunctions2_function.fn["Tick"].service_config[0].environment_variables["BATON_GPU_POOL"] == "https://baton-gpu-worker-123456789012.us-central1.run.app=1"
    error_message = "BATON_GPU_POOL must be <deterministic worker URL>=<slots>"
  }
  assert {
    condition     = google_cloud_run_v2_service.gpu_worker.template[0].scaling[0].max_instance_count == var.gpu_slots
    error_message = "max instances must equal gpu_slots"
  }
  assert {
    condition     = length(google_firestore_index.baton) == length(local.firestore_indexes)
    error_message = "every entry of local.firestore_indexes must become one index (are two the same?)"
  }
  assert {
    condition     = length(google_cloud_run_v2_service_iam_member.function_invoker) == 4
    error_message = "expected invokers: scheduler on Tick, worker on GPU, the operator on Schedules and GPU"
  }
}

run "bad_slots_refused" {
  command = plan
  variables {
    gpu_slots = 0
  }
  expect_failures = [var.gpu_slots]
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
