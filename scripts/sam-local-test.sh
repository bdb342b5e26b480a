#!/usr/bin/env bash
# `make sam-local-test`: `make sam-local` in the background on a database of
# its own, then, through it, the smoke (every route, tests/bin/smoke.rs)
# with the dev admin's key and the seed's concurrency table
# (tests/bin/seed_scenarios.rs); then everything stopped (sam and its
# containers, the forwarders, dockerd if sam-local started it). Prints the
# time of each phase; fails if either check fails.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PORT="${SAM_LOCAL_PORT:-3000}"
BASE="http://127.0.0.1:$PORT"
STATE="$ROOT/.aws-sam/local"
# Up to a cold release build of every function, and the stand-in image.
READY_WITHIN="${SAM_LOCAL_READY_WITHIN:-2400}"
export DATABASE_URL="${SAM_LOCAL_TEST_DATABASE_URL:-mysql://root@127.0.0.1:3306/sb_sam_local_test}"
export DEV_KEYS_FILE="$STATE/test-keys.env"
mkdir -p "$STATE"
LOG="$STATE/sam-local-test.log"

say() { printf 'sam-local-test: %s\n' "$*"; }
started=$SECONDS

if timeout 1 bash -c "</dev/tcp/127.0.0.1/$PORT" 2>/dev/null; then
    say "something already listens on 127.0.0.1:$PORT; stop it (or set SAM_LOCAL_PORT)"
    exit 2
fi

# The checks are built first, so they do not compete with sam's start.
cargo build --quiet -p slot-booking-tests --bin smoke --bin seed-scenarios

SAM_LOCAL_PORT="$PORT" setsid bash scripts/sam-local.sh >"$LOG" 2>&1 &
server=$!
stop() {
    if kill -0 "$server" 2>/dev/null; then
        kill -TERM "$server" 2>/dev/null || true
        for _ in $(seq 1 120); do kill -0 "$server" 2>/dev/null || break; sleep 0.5; done
    fi
    # Whatever a killed script could not stop itself.
    bash scripts/sam-local.sh --stop 2>/dev/null || true
}
trap stop EXIT

# Ready when an unknown route answers the API's 404: sam listens and the
# not-found function runs in its container.
until [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 60 "$BASE/" || true)" == 404 ]]; do
    if ! kill -0 "$server" 2>/dev/null; then
        say "make sam-local exited before it served; its output:"
        tail -40 "$LOG"
        exit 1
    fi
    if ((SECONDS - started > READY_WITHIN)); then
        say "not serving within ${READY_WITHIN} s; see ${LOG#"$ROOT"/}"
        exit 1
    fi
    sleep 2
done
ready=$((SECONDS - started))
say "serving after ${ready} s (log: ${LOG#"$ROOT"/})"

admin=$(sed -n 's/^ADMIN_KEY=//p' "$DEV_KEYS_FILE")
failed=0
t=$SECONDS
target/debug/smoke "$BASE" "$admin" || failed=1
smoke=$((SECONDS - t))
t=$SECONDS
target/debug/seed-scenarios "$BASE" || failed=1
scenarios=$((SECONDS - t))
t=$SECONDS
stop
trap - EXIT
stopped=$((SECONDS - t))
# With dockerd stopped (sam-local started it) nothing can be left.
left=0
if docker info >/dev/null 2>&1; then
    left=$(docker ps -aq --filter label=sam.cli.container.type=lambda | wc -l)
fi
say "times: ready ${ready} s, smoke ${smoke} s, scenarios ${scenarios} s, stop ${stopped} s, total $((SECONDS - started)) s; Lambda containers left: $left"
if ((failed)); then
    say "FAILED (server log: ${LOG#"$ROOT"/})"
    exit 1
fi
say "PASSED"
