#!/usr/bin/env bash
# Makes sure the database and the cache that DATABASE_URL and REDIS_URL name
# are up (`make db`, hence `make dev`, and `.ci/run` call it):
#
#   - listening: nothing to do;
#   - on this machine (127.0.0.1 / localhost), installed but stopped:
#     started, then waited for;
#   - not installed: installed from Debian's packages where apt-get is
#     there (as root, else through sudo: scripts/install-lib.sh), then
#     started; elsewhere, says exactly what to install, exit 2;
#   - elsewhere, or not startable from here: says so, exit 1.
#
# A port that accepts a TCP connection counts as up. Redis is started with
# nothing kept on disk (the cache is rebuilt from the database); MariaDB with
# its packaged configuration and data. A local MariaDB that refuses the URL's
# user over TCP (a fresh Debian one lets root in through its socket only)
# gets it, through the socket as root (ensure_tcp_user says how). Each step
# is one line on stderr.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

DATABASE_URL="${DATABASE_URL:-mysql://root@127.0.0.1:3306/slot_booking}"
REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379}"

say() { printf 'services: %s\n' "$*" >&2; }
# shellcheck source=scripts/install-lib.sh
. "$ROOT/scripts/install-lib.sh"

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

mariadb_server() {
    local server
    server=$(command -v mariadbd || command -v mysqld || true)
    for candidate in /usr/sbin/mariadbd /usr/sbin/mysqld; do
        [[ -z "$server" && -x "$candidate" ]] && server=$candidate
    done
    printf '%s\n' "$server"
}

start_mariadb() { # port
    local server
    server=$(mariadb_server)
    if [[ -z "$server" ]]; then
        provide "MariaDB (or MySQL)" mariadb-server mariadb-server mariadb || return
        server=$(mariadb_server)
        # Its package may have started it (systemd); else it is started below.
        if listening 127.0.0.1 "$1"; then say "MariaDB is up on 127.0.0.1:$1"; return 0; fi
    fi
    if [[ "$1" != 3306 ]]; then
        say "no database on port $1; start yours there or point DATABASE_URL at it"
        return 1
    fi
    say "starting MariaDB ($server)"
    if [[ -d /run/systemd/system ]] && command -v systemctl >/dev/null 2>&1 &&
        { [[ "$(id -u)" == 0 ]] || command -v sudo >/dev/null 2>&1; }; then
        as_root systemctl start mariadb
    elif command -v start-stop-daemon >/dev/null 2>&1 &&
        { [[ "$(id -u)" == 0 ]] || command -v sudo >/dev/null 2>&1; }; then
        # As root, mariadbd exits silently unless it runs as the mysql user.
        as_root mkdir -p /run/mysqld
        as_root chown mysql:mysql /run/mysqld
        as_root start-stop-daemon --start --oknodo --background --chuid mysql --exec "$server"
    elif command -v brew >/dev/null 2>&1; then
        brew services start mariadb >&2
    else
        say "MariaDB is installed but stopped, and this user cannot start it:"
        say "run: sudo systemctl start mariadb   (or: sudo service mariadb start)"
        return 1
    fi
    wait_listening MariaDB 127.0.0.1 "$1" 60
}

# The URL's user, password and database, percent-decoded.
decoded() { printf '%b' "${1//%/\\x}"; }
credentials() { # url -> user password
    local rest=${1#*://}
    rest=${rest%%/*}
    [[ "$rest" == *@* ]] || { echo "root "; return; }
    local userinfo=${rest%@*}
    local user=${userinfo%%:*} password=""
    [[ "$userinfo" == *:* ]] && password=${userinfo#*:}
    printf '%s %s\n' "$(decoded "$user")" "$(decoded "$password")"
}

sql_string() { local s=${1//\\/\\\\}; printf "'%s'" "${s//\'/\'\'}"; }

# A local MariaDB that refuses the URL's user over TCP gets it, through the
# socket as root, as a development machine wants it:
#   - the user exists at localhost with socket access only (a fresh Debian
#     root): the URL's password is added as an alternative, the socket kept
#     (a TCP connection from 127.0.0.1 resolves to localhost, so an account
#     at 127.0.0.1 beside it would never be chosen);
#   - no such user: created at localhost and 127.0.0.1, every privilege
#     (the tests create and drop databases and grant);
#   - anything else (a password of its own): left as it is, and said.
ensure_tcp_user() { # url host port
    local client user password
    client=$(command -v mariadb || command -v mysql || true)
    [[ -n "$client" ]] || return 0 # nothing to check with; devdb will tell
    read -r user password <<<"$(credentials "$1")"
    tcp_login() { MYSQL_PWD="$password" "$client" --protocol=tcp -h "$2" -P "$3" -u "$user" -N -e 'SELECT 1' 2>&1; }
    local answer
    answer=$(tcp_login "$@") && return 0
    if [[ "$answer" != *"(28000)"* ]]; then
        say "MariaDB answers on $2:$3 but not to $user: $answer"
        return 1
    fi
    if [[ "$(id -u)" != 0 ]] && ! command -v sudo >/dev/null 2>&1; then
        say "MariaDB refuses $user over TCP; as its administrator, let $user in from 127.0.0.1"
        return 1
    fi
    local name pass existing
    name=$(sql_string "$user") pass=$(sql_string "$password")
    existing=$(as_root "$client" -u root -N -e "SHOW CREATE USER $name@'localhost'" 2>/dev/null || true)
    if [[ -z "$existing" ]]; then
        say "MariaDB has no user $user: creating $user@localhost and $user@127.0.0.1, through the socket as root"
        as_root "$client" -u root -e "
            CREATE USER IF NOT EXISTS $name@'localhost' IDENTIFIED BY $pass;
            CREATE USER IF NOT EXISTS $name@'127.0.0.1' IDENTIFIED BY $pass;
            GRANT ALL PRIVILEGES ON *.* TO $name@'localhost' WITH GRANT OPTION;
            GRANT ALL PRIVILEGES ON *.* TO $name@'127.0.0.1' WITH GRANT OPTION" >&2 || return 1
    elif [[ "$existing" == *unix_socket* ]]; then
        say "MariaDB lets $user in through its socket only: adding the URL's password over TCP, socket kept (through the socket as root)"
        # The password first: a client's handshake starts with the first
        # method, and sqlx answers a switch to it with a scramble even for
        # an empty password, which the server then refuses.
        as_root "$client" -u root -e "ALTER USER $name@'localhost'
            IDENTIFIED VIA mysql_native_password USING PASSWORD($pass) OR unix_socket" >&2 || return 1
    fi
    if ! answer=$(tcp_login "$@"); then
        say "MariaDB still refuses $user over TCP ($answer): its account has a password of its own; fix it or set DATABASE_URL"
        return 1
    fi
    say "MariaDB lets $user in over TCP on $2:$3"
}

start_redis() { # port
    if ! command -v redis-server >/dev/null 2>&1; then
        provide Redis redis-server redis redis || return
        if listening 127.0.0.1 "$1"; then say "Redis is up on 127.0.0.1:$1"; return 0; fi
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
if ensure MariaDB "$DATABASE_URL" 3306 start_mariadb; then
    read -r db_host db_port <<<"$(endpoint "$DATABASE_URL" 3306)"
    if local_host "$db_host" && [[ -n "$(mariadb_server)" ]]; then
        ensure_tcp_user "$DATABASE_URL" "$db_host" "$db_port" || status=$?
    fi
else
    status=$?
fi
ensure Redis "$REDIS_URL" 6379 start_redis || status=$?
exit "$status"
