# The functions' images: Cloud Build pushes each function's image here
# (build_config.docker_repository) instead of the shared gcf-artifacts
# repository, so the build account can be given write on this repository
# alone, and old images are deleted rather than kept (and billed) forever.
# It is not the `baton` repository docs/deploy.md has you create by hand for
# the GPU worker's and the daemon's images: those must exist before this
# configuration deploys them, and a cleanup policy here could delete an
# image a service still runs (docs/deploy.md shows the same policy for that
# repository, with gcloud).
resource "google_artifact_registry_repository" "functions" {
  project       = var.project
  location      = var.region
  repository_id = "baton-functions"
  description   = "baton function images, built by Cloud Build from the source zip"
  format        = "DOCKER"

  # KEEP wins over DELETE (Artifact Registry cleanup policies): the
  # image_keep_count most recent versions of each image stay whatever their
  # age, so a function can always be rolled back that far; anything else
  # older than image_max_age_days is deleted.
  cleanup_policy_dry_run = false
  cleanup_policies {
    id     = "keep-most-recent"
    action = "KEEP"
    most_recent_versions {
      keep_count = var.image_keep_count
    }
  }
  cleanup_policies {
    id     = "delete-old"
    action = "DELETE"
    condition {
      tag_state  = "ANY"
      older_than = "${var.image_max_age_days * 86400}s"
    }
  }

  depends_on = [terraform_data.apis_ready]
}
