terraform {
  required_version = ">= 1.5"

  # Keep the state in a bucket of its own (not baton's), with versioning on:
  #
  # backend "gcs" {
  #   bucket = "MY_PROJECT-tfstate"
  #   prefix = "baton"
  # }

  required_providers {
    # CI validates against provider 8.0.0 built from source (scripts/tf-check.sh).
    google = {
      source  = "hashicorp/google"
      version = ">= 8.0, < 9.0"
    }
  }
}

provider "google" {
  project = var.project
  region  = var.region
}
