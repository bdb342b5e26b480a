#!/usr/bin/env bash
# The browser half of `make browser` (tests/bin/browser.rs starts `make
# dev` and calls this with BASE_URL, ADMIN_KEY, BOOKER_KEY and ARTIFACTS in
# the environment): makes sure of Debian's Chromium, Node.js and the tools
# web/package-lock.json pins (installed when missing), checks that the
# reference's bundle served from web/docs/ is the pinned one, then runs
# web/test/console.test.mjs.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
say() { printf 'browser: %s\n' "$*" >&2; }
# shellcheck source=scripts/install-lib.sh
. scripts/install-lib.sh

# Debian's Chromium (Playwright's own download cannot run here) and Node.
command -v chromium >/dev/null 2>&1 || provide "Chromium" chromium chromium chromium || exit 2
command -v npm >/dev/null 2>&1 || provide "Node.js and npm" "nodejs npm" "nodejs npm" node || exit 2

# The pinned packages, again whenever the lock file changed.
stamp=web/node_modules/.lock.sha256
want="$(sha256sum web/package-lock.json | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    say "npm ci in web/ (playwright-core, axe-core, redoc; once)"
    (cd web && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) >&2
    echo "$want" >"$stamp"
fi

# The bundle compiled into the docs function is the one the lock pins.
for file in redoc.standalone.js redoc.standalone.js.LICENSE.txt; do
    if ! cmp -s "web/node_modules/redoc/bundles/$file" "web/docs/$file"; then
        say "web/docs/$file is not web/node_modules/redoc/bundles/$file (the version in web/package-lock.json): copy it"
        exit 1
    fi
done

export CHROMIUM="${CHROMIUM:-$(command -v chromium)}"
node web/test/console.test.mjs
