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
# --ensure-venv); prints the binaries' names, one a line, on stdout. Its
# callers hold the lambda build lock (scripts/lambda-build-lock.sh says why)
# over it and the `sam build` after it.
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
echo "lambda-bootstraps: cargo lambda build --release for $arch (${#binaries[@]} binaries at once)" >&2
cargo lambda build "${flags[@]}" >&2
printf '%s\n' "${binaries[@]}"
