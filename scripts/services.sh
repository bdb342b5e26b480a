#!/usr/bin/env bash
# Makes sure the database and the cache that DATABASE_URL and REDIS_URL name
# are up (`make db`, hence `make dev`, and `.ci/run` call it):
#
#   - listening: nothing to do;
#   - on this machine (127.0.0.1 / localhost), installed but stopped:
#     started, then waited for;
#   - not installed: says exactly what to install, exit 2;
#   - elsewhere, or not startable from here: says so, exit 1.
#
# A port that accepts a TCP connection counts as up, so no client program is
# needed. Redis is started with nothing kept on disk (the cache is rebuilt
# from the database); MariaDB with its packaged configuration and data.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

DATABASE_URL="${DATABASE_URL:-mysql://root@127.0.0.1:3306/slot_booking}"
REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379}"

say() { printf 'services: %s\n' "$*" >&2; }

# host and port of a URL (scheme://[user[:password]@]host[:port][/...]).
endpoint() { # url default_port
    local rest=${1#*://}
    rest=${rest%%/*}
    rest=${rest##*@}
    local host=${rest%%:*} port=${rest##*:}
    [[ "$port" == "$rest" || -z "$port" ]] && port=$2
    echo "$host $port"
}

listening() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

wait_listening() { # name host port seconds
    for _ in $(seq "$4"); do
        if listening "$2" "$3"; then say "$1 is up on $2:$3"; return 0; fi
        sleep 1
    done
    say "$1 did not come up on $2:$3 within $4 s"
    return 1
}

local_host() { [[ "$1" == 127.0.0.1 || "$1" == localhost || "$1" == ::1 ]]; }

# What to install, for the package managers a developer is likely to have.
install_hint() { # debian-package fedora-package brew-formula
    if command -v apt-get >/dev/null 2>&1; then
        say "install it with: sudo apt-get install -y $1"
    elif command -v dnf >/dev/null 2>&1; then
        say "install it with: sudo dnf install -y $2"
    elif command -v brew >/dev/null 2>&1; then
        say "install it with: brew install $3 && brew services start $3"
    else
        say "install it from your system's packages: $1 (Debian names)"
    fi
}

as_root() { [[ "$(id -u)" == 0 ]]; }

start_mariadb() { # port
    local server
    server=$(command -v mariadbd || command -v mysqld || true)
    for candidate in /usr/sbin/mariadbd /usr/sbin/mysqld; do
        [[ -z "$server" && -x "$candidate" ]] && server=$candidate
    done
    if [[ -z "$server" ]]; then
        say "MariaDB (or MySQL) is not installed"
        install_hint mariadb-server mariadb-server mariadb
        return 2
    fi
    if [[ "$1" != 3306 ]]; then
        say "no database on port $1; start yours there or point DATABASE_URL at it"
        return 1
    fi
    say "starting MariaDB ($server)"
    if as_root && command -v start-stop-daemon >/dev/null 2>&1; then
        # As root, mariadbd exits silently unless it runs as the mysql user.
        mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
        start-stop-daemon --start --oknodo --background --chuid mysql --exec "$server"
    elif command -v brew >/dev/null 2>&1; then
        brew services start mariadb >&2
    elif command -v systemctl >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo -n systemctl start mariadb
    else
        say "MariaDB is installed but stopped, and this user cannot start it:"
        say "run: sudo systemctl start mariadb   (or: sudo service mariadb start)"
        return 1
    fi
    wait_listening MariaDB 127.0.0.1 "$1" 60
}

start_redis() { # port
    if ! command -v redis-server >/dev/null 2>&1; then
        say "Redis is not installed"
        install_hint redis-server redis redis
        return 2
    fi
    say "starting Redis on 127.0.0.1:$1 (nothing kept on disk)"
    local dir="$ROOT/target/redis"
    mkdir -p "$dir"
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$1" --save "" \
        --appendonly no --dir "$dir" --logfile "$dir/redis-$1.log"
    wait_listening Redis 127.0.0.1 "$1" 30
}

ensure() { # name url default_port starter
    local host port
    read -r host port <<<"$(endpoint "$2" "$3")"
    if listening "$host" "$port"; then return 0; fi
    if ! local_host "$host"; then
        say "$1 at $host:$port does not answer; it is not on this machine, so start it there"
        return 1
    fi
    "$4" "$port"
}

status=0
ensure MariaDB "$DATABASE_URL" 3306 start_mariadb || status=$?
ensure Redis "$REDIS_URL" 6379 start_redis || status=$?
exit "$status"
