#!/usr/bin/env bash
# Make sure .tools/bin/cargo-deny is the pinned cargo-deny: a project-local
# install, pinned by --locked, so it needs nothing of the machine but cargo.
# Serialised with a lock: `make test` starts it early in the background
# (scripts/ahead.sh) and `make deny` may ask while it is still building.
#
# cargo-deny's release profile is fat LTO with one codegen unit, a ten-minute
# build on 2 cores; overridden (config beats the manifest) it is a few
# minutes, for a checker that reads one dependency graph.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION=0.20.2
bin="$ROOT/.tools/bin/cargo-deny"

ready() { [[ -x "$bin" ]] && [[ "$("$bin" --version 2>/dev/null)" == "cargo-deny $VERSION" ]]; }

ready && exit 0
mkdir -p "$ROOT/.tools"
exec 9>"$ROOT/.tools/.install.lock"
flock 9
ready && exit 0
echo "deny: installing cargo-deny $VERSION into .tools/ (a few minutes, once)" >&2
CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    cargo install --locked --quiet cargo-deny --version "$VERSION" --root "$ROOT/.tools"
ready || { echo "deny: cargo-deny $VERSION does not run after its install" >&2; exit 1; }
