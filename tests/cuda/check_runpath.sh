#!/bin/sh
# check_runpath.sh LIB: LIB's RUNPATH/RPATH has no empty entry. An empty
# entry (what CMake's ':' padding leaves) is the current directory, searched
# before the system's libraries: a libnccl.so.2 planted where a worker runs
# would be loaded into it.
lib=${1:?library}
command -v readelf >/dev/null || { echo "SKIP: no readelf"; exit 77; }
paths=$(readelf -d "$lib" | sed -n 's/.*(R[UN]*PATH).*\[\(.*\)\]$/\1/p')
echo "$lib: RUNPATH '${paths}'"
[ -z "$paths" ] && exit 0
case ":$paths:" in
*::*) echo "FAIL: an empty entry (the current directory) in '$paths'"; exit 1 ;;
esac
exit 0
