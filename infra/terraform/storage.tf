resource "google_storage_bucket" "baton" {
  project  = var.project
  name     = var.bucket_name
  location = var.region
  # Leases are compared and swapped on object generations; uniform access
  # keeps every permission in IAM (no per-object ACLs).
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = !var.deletion_protection

  lifecycle_rule {
    condition {
      age            = var.output_retention_days
      matches_prefix = ["outputs/"]
    }
    action {
      type = "Delete"
    }
  }

  depends_on = [terraform_data.apis_ready]
}

# The function source, built by `make package` (scripts/package.sh). The
# object name carries the zip's hash so that a new build redeploys the
# functions, and no archive provider is needed.
resource "google_storage_bucket_object" "source" {
  bucket = google_storage_bucket.baton.name
  name   = "${local.source_prefix}functions-${filemd5(var.source_zip)}.zip"
  source = var.source_zip
}
