#!/usr/bin/env bash
# gpubench run: coordinator + local agent + default sweep, results table, exit 0;
# a second run on the same store adds a sweep.
source "$(dirname "$0")/lib.sh" "$1" "$2"
cd "$T"
check "gpubench run exits 0" "$GB" run --db "$T/run.db" >"$T/out.txt" 2>"$T/run.log"
contains "table header" "$T/out.txt" "status"
rows=$(grep -c " done " "$T/out.txt")
[ "$rows" -ge 1 ] || fail "no finished job in the table: $(cat "$T/out.txt")"
eq "rows in the store" "$(sqlite3 "$T/run.db" "SELECT count(*) FROM v_results WHERE status = 'done'")" "$rows"
check "second run" "$GB" run --db "$T/run.db" --format csv >"$T/out2.csv" 2>>"$T/run.log"
eq "two sweeps" "$(sqlite3 "$T/run.db" "SELECT count(*) FROM sweeps WHERE state = 'done'")" 2
eq "csv has the second sweep only" "$(tail -n +2 "$T/out2.csv" | cut -d, -f1 | sort -u)" 2
eq "the local node was reused" "$(sqlite3 "$T/run.db" "SELECT count(*) FROM nodes")" 1
echo ok
