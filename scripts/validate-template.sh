#!/usr/bin/env bash
# Validate the SAM template offline: `sam validate --lint` and `cfn-lint`.
#
# The tools live in a project-local virtualenv (.venv-sam at the repo root) so
# the system Python stays untouched and every machine gets the same pinned
# versions. Neither command needs AWS credentials: `sam validate --lint` runs
# cfn-lint (with the SAM transform) locally. Plain `sam validate` (without
# --lint) calls the CloudFormation API and would need credentials, so it is
# never used here.
#
# Exit status is non-zero on any finding, warnings and informational ones
# included.
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

if [[ ! -x "$VENV/bin/python" ]]; then
    echo "validate: creating $VENV" >&2
    "$PYTHON" -m venv "$VENV"
fi
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    echo "validate: installing $want into .venv-sam (first run takes a few minutes)" >&2
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
    # shellcheck disable=SC2086
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check $want
    echo "$want" >"$stamp"
fi

# A region is required by both tools (cfn-lint checks resource specs per
# region); credentials are not.
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
# Keep SAM CLI from phoning home or prompting.
export SAM_CLI_TELEMETRY=0
export SAM_CLI_DISABLE_VERSION_CHECK=1  # harmless if unknown

cd "$ROOT"

echo "+ sam validate --lint --template $TEMPLATE"
"$VENV/bin/sam" validate --lint --template "$TEMPLATE"

echo "+ cfn-lint $TEMPLATE"
# Informational checks are off by default; include them so that every finding
# (error 2, warning 4, informational 8 in the exit status) fails the run.
"$VENV/bin/cfn-lint" --include-checks I --format parseable -- "$TEMPLATE"
echo "validate: cfn-lint: no findings"
