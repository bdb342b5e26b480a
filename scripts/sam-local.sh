#!/usr/bin/env bash
# `make sam-local`: the template served by `sam local start-api` on
# 127.0.0.1:$SAM_LOCAL_PORT (3000), against the local MariaDB and Redis, as
# SPEC §14 asks. In order:
#
#   1. a Docker engine: `docker info`, else dockerd started here (vfs
#      storage, log in .aws-sam/local/dockerd.log), else installed from
#      Debian's docker.io where apt-get is there (as root, else through
#      sudo: scripts/install-lib.sh), saying so; otherwise it says what to
#      install and exits 2. The same for socat (and debootstrap, below);
#   2. the database migrated and the dev keys made, as `make dev` does
#      (tools/devdb, DATABASE_URL, keys in DEV_KEYS_FILE);
#   3. the functions built for this host's architecture (template parameter
#      Architecture; arm64 stays the deploy default) into
#      .aws-sam/local/build, so `make sam-build`'s arm64 output is untouched;
#   4. the Lambda base image SAM asks for, pulled; when it cannot be (an
#      offline machine) a stand-in of the same name is built from
#      `debootstrap --variant=minbase bookworm` and labelled
#      org.slot-booking.stand-in=true;
#   5. socat forwarders from the Docker bridge's address to the database and
#      the cache, which listen on 127.0.0.1 only;
#   6. `sam local start-api` with an env-vars file pointing at them.
#
# Ctrl-C or SIGTERM stops sam, removes its containers, the forwarders and a
# dockerd this script started. `sam-local.sh --stop` does the same for a
# server started by another shell (it reads .aws-sam/local/*.pid).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
STATE="$ROOT/.aws-sam/local"
BUILD_DIR="$STATE/build"
ENV_FILE="$STATE/env.json"
PORT="${SAM_LOCAL_PORT:-3000}"
# LAZY: a container per function on its first request (docs/DEPLOY.md says
# why not EAGER); EAGER starts all of them before the port opens.
WARM="${SAM_LOCAL_WARM_CONTAINERS:-LAZY}"
DATABASE_URL="${DATABASE_URL:-mysql://root@127.0.0.1:3306/slot_booking}"
REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379}"
export DATABASE_URL REDIS_URL SAM_CLI_TELEMETRY=0
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
mkdir -p "$STATE"

log() { printf 'sam-local: %s\n' "$*" >&2; }
die() { local code=$1; shift; log "$*"; exit "$code"; }

# shellcheck source=scripts/sam-local-lib.sh
. "$ROOT/scripts/sam-local-lib.sh"

if [[ "${1:-}" == "--stop" ]]; then
    stop_all
    exit 0
fi

case "$(uname -m)" in
    x86_64 | amd64) ARCH=x86_64 ;;
    aarch64 | arm64) ARCH=arm64 ;;
    *) die 2 "no Lambda architecture for this host ($(uname -m))" ;;
esac
BASE_IMAGE="public.ecr.aws/lambda/provided:al2023-$ARCH"

trap 'stop_all; exit 130' INT
trap 'stop_all; exit 143' TERM
trap stop_all EXIT

ensure_docker
need socat socat

# 2. The database, as `make dev` prepares it.
log "database: migrating ${DATABASE_URL##*@} and making the dev keys (tools/devdb)"
cargo run --quiet -p devdb >&2

# 3. The functions for this host.
SAM_BIN_DIR="$(bash scripts/validate-template.sh --ensure-venv)"
SAM="$SAM_BIN_DIR/sam"
PATH="$(scripts/ensure-cargo-lambda.sh):$PATH"
export PATH
log "sam build for $ARCH into ${BUILD_DIR#"$ROOT"/} (a cold release build takes several minutes)"
started=$SECONDS
cargo fetch --locked >&2
export CARGO_NET_OFFLINE=true
# Every bootstrap in one cargo invocation, which sam build then finds fresh;
# both under the lambda build lock, held to the end.
source scripts/lambda-build-lock.sh
bash scripts/lambda-bootstraps.sh template.yaml "$ARCH" >/dev/null
"$SAM" build --build-in-source --template template.yaml \
    --build-dir "$BUILD_DIR" --parameter-overrides "Architecture=$ARCH" >&2
log "sam build took $((SECONDS - started)) s"

# 4. The base image.
ensure_base_image "$BASE_IMAGE"

# 5. and 6.
BRIDGE="$(bridge_address)"
forward "$DATABASE_URL" 3306 database
forward "$REDIS_URL" 6379 cache
write_env_file "$ENV_FILE" "$BRIDGE"

log "serving http://127.0.0.1:$PORT (warm containers $WARM); keys: . ${DEV_KEYS_FILE:-./.dev-keys.env}"
lambda_containers >"$STATE/containers.before"
# Its own process group, so that stopping it stops its workers too.
setsid "$SAM" local start-api --template "$BUILD_DIR/template.yaml" \
    --env-vars "$ENV_FILE" --parameter-overrides "Architecture=$ARCH" \
    --skip-pull-image --warm-containers "$WARM" \
    --host 127.0.0.1 --port "$PORT" &
echo $! >"$STATE/sam.pid"
status=0
wait "$(cat "$STATE/sam.pid")" || status=$?
exit "$status"
