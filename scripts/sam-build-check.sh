#!/usr/bin/env bash
# `make sam-build`: run `sam build` on template.yaml exactly as a deploy would
# and check what it produced:
#
#   - every AWS::Serverless::Function of the template has
#     .aws-sam/build/<LogicalId>/bootstrap, an ARM aarch64 ELF executable;
#   - each bootstrap, zipped the way `sam deploy` zips it (deflate), stays
#     under MAX_ZIP_BYTES (default 5 MB = 5,000,000 bytes).
#
# Prints a table function -> unzipped and zipped size; the zips are left in
# .aws-sam/zip/ for inspection. Exit status non-zero on any failure.
#
# `sam-build-check.sh --bootstraps-only` stops after step 6 below, the one
# cargo invocation that does the work (scripts/ahead.sh runs it early).
#
# Time on 2 cores: cold (empty target/) about 10-20 minutes, the dependency
# tree once, then one short link per function (no LTO: Cargo.toml); warm (no
# source change) about 12 seconds.
#
# How the build runs (aws-lambda-builders' rust-cargolambda workflow, shipped
# with the pinned SAM CLI):
#   - in source, never in Docker: for each function it runs
#     `cargo lambda build --release --arm64 --bin <Binary>` in CodeUri (the
#     workspace root) with CARGO_TARGET_DIR = the workspace's target/ (from
#     `cargo metadata`), then copies target/lambda/<Binary>/bootstrap into
#     .aws-sam/build/<LogicalId>/. So every function after the first reuses
#     the compiled dependencies, and `cargo lambda build --release --arm64`
#     run by hand (or a previous `sam build`) leaves nothing to rebuild.
#   - `--build-in-source` only states what the workflow does anyway (it
#     supports nothing else; without the flag SAM prints a notice).
#   - `--cached` is not used: SAM's cache key is a hash of every file under
#     CodeUri (the whole repository, target/ included) so it would read
#     gigabytes and still miss after each build. Cargo's own fingerprints are
#     the cache.
#   - no network: the crates are fetched first (`cargo fetch --locked`, a
#     no-op when they are already in ~/.cargo), then the build runs with
#     CARGO_NET_OFFLINE=true. Zig (the cross linker) comes from the pip
#     package that scripts/ensure-cargo-lambda.sh installs.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

TEMPLATE="${TEMPLATE:-template.yaml}"
BUILD_DIR="$ROOT/.aws-sam/build"
ZIP_DIR="$ROOT/.aws-sam/zip"
MAX_ZIP_BYTES="${MAX_ZIP_BYTES:-5000000}"
TARGET_TRIPLE=aarch64-unknown-linux-gnu

log() { printf 'sam-build: %s\n' "$*" >&2; }
now() { date +%s; }

# 1. The Rust target (rustup needs the network only the first time).
if ! rustup target list --installed | grep -qx "$TARGET_TRIPLE"; then
    log "rustup target add $TARGET_TRIPLE"
    rustup target add "$TARGET_TRIPLE" >&2
fi

# 2. cargo-lambda (and zig): its directory must come first on PATH.
PATH="$(scripts/ensure-cargo-lambda.sh):$PATH"
export PATH

# 3. The SAM CLI, from the venv scripts/validate-template.sh maintains.
SAM_BIN_DIR="$(bash scripts/validate-template.sh --ensure-venv)"
SAM="$SAM_BIN_DIR/sam"
SAM_PYTHON="$SAM_BIN_DIR/python"
export SAM_CLI_TELEMETRY=0
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"

# 4. The functions of the template: LogicalId and BuildProperties.Binary.
# SAM's own YAML loader understands the CloudFormation short tags (!Ref ...).
mapfile -t FUNCTIONS < <("$SAM_PYTHON" - "$TEMPLATE" <<'PY'
import sys
from samcli.yamlhelper import yaml_parse

with open(sys.argv[1], encoding="utf-8") as f:
    template = yaml_parse(f.read())
for logical_id, resource in template.get("Resources", {}).items():
    if resource.get("Type") != "AWS::Serverless::Function":
        continue
    binary = (resource.get("Metadata") or {}).get("BuildProperties", {}).get("Binary", "")
    print(f"{logical_id} {binary}")
PY
)
if [[ ${#FUNCTIONS[@]} -eq 0 ]]; then
    log "no AWS::Serverless::Function in $TEMPLATE"
    exit 1
fi

# 5. Crates on disk, then an offline build.
cargo fetch --locked >&2
export CARGO_NET_OFFLINE=true

# 6. Every bootstrap in one cargo invocation first (the script says why),
# under the lambda build lock, held to the end: scripts/ahead.sh may run
# this script's step 6 while the sam-build stage runs it all.
source scripts/lambda-build-lock.sh
started=$(now)
bash scripts/lambda-bootstraps.sh "$TEMPLATE" arm64 >/dev/null
prebuild_seconds=$(( $(now) - started ))
log "the bootstraps took ${prebuild_seconds}s"
[[ "${1:-}" == "--bootstraps-only" ]] && exit 0

log "sam build (${#FUNCTIONS[@]} functions, each a fresh check of the build above)"
started=$(now)
"$SAM" build --build-in-source --template "$TEMPLATE" --build-dir "$BUILD_DIR" >&2
build_seconds=$(( $(now) - started ))
log "sam build took ${build_seconds}s"

# 7. Check every function's artefact, zip it, and report sizes.
rm -rf "$ZIP_DIR"
mkdir -p "$ZIP_DIR"
failed=0
printf '%-22s %-14s %12s %12s  %s\n' FUNCTION BINARY BOOTSTRAP ZIPPED RESULT
for entry in "${FUNCTIONS[@]}"; do
    read -r logical_id binary <<<"$entry"
    bootstrap="$BUILD_DIR/$logical_id/bootstrap"
    if [[ ! -f "$bootstrap" ]]; then
        printf '%-22s %-14s %12s %12s  %s\n' "$logical_id" "$binary" - - "FAIL: no $bootstrap"
        failed=1
        continue
    fi
    kind="$(file -b "$bootstrap")"
    if [[ "$kind" != ELF\ 64-bit*ARM\ aarch64* ]]; then
        printf '%-22s %-14s %12s %12s  %s\n' "$logical_id" "$binary" - - "FAIL: not an aarch64 ELF executable: $kind"
        failed=1
        continue
    fi
    zip="$ZIP_DIR/$logical_id.zip"
    # Deflate, as `sam deploy` packages a function directory.
    "$SAM_PYTHON" - "$bootstrap" "$zip" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[2], "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as z:
    z.write(sys.argv[1], "bootstrap")
PY
    size=$(stat -c %s "$bootstrap")
    zipped=$(stat -c %s "$zip")
    result=ok
    if (( zipped >= MAX_ZIP_BYTES )); then
        result="FAIL: zip >= $MAX_ZIP_BYTES bytes"
        failed=1
    fi
    printf '%-22s %-14s %12d %12d  %s\n' "$logical_id" "$binary" "$size" "$zipped" "$result"
done

if (( failed )); then
    log "FAILED (see the table above)"
    exit 1
fi
log "ok: ${#FUNCTIONS[@]} aarch64 bootstraps, every zip < $MAX_ZIP_BYTES bytes (bootstraps ${prebuild_seconds}s, sam build ${build_seconds}s)"
