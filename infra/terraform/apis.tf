locals {
  apis = [
    "artifactregistry.googleapis.com", # function images (google_artifact_registry_repository.functions) and the worker image
    "cloudbuild.googleapis.com",       # builds the function source
    "cloudfunctions.googleapis.com",
    # Project IAM grants and data.google_project. data.google_project is read
    # at plan, before this resource can enable anything, so a fresh project
    # needs it (and serviceusage.googleapis.com, which enables the rest)
    # turned on first: docs/deploy.md, "A fresh project".
    "cloudresourcemanager.googleapis.com",
    "cloudscheduler.googleapis.com",
    "cloudtasks.googleapis.com", # the queue between Tick (and Schedules) and Run
    "firestore.googleapis.com",
    "iam.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",     # metrics, alert policies, the dashboard (monitoring.tf)
    "pubsub.googleapis.com",         # the optional notify_topic and pubsub_target_topics grants (monitoring.tf)
    "billingbudgets.googleapis.com", # the optional GPU budget (monitoring.tf)
    "run.googleapis.com",            # gen2 functions and the GPU worker
    "storage.googleapis.com",
  ]
}

resource "google_project_service" "api" {
  for_each = toset(local.apis)

  project = var.project
  service = each.value
  # Leave the APIs on at destroy: other workloads in the project may use them.
  disable_on_destroy = false
}

# Enabling an API returns before every Google front end accepts calls to it,
# and the service agents Google creates with it (Cloud Functions', Cloud
# Run's, Cloud Build's) and their grants appear moments later; on a fresh
# project the first apply then fails with "API has not been used" or a 403
# on a service agent. Every resource that calls an API is ordered after
# this wait, directly (depends_on) or through a reference to a resource
# that is (tests/terraform_test.go checks both).
#
# Why terraform_data and sleep rather than time_sleep: the hashicorp/time
# provider cannot be fetched where CI validates this directory (only the
# Go module proxy is reachable, and it serves no Terraform providers), and
# terraform test's mock_provider does not help: it still needs the provider
# installed for its schema ("Missing required provider
# registry.terraform.io/hashicorp/time", tried with Terraform 1.11).
# terraform_data is built into Terraform. The provisioner runs only when
# this resource is created or replaced (the API list changes), never on a
# plain apply. The 8.0.0 google provider has no
# google_project_service_identity (that is google-beta), so the service
# agents cannot be created explicitly either: waiting is what remains.
resource "terraform_data" "apis_ready" {
  # None at 0, so that no sleep runs (nor need exist on the runner);
  # depends_on on a resource with no instances orders nothing and is valid.
  count = var.propagation_wait_seconds > 0 ? 1 : 0

  triggers_replace = local.apis

  provisioner "local-exec" {
    command = "sleep ${var.propagation_wait_seconds}"
  }

  depends_on = [google_project_service.api]
}
