#!/usr/bin/env bash
# Make sure `cargo lambda` is available.
#
# Prints exactly one line on stdout: the directory to prepend to PATH.
# Everything else (progress, errors) goes to stderr. Typical use:
#
#   PATH="$(scripts/ensure-cargo-lambda.sh):$PATH"
#
# - If `cargo-lambda` is already on PATH, nothing is installed and the
#   directory that holds it is printed (prepending it again is harmless).
# - Otherwise a Python venv `.venv-tools` is created in the repository root
#   (if missing) and the pinned cargo-lambda is pip-installed into it. The
#   PyPI package also brings `ziglang`, which `cargo lambda build --arm64`
#   uses as cross linker.
#
# Keep the printed directory on PATH when running cargo lambda: it looks for
# zig via `python3 -m ziglang`, i.e. the venv's python3 must come first on
# PATH. Calling the venv's cargo-lambda by its full path is not enough.
#
# Override the pinned version with CARGO_LAMBDA_VERSION=x.y.z.
set -euo pipefail

CARGO_LAMBDA_VERSION="${CARGO_LAMBDA_VERSION:-1.9.2}"

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/.." && pwd)"
venv="$repo_root/.venv-tools"
bin_dir="$venv/bin"

log() { printf 'ensure-cargo-lambda: %s\n' "$*" >&2; }
say() { log "$@"; }
# shellcheck source=scripts/install-lib.sh
. "$script_dir/install-lib.sh"

# 1. Already on PATH: do nothing.
if existing="$(command -v cargo-lambda 2>/dev/null)" && [ -n "$existing" ]; then
    dirname "$existing"
    exit 0
fi

installed_ok() {
    [ -x "$bin_dir/cargo-lambda" ] || return 1
    local out
    # The binary wants the `lambda` subcommand first (as cargo passes it).
    out="$("$bin_dir/cargo-lambda" lambda --version 2>/dev/null)" || return 1
    case "$out" in
        *" $CARGO_LAMBDA_VERSION "* | *" $CARGO_LAMBDA_VERSION") return 0 ;;
        *) return 1 ;;
    esac
}

# 2. Fast path: the repo-local venv already has the pinned version.
if installed_ok; then
    printf '%s\n' "$bin_dir"
    exit 0
fi

# 3. Install (serialised with a lock so parallel callers don't race).
# Python and its venv module by the rule of install-lib.sh: installed from
# Debian's packages where apt-get is there, else named.
if ! command -v python3 >/dev/null 2>&1; then
    provide "Python 3" "python3 python3-venv" python3 python || exit 2
fi

mkdir -p "$venv"
lock="$venv/.install.lock"
if command -v flock >/dev/null 2>&1; then
    exec 9>"$lock"
    flock 9
    # Someone else may have finished the install while we waited.
    if installed_ok; then
        printf '%s\n' "$bin_dir"
        exit 0
    fi
fi

if [ ! -x "$bin_dir/python3" ] || ! "$bin_dir/python3" -c 'import sys' >/dev/null 2>&1; then
    log "creating venv in $venv"
    # --clear: repair a half-created or stale venv (the lock file survives).
    if ! python3 -m venv --clear "$venv" >/dev/null 2>&1; then
        # Debian ships venv's pip apart, in python3-venv.
        provide "Python's venv module" python3-venv python3 python || exit 2
        python3 -m venv --clear "$venv" >&2 || { log "python3 -m venv failed"; exit 1; }
    fi
fi

log "installing cargo-lambda==$CARGO_LAMBDA_VERSION (brings ziglang, ~120 MB download)"
"$bin_dir/python3" -m pip install \
    --disable-pip-version-check --no-input --quiet \
    "cargo-lambda==$CARGO_LAMBDA_VERSION" >&2

if ! installed_ok; then
    log "cargo-lambda $CARGO_LAMBDA_VERSION is not working after install"
    exit 1
fi
if ! "$bin_dir/python3" -m ziglang version >/dev/null 2>&1; then
    log "warning: ziglang is not usable; 'cargo lambda build --arm64' will fail"
fi

log "ready: $("$bin_dir/cargo-lambda" lambda --version 2>/dev/null)"
printf '%s\n' "$bin_dir"
