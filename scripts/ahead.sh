#!/usr/bin/env bash
# The two builds of `make test`'s last stages, started by scripts/stages.sh
# as the first stage starts, at idle priority: cargo-deny's install (`deny`)
# and the arm64 bootstraps (`sam-build`). Cold, they are about half of a CI
# run's CPU time, and they need nothing the earlier stages make. The tests
# spend much of their time waiting on the database, the soak and the
# contract on their server; at idle priority these builds take only the
# cores those stages leave idle, and never one a test wants.
#
# Nothing depends on this script having run, or finished: each stage makes
# sure of its own build (under the same locks: flock, cargo's own), so the
# stage that comes to a build still under way waits for it, and one that
# finds it failed does it again and shows why.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
status=0
for step in "scripts/ensure-cargo-deny.sh" "scripts/sam-build-check.sh --bootstraps-only"; do
    started=$SECONDS
    # shellcheck disable=SC2086 # a script and its flag
    bash $step || status=1
    printf 'ahead: %s: %ds\n' "$step" "$((SECONDS - started))"
done
exit "$status"
