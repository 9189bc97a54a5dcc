resource "google_cloudfunctions2_function" "fn" {
  for_each = local.functions

  project     = var.project
  location    = var.region
  name        = each.value.name
  description = each.value.description

  build_config {
    runtime     = "go126"
    entry_point = each.key # the name functions/<name>.go registers with functions-framework
    # The function package is functions/, not the module root. What the
    # sources say (checked 2026-11-30):
    # - GoogleCloudPlatform/buildpacks README: GOOGLE_FUNCTION_SOURCE
    #   "specifies the name of the directory or file containing the function
    #   source, depending on the language ... only applicable to some
    #   languages" (example: function.py for Python); pkg/env/env.go says
    #   every functions-framework buildpack must respect it.
    # - The Go functions-framework buildpack itself
    #   (cmd/go/functions_framework/lib/lib.go) never reads it: it moves the
    #   source aside, parses the package of the .go files at the source root
    #   (failing with "unable to find Go package" when there are none) and
    #   generates a main that imports that package. GOOGLE_BUILDABLE does not
    #   help either: the buildpack overrides it with its generated main.
    # So, following reality, scripts/package writes a root function.go that
    # imports functions/ (whose init() registers every function) and
    # functions-framework's functions package (which selects the buildpack's
    # declarative main, serving FUNCTION_TARGET = entry_point). The variable
    # stays set, as the DESIGN asks and in case a future Go buildpack honours
    # it; both routes lead to functions/.
    environment_variables = {
      GOOGLE_FUNCTION_SOURCE = "functions"
    }
    service_account = google_service_account.build.id
    # Images go to baton's own repository, where the build account may
    # write (iam.tf) and old images are cleaned up (artifacts.tf).
    docker_repository = google_artifact_registry_repository.functions.id

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
    max_instance_count             = each.value.max_instances
    all_traffic_on_latest_revision = true

    # Only Run sets these (null elsewhere: the memory's default vCPU and one
    # request at a time).
    available_cpu                    = lookup(each.value, "cpu", null)
    max_instance_request_concurrency = lookup(each.value, "concurrency", null)
  }

  lifecycle {
    # A variable's validation cannot see another variable in Terraform 1.5.
    # Cloud Run serves more than one request at a time only with at least
    # 1 vCPU (https://cloud.google.com/run/docs/about-concurrency), and
    # fewer instances than dispatches in flight answer 429s that use up the
    # tasks' attempts.
    precondition {
      condition     = each.key != "Run" || var.run_concurrency == 1 || tonumber(var.run_cpu) >= 1
      error_message = "run_concurrency above 1 needs run_cpu of at least 1 (Cloud Run's rule for concurrency)."
    }
    precondition {
      condition     = each.key != "Run" || local.run_max_instances >= local.run_instances_needed
      error_message = "run_max_instances is below tasks_queue_count × tasks_max_concurrent_dispatches / run_concurrency: dispatches beyond Run's capacity would get 429s."
    }
    # V is fixed per deployment (ticks.tf, terraform_data.decider_shards):
    # a changed decider_shards re-homes almost every schedule while the
    # deciders run, so it is refused until the migration's deliberate step.
    precondition {
      condition     = each.key != "Tick" || terraform_data.decider_shards.output == var.decider_shards
      error_message = "decider_shards differs from the V this deployment was applied with (terraform_data.decider_shards). Changing V is an offline migration: follow docs/deploy.md, \"Changing decider_shards\", whose apply step is terraform apply -replace=terraform_data.decider_shards."
    }
  }

  # The build account's grants and the runtime accounts' grants are in
  # place and propagated (terraform_data.iam_ready) before the first build.
  depends_on = [
    terraform_data.apis_ready,
    terraform_data.iam_ready,
  ]
}
