variable "project" {
  description = "Google Cloud project ID to deploy into."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project))
    error_message = "project must be a project ID: 6-30 characters, lower-case letters, digits and hyphens, starting with a letter."
  }
}

variable "region" {
  description = "Region for the functions, the scheduler job, the GPU worker and (unless firestore_location is set) the database. It must offer Cloud Run GPUs."
  type        = string
  default     = "us-central1"

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must look like us-central1 or europe-west4."
  }
}

variable "firestore_location" {
  description = "Firestore location (a region or a multi-region such as nam5). Empty means var.region."
  type        = string
  default     = ""

  validation {
    condition     = var.firestore_location == "" || can(regex("^[a-z0-9-]+$", var.firestore_location))
    error_message = "firestore_location must be empty or a location ID such as us-central1 or nam5."
  }
}

variable "bucket_name" {
  description = "Name of the Cloud Storage bucket for leases, job output and the function source. Bucket names are global."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]$", var.bucket_name)) && !startswith(var.bucket_name, "goog")
    error_message = "bucket_name must be 3-63 lower-case letters, digits, '-' or '_', start and end with a letter or digit, and not start with \"goog\"."
  }
}

variable "database_name" {
  description = "Firestore database ID (the Mongo database name baton uses)."
  type        = string
  default     = "baton"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{2,61}[a-z0-9]$", var.database_name))
    error_message = "database_name must be 4-63 characters: lower-case letters, digits and '-', starting with a letter."
  }
}

variable "tick_schedule" {
  description = "Cron expression (5 fields) for the Cloud Scheduler job that calls Tick. Cloud Scheduler's finest period is one minute."
  type        = string
  default     = "* * * * *"

  validation {
    condition     = length(split(" ", trimspace(var.tick_schedule))) == 5
    error_message = "tick_schedule must be a 5-field cron expression such as \"* * * * *\"."
  }
}

variable "tick_time_zone" {
  description = "Time zone the Cloud Scheduler job reads tick_schedule in. Schedules carry their own time zones; this only matters for a tick_schedule that is not every minute."
  type        = string
  default     = "Etc/UTC"

  validation {
    condition     = can(regex("^[A-Za-z_]+(/[A-Za-z0-9_+-]+)*$", var.tick_time_zone))
    error_message = "tick_time_zone must be an IANA time zone such as Etc/UTC or Europe/Berlin."
  }
}

variable "gpu_accelerator" {
  description = "Cloud Run GPU type for the worker (node selector run.googleapis.com/accelerator)."
  type        = string
  default     = "nvidia-l4"

  validation {
    condition     = contains(["nvidia-l4", "nvidia-rtx-pro-6000"], var.gpu_accelerator)
    error_message = "gpu_accelerator must be nvidia-l4 or nvidia-rtx-pro-6000."
  }
}

variable "gpu_slots" {
  description = "Number of GPU slots: the worker's max instances (each runs one job at a time). Needs as much Cloud Run GPU quota in the region."
  type        = number
  default     = 1

  validation {
    condition     = var.gpu_slots >= 1 && var.gpu_slots <= 100 && floor(var.gpu_slots) == var.gpu_slots
    error_message = "gpu_slots must be a whole number from 1 to 100."
  }
}

variable "gpu_zonal_redundancy_disabled" {
  description = "Turn GPU zonal redundancy off: cheaper and uses the non-redundant GPU quota, but an instance may not restart in another zone during a zonal outage."
  type        = bool
  default     = true
}

variable "worker_image" {
  description = "Container image of cmd/gpu-worker, e.g. us-central1-docker.pkg.dev/PROJECT/baton/gpu-worker:v1 (see docs/deploy.md)."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9.-]+(:[0-9]+)?/[a-z0-9._/-]+(:[A-Za-z0-9._-]+|@sha256:[a-f0-9]{64})$", var.worker_image))
    error_message = "worker_image must be a full image reference with a tag or digest, e.g. us-central1-docker.pkg.dev/PROJECT/baton/gpu-worker:v1."
  }
}

variable "worker_command" {
  description = "The argv the GPU worker runs for each job (BATON_WORKER_COMMAND)."
  type        = list(string)
  default     = ["sh", "-c", "cat"]

  validation {
    condition     = length(var.worker_command) > 0 && alltrue([for a in var.worker_command : a != ""])
    error_message = "worker_command must be a non-empty list of non-empty strings."
  }
}

variable "worker_cpu" {
  description = "vCPUs of a GPU worker instance. Cloud Run GPUs need at least 4."
  type        = string
  default     = "4"

  validation {
    condition     = contains(["4", "6", "8", "20"], var.worker_cpu)
    error_message = "worker_cpu must be 4, 6, 8 or 20 (Cloud Run GPU instances need at least 4 vCPUs)."
  }
}

variable "worker_memory" {
  description = "Memory of a GPU worker instance. Cloud Run GPUs need at least 16Gi."
  type        = string
  default     = "16Gi"

  validation {
    condition     = can(regex("^[0-9]+Gi$", var.worker_memory)) && try(tonumber(trimsuffix(var.worker_memory, "Gi")) >= 16, false)
    error_message = "worker_memory must be at least 16Gi, written like 16Gi or 32Gi."
  }
}

variable "worker_timeout_seconds" {
  description = "Request timeout of the GPU worker, i.e. the longest a job may run. Cloud Run allows up to 3600."
  type        = number
  default     = 3600

  validation {
    condition     = var.worker_timeout_seconds >= 60 && var.worker_timeout_seconds <= 3600
    error_message = "worker_timeout_seconds must be between 60 and 3600."
  }
}

variable "tick_timeout_seconds" {
  description = "Timeout of the Tick function and the scheduler's attempt deadline. Runs executed by a tick must finish within it."
  type        = number
  default     = 540

  validation {
    condition     = var.tick_timeout_seconds >= 15 && var.tick_timeout_seconds <= 1800
    error_message = "tick_timeout_seconds must be between 15 and 1800 (Cloud Scheduler's longest HTTP attempt deadline)."
  }
}

variable "allowed_targets" {
  description = "Host allowlist for http targets (BATON_ALLOWED_TARGETS): host, host:port or *.example.com. Empty refuses every http target."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for h in var.allowed_targets : can(regex("^(\\*\\.)?[A-Za-z0-9.-]+(:[0-9]+)?$", h))])
    error_message = "allowed_targets entries must be host, host:port or *.domain, without a scheme or path."
  }
}

variable "operator_members" {
  description = "IAM members allowed to call the Schedules and GPU APIs (the baton CLI), e.g. [\"user:ops@example.com\", \"group:sre@example.com\"]."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for m in var.operator_members : can(regex("^(user|group|serviceAccount|domain|principal|principalSet):.+", m))])
    error_message = "operator_members must be IAM members such as user:a@example.com or group:ops@example.com (allUsers and allAuthenticatedUsers are refused)."
  }
}

variable "tick_lease_ttl" {
  description = "TTL of the tick lease (BATON_TICK_LEASE_TTL), a Go duration."
  type        = string
  default     = "30s"

  validation {
    condition     = can(regex("^([0-9]+(ms|s|m|h))+$", var.tick_lease_ttl))
    error_message = "tick_lease_ttl must be a Go duration such as 30s or 1m."
  }
}

variable "clock_skew" {
  description = "Clock-skew allowance added to every lease expiry (BATON_CLOCK_SKEW), a Go duration."
  type        = string
  default     = "2s"

  validation {
    condition     = can(regex("^([0-9]+(ms|s|m|h))+$", var.clock_skew))
    error_message = "clock_skew must be a Go duration such as 2s."
  }
}

variable "log_level" {
  description = "Log level of every deployable (BATON_LOG_LEVEL)."
  type        = string
  default     = "info"

  validation {
    condition     = contains(["debug", "info", "warn", "error"], var.log_level)
    error_message = "log_level must be debug, info, warn or error."
  }
}

variable "output_retention_days" {
  description = "Days after which job output under outputs/ in the bucket is deleted."
  type        = number
  default     = 30

  validation {
    condition     = var.output_retention_days >= 1 && floor(var.output_retention_days) == var.output_retention_days
    error_message = "output_retention_days must be a whole number of at least 1."
  }
}

variable "source_zip" {
  description = "Path of the function source zip that `make package` writes."
  type        = string
  default     = "../../dist/functions-source.zip"

  validation {
    condition     = endswith(var.source_zip, ".zip")
    error_message = "source_zip must be the .zip written by `make package`."
  }
}

variable "deletion_protection" {
  description = "Protect the database and the GPU service from deletion. Set to false and apply before `terraform destroy`."
  type        = bool
  default     = true
}
