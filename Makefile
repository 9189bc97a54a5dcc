# baton: `make run` starts the local stack, `make test` runs every check.
GO        ?= go
ARGS      ?=
# Packages with concurrency (leases, CAS, dispatch, emulator fronts) run under
# the race detector; the others run without it, so no package runs twice.
RACE_PKGS := ./shared/lease/... ./shared/store/... ./shared/catalog/... ./shared/scheduler/... ./shared/gpu/... ./emulator/... ./cmd/gpu-worker/...

.PHONY: run test test-unit test-race test-scale vet lint openapi-lint fmt-check fmt build package deploy tf-check bench screenshots wire-reset wire-check wire-inventory soak

# golangci-lint, pinned; make lint installs it from the Go module proxy on
# first use (into GOPATH/bin), so a fresh machine needs nothing else.
GOLANGCI_LINT_VERSION := 2.15.0
GOLANGCI_LINT         := $(shell $(GO) env GOPATH)/bin/golangci-lint

run:
	@$(GO) run ./cmd/baton local $(ARGS)

test: fmt-check vet lint openapi-lint wire-reset test-unit test-race test-scale wire-check

# The wire inventory (docs/emulators-mongo.md): while the tests run, every
# store records the shape of each command it sends into WIRELOG (one file
# per test binary, one line per distinct shape); wire-check then fails on
# any command, option, stage or operator that is not on the Mongo
# emulator's allowlist. It runs with -race, as test-race built that
# package, so it reuses the build.
WIRELOG := $(CURDIR)/.wirelog

wire-reset:
	@rm -rf "$(WIRELOG)"

wire-check:
	BATON_WIRECHECK="$(WIRELOG)" $(GO) test -race -count=1 -run '^TestWireInventory$$' ./emulator/mongo/

# Rewrites the checked-in inventory and its table in docs/emulators-mongo.md
# from the last make test's recordings (or, without any, from the store,
# scheduler, catalog and GPU suites run now).
wire-inventory:
	@if ! ls "$(WIRELOG)"/*.jsonl >/dev/null 2>&1; then \
		BATON_MONGO_WIRELOG="$(WIRELOG)" $(GO) test -count=1 ./shared/store/... ./shared/scheduler/... ./shared/catalog/... ./shared/gpu/...; \
	fi
	BATON_WIRECHECK="$(WIRELOG)" BATON_WIRECHECK_UPDATE=1 $(GO) test -count=1 -run '^TestWireInventory$$' ./emulator/mongo/

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	$(GO) vet ./...

lint:
	@if ! "$(GOLANGCI_LINT)" version 2>/dev/null | grep -q "version $(GOLANGCI_LINT_VERSION) "; then \
		echo "lint: installing golangci-lint v$(GOLANGCI_LINT_VERSION) (first use only)"; \
		GOBIN="$(dir $(GOLANGCI_LINT))" $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v$(GOLANGCI_LINT_VERSION); \
	fi
	"$(GOLANGCI_LINT)" run ./...

# The API's contract (shared/openapi/openapi.yaml) through Redocly's and
# Spectral's standard OpenAPI rules; the linters are pinned npm packages,
# installed into ~/.cache/baton on first use (needs node and npm).
openapi-lint:
	scripts/openapi-lint.sh

test-unit:
	@pkgs=$$($(GO) list ./... | grep -vxF "$$($(GO) list $(RACE_PKGS))"); \
	BATON_MONGO_WIRELOG="$(WIRELOG)" $(GO) test -count=1 -timeout 30m $$pkgs

test-race:
	BATON_MONGO_WIRELOG="$(WIRELOG)" $(GO) test -race -count=1 -timeout 30m $(RACE_PKGS)

# Issue 28's correctness test at its full size: 2,000 every-minute
# schedules over ten minutes of the engine's clock, P cycling 1 → 4 → 16 → 3,
# every partition task delivered twice, a stale shard holder woken mid-decide
# (docs/scheduler.md, Partitioned deciders). Without the race detector:
# test-race runs the same test at 20 schedules under it, which covers the
# concurrency; this covers the size. Most of its CPU is the embedded
# FerretDB decoding documents, and a quarter of that was garbage collection:
# GOGC=400 took a quarter off its CPU time at 150 schedules (41 s → 31 s
# user, peak RSS 166 → 415 MB), with GOMEMLIMIT as the ceiling.
SCALE_SCHEDULES ?= 2000

test-scale:
	GOGC=400 GOMEMLIMIT=3GiB BATON_MONGO_WIRELOG="$(WIRELOG)" BATON_TEST_PARTITION_SCHEDULES=$(SCALE_SCHEDULES) \
		$(GO) test -count=1 -timeout 40m -run '^TestPartitionedDecidersExactlyOnce$$' ./shared/scheduler/

build:
	$(GO) build ./...

# The console's screenshots in docs/console.md: the browser test (part of
# make test) run alone, writing its PNGs to docs/console/.
screenshots:
	BATON_SCREENSHOTS=docs/console BATON_REQUIRE_BROWSER=1 $(GO) test -count=1 -run '^TestConsoleBrowser$$' ./tests/

# The crash loop's long form (README, Development): 2 min of SIGKILLs and
# restarts of baton local, then 2 clean minutes; make test runs the short one.
soak:
	BATON_SOAK=1 $(GO) test -count=1 -timeout 20m -v -run '^TestCrashLoop$$' ./tests/

bench:
	$(GO) run ./cmd/baton bench lease
	$(GO) run ./cmd/baton bench tick
	$(GO) run ./cmd/baton bench gpu

# Deployment (docs/deploy.md). `make package` writes the function source zip
# that Terraform uploads; `make deploy` applies infra/terraform with it. Pass
# the rest as TF_ARGS='-var project=... -var bucket_name=... -var worker_image=...'
# or in infra/terraform/terraform.tfvars.
TF_DIR     := infra/terraform
SOURCE_ZIP := dist/functions-source.zip
TF_ARGS    ?=

package:
	$(GO) run ./scripts/package -check -o $(SOURCE_ZIP)

deploy: package
	terraform -chdir=$(TF_DIR) init -input=false
	terraform -chdir=$(TF_DIR) apply -var source_zip=$(CURDIR)/$(SOURCE_ZIP) $(TF_ARGS)

# Offline: terraform fmt and validate against the real google provider 8.0.0.
tf-check:
	scripts/tf-check.sh
