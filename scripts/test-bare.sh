#!/usr/bin/env bash
# `make test-bare`: `make dev`'s set-up on a bare Debian machine. In a
# minimal Debian root made by debootstrap (Debian's package) — no MariaDB,
# no Redis, nothing listening — scripts/services.sh, the script `make db`
# runs, installs both from Debian's packages, starts them and creates the
# TCP user the defaults expect; then clients reach both over TCP: the
# mariadb client, redis-cli, and tools/devdb preparing the database as
# `make dev` does (it migrates over DATABASE_URL and seeds through the
# service's own code, which invalidates the cache over REDIS_URL).
#
# The root runs in its own network, mount and pid namespaces (unshare), so
# this machine's own MariaDB and Redis, on the same ports, are out of sight,
# and every process started in there ends with it. That network has only a
# loopback: what services.sh will install is downloaded beforehand into the
# root's apt cache (`apt-get install --download-only`, the one step with
# the network), and services.sh's own `apt-get install` takes it from
# there. As in Debian's container images, a policy-rc.d keeps packages from
# starting their services, so services.sh has to.
#
# Not part of `make test`: it downloads about 100 MB of packages (the root
# once, kept in target/bare/, and the services each run). Root or sudo.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
STATE="$ROOT/target/bare"
PRISTINE="$STATE/bookworm-minbase"
WORK="$STATE/root"
MIRROR="${TEST_BARE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

say() { printf 'test-bare: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
# shellcheck source=scripts/install-lib.sh
. "$ROOT/scripts/install-lib.sh"
started=$SECONDS

if [[ "$(id -u)" != 0 ]]; then
    command -v sudo >/dev/null 2>&1 || die "debootstrap, chroot and unshare need root (or sudo)"
    say "debootstrap, chroot and unshare need root: running again through sudo"
    exec sudo PATH="$PATH" CARGO_HOME="${CARGO_HOME:-$HOME/.cargo}" RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}" \
        bash "$0" "$@"
fi
for tool in debootstrap:debootstrap unshare:util-linux ip:iproute2; do
    PATH="$PATH:/usr/sbin:/sbin" command -v "${tool%%:*}" >/dev/null ||
        provide "${tool%%:*}" "${tool#*:}" "" "" || exit
done
export PATH="$PATH:/usr/sbin:/sbin"

say "building tools/devdb (the client that prepares the database for make dev)"
cargo build --quiet -p devdb
mkdir -p "$STATE"

# Whatever is mounted under a directory, unmounted, deepest first: inside a
# container debootstrap can leave the root's /proc mounted, and copying or
# removing a live /proc (its pagemap files read as terabytes) fills the disk.
unmount_under() {
    local dir mounts
    dir=$(realpath -m "$1")
    mounts=$(awk -v d="$dir/" 'index($2 "/", d) == 1 { print $2 }' /proc/self/mounts | sort -r)
    for m in $mounts; do umount -l "$m"; done
}
remove() { unmount_under "$1"; rm -rf --one-file-system "$1"; }

if [[ ! -f "$PRISTINE/.complete" ]]; then
    say "making a minimal Debian root: debootstrap --variant=minbase bookworm (log in target/bare/debootstrap.log)"
    remove "$PRISTINE"
    status=0
    debootstrap --variant=minbase bookworm "$PRISTINE" "$MIRROR" >"$STATE/debootstrap.log" 2>&1 || status=$?
    unmount_under "$PRISTINE"
    ((status == 0)) || die "debootstrap failed: $(tail -5 "$STATE/debootstrap.log")"
    touch "$PRISTINE/.complete"
fi
say "a fresh copy of that root in target/bare/root"
remove "$WORK"
unmount_under "$PRISTINE"
cp -a --one-file-system "$PRISTINE" "$WORK"
rm -f "$WORK/.complete"
printf '#!/bin/sh\n# As in container images: packages start no service.\nexit 101\n' >"$WORK/usr/sbin/policy-rc.d"
chmod +x "$WORK/usr/sbin/policy-rc.d"
cp /etc/resolv.conf "$WORK/etc/resolv.conf"
mkdir -p "$WORK/project/scripts"
cp scripts/services.sh scripts/install-lib.sh "$WORK/project/scripts/"
cp target/debug/devdb "$WORK/project/devdb"

# `inside NETWORK SCRIPT`: SCRIPT run by bash in the root, in new mount and
# pid namespaces; NETWORK "none" adds a network namespace with only lo.
inside() {
    local flags=(--mount --pid --fork --kill-child)
    [[ "$1" == none ]] && flags+=(--net)
    unshare "${flags[@]}" bash -euo pipefail -c '
        [[ "$2" == none ]] && ip link set lo up
        mount -t proc proc "$1/proc"
        mount --bind /dev "$1/dev"
        exec chroot "$1" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
            LANG=C.UTF-8 bash -euo pipefail -c "$3"' _ "$WORK" "$1" "$2"
}

say "downloading what services.sh will install into the root's apt cache (the one step with the network)"
inside host 'apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -q -y --download-only mariadb-server redis-server' \
    >"$STATE/download.log" 2>&1 || die "the download failed: $(tail -5 "$STATE/download.log")"

say "into the root, with no network but its own loopback:"
inside none '
    cd /project
    unused() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
    for tool in mariadbd mariadb redis-server redis-cli; do
        ! command -v "$tool" >/dev/null || { echo "bare: $tool is installed already"; exit 1; }
    done
    unused 3306 && unused 6379 || { echo "bare: something listens on 3306 or 6379 already"; exit 1; }
    echo "bare: no MariaDB, no Redis, nothing on 127.0.0.1:3306 or :6379"
    echo "bare: \$ bash scripts/services.sh"
    bash scripts/services.sh
    echo "bare: \$ bash scripts/services.sh   (again: both up, nothing to do)"
    bash scripts/services.sh
    echo "bare: \$ mariadb --protocol=tcp -h 127.0.0.1 -P 3306 -u root"
    mariadb --protocol=tcp -h 127.0.0.1 -P 3306 -u root -N \
        -e "SELECT CONCAT(\"  over TCP: \", VERSION(), \" as \", CURRENT_USER())"
    echo "bare: \$ redis-cli -h 127.0.0.1 -p 6379 (PING, SET, GET)"
    printf "  over TCP: %s %s %s\n" "$(redis-cli -h 127.0.0.1 -p 6379 PING)" \
        "$(redis-cli -h 127.0.0.1 -p 6379 SET bare ok)" "$(redis-cli -h 127.0.0.1 -p 6379 GET bare)"
    echo "bare: \$ ./devdb   (DATABASE_URL and REDIS_URL: the defaults of make dev)"
    DATABASE_URL=mysql://root@127.0.0.1:3306/slot_booking REDIS_URL=redis://127.0.0.1:6379 \
        DEV_KEYS_FILE=/project/.dev-keys.env ./devdb 2>&1 | sed "s/sb_[A-Za-z0-9_-]*/sb_…/g"
    printf "  slots seeded: %s\n" "$(mariadb --protocol=tcp -h 127.0.0.1 -u root -N \
        -e "SELECT COUNT(*) FROM slot_booking.slots")"
' 2>&1 | sed 's/^/    /' >&2 || die "failed after $((SECONDS - started)) s"
say "passed in $((SECONDS - started)) s: services.sh installed and started MariaDB and Redis on a bare Debian root, and clients reached both over TCP"
