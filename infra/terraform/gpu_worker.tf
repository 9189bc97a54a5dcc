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

  template {
    service_account                  = google_service_account.gpu_worker.email
    max_instance_request_concurrency = 1
    timeout                          = "${var.worker_timeout_seconds}s"
    gpu_zonal_redundancy_disabled    = var.gpu_zonal_redundancy_disabled

    scaling {
      min_instance_count = 0
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

  depends_on = [google_project_service.api]
}

# The worker calls the GPU function back (heartbeat, complete) with an ID
# token for its own service account; see function_invoker in iam.tf.
