# slot-booking — every command a developer or CI needs.
# `make dev` serves the API locally; `make test` runs every check CI runs.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

DATABASE_URL ?= mysql://root@127.0.0.1:3306/slot_booking
REDIS_URL ?= redis://127.0.0.1:6379
PORT ?= 9000
# At least 20 parallel instances per function, as Lambda would run them:
# one request at a time through a single instance would hide every race.
CONCURRENCY ?= 20
export DATABASE_URL REDIS_URL
API_FUNCTIONS := availability hold confirm cancel holds-get holds-find holds-extend holds-move waitlist-join waitlist-get waitlist-leave events-list slots-create slots-get slots-update slots-delete clients-create clients-list clients-revoke clients-update webhooks-create webhooks-list webhooks-get webhooks-update webhooks-delete webhooks-rotate webhooks-deliveries webhooks-ping console docs openapi
# What `make dev` serves: the API's routes, API Gateway's `$default` route,
# the scheduled sweeper, the publisher (which starts only with an
# EVENT_BUS_NAME; `make dev` never invokes it: no bus runs locally) and the
# webhooks' delivery engine (invoked back to back, scripts/dev.sh).
DEV_FUNCTIONS := $(API_FUNCTIONS) not-found sweep events-publish webhooks-deliver
# Extra `cargo lambda watch` flags for `make dev` (the soak passes
# --ignore-changes). Never --timeout: see docs/LOCAL.md.
WATCH_FLAGS ?=
SOAK_MINUTES ?= 30

# cargo-lambda (and the zig it cross-links with) from a project-local venv
# when it is not installed; its directory must stay first on PATH.
WITH_CARGO_LAMBDA = PATH="$$(scripts/ensure-cargo-lambda.sh):$$PATH"

.PHONY: help dev db soak soak-short contract browser deny test check lint unit validate build sam-build sam-local sam-local-test test-bare smoke scenarios bench bench-scale deploy clean

help: ## list the commands
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

dev: db ## serve the API on http://127.0.0.1:$(PORT) ($(CONCURRENCY) instances per function), sweeper every 60 s
	@# Built as the watcher runs them (`cargo run --bin NAME`), so the first
	@# requests do not wait for a compile.
	cargo build $(foreach f,$(DEV_FUNCTIONS),--bin $(f))
	$(WITH_CARGO_LAMBDA) scripts/dev.sh $(PORT) $(CONCURRENCY) $(WATCH_FLAGS)

db: ## start MariaDB and Redis if stopped, create the database if missing, migrate it, seed demo slots when none is still to start
	bash scripts/services.sh
	cargo run --quiet -p devdb

test: ## everything CI runs, each stage timed: lint unit soak-short contract browser deny validate sam-build
	@bash scripts/stages.sh lint unit soak-short contract browser deny validate sam-build

lint: ## formatting and clippy, warnings are errors
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

unit: ## the whole test suite against the real MariaDB and Redis
	mkdir -p target
	@# Every binary runs (--no-fail-fast); the closing line for the whole
	@# suite (cargo prints one per binary) is written also when tests fail.
	status=0; $(WITH_CARGO_LAMBDA) cargo test --workspace --no-fail-fast 2>&1 \
		| tee target/test-output.log || status=$$?; \
	awk '/^test result:/ { passed += $$4; failed += $$6 } \
		END { printf "tests: %d passed, %d failed\n", passed, failed }' \
		target/test-output.log | tee target/test-summary.txt; \
	exit $$status

soak: ## `make dev` under bursts of mixed traffic and idle gaps for SOAK_MINUTES (30) minutes: no panic, every request answered
	SOAK_MINUTES=$(SOAK_MINUTES) cargo run --quiet -p slot-booking-tests --bin soak

soak-short: ## the soak for 2 minutes (part of `make test`)
	$(MAKE) --no-print-directory soak SOAK_MINUTES=2

browser: ## the console and the reference in headless Chromium (Playwright, axe-core) against `make dev`: screenshots in target/browser/
	cargo run --quiet -p slot-booking-tests --bin browser

contract: ## schemathesis against `make dev` (own database, dev keys): no 5xx, every answer as openapi.yaml says
	cargo run --quiet -p slot-booking-tests --bin contract

deny: ## cargo deny: bans, licenses and sources of every dependency (deny.toml); installs cargo-deny into .tools/ once
	@# `advisories` is left out (deny.toml says why).
	bash scripts/ensure-cargo-deny.sh
	.tools/bin/cargo-deny check bans licenses sources

validate: ## sam validate --lint, cfn-lint and the dependency-graph check on template.yaml
	bash scripts/validate-template.sh

build: sam-build ## arm64 Lambda bootstraps (sam build → cargo lambda build), with their zipped sizes

sam-build: ## sam build: one aarch64 bootstrap per function, each zipped < 5 MB
	bash scripts/sam-build-check.sh

sam-local: ## the template under `sam local start-api` on http://127.0.0.1:3000: Docker, host-architecture build, the local MariaDB and Redis (docs/DEPLOY.md)
	bash scripts/sam-local.sh

sam-local-test: ## `make sam-local` in the background, `make smoke` and the seed's scenarios through it, then all stopped
	bash scripts/sam-local-test.sh

test-bare: ## `make dev`'s set-up on a bare Debian root (debootstrap): services.sh installs and starts MariaDB and Redis, clients reach both over TCP; root or sudo, downloads packages, not in `make test`
	bash scripts/test-bare.sh

smoke: ## every route once against API_URL with an admin API_KEY (a deployed stack, make dev, make sam-local); removes what it made
	@if [ -z "$(API_URL)" ] || [ -z "$(API_KEY)" ]; then \
		echo "usage: make smoke API_URL=https://… API_KEY=sb_… (an admin key)" >&2; exit 2; fi
	@API_URL="$(API_URL)" API_KEY="$(API_KEY)" cargo run --quiet -p slot-booking-tests --bin smoke

scenarios: ## the seed's three concurrency scenarios over HTTP against a running `make dev`
	cargo run --quiet -p slot-booking-tests --bin seed-scenarios -- http://127.0.0.1:$(PORT)

bench: sam-build ## benchmarks: figures printed and written to docs/BENCHMARKS.md (after the arm64 build, whose zips it reports)
	$(WITH_CARGO_LAMBDA) cargo run --release -p bench

bench-scale: ## the benchmarks at 1,000,000 slots and 10,000,000 holds alone (part of `make bench`), rewriting their section of docs/BENCHMARKS.md
	cargo run --release -p bench -- --only scale

deploy: validate sam-build ## deploy with SAM (needs AWS credentials; not run from here)
	.venv-sam/bin/sam deploy $(if $(wildcard samconfig.toml),,--guided)

clean: ## remove build output
	cargo clean
	rm -rf .aws-sam
