#!/usr/bin/env bash
# `make dev`: serves the API with `cargo lambda watch` on 127.0.0.1:PORT and
# invokes the sweeper through it every 60 s, as the template's schedule
# (rate(1 minute)) does on AWS, and the webhooks' delivery engine back to
# back. Ctrl-C (or SIGTERM) stops both, quietly
# (stop, below).
#
# Usage: scripts/dev.sh PORT CONCURRENCY [extra cargo lambda watch flags]
# with cargo-lambda on PATH and DATABASE_URL / REDIS_URL set (the Makefile
# does both).
set -euo pipefail
cd "$(dirname "$0")/.."
port=$1
concurrency=$2
shift 2

# Webhooks (SPEC §20) under `make dev` only: endpoints over plain http and
# on this machine's or the LAN's addresses (the template refuses both), and
# a fixed key sealing their secrets at rest: a development key, public by
# being here, for a development database. Each may be overridden.
export WEBHOOK_ALLOW_HTTP="${WEBHOOK_ALLOW_HTTP:-true}"
export WEBHOOK_ALLOW_PRIVATE="${WEBHOOK_ALLOW_PRIVATE:-true}"
export WEBHOOK_SECRET_KEY="${WEBHOOK_SECRET_KEY:-bWFrZS1kZXYgd2ViaG9vayBzZWFsIGtleSAoZGV2ISk=}"
# Runs of the delivery engine of 2 s, not AWS's 60: invoked back to back
# (webhooks, below), and a stop waits for the run in flight (stop, below).
export WEBHOOK_RUN_SECONDS="${WEBHOOK_RUN_SECONDS:-2}"

# No `--timeout`: cargo-lambda 1.9.2 wraps its whole app, the Lambda Runtime
# API included, in that time-out, so an idle instance's long-poll for its
# next event is answered 408 without a request id and lambda_runtime 1.5.0
# panics (docs/LOCAL.md). The functions bound their own time.
#
# The watcher runs in a session of its own, so that a Ctrl-C in the terminal
# (SIGINT to make's process group) reaches this script and not the watcher:
# the stop goes in order (stop, below). `--pdeathsig TERM`: should this
# script be killed outright, the watcher goes with it.
setsid setpriv --pdeathsig TERM cargo lambda watch --invoke-address 127.0.0.1 \
    --invoke-port "$port" --concurrency "$concurrency" "$@" &
watch=$!

sweeper() {
    # Invocations go through the emulator, as EventBridge Scheduler's go
    # through Lambda: an instance of `sweep` started by cargo lambda watch.
    # Ready when `/` is answered (by `not-found`, the `$default` route):
    # one request that waits however long the first build takes. A probe
    # that gave up would leave its invocation queued in the emulator; the
    # instance that later answers it finds no one waiting, the emulator
    # answers its POST …/response 500 and lambda_runtime logs it at ERROR
    # (docs/LOCAL.md). Only a refused connection (not listening yet) is
    # tried again.
    until curl --silent --output /dev/null --connect-timeout 2 "http://127.0.0.1:$port/" 2>/dev/null; do
        kill -0 "$watch" 2>/dev/null || return 0
        sleep 0.5
    done
    # The pages and the keys again, now that the server's start-up lines
    # are past.
    echo "dev: the console: http://127.0.0.1:$port/console (paste a key there)"
    echo "dev: the API reference: http://127.0.0.1:$port/docs"
    if [ -r "${DEV_KEYS_FILE:-.dev-keys.env}" ]; then
        echo "dev: serving http://127.0.0.1:$port; API keys (. ./${DEV_KEYS_FILE:-.dev-keys.env}):"
        grep -E '^[A-Z_]+=' "${DEV_KEYS_FILE:-.dev-keys.env}" | sed 's/^/dev:   /'
    fi
    # TERM (stop, below) ends the loop after the invocation in flight:
    # killed while it waits, the client would leave the invocation to an
    # instance whose answer no one takes (the emulator's 500, an ERROR).
    local next=$SECONDS out stopping=""
    trap 'stopping=1' TERM
    while [ -z "$stopping" ] && kill -0 "$watch" 2>/dev/null; do
        if out=$(cargo lambda invoke sweep --invoke-address 127.0.0.1 --invoke-port "$port" \
            --data-file tests/fixtures/eventbridge_scheduled.json 2>&1); then
            echo "dev: sweep invoked: $(tr -d '\n' <<<"$out")"
        else
            echo "dev: sweep invocation failed: $(tr -d '\n' <<<"$out")" >&2
        fi
        # Every 60 s from the previous start, however long the run took.
        next=$((next + 60))
        while [ -z "$stopping" ] && [ "$SECONDS" -lt "$next" ] && kill -0 "$watch" 2>/dev/null; do
            sleep 1
        done
    done
}
sweeper &
sweeper_pid=$!

webhooks() {
    # The webhooks' delivery engine (SPEC §20), invoked again as soon as a
    # run ends: each run is WEBHOOK_RUN_SECONDS (2) of rounds a second
    # apart, so a committed event reaches a receiver within a second or
    # two, as on AWS (functions/webhooks-deliver). Waits for the server as
    # the sweeper does, and ends on TERM after the run in flight, as it.
    until curl --silent --output /dev/null --connect-timeout 2 "http://127.0.0.1:$port/" 2>/dev/null; do
        kill -0 "$watch" 2>/dev/null || return 0
        sleep 0.5
    done
    local out stopping=""
    trap 'stopping=1' TERM
    while [ -z "$stopping" ] && kill -0 "$watch" 2>/dev/null; do
        if ! out=$(cargo lambda invoke webhooks-deliver --invoke-address 127.0.0.1 --invoke-port "$port" \
            --data-file tests/fixtures/eventbridge_scheduled.json 2>&1); then
            echo "dev: webhooks-deliver invocation failed: $(tr -d '\n' <<<"$out")" >&2
            sleep 1
        fi
    done
}
webhooks &
webhooks_pid=$!

# A quiet stop (docs/LOCAL.md, "A quiet log"), in this order:
# 1. The sweeper's and the webhooks' loops.
# 2. Every function instance, the watcher's children (each runs in a
#    process group of its own, watchexec's): on SIGTERM a function exits at
#    once with status 0 and logs nothing (shared::telemetry::
#    exit_quietly_on_sigterm), between invocations as Lambda stops one.
#    Stopped with the emulator instead, each would find its Runtime API
#    gone (the function's ERROR "the Lambda runtime stopped"), or be
#    killed by its watchexec (the emulator's ERROR "command killed").
# 3. The watcher, which then has no instance left to lose: killed outright
#    (SIGKILL), since it has nothing left to stop. Its own Ctrl-C handling
#    (cargo-lambda 1.9.2, the latest) now and then panics in its runtime's
#    shutdown ("A Tokio 1.x context was found, but it is being shutdown",
#    tokio 1.53.1's timer): no shutdown of its, no panic. Should an instance
#    outlive the wait, the watcher gets SIGINT instead, to stop it.
stopped=false
stop() {
    trap '' INT TERM
    # The loops end after their invocation in flight (a sweep: moments; a
    # delivery run: WEBHOOK_RUN_SECONDS); one still busy after 15 s (a
    # first build) is killed.
    kill -TERM "$sweeper_pid" "$webhooks_pid" 2>/dev/null || true
    local looped=0
    while { kill -0 "$sweeper_pid" || kill -0 "$webhooks_pid"; } 2>/dev/null && [ "$looped" -lt 150 ]; do
        sleep 0.1
        looped=$((looped + 1))
    done
    kill -KILL "$sweeper_pid" "$webhooks_pid" 2>/dev/null || true
    wait "$sweeper_pid" "$webhooks_pid" 2>/dev/null || true
    pkill -TERM -P "$watch" 2>/dev/null || true
    local waited=0
    while pgrep -P "$watch" >/dev/null && [ "$waited" -lt 100 ]; do
        sleep 0.1
        waited=$((waited + 1))
    done
    stopped=true
    if pgrep -P "$watch" >/dev/null; then
        kill -INT "$watch" 2>/dev/null || true
    else
        kill -KILL "$watch" 2>/dev/null || true
    fi
}
trap stop INT TERM
# The watcher's status is make's: a server that dies is a failed `make dev`.
status=0
wait "$watch" || status=$?
# A trapped signal interrupts `wait`: wait for the watcher's own shutdown.
if kill -0 "$watch" 2>/dev/null; then wait "$watch" || status=$?; fi
# Stopped on request: a clean end, whatever signal ended the watcher.
if [ "$stopped" = true ]; then status=0; fi
kill "$sweeper_pid" "$webhooks_pid" 2>/dev/null || true
wait "$sweeper_pid" "$webhooks_pid" 2>/dev/null || true
exit "$status"
