"""benchutil.py - what bench.py, dp.py and gemm.py share: running a child so
that stopping the script stops it too, checking paths before a long run, and
writing the results."""
import os
import shutil
import signal
import subprocess
import sys


def stop_on_sigterm():
    """SIGTERM unwinds like Ctrl-C (SystemExit 143), so that run() below
    stops the child and temporary folders are removed; by default Python
    dies at once and leaves the child running."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))


def run(cmd, env=None):
    """subprocess.run(cmd, capture_output=True, text=True), the child in a
    process group of its own: when this script is interrupted (Ctrl-C,
    SIGTERM, any exception) the whole group is stopped, the program under
    /usr/bin/time too (killing time alone would leave it running)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env, start_new_session=True)
    try:
        out, err = p.communicate()
    except BaseException:
        for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, None)):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                break
            try:
                p.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                pass
        raise
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def program(path):
    """PATH as given on the command line: a bare name is looked up in PATH,
    anything else is taken from the current directory; an absolute path."""
    if os.sep not in path:
        path = shutil.which(path) or path
    return os.path.abspath(path)


def emit(lines, path):
    """The results, one string per line: printed, and written to PATH."""
    text = "\n".join(lines)
    print(text)
    with open(path, "w") as f:
        f.write(text)


def writable_dir_of(path):
    """None when the folder that is to hold the file PATH exists and can be
    written, else why not (checked before a run of many minutes)."""
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        return "no folder %s" % d
    if not os.access(d, os.W_OK | os.X_OK):
        return "%s cannot be written" % d
    return None
