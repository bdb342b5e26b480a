#!/usr/bin/env bash
# Usage: scripts/wait-http.sh URL TIMEOUT_SECONDS
#
# Polls URL until it answers with any HTTP status (2xx, 4xx, 5xx all count),
# i.e. until something is listening and speaking HTTP. Exits 0 then, or 1
# once TIMEOUT_SECONDS have passed. Exit 2 on bad usage.
#
# With `cargo lambda watch`, poll a path that is NOT a function route (for
# example http://127.0.0.1:9000/ , which the emulator answers with 404 as
# soon as it listens). A request to a function route starts compiling that
# function and blocks until the build is done.
set -uo pipefail

if [ "$#" -ne 2 ]; then
    echo "usage: $0 URL TIMEOUT_SECONDS" >&2
    exit 2
fi
url="$1"
timeout="$2"
case "$timeout" in
    '' | *[!0-9]*)
        echo "wait-http: TIMEOUT_SECONDS must be a whole number, got '$timeout'" >&2
        exit 2
        ;;
esac
if ! command -v curl >/dev/null 2>&1; then
    echo "wait-http: curl not found" >&2
    exit 2
fi

now_ms() { date +%s%3N; }
deadline=$(($(now_ms) + timeout * 1000))
while :; do
    left_ms=$((deadline - $(now_ms)))
    if [ "$left_ms" -le 0 ]; then
        break
    fi
    # Whole seconds for this attempt: at most 5, at least 1.
    per_try=$(((left_ms + 999) / 1000))
    if [ "$per_try" -gt 5 ]; then per_try=5; fi
    code="$(curl --silent --output /dev/null --write-out '%{http_code}' \
        --connect-timeout 2 --max-time "$per_try" "$url" 2>/dev/null)"
    if [ -n "$code" ] && [ "$code" != "000" ]; then
        echo "wait-http: $url answered HTTP $code" >&2
        exit 0
    fi
    sleep 0.3
done

echo "wait-http: no HTTP answer from $url within ${timeout}s" >&2
exit 1
