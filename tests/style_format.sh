#!/usr/bin/env bash
# Every C, header and CUDA file of the project is as clang-format (the
# project's .clang-format) writes it. Skipped (77) without clang-format.
set -u
src=${1:?source dir}
command -v clang-format >/dev/null || { echo "SKIP: no clang-format" >&2; exit 77; }
cd "$src" || exit 1
mapfile -t files < <(find agent bench cli common coordinator kernels schema tests worker \
    -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | sort)
[ "${#files[@]}" -gt 100 ] || { echo "FAIL: only ${#files[@]} files found" >&2; exit 1; }
if ! clang-format --dry-run -Werror "${files[@]}" 2>"${TMPDIR:-/tmp}/gb-format.$$"; then
    grep error "${TMPDIR:-/tmp}/gb-format.$$" | head -20 >&2
    rm -f "${TMPDIR:-/tmp}/gb-format.$$"
    echo "FAIL: run clang-format -i on the files above" >&2
    exit 1
fi
rm -f "${TMPDIR:-/tmp}/gb-format.$$"
echo "ok: ${#files[@]} files"
