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

variable "gpu_min_instances" {
  description = "GPU worker instances kept started when idle (the service's min instances, at most gpu_slots). 0 scales to zero: no GPU cost while idle, but the first job after a quiet spell waits for a cold start (docs/gpu.md, \"Cold starts\"); each kept instance is billed around the clock."
  type        = number
  default     = 0

  validation {
    condition     = var.gpu_min_instances >= 0 && var.gpu_min_instances <= 100 && floor(var.gpu_min_instances) == var.gpu_min_instances
    error_message = "gpu_min_instances must be a whole number from 0 to 100 (and at most gpu_slots)."
  }
}

variable "gpu_worker_types" {
  description = "More GPU worker services, one per entry, beside the default one (gpu_accelerator, gpu_slots, gpu_min_instances): a short name (the service is baton-gpu-worker-NAME) to its accelerator, slots (max instances), min_instances (default 0) and optional cpu/memory (default worker_cpu/worker_memory). Each joins BATON_GPU_POOL as URL=slots@accelerator, so a job may ask for its type (gpuType). Two entries may share an accelerator (two sizes). See docs/gpu.md, \"Several GPU types with Terraform\"."
  type = map(object({
    accelerator   = string
    slots         = number
    min_instances = optional(number, 0)
    cpu           = optional(string)
    memory        = optional(string)
  }))
  default = {}

  # One rule per block, each naming the entries that break it. Names stop
  # at 20 characters so that "baton-gpu-worker-NAME-PROJECT_NUMBER" stays a
  # DNS label (63), and the computed URL in BATON_GPU_POOL is the service's
  # (main.tf, worker_type_urls). The cpu and memory shape per accelerator
  # is a precondition on the service (gpu_worker_types.tf), as it needs
  # worker_cpu/worker_memory for entries that do not set their own.
  validation {
    condition     = length(var.gpu_worker_types) <= 10 && alltrue([for k, t in var.gpu_worker_types : can(regex("^[a-z]([a-z0-9-]{0,18}[a-z0-9])?$", k)) && k != "default"])
    error_message = "gpu_worker_types: at most 10 entries, each named by 1-20 lowercase letters, digits and hyphens (starting with a letter, not ending with a hyphen), and not \"default\" (the gpu_accelerator service's name in gpu_worker_urls); refused: ${join(", ", [for k, t in var.gpu_worker_types : k if !can(regex("^[a-z]([a-z0-9-]{0,18}[a-z0-9])?$", k)) || k == "default"])}."
  }
  validation {
    condition     = alltrue([for k, t in var.gpu_worker_types : contains(["nvidia-l4", "nvidia-rtx-pro-6000"], t.accelerator)])
    error_message = "gpu_worker_types: accelerator must be nvidia-l4 or nvidia-rtx-pro-6000; refused: ${join(", ", [for k, t in var.gpu_worker_types : "${k} (${t.accelerator})" if !contains(["nvidia-l4", "nvidia-rtx-pro-6000"], t.accelerator)])}."
  }
  validation {
    condition     = alltrue([for k, t in var.gpu_worker_types : t.slots >= 1 && t.slots <= 100 && floor(t.slots) == t.slots])
    error_message = "gpu_worker_types: slots must be a whole number from 1 to 100; refused: ${join(", ", [for k, t in var.gpu_worker_types : "${k} (${t.slots})" if !(t.slots >= 1 && t.slots <= 100 && floor(t.slots) == t.slots)])}."
  }
  validation {
    condition     = alltrue([for k, t in var.gpu_worker_types : t.min_instances >= 0 && t.min_instances <= t.slots && floor(t.min_instances) == t.min_instances])
    error_message = "gpu_worker_types: min_instances must be a whole number from 0 to the entry's slots (an instance kept started beyond the slots would never get a job); refused: ${join(", ", [for k, t in var.gpu_worker_types : "${k} (min_instances ${t.min_instances}, slots ${t.slots})" if !(t.min_instances >= 0 && t.min_instances <= t.slots && floor(t.min_instances) == t.min_instances)])}."
  }
  validation {
    condition     = alltrue([for k, t in var.gpu_worker_types : (t.cpu == null || contains(["4", "6", "8", "20"], coalesce(t.cpu, "4"))) && (t.memory == null || (can(regex("^[0-9]+Gi$", coalesce(t.memory, "16Gi"))) && try(tonumber(trimsuffix(t.memory, "Gi")) >= 16, false)))])
    error_message = "gpu_worker_types: cpu must be 4, 6, 8 or 20 and memory at least 16Gi, written like 16Gi (as worker_cpu and worker_memory); refused: ${join(", ", [for k, t in var.gpu_worker_types : k if !((t.cpu == null || contains(["4", "6", "8", "20"], coalesce(t.cpu, "4"))) && (t.memory == null || (can(regex("^[0-9]+Gi$", coalesce(t.memory, "16Gi"))) && try(tonumber(trimsuffix(t.memory, "Gi")) >= 16, false))))])}."
  }
}

variable "gpu_weights" {
  description = "GPU tenants' weights for fair share of the slots, e.g. { research = 3, batch = 1 } (BATON_GPU_WEIGHTS); a tenant not named weighs 1. See docs/gpu.md, \"Tenants\"."
  type        = map(number)
  default     = {}

  validation {
    condition = length(var.gpu_weights) <= 100 && alltrue([for t, w in var.gpu_weights :
    can(regex("^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$", t)) && w >= 1 && w <= 1000 && floor(w) == w])
    error_message = "gpu_weights: at most 100 tenants, each named by 1-63 letters, digits and ._- (starting with a letter or digit), with a whole weight from 1 to 1000."
  }
}

variable "gpu_quotas" {
  description = "GPU tenants' caps on concurrently running slots, e.g. { batch = 2 } (BATON_GPU_QUOTAS); a tenant not named has no cap."
  type        = map(number)
  default     = {}

  validation {
    condition = length(var.gpu_quotas) <= 100 && alltrue([for t, q in var.gpu_quotas :
    can(regex("^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$", t)) && q >= 1 && q <= 1000 && floor(q) == q])
    error_message = "gpu_quotas: at most 100 tenants, each named by 1-63 letters, digits and ._- (starting with a letter or digit), with a whole number of slots from 1 to 1000."
  }
}

variable "gpu_fair_halflife" {
  description = "Half-life of the usage GPU fair share compares (BATON_GPU_FAIR_HALFLIFE): decayed slot-seconds per tenant, 1s to 720h; several times your longest common job (docs/gpu.md)."
  type        = string
  default     = "1h"
  validation {
    condition     = can(regex("^([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$", var.gpu_fair_halflife))
    error_message = "gpu_fair_halflife: a Go duration such as 1h or 20m (from 1s to 720h)."
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
  description = "Timeout of the Tick function and the scheduler's attempt deadline. Tick only decides and enqueues (Run executes), so this bounds deciding, not any target."
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

variable "job_lease_store" {
  description = "Where the job leases live (BATON_JOB_LEASE_STORE): firestore, a document in the job_leases collection (a write unit per run, $0.26 per million), or gcs, an object in the bucket (a Class A write per run, $5.00 per million). The tick lease stays in the bucket. A change is safe while old and new instances overlap (docs/deploy.md)."
  type        = string
  default     = "firestore"

  validation {
    condition     = contains(["firestore", "gcs"], var.job_lease_store)
    error_message = "job_lease_store must be firestore or gcs."
  }
}

variable "history_keep" {
  description = "How long finished runs and schedule change records are kept when a schedule sets no history.keep (BATON_HISTORY_KEEP): whole days (30d) or a Go duration, 1h to 3650d. Firestore's TTL policy on expireAt deletes them."
  type        = string
  default     = "30d"

  validation {
    condition     = can(regex("^([0-9]+d|([0-9]+(ms|s|m|h))+)$", var.history_keep))
    error_message = "history_keep must be whole days such as 90d or a Go duration such as 36h (between 1h and 3650d)."
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
  description = "Protect the database, the GPU service, the daemon and the tasks queue from deletion. Set to false and apply before `terraform destroy`."
  type        = bool
  default     = true
}

variable "run_timeout_seconds" {
  description = "Timeout of the Run function, which executes one run per Cloud Task. It must outlive the longest dispatch deadline Cloud Tasks allows (1800 s), or Run is killed while Cloud Tasks still waits; gen2 HTTP functions allow up to 3600."
  type        = number
  default     = 1860

  validation {
    condition     = var.run_timeout_seconds >= 1800 && var.run_timeout_seconds <= 3600 && floor(var.run_timeout_seconds) == var.run_timeout_seconds
    error_message = "run_timeout_seconds must be a whole number from 1800 (Cloud Tasks' longest dispatch deadline) to 3600 (the longest gen2 HTTP function timeout)."
  }
}

variable "tasks_queue_name" {
  description = "Name of the Cloud Tasks queue that Tick, Schedules and Run hand runs to. A deleted queue's name cannot be reused for 7 days."
  type        = string
  default     = "baton-runs"

  validation {
    condition     = can(regex("^[A-Za-z0-9-]{1,100}$", var.tasks_queue_name))
    error_message = "tasks_queue_name must be 1-100 letters, digits or hyphens (Cloud Tasks' queue ID rule)."
  }
}

variable "tasks_max_attempts" {
  description = "Attempts per task, the first included (retry_config.max_attempts). After the last, Tick's sweep repairs the run. Cloud Tasks allows -1 (unlimited), which baton refuses: a run must end."
  type        = number
  default     = 5

  validation {
    condition     = var.tasks_max_attempts >= 1 && var.tasks_max_attempts <= 100 && floor(var.tasks_max_attempts) == var.tasks_max_attempts
    error_message = "tasks_max_attempts must be a whole number from 1 to 100 (Cloud Tasks takes >= -1; unlimited is refused here)."
  }
}

variable "tasks_min_backoff_seconds" {
  description = "Shortest wait before a task is retried (retry_config.min_backoff), in seconds; Cloud Tasks truncates backoffs to whole seconds."
  type        = number
  default     = 10

  validation {
    condition     = var.tasks_min_backoff_seconds >= 0 && var.tasks_min_backoff_seconds <= 2678400 && floor(var.tasks_min_backoff_seconds) == var.tasks_min_backoff_seconds
    error_message = "tasks_min_backoff_seconds must be a whole number of seconds from 0 to 2678400 (31 days, Cloud Tasks' longest task retention: a task is deleted before a longer wait ends)."
  }
}

variable "tasks_max_backoff_seconds" {
  description = "Longest wait between two attempts of a task (retry_config.max_backoff), in seconds; at least tasks_min_backoff_seconds."
  type        = number
  default     = 300

  validation {
    condition     = var.tasks_max_backoff_seconds >= 0 && var.tasks_max_backoff_seconds <= 2678400 && floor(var.tasks_max_backoff_seconds) == var.tasks_max_backoff_seconds
    error_message = "tasks_max_backoff_seconds must be a whole number of seconds from 0 to 2678400 (31 days, Cloud Tasks' longest task retention: a task is deleted before a longer wait ends)."
  }
}

variable "tasks_max_doublings" {
  description = "How many times the retry interval doubles from tasks_min_backoff_seconds before it grows linearly up to tasks_max_backoff_seconds (retry_config.max_doublings). With 10 s and 4: 10, 20, 40, 80, 160 s."
  type        = number
  default     = 4

  validation {
    condition     = var.tasks_max_doublings >= 0 && var.tasks_max_doublings <= 16 && floor(var.tasks_max_doublings) == var.tasks_max_doublings
    error_message = "tasks_max_doublings must be a whole number from 0 to 16 (Cloud Tasks' default; 10 s doubled 16 times is already 7.6 days)."
  }
}

variable "tasks_max_retry_duration_seconds" {
  description = "Time limit for retrying a task, from its first attempt (retry_config.max_retry_duration). Cloud Tasks stops only once both this and tasks_max_attempts are used up; 0 means no time limit, so that max_attempts alone decides."
  type        = number
  default     = 0

  validation {
    condition     = var.tasks_max_retry_duration_seconds >= 0 && var.tasks_max_retry_duration_seconds <= 2678400 && floor(var.tasks_max_retry_duration_seconds) == var.tasks_max_retry_duration_seconds
    error_message = "tasks_max_retry_duration_seconds must be a whole number of seconds from 0 to 2678400 (31 days, Cloud Tasks' longest task retention)."
  }
}

variable "tasks_max_dispatches_per_second" {
  description = "Highest rate at which each run queue dispatches tasks to Run (rate_limits.max_dispatches_per_second). Cloud Tasks allows at most 500 per queue (https://cloud.google.com/tasks/docs/quotas). The default, 250, is 15,000 runs a minute per queue: docs/deploy.md, \"Sizing\"."
  type        = number
  default     = 250

  validation {
    condition     = var.tasks_max_dispatches_per_second > 0 && var.tasks_max_dispatches_per_second <= 500
    error_message = "tasks_max_dispatches_per_second must be above 0 and at most 500 (Cloud Tasks' per-queue limit)."
  }
}

variable "tasks_max_concurrent_dispatches" {
  description = "Most tasks each run queue has in flight to Run at once (rate_limits.max_concurrent_dispatches). Run's instances are sized to hold them all (run_max_instances). Cloud Tasks allows at most 5000 (https://cloud.google.com/tasks/docs/quotas). The default, 1000, keeps the rate the limit for runs of up to 4 s at 250 dispatches a second."
  type        = number
  default     = 1000

  validation {
    condition     = var.tasks_max_concurrent_dispatches >= 1 && var.tasks_max_concurrent_dispatches <= 5000 && floor(var.tasks_max_concurrent_dispatches) == var.tasks_max_concurrent_dispatches
    error_message = "tasks_max_concurrent_dispatches must be a whole number from 1 to 5000 (Cloud Tasks' limit)."
  }
}

variable "tasks_queue_count" {
  description = "Number of run queues. One queue dispatches at most 500 tasks a second (https://cloud.google.com/tasks/docs/quotas); more queues multiply that. The enqueuer puts a schedule's tasks on queue hash(schedule id) mod count, so changing the count moves schedules between queues: a task created just before the change may be created again on the new queue, which Run's job lease and claim make harmless (docs/deploy.md, \"Sizing\")."
  type        = number
  default     = 1

  validation {
    condition     = var.tasks_queue_count >= 1 && var.tasks_queue_count <= 20 && floor(var.tasks_queue_count) == var.tasks_queue_count
    error_message = "tasks_queue_count must be a whole number from 1 to 20 (20 queues at 500 dispatches a second is 600,000 runs a minute, far past what one Firestore database's deciders feed)."
  }
}

variable "decider_partitions" {
  description = "P, the partitions of a tick (BATON_PARTITIONS on Tick): 1 or more makes the Cloud Scheduler tick a coordinator that creates P partition tasks a minute on the baton-ticks queue, each deciding the decider shards v mod P == p (docs/scheduler.md). 0 deploys no tick queue and decides every schedule in the tick under one lease. null (the default) is 8, or 0 when daemon_image is set (the daemon needs the single lease). At most decider_shards; may change while running. docs/deploy.md, \"Sizing\", explains the 8."
  type        = number
  default     = null

  validation {
    condition     = var.decider_partitions == null || try(var.decider_partitions >= 0 && var.decider_partitions <= 4096 && floor(var.decider_partitions) == var.decider_partitions, false)
    error_message = "decider_partitions must be a whole number from 0 (one decider) to decider_shards (at most 4096, schedule.MaxDeciderShards), or null for the default."
  }
}

variable "decider_shards" {
  description = "V, the virtual decider shards (BATON_DECIDER_SHARDS on Tick, Schedules and Run): each schedule's shard is FNV-1a(id) mod V, stored on it. Fixed per deployment: changing it is an offline migration (docs/deploy.md, \"Changing decider_shards\"), and a plan that changes it is refused until terraform_data.decider_shards is replaced."
  type        = number
  default     = 64

  validation {
    condition     = var.decider_shards >= 1 && var.decider_shards <= 4096 && floor(var.decider_shards) == var.decider_shards
    error_message = "decider_shards must be a whole number from 1 to 4096 (schedule.MaxDeciderShards: each shard is one lease object written every minute)."
  }
}

variable "run_cpu" {
  description = "vCPUs of each Run instance (service_config.available_cpu). Cloud Run serves concurrent requests only with at least 1 vCPU (https://cloud.google.com/run/docs/about-concurrency); a run mostly waits on its target, the database and the bucket, so one vCPU serves run_concurrency of them."
  type        = string
  default     = "1"

  validation {
    condition     = contains(["0.083", "0.167", "0.333", "0.583", "1", "2", "4", "6", "8"], var.run_cpu)
    error_message = "run_cpu must be one of Cloud Run's CPU settings: 0.083, 0.167, 0.333, 0.583, 1, 2, 4, 6 or 8 (https://cloud.google.com/run/docs/configuring/services/cpu)."
  }
}

variable "run_memory" {
  description = "Memory of each Run instance (service_config.available_memory), shared by run_concurrency runs at once. Cloud Run bounds it by the vCPU count (https://cloud.google.com/run/docs/configuring/services/memory-limits)."
  type        = string
  default     = "1Gi"

  validation {
    condition     = can(regex("^(128|256|512)Mi$|^([1-9]|[12][0-9]|3[0-2])Gi$", var.run_memory))
    error_message = "run_memory must be 128Mi, 256Mi, 512Mi or 1Gi to 32Gi in whole GiB (Cloud Run's memory limits)."
  }
}

variable "run_concurrency" {
  description = "Requests one Run instance serves at once (service_config.max_instance_request_concurrency). Above 1 needs run_cpu of at least 1. Cloud Run allows up to 1000 (https://cloud.google.com/run/docs/about-concurrency)."
  type        = number
  default     = 80

  validation {
    condition     = var.run_concurrency >= 1 && var.run_concurrency <= 1000 && floor(var.run_concurrency) == var.run_concurrency
    error_message = "run_concurrency must be a whole number from 1 to 1000 (Cloud Run's limit)."
  }
}

variable "run_max_instances" {
  description = "Most Run instances. 0 (the default) sizes it to hold every dispatch the queues may have in flight: ceil(tasks_queue_count × tasks_max_concurrent_dispatches / run_concurrency). A smaller number is refused (those dispatches would get 429s); the region's Cloud Run instance quota must allow it."
  type        = number
  default     = 0

  validation {
    condition     = var.run_max_instances >= 0 && var.run_max_instances <= 1000 && floor(var.run_max_instances) == var.run_max_instances
    error_message = "run_max_instances must be a whole number from 0 (sized from the queues) to 1000."
  }
}

variable "tasks_log_sampling_ratio" {
  description = "Fraction of the queue's dispatch attempts written to Cloud Logging (stackdriver_logging_config.sampling_ratio), from 0.0 (none) to 1.0 (all)."
  type        = number
  default     = 1

  validation {
    condition     = var.tasks_log_sampling_ratio >= 0 && var.tasks_log_sampling_ratio <= 1
    error_message = "tasks_log_sampling_ratio must be between 0.0 and 1.0."
  }
}

variable "tasks_service_agent_grant" {
  description = "Grant roles/cloudtasks.serviceAgent to the Cloud Tasks service agent (service-PROJECT_NUMBER@gcp-sa-cloudtasks.iam.gserviceaccount.com), which mints the tasks' OIDC tokens. Only for a project that enabled the Cloud Tasks API before 19 March 2019 and so lacks it (see docs/deploy.md); newer projects have it from Google."
  type        = bool
  default     = false
}

variable "daemon_image" {
  description = "Container image of the baton CLI (ENTRYPOINT baton), run as `baton daemon` on an always-on Cloud Run service for sub-minute schedules (see docs/deploy.md). Empty deploys no daemon, and Schedules refuses seconds-level crons."
  type        = string
  default     = ""

  validation {
    condition     = var.daemon_image == "" || can(regex("^[a-z0-9.-]+(:[0-9]+)?/[a-z0-9._/-]+(:[A-Za-z0-9._-]+|@sha256:[a-f0-9]{64})$", var.daemon_image))
    error_message = "daemon_image must be empty or a full image reference with a tag or digest, e.g. us-central1-docker.pkg.dev/PROJECT/baton/baton:v1."
  }
}

variable "daemon_poll" {
  description = "How often the daemon polls for schedule edits (baton daemon --poll) where the database has no change stream, as Firestore has none unless one was created. Each poll is a query, billed even when nothing changed: 200ms reacts at once, 5s costs 25 times fewer queries."
  type        = string
  default     = "200ms"

  validation {
    condition     = can(regex("^([0-9]+(ms|s|m))+$", var.daemon_poll))
    error_message = "daemon_poll must be a Go duration such as 200ms, 1s or 5s."
  }
}

# Required, with no default: Terraform has no built-in source of secrets
# that CI can validate offline (the hashicorp/random provider is not in the
# provider cache scripts/tf-check.sh builds), and a default would be public.
variable "page_token_secret" {
  description = "Secret that signs the list endpoints' page tokens (BATON_PAGE_TOKEN_SECRET of Schedules and GPU), at least 32 bytes: generate one with `openssl rand -base64 48` and keep it (e.g. export TF_VAR_page_token_secret). Changing it only makes outstanding nextPageTokens a 400."
  type        = string
  sensitive   = true

  validation {
    condition     = length(var.page_token_secret) >= 32
    error_message = "page_token_secret must be at least 32 bytes (openssl rand -base64 48 makes 64)."
  }
}

variable "rent_public" {
  description = "Grant roles/run.invoker on the Rent function to allUsers (a public calculator with no data behind it). Set false where the organisation's domain-restricted sharing policy refuses allUsers; operator_members can then call it with an ID token."
  type        = bool
  default     = true
}

variable "point_in_time_recovery" {
  description = "Keep Firestore point-in-time recovery on (7 days of versions, billed as storage), so a bad edit or a bug's writes can be read back and undone."
  type        = bool
  default     = true
}

variable "change_stream" {
  description = "Create the Firestore change stream on the schedules collection, so that baton daemon watches edits instead of polling for them. Change streams are a Firestore preview; set false where it cannot be created, and the daemon polls."
  type        = bool
  default     = true
}

variable "index_id_field" {
  description = "Field path under which the Firestore indexes name the document's _id (the last field of 19 of them: the keyset tie-breaker, or the whole key of the schedule and calendar lists). \"__name__\" (the default) is the form Google documents: the admin API ends every index with __name__, the document name from which Firestore computes _id. \"_id\" is the field name the MongoDB API's createIndex uses. Set \"_id\" only if terraform apply refuses a google_firestore_index.baton whose fields name __name__, then apply again: each of those 19 indexes is replaced, and its queries are scans until the new one is READY. baton doctor accepts either form."
  type        = string
  default     = "__name__"

  validation {
    condition     = contains(["__name__", "_id"], var.index_id_field)
    error_message = "index_id_field must be \"__name__\" (the admin API's documented field path for the document name) or \"_id\" (the MongoDB API's field name)."
  }
}

variable "propagation_wait_seconds" {
  description = "Seconds to wait after enabling the APIs and again after the IAM grants that builds and services need at start, before using them (a local-exec sleep on the machine running terraform, only when those resources are created or changed). Google documents that enabled APIs and IAM changes take minutes to propagate; 0 creates no wait at all and runs nothing (a project whose APIs and grants already exist, or a runner without sleep), and a failure then is fixed by applying again."
  type        = number
  default     = 120

  validation {
    condition     = var.propagation_wait_seconds >= 0 && var.propagation_wait_seconds <= 900 && floor(var.propagation_wait_seconds) == var.propagation_wait_seconds
    error_message = "propagation_wait_seconds must be a whole number from 0 to 900."
  }
}

variable "image_keep_count" {
  description = "Versions of each function image that the Artifact Registry cleanup policy always keeps (the most recent ones), whatever their age: enough to roll a function back."
  type        = number
  default     = 10

  validation {
    condition     = var.image_keep_count >= 1 && var.image_keep_count <= 100 && floor(var.image_keep_count) == var.image_keep_count
    error_message = "image_keep_count must be a whole number from 1 to 100: at least the image each function runs must be kept."
  }
}

variable "image_max_age_days" {
  description = "Function image versions older than this many days are deleted by the Artifact Registry cleanup policy, except the image_keep_count most recent of each image."
  type        = number
  default     = 30

  validation {
    condition     = var.image_max_age_days >= 1 && floor(var.image_max_age_days) == var.image_max_age_days
    error_message = "image_max_age_days must be a whole number of days, at least 1."
  }
}

variable "alert_emails" {
  description = "Email addresses that receive baton's alerts (one Cloud Monitoring email channel each). Empty makes none; notification_channels adds channels that already exist."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for e in var.alert_emails : can(regex("^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$", e))])
    error_message = "alert_emails must be email addresses such as oncall@example.com."
  }
}

variable "notification_channels" {
  description = "Existing Cloud Monitoring notification channels (projects/P/notificationChannels/ID: Slack, PagerDuty, Pub/Sub, …) that receive every baton alert, besides alert_emails."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for c in var.notification_channels : can(regex("^projects/[^/]+/notificationChannels/[^/]+$", c))])
    error_message = "notification_channels must be channel names of the form projects/PROJECT/notificationChannels/ID."
  }
}

variable "alert_tick_absent_minutes" {
  description = "Minutes without a successful tick before the no-tick alert fires. Ticks come every minute; a few minutes rides out a deploy."
  type        = number
  default     = 10

  validation {
    condition     = var.alert_tick_absent_minutes >= 5 && var.alert_tick_absent_minutes <= 1440 && floor(var.alert_tick_absent_minutes) == var.alert_tick_absent_minutes
    error_message = "alert_tick_absent_minutes must be a whole number from 5 to 1440 (the alignment period is 5 minutes)."
  }
}

variable "alert_run_failure_ratio" {
  description = "Share of runs (0 to 1) that may end failed over 10 minutes before the run-failure alert fires."
  type        = number
  default     = 0.1

  validation {
    condition     = var.alert_run_failure_ratio >= 0 && var.alert_run_failure_ratio < 1
    error_message = "alert_run_failure_ratio must be at least 0 and below 1."
  }
}

variable "alert_gpu_wait_p99_seconds" {
  description = "The GPU-wait alert fires when the 99th percentile of the queue wait (enqueue to dispatch) over 10 minutes exceeds this many seconds."
  type        = number
  default     = 600

  validation {
    condition     = var.alert_gpu_wait_p99_seconds > 0
    error_message = "alert_gpu_wait_p99_seconds must be positive."
  }
}

variable "billing_account" {
  description = "Billing account id (XXXXXX-XXXXXX-XXXXXX) for the optional GPU budget. Empty makes no budget."
  type        = string
  default     = ""

  validation {
    condition     = var.billing_account == "" || can(regex("^[0-9A-F]{6}-[0-9A-F]{6}-[0-9A-F]{6}$", var.billing_account))
    error_message = "billing_account must be empty or a billing account id such as 0X0X0X-0X0X0X-0X0X0X."
  }
}

variable "gpu_budget_amount" {
  description = "Monthly GPU budget in gpu_budget_currency (whole units); 0 makes no budget. Needs billing_account."
  type        = number
  default     = 0

  validation {
    condition     = var.gpu_budget_amount >= 0 && floor(var.gpu_budget_amount) == var.gpu_budget_amount
    error_message = "gpu_budget_amount must be a whole number, 0 or more."
  }
}

variable "gpu_budget_currency" {
  description = "Currency of gpu_budget_amount; it must be the billing account's currency."
  type        = string
  default     = "USD"

  validation {
    condition     = can(regex("^[A-Z]{3}$", var.gpu_budget_currency))
    error_message = "gpu_budget_currency must be an ISO 4217 code such as USD."
  }
}

variable "gpu_budget_services" {
  description = "Billing services the GPU budget counts: Cloud Run's (services/152E-C115-5142), where the GPU worker runs. The budget covers this project only."
  type        = list(string)
  default     = ["services/152E-C115-5142"]

  validation {
    condition     = length(var.gpu_budget_services) > 0 && alltrue([for s in var.gpu_budget_services : can(regex("^services/[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}$", s))])
    error_message = "gpu_budget_services must list billing service ids such as services/152E-C115-5142."
  }
}

# The default notification channel (docs/notifications.md): every schedule
# without a notify block of its own sends its events here. Empty sends none.
variable "notify_webhook_url" {
  description = "Default notification webhook (BATON_NOTIFY_WEBHOOK_URL of Tick, Run and Schedules), for every schedule without a notify block. Its host must be in allowed_targets. Empty means no default channel."
  type        = string
  default     = ""

  validation {
    condition     = var.notify_webhook_url == "" || can(regex("^https?://", var.notify_webhook_url))
    error_message = "notify_webhook_url must be an http(s) URL, or empty."
  }
}

variable "notify_webhook_secret" {
  description = "Secret that signs the default webhook's requests (BATON_NOTIFY_WEBHOOK_SECRET), at least 16 bytes: generate one with `openssl rand -base64 32`. Required with notify_webhook_url."

  # Empty by default, as is the webhook: no channel, no secret.
  sensitive = true
  type      = string
  default   = ""

  validation {
    condition     = var.notify_webhook_secret == "" || length(var.notify_webhook_secret) >= 16
    error_message = "notify_webhook_secret must be at least 16 bytes (openssl rand -base64 32 makes 44)."
  }
}

variable "notify_on" {
  description = "Comma-separated events the default webhook gets (BATON_NOTIFY_ON): failed, skipped, misfire, recovered, missed."
  type        = string
  default     = "failed"

  validation {
    condition     = alltrue([for e in split(",", var.notify_on) : contains(["failed", "skipped", "misfire", "recovered", "missed"], trimspace(e))])
    error_message = "notify_on must list failed, skipped, misfire, recovered or missed, separated by commas."
  }
}

variable "console_url" {
  description = "Base URL of the console (BATON_CONSOLE_URL): each notification links to <console_url>/runs/<id>. Empty leaves the link out."
  type        = string
  default     = ""

  validation {
    condition     = var.console_url == "" || can(regex("^https?://", var.console_url))
    error_message = "console_url must be an http(s) URL, or empty."
  }
}

variable "pubsub_target_topics" {
  description = "Pub/Sub topics that schedules' pubsub targets may publish to (BATON_ALLOWED_TOPICS), each projects/PROJECT/topics/TOPIC. The topics are the operator's; Terraform grants Tick, Run and Schedules (and the daemon) roles/pubsub.publisher on each listed topic and on nothing else. A pubsub target naming another topic is refused with 400. Empty means no pubsub target can be written."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for t in var.pubsub_target_topics : can(regex("^projects/[a-z0-9][a-z0-9.:-]{0,62}/topics/[A-Za-z][A-Za-z0-9._~+%-]{2,254}$", t)) && !startswith(lower(split("/", t)[3]), "goog")]) && length(distinct(var.pubsub_target_topics)) == length(var.pubsub_target_topics)
    error_message = "pubsub_target_topics: each entry must be a topic name, projects/PROJECT/topics/TOPIC (a topic id not starting with goog), listed once; a wildcard is not a grant Terraform can make."
  }
}

variable "cloud_run_target_jobs" {
  description = "Cloud Run jobs that schedules' cloudRunJob targets may execute (BATON_ALLOWED_JOBS), each projects/PROJECT/locations/REGION/jobs/JOB. The jobs are the operator's; Terraform grants Tick, Run and Schedules (and the daemon) roles/run.jobsExecutorWithOverrides (run with overrides, cancel) and roles/run.viewer (read executions) on each listed job and on nothing else. A cloudRunJob target naming another job is refused with 400. Empty means no cloudRunJob target can be written."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for j in var.cloud_run_target_jobs : can(regex("^projects/[a-z0-9][a-z0-9.:-]{0,62}/locations/[a-z0-9-]+/jobs/[a-z]([a-z0-9-]{0,61}[a-z0-9])?$", j))]) && length(distinct(var.cloud_run_target_jobs)) == length(var.cloud_run_target_jobs)
    error_message = "cloud_run_target_jobs: each entry must be a job name, projects/PROJECT/locations/REGION/jobs/JOB (JOB a lowercase RFC 1035 label), listed once; a wildcard is not a grant Terraform can make."
  }
}

variable "notify_topic" {
  description = "Default Pub/Sub notification channel (BATON_NOTIFY_TOPIC), projects/PROJECT/topics/TOPIC, for every schedule without a notify block: the events of notify_on are published there. The topic is the operator's; Terraform grants Tick, Run and Schedules (and the daemon) roles/pubsub.publisher on it. Empty means none."
  type        = string
  default     = ""

  validation {
    condition     = var.notify_topic == "" || can(regex("^projects/[a-z0-9][a-z0-9.:-]{0,62}/topics/[A-Za-z][A-Za-z0-9._~+%-]{2,254}$", var.notify_topic))
    error_message = "notify_topic must be empty or a topic name, projects/PROJECT/topics/TOPIC."
  }
}
