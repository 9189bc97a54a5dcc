terraform {
  required_version = ">= 1.5"

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
