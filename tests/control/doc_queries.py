#!/usr/bin/env python3
"""doc_queries.py DB FILE.md...: every sqlite3 query in the ```sh blocks of the docs
runs on a store of the current schema without an error (a renamed column or a
view that lost one shows here, not in a user's shell)."""
import re
import subprocess
import sys
db = sys.argv[1]
files = sys.argv[2:]
bad = 0; n = 0
for f in files:
    text = open(f).read()
    for blk in re.findall(r"```sh\n(.*?)```", text, re.S):
        for m in re.finditer(r'sqlite3\s+(?:-\S+\s+)*\S+\.db\s+"((?:[^"\\]|\\.)*)"', blk, re.S):
            q = m.group(1)
            n += 1
            p = subprocess.run(["sqlite3", "-bail", db, q], capture_output=True, text=True)
            if p.returncode != 0 or p.stderr:
                bad += 1
                print("FAIL %s: %s\n  %s" % (f, p.stderr.strip(), " ".join(q.split())[:200]))
print("%d queries, %d failed" % (n, bad))
sys.exit(1 if bad or n < 10 else 0)
