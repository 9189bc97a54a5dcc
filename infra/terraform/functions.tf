resource "google_cloudfunctions2_function" "fn" {
  for_each = local.functions

  project     = var.project
  location    = var.region
  name        = each.value.name
  description = each.value.description

  build_config {
    runtime     = "go126"
    entry_point = each.key # the name functions/<name>.go registers with functions-framework
    # The function package is functions/, not the module root. The buildpacks
    # docs (docs.cloud.google.com/docs/buildpacks/service-specific-configs,
    # "additional Cloud Run functions environment variables") list
    # GOOGLE_FUNCTION_SOURCE as "the name of the directory or file containing
    # the function source, depending on the language", and pkg/env in
    # GoogleCloudPlatform/buildpacks says every functions-framework buildpack
    # must respect it. The Go buildpack's source
    # (cmd/go/functions_framework/lib/lib.go) does not read it, though: it
    # takes the package name of the .go files at the root and, when a
    # directory of that name exists at the root, imports MODULE/<name>. So
    # scripts/package.sh also writes a root function.go ("package functions",
    # importing functions-framework's functions package so the buildpack uses
    # its declarative main), which makes the buildpack import
    # github.com/baton-cron/baton/functions. Both routes point at functions/.
    environment_variables = {
      GOOGLE_FUNCTION_SOURCE = "functions"
    }
    service_account = google_service_account.build.id

    source {
      storage_source {
        bucket = google_storage_bucket.baton.name
        object = google_storage_bucket_object.source.name
      }
    }
  }

  service_config {
    service_account_email          = google_service_account.function[each.key].email
    environment_variables          = each.value.env
    ingress_settings               = each.value.ingress
    timeout_seconds                = each.value.timeout
    available_memory               = each.value.memory
    min_instance_count             = 0
    max_instance_count             = 10
    all_traffic_on_latest_revision = true
  }

  depends_on = [
    google_project_service.api,
    google_project_iam_member.build,
    google_storage_bucket_iam_member.build_source,
  ]
}
