#!/usr/bin/env bash
# A local stand-in for AWS APIs: the moto server, from PyPI, in a
# project-local virtualenv (.venv-tools at the repo root).
#
#   scripts/moto-server.sh --install   install (or check) the pinned copy only
#   scripts/moto-server.sh PORT        install if needed, then serve on 127.0.0.1:PORT
#
# MOTO_LOG=FILE sends the server's request log (and moto's tracebacks for
# calls it does not implement) to FILE instead of stderr.
#
# tests/discovery.rs starts it on a free port and talks to it with the AWS
# SDK (endpoint override) to check cache discovery by replication group;
# tests/publisher.rs uses its EventBridge (a bus, a rule, an SQS target).
# moto implements the ElastiCache replication-group calls but not the
# serverless-cache ones (DescribeServerlessCaches answers 500); the test
# covers those with recorded responses instead.
#
# The first run creates the venv and installs the pins (~15 s with a warm
# pip cache); later runs only compare the stamp.
set -euo pipefail

# Pins: moto's server needs flask and flask-cors (its [server] extra pulls in
# far more: cfn-lint, docker, …, none of which ElastiCache needs);
# EventBridge's delivery to a rule's targets (tests/publisher.rs) needs
# jsonpath-ng.
MOTO_VERSION="5.2.5"
PINS="moto==$MOTO_VERSION flask==3.1.3 flask-cors==6.0.5 jsonpath-ng==1.16.0"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv-tools"
PYTHON="${PYTHON:-python3}"
stamp="$VENV/.moto-pins"

# Concurrent callers (parallel tests) must not install twice at once.
mkdir -p "$VENV"
exec 9>"$VENV/.install-lock"
flock 9
if [[ ! -x "$VENV/bin/python" ]]; then
    echo "moto-server: creating $VENV" >&2
    "$PYTHON" -m venv "$VENV"
fi
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$PINS" ]]; then
    echo "moto-server: installing $PINS into .venv-tools (once)" >&2
    # shellcheck disable=SC2086
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check $PINS >&2
    echo "$PINS" >"$stamp"
fi
flock -u 9
exec 9>&-

if [[ "${1:-}" == "--install" ]]; then
    exit 0
fi
PORT="${1:?usage: scripts/moto-server.sh PORT | --install}"
if [[ -n "${MOTO_LOG:-}" ]]; then
    exec "$VENV/bin/python" -m moto.server -H 127.0.0.1 -p "$PORT" 2>"$MOTO_LOG"
fi
exec "$VENV/bin/python" -m moto.server -H 127.0.0.1 -p "$PORT"
