# lib.sh - helpers for the hardening integration tests (sourced after the
# control plane's tests/control/lib.sh, whose coordinator/agent/check
# helpers they use): keys, and the exactly-once assertion every fault test
# ends with.
#
# Usage: source lib.sh GPUBENCH [HPEER]
source "$(dirname "${BASH_SOURCE[0]}")/../control/lib.sh" "$1" "${2:-}"
HPEER=${2:-}

# make_keys NAME...: $T/NAME.key and $T/NAME.pub
make_keys() {
    local n
    for n in "$@"; do "$GB" keygen "$T/$n" >/dev/null 2>&1 || fail "keygen $n"; done
}

# authorize NAME...: $T/authorized lists exactly these public keys
authorize() {
    local n
    : >"$T/authorized.new"
    for n in "$@"; do echo "$(cat "$T/$n.pub") $n" >>"$T/authorized.new"; done
    mv "$T/authorized.new" "$T/authorized"
}

# use_keys NAME: the gpubench commands (and test_hpeer) use NAME's key and
# pin coord.pub
use_keys() { export GB_KEY=$T/$1.key GB_SERVER_KEY=$T/coord.pub; }
no_keys() { unset GB_KEY GB_SERVER_KEY; }

# remove_whole DIR: DIR gone at one instant, as the process under test sees
# it. `rm -rf` is not: it unlinks the entries, then the directory, and an
# agent (or coordinator) that remakes what is missing in between leaves rm
# "Directory not empty" (seen in CI). Moved away (one rename), then removed.
remove_whole() {
    mv "$1" "$1.gone" || fail "cannot move $1 away"
    rm -rf "$1.gone"
}

source "$(dirname "${BASH_SOURCE[0]}")/exactly_once.sh"
