#!/usr/bin/env bash
# Validate the SAM template offline: `sam validate --lint`, `cfn-lint` and
# scripts/check-template-graph.py (the dependency graph the linters do not
# check: the migrate custom resource's Delete path must outlive it) and
# scripts/check-template-alarms.py (CloudWatch's 10 metrics per alarm, and
# an alarm for every function) and scripts/check-template-webhooks.py (the
# webhook sender's role names its log group only; the worker alone invokes
# it).
#
# The tools live in a project-local virtualenv (.venv-sam at the repo root) so
# the system Python stays untouched and every machine gets the same pinned
# versions. Neither command needs AWS credentials or network: `sam validate
# --lint` runs cfn-lint's SAM-aware rules locally. Plain `sam validate` (no
# --lint) resolves managed IAM policies through the IAM API when credentials
# exist and otherwise falls back to a basic check, so it is not used here.
#
# Exit status is non-zero on any finding, warnings and informational ones
# included.
#
# `validate-template.sh --ensure-venv` only makes sure .venv-sam holds the
# pinned tools and prints its bin directory on stdout (progress goes to
# stderr); scripts/sam-build-check.sh uses it so the venv is set up in one
# place.
set -euo pipefail

# Pins: aws-sam-cli 1.170.0 requires cfn-lint >=1.52,<1.59; keep them in step.
SAM_CLI_VERSION="1.170.0"
CFN_LINT_VERSION="1.58.0"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv-sam"
TEMPLATE="${TEMPLATE:-template.yaml}"
PYTHON="${PYTHON:-python3}"

want="aws-sam-cli==$SAM_CLI_VERSION cfn-lint==$CFN_LINT_VERSION"
stamp="$VENV/.pins"

venv_ready() { [[ -x "$VENV/bin/sam" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; }

ensure_venv() {
    venv_ready && return 0
    mkdir -p "$VENV"
    # Serialise installs: `make -j test` may run validate and sam-build at once.
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$VENV/.install.lock"
        flock 9
        venv_ready && return 0
    fi
    if [[ ! -x "$VENV/bin/python" ]]; then
        echo "validate: creating $VENV" >&2
        "$PYTHON" -m venv "$VENV" >&2
    fi
    echo "validate: installing $want into .venv-sam (about a minute, once)" >&2
    # shellcheck disable=SC2086
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check $want >&2
    echo "$want" >"$stamp"
}

ensure_venv
if [[ "${1:-}" == "--ensure-venv" ]]; then
    printf '%s\n' "$VENV/bin"
    exit 0
fi

# A region is required by both tools (cfn-lint checks resource specs per
# region); credentials are not.
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
# No telemetry, and no first-run telemetry banner.
export SAM_CLI_TELEMETRY=0

cd "$ROOT"

echo "+ sam validate --lint --template $TEMPLATE"
"$VENV/bin/sam" validate --lint --template "$TEMPLATE"

echo "+ cfn-lint --include-checks I $TEMPLATE"
# Informational checks are off by default; include them so that every finding
# (error 2, warning 4, informational 8 in the exit status) fails the run.
"$VENV/bin/cfn-lint" --include-checks I --format parseable -- "$TEMPLATE"
echo "validate: cfn-lint: no findings"

echo "+ check-template-graph.py $TEMPLATE"
"$VENV/bin/python" "$ROOT/scripts/check-template-graph.py" "$TEMPLATE"
echo "+ check-template-alarms.py $TEMPLATE"
"$VENV/bin/python" "$ROOT/scripts/check-template-alarms.py" "$TEMPLATE"
echo "+ check-template-webhooks.py $TEMPLATE"
"$VENV/bin/python" "$ROOT/scripts/check-template-webhooks.py" "$TEMPLATE"
