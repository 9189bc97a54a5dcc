#!/usr/bin/env bash
# tf-check: offline checks of infra/terraform (make tf-check, run by CI).
#
#   1. terraform fmt -check -recursive infra/terraform
#   2. terraform validate against the real hashicorp/google provider 8.0.0,
#      built from the Go module proxy (the only network it needs) and cached
#      under $HOME/.cache/baton/terraform-provider-google/8.0.0/, so only the
#      first run on a machine pays for the build (about 9 minutes, 2 GB).
#   3. terraform test: infra/terraform/tests/*.tftest.hcl plan the whole
#      configuration against a mocked provider (same schema, no Google), which
#      evaluates locals, for_each and the variables' validation rules.
#
# Both run with no `terraform init`: a CLI config whose dev_overrides points
# hashicorp/google at the cached binary makes Terraform load the provider
# from there without a registry, a lock file or .terraform/.
set -euo pipefail
cd "$(dirname "$0")/.."

PROVIDER_VERSION=8.0.0
# The Go module proxy serves the provider only as this pseudo-version of
# github.com/hashicorp/terraform-provider-google; it is the 8.0.0 source.
PROVIDER_MODULE=github.com/hashicorp/terraform-provider-google
PROVIDER_PSEUDO=v1.20.1-0.20260828184646-f3721fb45fa3
TF_DIR=infra/terraform

CACHE_DIR="${BATON_PROVIDER_CACHE:-${HOME}/.cache/baton/terraform-provider-google/${PROVIDER_VERSION}}"
# dev_overrides looks for terraform-provider-<type> in the directory.
PROVIDER_BIN="${CACHE_DIR}/terraform-provider-google"

if ! command -v terraform >/dev/null 2>&1; then
  echo "tf-check: terraform is not installed (expected /usr/local/bin/terraform, v1.11 or later)." >&2
  echo "tf-check: install it from https://developer.hashicorp.com/terraform/install and re-run." >&2
  exit 1
fi

tmp_bin=""
cli_config="$(mktemp)"
trap 'rm -f "${cli_config}"; if [ -n "${tmp_bin}" ]; then rm -rf "${tmp_bin}"; fi' EXIT
# Our own CLI config for every terraform call, so a user's ~/.terraformrc (or
# a TF_CLI_CONFIG_FILE naming a missing file) plays no part.
cat >"${cli_config}" <<HCL
provider_installation {
  dev_overrides {
    "hashicorp/google" = "${CACHE_DIR}"
  }
  direct {}
}
HCL
export TF_CLI_CONFIG_FILE="${cli_config}"

echo "tf-check: terraform fmt -check -recursive ${TF_DIR}"
if ! terraform fmt -check -recursive "${TF_DIR}"; then
  echo "tf-check: the files above need formatting: run terraform fmt -recursive ${TF_DIR}" >&2
  exit 1
fi

if [ ! -x "${PROVIDER_BIN}" ]; then
  command -v go >/dev/null 2>&1 || { echo "tf-check: go is needed to build the provider" >&2; exit 1; }
  echo "tf-check: building ${PROVIDER_MODULE} ${PROVIDER_VERSION} (${PROVIDER_PSEUDO}) into ${CACHE_DIR}"
  echo "tf-check: this takes about 9 minutes and 2 GB of memory the first time; later runs use the cache."
  mkdir -p "${CACHE_DIR}"
  tmp_bin="$(mktemp -d)"
  # Build outside the repository so this module's go.mod plays no part.
  (cd "${tmp_bin}" && GOBIN="${tmp_bin}" GOFLAGS=-buildvcs=false go install \
    -ldflags="-s -w -X ${PROVIDER_MODULE}/version.ProviderVersion=${PROVIDER_VERSION}" \
    "${PROVIDER_MODULE}@${PROVIDER_PSEUDO}")
  # Move into place only when complete, so an interrupted build is retried.
  mv "${tmp_bin}/terraform-provider-google" "${PROVIDER_BIN}.tmp"
  mv "${PROVIDER_BIN}.tmp" "${PROVIDER_BIN}"
fi

echo "tf-check: terraform validate (hashicorp/google ${PROVIDER_VERSION} from ${CACHE_DIR}, no init)"
# TF_IN_AUTOMATION drops the hints meant for humans; the dev_overrides
# warning stays, which is expected here.
TF_IN_AUTOMATION=1 terraform -chdir="${TF_DIR}" validate -no-color

echo "tf-check: terraform test (offline plan with a mocked provider)"
TF_IN_AUTOMATION=1 terraform -chdir="${TF_DIR}" test -no-color
