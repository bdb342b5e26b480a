#!/usr/bin/env bash
# Runs `make STAGE` for each stage given, in order, timing each; stops at
# the first that fails. Prints one line per stage as it ends and, at the
# end, every stage's time (the CI budget is watched from these lines).
set -uo pipefail

declare -a done_stages=()
summary() {
    printf '[stages]'
    for entry in "${done_stages[@]}"; do printf ' %s' "$entry"; done
    printf '\n'
}

total_start=$SECONDS
# The builds of `deny` and `sam-build`, at idle priority from the start
# (scripts/ahead.sh says why); in their own process group, stopped whole if a
# stage fails first. AHEAD=0 runs every build in its own stage.
if [[ "${AHEAD:-1}" != 0 && " $* " =~ \ (deny|sam-build)\  ]]; then
    mkdir -p target
    set -m
    chrt --idle 0 nice -n 19 bash scripts/ahead.sh > target/ahead.log 2>&1 &
    ahead_pid=$!
    set +m
    trap 'kill -- -"$ahead_pid" 2>/dev/null; grep "^ahead:" target/ahead.log' EXIT
fi
for stage in "$@"; do
    start=$SECONDS
    make --no-print-directory "$stage"
    status=$?
    took=$((SECONDS - start))
    done_stages+=("$stage=${took}s")
    if [ "$status" -ne 0 ]; then
        printf '[stage] %s failed after %ds\n' "$stage" "$took"
        summary
        exit "$status"
    fi
    printf '[stage] %s: %ds\n' "$stage" "$took"
done
done_stages+=("total=$((SECONDS - total_start))s")
summary
