#!/usr/bin/env bash
# Usage: scripts/lambda-bootstraps.sh TEMPLATE arm64|x86_64
#
# Builds the bootstrap of every AWS::Serverless::Function in TEMPLATE
# (BuildProperties.Binary) in ONE `cargo lambda build --release` invocation,
# with the flags SAM's rust-cargolambda workflow passes for that
# architecture (`--arm64`, or none for x86_64 on provided.al2023), before
# `sam build` runs. `sam build` runs one `cargo lambda build --release
# [--arm64] --bin X` per function, each waiting for the one before: 17
# serial release links. One invocation builds them as cargo schedules any
# crate graph, every core busy, and leaves the same artefacts (same command,
# flags and features: every function crate depends on `shared` alike) for
# sam's own invocations to find fresh, a few seconds in all.
#
# Needs cargo-lambda on PATH and the SAM venv (scripts/validate-template.sh
# --ensure-venv); prints the binaries' names, one a line, on stdout.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
template=$1 arch=$2
sam_python="$(bash "$ROOT/scripts/validate-template.sh" --ensure-venv)/python"

# SAM's own YAML loader understands the CloudFormation short tags (!Ref ...).
mapfile -t binaries < <("$sam_python" - "$template" <<'PY'
import sys
from samcli.yamlhelper import yaml_parse

with open(sys.argv[1], encoding="utf-8") as f:
    template = yaml_parse(f.read())
for resource in template.get("Resources", {}).values():
    if resource.get("Type") == "AWS::Serverless::Function":
        print((resource.get("Metadata") or {}).get("BuildProperties", {}).get("Binary", ""))
PY
)
flags=(--release)
case "$arch" in
    arm64) flags+=(--arm64) ;;
    x86_64) ;;
    *) echo "lambda-bootstraps: no architecture $arch" >&2; exit 2 ;;
esac
for binary in "${binaries[@]}"; do flags+=(--bin "$binary"); done
# One build at a time: `make test` starts this script early in the
# background (scripts/ahead.sh) and the sam-build stage runs it again. Cargo
# serialises the two compilations, but cargo-lambda then MOVES each binary
# from target/<triple>/release/ into target/lambda/<bin>/bootstrap; the
# second build re-links the binary the first is moving, and one of them
# finds it gone ("error moving the binary ... No such file or directory").
# scripts/sam-build-check.sh takes the same lock over its `sam build`, whose
# per-function builds move binaries alike, and tells us it holds it.
if [[ -z "${LAMBDA_BUILD_LOCK_HELD:-}" ]]; then
    mkdir -p "$ROOT/target"
    exec 8>"$ROOT/target/.lambda-build.lock"
    flock 8
fi
echo "lambda-bootstraps: cargo lambda build --release for $arch (${#binaries[@]} binaries at once)" >&2
cargo lambda build "${flags[@]}" >&2
printf '%s\n' "${binaries[@]}"
