#!/usr/bin/python3
"""test_launch.py - data-parallel replicas as processes of their own
(--launch processes, kernels/launch.h), with the real gpubench:

  identical  CPU replicas as processes end with the very bytes threads end
             with (--save, --save-grads; 2 replicas, and 3 on a --data file,
             each process taking its slice); the record says how they ran
  killed     a replica process killed mid-run fails the run at once, naming
             it; the other replica process is gone with it
  planted    a replica that fails while another is blocked for good (the
             planted backend, loaded as the CUDA backend, whose default
             launch is processes): the blocked one is killed, not waited for;
             one that never becomes ready fails the run at the set-up's
             deadline
  orphans    the launcher killed: its replica processes die with it
  refused    a bad --launch, a stray __replica, a program's own misuse
  worker     a resnet50 job with "launch": "processes" through the worker

Usage: test_launch.py GPUBENCH LIBSTRANDED CASE"""
import json
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import time
import uuid

exe, lib, case = sys.argv[1], sys.argv[2], sys.argv[3]
TAG = "gb-launch-test-" + uuid.uuid4().hex  # marks this test's processes
BASE = ["train", "--backend", "cpu", "--threads", "2"]
SMALL = BASE + ["--batch", "2", "--image-size", "32", "--warmup", "1"]


def check(cond, what):
    if not cond:
        print("FAIL: " + what)
        sys.exit(1)


def env(**kw):
    e = dict(os.environ, GB_LAUNCH_TEST=TAG)
    e.update(kw)
    return e


def run(args, e=None, timeout=120):
    p = subprocess.run([exe] + args, capture_output=True, text=True, env=e or env(),
                       timeout=timeout)
    return p


def tagged():
    """pids of live replica processes of this test (by their environment)"""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read().split(b"\0")
            with open("/proc/%s/environ" % d, "rb") as f:
                envb = f.read()
            with open("/proc/%s/stat" % d) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if len(cmd) > 1 and cmd[1] == b"__replica" and TAG.encode() in envb and state != "Z":
            found.append(int(d))
    return found


def none_left(what, within=5.0):
    t0 = time.monotonic()
    while tagged() and time.monotonic() - t0 < within:
        time.sleep(0.05)
    check(not tagged(), "%s: replica processes %s still alive" % (what, tagged()))


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    st = f.read().rsplit(")", 1)[1].split()
                if int(st[1]) == pid:
                    out.append(int(d))
            except OSError:
                pass
    return out


def write_data(path, n, size):
    """a safetensors file of n images (N,3,H,W) f32 and labels (N) i64"""
    import random
    rnd = random.Random(5)
    imgs = struct.pack("<%df" % (n * 3 * size * size),
                       *[rnd.uniform(-2, 2) for _ in range(n * 3 * size * size)])
    labels = struct.pack("<%dq" % n, *[rnd.randrange(1000) for _ in range(n)])
    hdr = {"images": {"dtype": "F32", "shape": [n, 3, size, size],
                      "data_offsets": [0, len(imgs)]},
           "labels": {"dtype": "I64", "shape": [n],
                      "data_offsets": [len(imgs), len(imgs) + len(labels)]}}
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + imgs + labels)


def same_file(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def load_st(path):
    """the float32 tensors of a safetensors file, as torch tensors (float64)"""
    import torch
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    hdr = json.loads(b[8:8 + n])
    out = {}
    for k, v in hdr.items():
        if k != "__metadata__" and v["dtype"] == "F32":
            s, e = v["data_offsets"]
            out[k] = torch.frombuffer(bytearray(b[8 + n + s:8 + n + e]),
                                      dtype=torch.float32).double()
    return out


def worst_rel(a, b):
    """the largest per-tensor |a - b| / |a| (2-norms) over two files' tensors"""
    ta, tb = load_st(a), load_st(b)
    check(ta.keys() == tb.keys(), "the same tensors")
    return max(((ta[k] - tb[k]).norm() / max(ta[k].norm(), 1e-30)).item() for k in ta)


if case == "identical":
    with tempfile.TemporaryDirectory() as d:
        write_data(os.path.join(d, "data.st"), 6, 32)
        # 2 replicas: a + b is b + a, so the ring's order of summation
        # (processes) and the shared memory's (threads) give the same bits;
        # 3 replicas on a --data file: one step, equal to float rounding
        # (later steps are not compared: the ReLU masks that a difference in
        # the last bit flips make BN's gradients part by a percent)
        for devices, extra in [(2, SMALL[len(BASE):] + ["--steps", "3"]),
                               (3, ["--steps", "1", "--warmup", "0", "--image-size", "32",
                                    "--batch", "2", "--lr", "0.01", "--data",
                                    os.path.join(d, "data.st")])]:
            recs = {}
            for launch in ["threads", "processes"]:
                s, g = os.path.join(d, launch + ".st"), os.path.join(d, launch + "_g.st")
                p = run(BASE + ["--devices", str(devices), "--launch", launch, "--save", s,
                                 "--save-grads", g, "--format", "json"] + extra)
                check(p.returncode == 0, "%s x%d: %s" % (launch, devices, p.stderr))
                recs[launch] = json.loads(p.stdout)
            files = [os.path.join(d, n) for n in
                     ["threads.st", "processes.st", "threads_g.st", "processes_g.st"]]
            t, p = recs["threads"], recs["processes"]
            if devices == 2:
                check(same_file(files[0], files[1]),
                      "x2: the weights after 3 steps differ between threads and processes")
                check(same_file(files[2], files[3]), "x2: the last gradients differ")
                check(p["loss_samples"] == t["loss_samples"], "the same losses, step by step")
                check(p["details"]["params_fnv"] == t["details"]["params_fnv"],
                      "the same weights' checksum")
            else:
                w, g = worst_rel(files[0], files[1]), worst_rel(files[2], files[3])
                print("x3: weights within %.1e, gradients within %.1e" % (w, g))
                check(w < 1e-6 and g < 1e-6, "x3: threads and processes part by more than "
                      "rounding: weights %.2e, gradients %.2e" % (w, g))
                check(abs(p["loss_last"] - t["loss_last"]) <= 1e-5 * abs(t["loss_last"]),
                      "x3: the same loss (each process on its slice of --data)")
            det = p["details"]
            check(det["launch"] == "processes" and t["details"]["launch"] == "threads",
                  "the record says how the replicas ran: %s" % det.get("launch"))
            check(p["interconnect"] == "tcp" and t["interconnect"] == "shm",
                  "processes reduce over the TCP ring: %s" % p["interconnect"])
            check(p["n_devices"] == devices and p["global_batch"] == devices * p["batch_per_device"],
                  "global figures: %s %s" % (p["n_devices"], p["global_batch"]))
            reps = det["replicas"]
            check([r["rank"] for r in reps] == list(range(devices)), "one entry per process")
            check(len({r["params_fnv"] for r in reps}) == 1, "every process ends with the same "
                  "weights")
            check(all(r["allreduce"]["transport"] == "threads+tcp" for r in reps),
                  "each process's buckets went over the ring")
            check(len(p["step_ms_samples"]) == p["steps"] and p["step_ms"]["median"] > 0,
                  "step times from the processes")
            print("x%d: threads and processes agree" % devices)
    print("ok")

elif case == "killed":
    args = [exe] + SMALL + ["--devices", "2", "--steps", "100000", "--launch", "processes"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env())
    kids = []
    t0 = time.monotonic()
    while len(kids) < 2 and time.monotonic() - t0 < 60:
        kids = children(proc.pid)
        time.sleep(0.05)
    check(len(kids) == 2, "two replica processes under the launcher: %s" % kids)
    time.sleep(3)  # into the steps
    # which of the two is replica process 1 only the launcher knows: the
    # error must name the one killed, or its peer, whose ring broke first
    os.kill(kids[1], signal.SIGKILL)
    t1 = time.monotonic()
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        check(False, "the launcher did not end after a replica process was killed")
    took = time.monotonic() - t1
    print("killed: rc %d in %.2f s: %s" % (proc.returncode, took, err.strip()))
    check(proc.returncode == 1, "exit status 1")
    check(re.search(r"replica process [01] \(rank [01]\): (ended without a result: killed by "
                    r"signal 9|.*closed the connection)", err), "the failure named: " + err)
    check(took < 30, "ended %.1f s after the kill (not at a timeout)" % took)
    none_left("killed")
    print("ok")

elif case == "planted":
    train = ["train", "--backend", "cuda", "--devices", "2", "--batch", "2", "--image-size", "32",
             "--steps", "2", "--warmup", "1"]
    # at create, at the first step, and at the step with a teardown that
    # never ends after it (the launcher hears of the failure at once, not
    # at the teardown's end, and stops both processes: before, it waited
    # for a "fail" sent after the teardown)
    for at, phase, hangs in [("create", "create", ""), ("step", "step", ""),
                             ("step", "step", "1")]:
        what = "planted %s%s" % (at, ", destroy hangs" if hangs else "")
        t0 = time.monotonic()
        p = run(train, env(GB_CUDA_LIB=lib, GB_PLANT_AT=at, GB_PLANT_DESTROY_HANGS=hangs,
                           GB_REPLICA_GRACE_MS="600000"), timeout=120)
        took = time.monotonic() - t0
        print("%s: rc %d in %.2f s: %s" % (what, p.returncode, took, p.stderr.strip()))
        check(p.returncode == 1, "exit status 1")
        check("replica process 0 (rank 0): replica 0's %s failed (planted)" % phase in p.stderr,
              "the failing replica process named, with its own reason")
        check("still running" not in p.stderr, "nothing stranded: a process can be killed")
        # far under the grace, not a tight time: under ASan with four tests
        # a core one run took 20.2 s
        check(took < 100, "ended %.1f s after start, not after the 600 s grace nor at a "
              "teardown's end (never)" % took)
        none_left(what)
    # a replica process that never becomes ready (blocked in its set-up)
    # while the other is ready: the run fails at the set-up's deadline,
    # naming it (the launcher and the ready replica waited for ever)
    t0 = time.monotonic()
    # (15 s: a replica process's set-up, ResNet-50's weights made, takes
    # 2-5 s here, more under ASan; a replica 0 that is not ready yet is
    # named too)
    p = run(train, env(GB_CUDA_LIB=lib, GB_PLANT_AT="setup", GB_REPLICA_SETUP_MS="15000"),
            timeout=120)
    took = time.monotonic() - t0
    print("planted setup: rc %d in %.2f s: %s" % (p.returncode, took, p.stderr.strip()))
    check(p.returncode == 1 and "planted: replica 1 blocks in its set-up" in p.stderr and
          re.search(r"replica process\(es\) (0 \(rank 0\) )?1 \(rank 1\) not ready 15 s after "
                    r"their start \(GB_REPLICA_SETUP_MS\)", p.stderr), "the stalled replica named")
    check(took < 75, "ended %.1f s after start" % took)
    none_left("planted setup")
    # NCCL's log directory: one for both replica processes (rank 0 reads
    # every process's lines there), made by the launcher and, with nothing
    # written to it, removed after the run
    p = run(train, env(GB_CUDA_LIB=lib, GB_PLANT_AT="step", GB_PLANT_SAY_NCCL_DIR="1",
                       GB_REPLICA_GRACE_MS="600000"), timeout=120)
    dirs = re.findall(r"planted: replica (\d) NCCL log dir (\S+)", p.stderr)
    print("NCCL log dirs: %s" % dirs)
    check(p.returncode == 1 and sorted(r for r, _ in dirs) == ["0", "1"],
          "both replica processes said their directory: " + p.stderr)
    check(len({d for _, d in dirs}) == 1 and "/gb-nccl-" in dirs[0][1],
          "one directory for both: %s" % dirs)
    check(not os.path.exists(dirs[0][1]), "the empty directory removed: " + dirs[0][1])
    none_left("NCCL log dir")
    # the same with the launch said: the planted library's record of launch
    p = run(train + ["--launch", "threads"],
            env(GB_CUDA_LIB=lib, GB_PLANT_AT="create", GB_REPLICA_GRACE_MS="200"), timeout=60)
    check(p.returncode == 1 and "replica 1 (in create) still running" in p.stderr,
          "--launch threads keeps the replicas in one process: " + p.stderr)
    print("ok")

elif case == "orphans":
    args = [exe] + SMALL + ["--devices", "2", "--steps", "100000", "--launch", "processes"]
    # a descriptor the launcher inherits without close-on-exec (as a worker
    # holds the agent's rendezvous socket): no replica process may hold it
    rfd, wfd = os.pipe()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(),
                            pass_fds=(wfd,))
    os.close(wfd)
    t0 = time.monotonic()
    while len(tagged()) < 2 and time.monotonic() - t0 < 60:
        time.sleep(0.05)
    check(len(tagged()) == 2, "two replica processes running")
    time.sleep(1)

    def holds_pipe(pid):
        mine = "pipe:[%d]" % os.fstat(rfd).st_ino
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                if os.readlink("/proc/%d/fd/%s" % (pid, fd)) == mine:
                    return True
            except OSError:  # closed meanwhile
                pass
        return False

    check(holds_pipe(proc.pid), "the launcher holds the inherited pipe (the test's premise)")
    for pid in tagged():
        check(not holds_pipe(pid), "replica process %d holds the launcher's inherited pipe" % pid)
    os.close(rfd)
    proc.kill()
    proc.wait()
    none_left("the launcher killed")
    print("ok")

elif case == "refused":
    p = run(SMALL + ["--devices", "2", "--launch", "forks"])
    check(p.returncode == 2 and "auto, threads or processes" in p.stderr, "bad --launch: "
          + p.stderr)
    p = run(["__replica"])
    check(p.returncode == 2 and "started by gpubench itself" in p.stderr, "bare __replica")
    p = run(["__replica", "nine"])
    check(p.returncode == 2, "__replica with no descriptor")
    # a descriptor with no launcher behind it: the job is incomplete, said
    p = subprocess.run([exe, "__replica", "0"], stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=30)
    check(p.returncode == 1, "__replica on /dev/null: rc %d" % p.returncode)
    # one device: nothing to launch, the run is as before
    p = run(SMALL + ["--devices", "1", "--steps", "2", "--launch", "processes", "--format",
                     "json"])
    check(p.returncode == 0 and "launch" not in json.loads(p.stdout)["details"],
          "one replica runs in the process: " + p.stderr)
    # the table says how the replicas ran
    p = run(SMALL + ["--devices", "2", "--steps", "1", "--launch", "processes"])
    check(p.returncode == 0 and "2 replicas as processes (global batch 4), tcp" in p.stdout,
          "the table: " + p.stdout + p.stderr)
    print("ok")

elif case == "worker":
    with tempfile.TemporaryDirectory() as d:
        for launch, ok in [("processes", True), ("forks", False)]:
            params = {"kind": "resnet50", "backend": "cpu", "gpus": 2, "batch": 2, "steps": 2,
                      "warmup": 1, "image_size": 32, "launch": launch}
            job, out = os.path.join(d, "job.json"), os.path.join(d, "out.json")
            with open(job, "w") as f:
                json.dump({"job_id": 3, "attempt": 1, "params": params}, f)
            p = subprocess.run([exe, "worker", "--job", job, "--out", out], capture_output=True,
                               text=True, env=env(), timeout=120)
            with open(out) as f:
                rec = json.load(f)
            if ok:
                check(p.returncode == 0, "worker: " + p.stderr)
                check(rec["details"]["launch"] == "processes" and rec["n_devices"] == 2
                      and len({r["params_fnv"] for r in rec["details"]["replicas"]}) == 1,
                      "the worker's record: %s" % rec["details"].get("launch"))
            else:
                check(p.returncode != 0 and "launch" in rec.get("error", ""),
                      "a bad launch refused: %s" % rec)
    none_left("worker")
    print("ok")

else:
    check(False, "unknown case " + case)
