# shellcheck shell=bash
# One rule for a missing Debian package, shared by `make dev` (services.sh,
# ensure-cargo-lambda.sh), `make sam-local` and `make test-bare`: where
# apt-get is there, install it — as root directly, otherwise through sudo,
# which may ask for the password — and say so in one line; elsewhere,
# print the exact command to run and let the caller exit 2.
#
# Sourced; the caller defines `say` (one line to stderr). apt's own output
# goes to $INSTALL_LOG (target/install.log), shown when a step fails.

INSTALL_LOG="${INSTALL_LOG:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/target/install.log}"

# Runs a command as root: as it is for root, else through sudo.
as_root() {
    if [[ "$(id -u)" == 0 ]]; then "$@"; else sudo "$@"; fi
}

# May this machine install a Debian package from here?
can_install() {
    command -v apt-get >/dev/null 2>&1 || return 1
    [[ "$(id -u)" == 0 ]] || command -v sudo >/dev/null 2>&1
}

# `install_packages PACKAGE...`: apt-get install, with one `apt-get update`
# when the package lists are empty or out of date. 0 once installed.
install_packages() {
    local how="apt-get install -y $*"
    [[ "$(id -u)" == 0 ]] || how="sudo $how; sudo may ask for your password"
    say "installing $* ($how)"
    mkdir -p "$(dirname "$INSTALL_LOG")"
    if apt_get install -y -q "$@"; then return 0; fi
    say "updating the package lists first (apt-get update)"
    if apt_get update -q && apt_get install -y -q "$@"; then return 0; fi
    say "installing $* failed; the last lines of ${INSTALL_LOG#"$PWD"/}:"
    tail -n 5 "$INSTALL_LOG" | sed 's/^/    /' >&2
    return 1
}

apt_get() {
    as_root env DEBIAN_FRONTEND=noninteractive apt-get "$@" >>"$INSTALL_LOG" 2>&1 </dev/null
}

# What to type where this script may not install, for the package managers
# a developer is likely to have.
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

# `provide WHAT DEBIAN FEDORA BREW`: WHAT (a description) is missing;
# installs the Debian packages (a space-separated list) by the rule above,
# else says what to install. 0 when installed, 2 when the developer has to.
provide() {
    say "$1 is not installed"
    # shellcheck disable=SC2086 # the list, word by word
    if can_install && install_packages $2; then return 0; fi
    install_hint "$2" "$3" "$4"
    return 2
}
