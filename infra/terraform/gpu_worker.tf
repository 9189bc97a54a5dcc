# The GPU worker: one job per instance (concurrency 1), one instance per
# slot, CPU always allocated while an instance lives (cpu_idle = false) so a
# job keeps running and heartbeating between requests' bytes.
resource "google_cloud_run_v2_service" "gpu_worker" {
  project             = var.project
  location            = var.region
  name                = local.worker_name
  description         = "baton GPU worker (cmd/gpu-worker)"
  ingress             = "INGRESS_TRAFFIC_ALL" # Tick and GPU call it without a VPC; IAM decides who may.
  deletion_protection = var.deletion_protection

  # Combinations the Cloud Run API refuses, refused at plan instead of
  # halfway through an apply.
  lifecycle {
    precondition {
      condition     = local.worker_shape_ok
      error_message = local.worker_shape_rule
    }
    precondition {
      condition     = var.gpu_min_instances <= var.gpu_slots
      error_message = "gpu_min_instances must be at most gpu_slots: an instance kept started beyond the pool's slots would never get a job."
    }
  }

  template {
    service_account                  = google_service_account.gpu_worker.email
    max_instance_request_concurrency = 1
    timeout                          = "${var.worker_timeout_seconds}s"
    gpu_zonal_redundancy_disabled    = var.gpu_zonal_redundancy_disabled

    scaling {
      min_instance_count = var.gpu_min_instances
      max_instance_count = var.gpu_slots
    }

    node_selector {
      accelerator = var.gpu_accelerator
    }

    containers {
      image = var.worker_image

      resources {
        limits = {
          cpu              = var.worker_cpu
          memory           = var.worker_memory
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

  # Its output grant is propagated before it is deployed (iam_ready), and
  # so is its invoker grant on GPUCallback: that grant needs the function,
  # so it comes after iam_ready, and has its own wait
  # (terraform_data.callback_invoker_ready, iam.tf).
  depends_on = [
    terraform_data.apis_ready,
    terraform_data.iam_ready,
    google_storage_bucket_iam_member.worker_bucket,
    google_cloud_run_v2_service_iam_member.function_invoker,
    terraform_data.callback_invoker_ready,
  ]
}

# The worker calls GPUCallback back (heartbeat, complete) with an ID token
# for its own service account; see function_invoker in iam.tf. It is told
# that URL in its own environment (BATON_CONTROL_URL), not by the
# dispatcher, so nothing that can call /run can send its ID tokens and
# dispatch secrets elsewhere.

locals {
  # The shape of each worker service: the default one and one per
  # gpu_worker_types entry, which falls back to worker_cpu/worker_memory.
  worker_shapes = merge(
    { default = { accelerator = var.gpu_accelerator, cpu = var.worker_cpu, memory = var.worker_memory } },
    { for k, t in var.gpu_worker_types : k => {
      accelerator = t.accelerator
      cpu         = coalesce(t.cpu, var.worker_cpu)
      memory      = coalesce(t.memory, var.worker_memory)
    } },
  )
  # nvidia-rtx-pro-6000 needs 20 vCPUs and at least 80 GiB; nvidia-l4 takes
  # at most 8 vCPUs and 32 GiB, and Cloud Run asks for 6 vCPUs above 16 GiB
  # and 8 above 24 GiB. One rule, applied to every service.
  worker_shapes_ok = { for k, s in local.worker_shapes : k => (s.accelerator == "nvidia-rtx-pro-6000" ?
    tonumber(s.cpu) >= 20 && tonumber(trimsuffix(s.memory, "Gi")) >= 80 :
    tonumber(s.cpu) <= 8 && tonumber(trimsuffix(s.memory, "Gi")) <= 32 &&
    (tonumber(trimsuffix(s.memory, "Gi")) <= 16 || tonumber(s.cpu) >= 6) &&
  (tonumber(trimsuffix(s.memory, "Gi")) <= 24 || tonumber(s.cpu) >= 8)) }
  worker_shape_ok      = local.worker_shapes_ok["default"]
  worker_shape_rule    = "worker_cpu/worker_memory do not fit gpu_accelerator: ${local.worker_shape_rule_of}"
  worker_shape_rule_of = "nvidia-rtx-pro-6000 needs cpu = 20 and memory >= 80Gi; nvidia-l4 takes cpu <= 8 and memory <= 32Gi, with cpu >= 6 above 16Gi and 8 above 24Gi."
}
