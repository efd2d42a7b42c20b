#!/usr/bin/env python3
"""pty_hangup.py GPUBENCH DB SPEC: `gpubench run` on a pseudo-terminal (its
controlling terminal), the terminal closed once its job runs, as a closed
terminal window or a dropped ssh session does. Prints how it ended:
"signal N" or "exit N"."""
import os
import pty
import select
import sqlite3
import sys

gb, db, spec = sys.argv[1:4]
pid, fd = pty.fork()
if pid == 0:
    os.execv(gb, [gb, "run", "--db", db, "--spec", spec])
for _ in range(400):  # its job running (20 s at most), the terminal read meanwhile
    try:
        n = sqlite3.connect(db).execute(
            "SELECT count(*) FROM jobs WHERE state = 'running'").fetchone()[0]
    except sqlite3.Error:
        n = 0
    if n == 1:
        break
    try:
        if select.select([fd], [], [], 0.05)[0]:
            os.read(fd, 65536)
    except OSError:
        pass
os.close(fd)  # the terminal goes away: SIGHUP to its session
_, st = os.waitpid(pid, 0)
print("signal %d" % os.WTERMSIG(st) if os.WIFSIGNALED(st) else "exit %d" % os.WEXITSTATUS(st))
