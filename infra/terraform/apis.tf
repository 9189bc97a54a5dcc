locals {
  apis = [
    "artifactregistry.googleapis.com", # function images (gcf-artifacts) and the worker image
    "cloudbuild.googleapis.com",       # builds the function source
    "cloudfunctions.googleapis.com",
    "cloudscheduler.googleapis.com",
    "cloudtasks.googleapis.com", # the queue between Tick (and Schedules) and Run
    "firestore.googleapis.com",
    "iam.googleapis.com",
    "logging.googleapis.com",
    "run.googleapis.com", # gen2 functions and the GPU worker
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
