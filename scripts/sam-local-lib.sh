# shellcheck shell=bash
# The steps of scripts/sam-local.sh (sourced by it; ROOT, STATE, ARCH, log
# and die come from there). Every process started here writes its pid to
# $STATE, so that stop_all (and `sam-local.sh --stop`) stops only those.

# shellcheck source=scripts/install-lib.sh
. "$ROOT/scripts/install-lib.sh"
say() { log "$@"; }

# `need COMMAND PACKAGE`: COMMAND on PATH (or in an sbin), else PACKAGE
# installed by install-lib.sh's rule (apt-get, as root or through sudo),
# else the exact command to run and exit 2.
need() {
    local command=$1 package=$2
    PATH="$PATH:/usr/sbin:/sbin" command -v "$command" >/dev/null && return 0
    say "$command is missing"
    if can_install && install_packages "$package"; then return 0; fi
    die 2 "install it with \`sudo apt-get install -y $package\` (Debian/Ubuntu)"
}

# 1. A Docker engine that answers `docker info`.
ensure_docker() {
    if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
        return 0
    fi
    need dockerd docker.io
    need docker docker.io
    docker info >/dev/null 2>&1 && return 0
    if [[ "$(id -u)" != 0 ]]; then
        die 2 "the Docker engine is not running and only root can start it here:
           \`sudo systemctl start docker\` (or \`sudo dockerd &\`), and add yourself
           to the docker group (\`sudo usermod -aG docker $USER\`, then log in again)"
    fi
    # vfs works on any file system, including a container's own overlay
    # (overlay2 cannot stack on it); it copies each image per container.
    log "starting dockerd (--storage-driver=vfs), log in ${STATE#"$ROOT"/}/dockerd.log"
    PATH="$PATH:/usr/sbin:/sbin" setsid dockerd --storage-driver=vfs \
        >"$STATE/dockerd.log" 2>&1 &
    echo $! >"$STATE/dockerd.pid"
    local deadline=$((SECONDS + 60))
    until docker info >/dev/null 2>&1; do
        kill -0 "$(cat "$STATE/dockerd.pid")" 2>/dev/null ||
            die 1 "dockerd exited: $(tail -5 "$STATE/dockerd.log")"
        ((SECONDS < deadline)) || die 1 "dockerd did not answer within 60 s (${STATE#"$ROOT"/}/dockerd.log)"
        sleep 1
    done
    log "dockerd is up"
}

# 4. The image SAM's emulation image is built FROM: the public one when it
# can be pulled, else a local stand-in of the same name (SAM's
# --skip-pull-image then never asks a registry).
ensure_base_image() {
    local image=$1
    if [[ "${SAM_LOCAL_OFFLINE:-}" != 1 ]] && timeout 120 docker pull -q "$image" >/dev/null 2>&1; then
        log "base image $image pulled"
        return 0
    fi
    if [[ "$(docker image inspect "$image" --format '{{index .Config.Labels "org.slot-booking.stand-in"}}' 2>/dev/null)" == true ]]; then
        stand_in_notice "$image" "reusing the stand-in built earlier"
        return 0
    fi
    if docker image inspect "$image" >/dev/null 2>&1; then
        log "base image $image: the copy already here (it could not be pulled again)"
        return 0
    fi
    need debootstrap debootstrap
    local debian_arch=amd64 rootfs="$STATE/stand-in-rootfs" tarball="$STATE/stand-in-bookworm-$ARCH.tar"
    [[ "$ARCH" == arm64 ]] && debian_arch=arm64
    if [[ ! -s "$tarball" ]]; then
        log "cannot pull $image: building a stand-in root file system (debootstrap --variant=minbase bookworm, about 30 s)"
        rm -rf "$rootfs"
        PATH="$PATH:/usr/sbin:/sbin" debootstrap --variant=minbase --arch="$debian_arch" bookworm "$rootfs" \
            "${SAM_LOCAL_DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$STATE/debootstrap.log" 2>&1 ||
            die 1 "debootstrap failed: $(tail -5 "$STATE/debootstrap.log")"
        # SAM mounts the function at /var/task and the emulator at /var/rapid.
        mkdir -p "$rootfs/var/task" "$rootfs/var/runtime" "$rootfs/opt"
        tar -C "$rootfs" -cf "$tarball.partial" . && mv "$tarball.partial" "$tarball"
        rm -rf "$rootfs"
    fi
    docker import --change 'LABEL org.slot-booking.stand-in=true' \
        --change 'ENV LAMBDA_TASK_ROOT=/var/task LAMBDA_RUNTIME_DIR=/var/runtime' \
        --change 'WORKDIR /var/task' "$tarball" "$image" >&2
    stand_in_notice "$image" "built from Debian bookworm (minbase), cached in ${tarball#"$ROOT"/}"
}

stand_in_notice() {
    log "################################################################"
    log "STAND-IN IMAGE: $1 is NOT the public Lambda base image"
    log "($2; label org.slot-booking.stand-in=true). The functions run on"
    log "Debian's glibc and userland, not Amazon Linux 2023's."
    log "################################################################"
}

# The host's address on Docker's default bridge, which containers reach:
# the network's gateway, or (dockerd leaves it out of `inspect` when it
# picked the subnet itself) the bridge interface's own address.
bridge_address() {
    local gateway interface
    gateway=$(docker network inspect bridge --format '{{range .IPAM.Config}}{{.Gateway}}{{end}}')
    if [[ -z "$gateway" ]]; then
        interface=$(docker network inspect bridge --format '{{index .Options "com.docker.network.bridge.name"}}')
        gateway=$(ip -4 -o addr show "${interface:-docker0}" 2>/dev/null | awk '{ sub(/\/.*/, "", $4); print $4; exit }')
    fi
    [[ -n "$gateway" ]] || die 1 "cannot tell the host's address on the Docker bridge"
    printf '%s\n' "$gateway"
}

# 5. `forward URL DEFAULT_PORT WHAT`: a socat forwarder from the bridge
# address to URL's loopback port (containers cannot reach 127.0.0.1 of the
# host). Sets FORWARDED[WHAT] to the URL the containers must use.
declare -A FORWARDED=()
forward() {
    local url=$1 default_port=$2 what=$3 host port
    if [[ ! "$url" =~ ^[a-z]+://([^@/]*@)?([^:/]+)(:([0-9]+))? ]]; then
        die 1 "cannot read the $what URL: $url"
    fi
    host=${BASH_REMATCH[2]} port=${BASH_REMATCH[4]:-$default_port}
    if [[ "$host" != 127.0.0.1 && "$host" != localhost ]]; then
        FORWARDED[$what]=$url
        return 0
    fi
    FORWARDED[$what]=${url/:\/\/${BASH_REMATCH[1]}$host/:\/\/${BASH_REMATCH[1]}$BRIDGE}
    if timeout 1 bash -c "</dev/tcp/$BRIDGE/$port" 2>/dev/null; then
        log "$what: $BRIDGE:$port already answers (no forwarder needed)"
        return 0
    fi
    setsid socat "TCP-LISTEN:$port,bind=$BRIDGE,reuseaddr,fork" "TCP:127.0.0.1:$port" \
        >>"$STATE/socat-$what.log" 2>&1 &
    echo $! >"$STATE/socat-$what.pid"
    local deadline=$((SECONDS + 10))
    until timeout 1 bash -c "</dev/tcp/$BRIDGE/$port" 2>/dev/null; do
        ((SECONDS < deadline)) || die 1 "the $what forwarder on $BRIDGE:$port does not answer"
        sleep 0.2
    done
    log "$what: forwarding $BRIDGE:$port -> 127.0.0.1:$port"
}

# 6. The env-vars file: the local services through the forwarders, and
# every AWS-only variable of the template blanked (SAM resolves its
# intrinsics to placeholders, not to nothing).
write_env_file() {
    local file=$1
    DB="${FORWARDED[database]}" CACHE="${FORWARDED[cache]}" python3 - "$file" <<'PY'
import json, os, sys
aws_only = ["DB_HOST", "DB_PORT", "DB_NAME", "DB_USER", "DB_SECRET_ARN", "CACHE_NAME",
            "CACHE_USER", "CACHE_SECRET_ARN", "CACHE_NAMESPACE", "CREDENTIALS_VERSION"]
everywhere = {name: "" for name in aws_only}
everywhere.update(DATABASE_URL=os.environ["DB"], REDIS_URL=os.environ["CACHE"],
                  AUTH_MODE="api-key", RUST_LOG=os.environ.get("RUST_LOG", "info"))
env = {
    "Parameters": everywhere,
    # As the template has them: no database or cache for the 404, no cache
    # for the sweeper and the migrations.
    "NotFoundFunction": {"DATABASE_URL": "", "REDIS_URL": ""},
    "SweepFunction": {"REDIS_URL": ""},
    "MigrateFunction": {"REDIS_URL": ""},
}
with open(sys.argv[1], "w", encoding="utf-8") as f:
    json.dump(env, f, indent=2)
PY
}

lambda_containers() {
    docker ps -aq --no-trunc --filter label=sam.cli.container.type=lambda 2>/dev/null || true
}

# Stops what this script started (pid files in $STATE) and the Lambda
# containers its sam left. Safe to run twice.
stop_all() {
    local pidfile pid id
    if [[ -f "$STATE/sam.pid" ]]; then
        pid=$(cat "$STATE/sam.pid")
        if kill -0 "$pid" 2>/dev/null; then
            # SIGINT: sam's own clean-up of its warm containers.
            kill -INT -- "-$pid" 2>/dev/null || kill -INT "$pid" 2>/dev/null || true
            for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
            kill -KILL -- "-$pid" 2>/dev/null || true
        fi
        rm -f "$STATE/sam.pid"
    fi
    # The Lambda containers that were not there before this sam started.
    if [[ -f "$STATE/containers.before" ]] && docker info >/dev/null 2>&1; then
        for id in $(lambda_containers); do
            grep -qx "$id" "$STATE/containers.before" || docker rm -f "$id" >/dev/null 2>&1 || true
        done
        rm -f "$STATE/containers.before"
    fi
    for pidfile in "$STATE"/socat-*.pid "$STATE/dockerd.pid"; do
        [[ -f "$pidfile" ]] || continue
        pid=$(cat "$pidfile")
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
            for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
        fi
        rm -f "$pidfile"
    done
}
