# bench/lib.sh - what the bench scripts share; sourced, not run. Each sets
# ME (its name in messages) first.

# die MESSAGE: the message on stderr, exit 2 (the scripts' usage error)
die() { echo "$ME: $*" >&2; exit 2; }

# need_int NAME MIN MAX [LABEL]: $NAME is a whole number from MIN to MAX,
# written in decimal (010 is ten, not octal eight; 08 is eight), or the
# script stops here with exit 2; $NAME is then left in plain decimal.
need_int() {
    local v=${!1} what=${4:-$1}
    if ! [[ $v =~ ^[0-9]+$ ]] || [ ${#v} -gt 18 ] || [ $((10#$v)) -lt "$2" ] || [ $((10#$v)) -gt "$3" ]; then
        die "$what is '$v': it must be a whole number from $2 to $3"
    fi
    printf -v "$1" '%d' $((10#$v))
}
