# One more worker service per gpu_worker_types entry, the same as the
# default one (gpu_worker.tf) but for its name, GPU, scaling and shape:
# the same image, service account, environment and grants. The default one
# keeps its own resource (and address), so adding types changes nothing
# about it: no state move, and no redeploy under the jobs it runs.
resource "google_cloud_run_v2_service" "gpu_worker_type" {
  for_each = var.gpu_worker_types

  project             = var.project
  location            = var.region
  name                = local.worker_type_names[each.key]
  description         = "baton GPU worker (cmd/gpu-worker), type ${each.key} (${each.value.accelerator})"
  ingress             = "INGRESS_TRAFFIC_ALL" # Tick and GPU call it without a VPC; IAM decides who may.
  deletion_protection = var.deletion_protection

  # The default service's shape check, per entry (min_instances <= slots
  # is the variable's own validation).
  lifecycle {
    precondition {
      condition     = local.worker_shapes_ok[each.key]
      error_message = "gpu_worker_types[\"${each.key}\"]: cpu ${local.worker_shapes[each.key].cpu} / memory ${local.worker_shapes[each.key].memory} do not fit ${each.value.accelerator}: ${local.worker_shape_rule_of} (cpu and memory default to worker_cpu and worker_memory)"
    }
  }

  template {
    service_account                  = google_service_account.gpu_worker.email
    max_instance_request_concurrency = 1
    timeout                          = "${var.worker_timeout_seconds}s"
    gpu_zonal_redundancy_disabled    = var.gpu_zonal_redundancy_disabled

    scaling {
      min_instance_count = each.value.min_instances
      max_instance_count = each.value.slots
    }

    node_selector {
      accelerator = each.value.accelerator
    }

    containers {
      image = var.worker_image

      resources {
        limits = {
          cpu              = local.worker_shapes[each.key].cpu
          memory           = local.worker_shapes[each.key].memory
          "nvidia.com/gpu" = "1"
        }
        cpu_idle          = false
        startup_cpu_boost = true
      }

      dynamic "env" {
        for_each = local.worker_env
        content {
          name  = env.key
          value = env.value
        }
      }
    }
  }

  depends_on = [
    terraform_data.apis_ready,
    terraform_data.iam_ready,
    google_storage_bucket_iam_member.worker_bucket,
    google_cloud_run_v2_service_iam_member.function_invoker,
    terraform_data.callback_invoker_ready,
  ]
}
