#!/usr/bin/env bash
# schemathesis (openapi.yaml's schema-driven fuzzer) against a running API:
# no 5xx, every answer conforms to openapi.yaml (a documented status, its
# content type, its headers and its body schema), a known path's other
# methods answer 405 with `Allow`, and the stateful phase follows a hold's
# links into each of its operations with the ids its answers gave. It starts
# nothing: `make contract` starts `make dev` for it on a database of its own.
#
# Usage: scripts/schemathesis.sh BASE_URL ADMIN_KEY BOOKER_KEY
#   SCHEMATHESIS_EXAMPLES (default 40) examples per operation and phase.
#
# It changes data: slots, holds and clients are created, changed and
# deleted, and the last pass may revoke either key. Never point it at a
# database whose keys or data you want to keep.
#
# The tool lives in a project-local virtualenv (.venv-contract at the repo
# root, git-ignored), installed on first use with a pinned version, as
# scripts/validate-template.sh does for its tools.
set -euo pipefail

SCHEMATHESIS_VERSION="4.32.5"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv-contract"
EXAMPLES="${SCHEMATHESIS_EXAMPLES:-40}"

# Python 3.11 before 3.11.8 (CPython gh-106905) can fail an `ast.parse`
# made deep in a call stack with "AST constructor recursion depth
# mismatch", which Hypothesis does while describing a strategy: an error
# of the tool, not a finding. So the newest Python 3.12+ there is: on PATH,
# else one pyenv has installed, else python3.
pick_python() {
    local candidate version
    for candidate in python3.14 python3.13 python3.12; do
        if "$candidate" -c '' 2>/dev/null; then
            echo "$candidate"
            return
        fi
    done
    if command -v pyenv >/dev/null 2>&1; then
        for version in $(pyenv versions --bare 2>/dev/null | grep -E '^3\.(1[2-9])(\.[0-9]+)*$' | sort -rV); do
            candidate="$(pyenv root)/versions/$version/bin/python3"
            if [[ -x "$candidate" ]]; then
                echo "$candidate"
                return
            fi
        done
    fi
    echo python3
}
PYTHON="${PYTHON:-$(pick_python)}"

if [[ $# -ne 3 ]]; then
    echo "usage: $0 BASE_URL ADMIN_KEY BOOKER_KEY" >&2
    exit 2
fi
base=$1 admin=$2 booker=$3

want="schemathesis==$SCHEMATHESIS_VERSION on $("$PYTHON" -c 'import platform; print(platform.python_version())')"
stamp="$VENV/.pins"
venv_ready() { [[ -x "$VENV/bin/st" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; }

ensure_venv() {
    venv_ready && return 0
    mkdir -p "$VENV"
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$VENV/.install.lock"
        flock 9
        venv_ready && return 0
    fi
    # Made anew: the pins name the Python too.
    echo "contract: creating $VENV with $PYTHON" >&2
    rm -rf "${VENV:?}/bin" "$VENV/lib" "$VENV/lib64" "$VENV/include" "$VENV/pyvenv.cfg"
    "$PYTHON" -m venv "$VENV" >&2
    echo "contract: installing $want into .venv-contract (once)" >&2
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        "schemathesis==$SCHEMATHESIS_VERSION" >&2
    echo "$want" >"$stamp"
}
ensure_venv

# The checks of SPEC §13: no 5xx, and conformance; and a known path's other
# methods answered 405 with `Allow` (`unsupported_method`, SPEC §19.8; the
# methods it sends are in scripts/schemathesis.toml). Not the
# negative/positive data checks (the schema cannot say every rule, e.g. a
# batch's all-or-nothing or a time's microsecond limit, so a conforming body
# may still be refused with a documented 422).
checks=not_a_server_error,status_code_conformance,content_type_conformance
checks+=,response_headers_conformance,response_schema_conformance
checks+=,unsupported_method

# Every request and answer of each run, for the checks at the end: run-N-
# PHASE.har (`stateful` in the name for a stateful phase's run).
REPORTS="${SCHEMATHESIS_REPORT_DIR:-$ROOT/target/contract-report}"
rm -rf "$REPORTS"
mkdir -p "$REPORTS"
runs=0

# st KEY PHASES [more options]: one run of the phases, as the client KEY.
st() {
    local key=$1 phases=$2
    shift 2
    runs=$((runs + 1))
    "$VENV/bin/st" --config-file "$ROOT/scripts/schemathesis.toml" \
        run "$ROOT/openapi.yaml" \
        --phases "$phases" \
        --report har --report-har-path "$REPORTS/run-$runs-${phases//,/-}.har" \
        --url "$base" \
        --header "Authorization: Bearer $key" \
        --generation-with-security-parameters false \
        --checks "$checks" \
        --max-examples "$EXAMPLES" \
        --workers 2 \
        --request-timeout 60 \
        --generation-database none \
        --seed "${SCHEMATHESIS_SEED:-1}" \
        --no-color \
        "$@"
}

# The coverage phase sends valid and invalid inputs (every constraint of
# the schema broken in turn, every other method of each path); the fuzzing
# phase random valid ones, and the stateful phase sequences along
# openapi.yaml's links (a slot from the availability list or one just
# created held, then the hold read, found by its key, extended, confirmed,
# cancelled; a client created, then revoked), which reach the 409s that
# need a real hold. Random invalid bodies are left out: among them are bytes
# that are not UTF-8 under `Content-Type: application/json`, which `cargo
# lambda watch` answers 500 itself before any function runs, where API
# Gateway passes them on base64-encoded (docs/LOCAL.md; tests/local.rs pins
# both).
pass() {
    local name=$1 key=$2 random=$3
    shift 3
    echo "contract: $name" >&2
    st "$key" examples,coverage "$@" &&
        for phase in ${random//,/ }; do
            st "$key" "$phase" --mode positive "$@" || return 1
        done
}

# The pages (no key, static files) have a pass of their own; left out of
# the keyed passes, which then generate exactly what they did before the
# pages existed (the seed is fixed) and keep reaching what they reached.
pages=(consolePage consoleFile docsPage docsFile openapiDocument)
not_pages=() only_pages=()
for id in "${pages[@]}"; do
    not_pages+=(--exclude-operation-id "$id")
    only_pages+=(--include-operation-id "$id")
done

status=0
# A key of the right form that no client has: every route answers 401
# before it reads anything else (a few examples each are enough).
echo "contract: every route with an unknown key" >&2
st "sb_unknown_key_of_no_client_000000000000000" fuzzing --mode positive --max-examples 3 || status=1
# A booker first: every admin route answers it 403.
pass "every route as the dev booker" "$booker" fuzzing,stateful "${not_pages[@]}" || status=1
# The hold's whole life along the links, as its owner: with only these
# operations to choose from, the stateful phase follows a hold into each of
# its operations with the id and key its answer gave (checked below). Five
# times the examples: its sequences shift with every operation the schema
# gains, and a few dozen scenarios left an extension's 200 to chance.
echo "contract: a hold's life along the links as the dev booker" >&2
st "$booker" stateful --mode positive \
    --include-operation-id availability --include-operation-id getSlot \
    --include-operation-id hold --include-operation-id getHold \
    --include-operation-id findHold --include-operation-id extendHold \
    --include-operation-id confirm --include-operation-id cancel \
    --max-examples $((EXAMPLES * 5)) || status=1
# A hold read back along its links, by id and by key: in the run above
# these compete with five other operations, and some seeds never draw them.
echo "contract: a hold read back along the links as the dev booker" >&2
st "$booker" stateful --mode positive \
    --include-operation-id availability --include-operation-id getSlot \
    --include-operation-id hold --include-operation-id getHold \
    --include-operation-id findHold || status=1
# A hold moved along its link (to the slot it is on: 200 unchanged, or
# the refusal of a hold confirmed or cancelled first), in a run of its own
# so that the run above keeps its sequences.
echo "contract: a hold moved along the links as the dev booker" >&2
st "$booker" stateful --mode positive \
    --include-operation-id availability --include-operation-id getSlot \
    --include-operation-id hold --include-operation-id moveHold \
    --include-operation-id confirm --include-operation-id cancel || status=1
# The admin on everything but revocation, which could revoke the very key
# being used (another admin the fuzzer made lets the last_admin rule pass),
# and the limits' patch, whose random ids could give the dev keys a rate
# limit of 1 for the passes after it.
pass "every route but DELETE and PATCH /clients/{id} as the dev admin" "$admin" fuzzing,stateful \
    --exclude-operation-id revokeClient --exclude-operation-id patchClient "${not_pages[@]}" || status=1
# The patch's examples and coverage (boundary ids: the built-in client's 1,
# no client's 2^64-1; every broken body); its 200 and 409 come along the
# links of the clients run below.
pass "PATCH /clients/{id} as the dev admin" "$admin" "" \
    --include-operation-id patchClient || status=1
# Revocation last: after it, either key may be gone. Its stateful phase
# revokes the clients it creates, along the link.
pass "DELETE /clients/{id} as the dev admin" "$admin" fuzzing \
    --include-operation-id revokeClient || status=1
echo "contract: clients created, patched, revoked along the links as the dev admin" >&2
st "$admin" stateful --mode positive \
    --include-operation-id createClient --include-operation-id patchClient \
    --include-operation-id revokeClient || status=1
pass "the pages, which need no key" "$booker" fuzzing "${only_pages[@]}" || status=1
# Every documented answer reached, or explained in docs/CONTRACT.md.
"$VENV/bin/python" "$ROOT/scripts/contract-coverage.py" "$ROOT/openapi.yaml" \
    "$ROOT/docs/CONTRACT.md" "$REPORTS"/run-*.har || status=1
# The stateful runs followed holds into their operations with real ids.
"$VENV/bin/python" "$ROOT/scripts/contract-stateful.py" "$REPORTS"/run-*stateful*.har || status=1
exit "$status"
