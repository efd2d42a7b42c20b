# shellcheck shell=bash
# bench/gpu/carry_lib.sh - sourced by carry_dnnl.sh and carry_full.sh: a
# copy for .gpu-deps is made beside the old one and put in place only when
# complete, so a failed or interrupted run leaves the previous copy (or
# none), never a partial one that run.sh would take up. Run from the
# repository root.

# carry_begin NAME: an empty folder for the new copy in NEW, removed on any
# exit. A copy left half-made by a SIGKILL (no trap ran) is removed first: it
# would travel too, and two oneDNN copies are over the device call's 64 MiB.
carry_begin() {
  mkdir -p .gpu-deps
  rm -rf .gpu-deps/"$1".new.*
  NEW=$(mktemp -d .gpu-deps/"$1".new.XXXXXX)
  trap 'rm -rf "$NEW"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  chmod 755 "$NEW"
}

# carry_commit NAME: the new copy replaces .gpu-deps/NAME
carry_commit() {
  rm -rf ".gpu-deps/$1"
  mv "$NEW" ".gpu-deps/$1"
}
