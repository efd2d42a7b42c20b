#!/usr/bin/python3
"""test_cli.py - `gpubench train` as a person and a script use it: -h lists
every option with its default, bad values are usage errors (exit 2), a failed
run exits 1 with the reason on stderr, and --format json prints exactly the
result record on stdout (even with ONEDNN_VERBOSE's trace, which goes to
stderr), a save that fails after the run still prints the result and exits 1.
Usage: test_cli.py GPUBENCH"""
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

exe = sys.argv[1]
SMALL = ["--batch", "2", "--image-size", "32", "--steps", "2", "--warmup", "0", "--threads", "2"]


def small(*drop):
    """SMALL without the options in drop, for a call that gives its own (an
    option given twice is a usage error)"""
    return [a for i, a in enumerate(SMALL) if SMALL[i - i % 2] not in drop]


def run(*args):
    return subprocess.run([exe, "train", *args], capture_output=True, text=True)


def check(cond, what):
    if not cond:
        print("FAIL: " + what)
        sys.exit(1)


p = run("-h")
check(p.returncode == 0, "-h exits 0")
for opt in ["--backend", "--precision", "--batch", "--image-size", "--steps", "--warmup",
            "--threads", "--devices", "--lr", "--momentum", "--weight-decay", "--seed", "--load",
            "--data", "--save", "--save-grads", "--format", "--no-cuda-graph", "--interconnect",
            "--bucket-mb", "--no-bn"]:
    check(opt in p.stdout, "-h lists " + opt)
check("(default 32)" in p.stdout and "(default 224)" in p.stdout, "-h shows defaults")

for bad in (["--batch", "0"], ["--batch", "x"], ["--lr", "nan"], ["--format", "csv"],
            ["--precision", "fp8"], ["--backend", "tpu"], ["--steps", "-1"], ["--seed", "-3"],
            ["--nope"], ["extra"], ["--bucket-mb", "1e30"], ["--bucket-mb", "4097"],
            ["--image-size", "5000"], ["--seed", "9007199254740993"], ["--save", ""],
            ["--load", ""], ["--data", ""], ["--save-grads", ""],
            ["--backend", "cpu", "--no-cuda-graph"]):
    p = run(*bad)
    check(p.returncode == 2, "%s is a usage error (got %d)" % (bad, p.returncode))
    check(p.stdout == "" and p.stderr != "", "%s: message on stderr only" % bad)

# in the words of the other commands (cli_long's): it said "bad value '0' for
# --steps (1..1000000)" where they say "--timeout: 'abc' is not an integer in
# 0..8640000"; a value given twice is refused, as theirs are
T = "gpubench train: "
for args, said in ((["--steps", "0"], T + "--steps: '0' is not an integer in 1..1000000"),
                   (["--threads", "x"], T + "--threads: 'x' is not an integer in 0..4096"),
                   (["--seed", "-3"], T + "--seed: '-3' is not an integer in 0..9007199254740992"),
                   (["--backend", "tpu"], T + "--backend: 'tpu' is not cpu, cuda or auto"),
                   (["--format", "csv"], T + "--format is table or json (see"),
                   (["--save", ""], T + "--save needs a file name (see"),
                   (["--steps", "1", "--steps", "2"], T + "--steps given twice (see"),
                   (["extra"], T + "unexpected argument 'extra' (see")):
    p = run(*args)
    check(p.returncode == 2 and said in p.stderr and "bad value" not in p.stderr,
          "%s: rc %d, %r" % (args, p.returncode, p.stderr))

p = run(*SMALL, "--load", "/nonexistent.safetensors")
check(p.returncode == 1 and "nonexistent" in p.stderr and p.stdout == "", "failed run exits 1")
p = run(*SMALL, "--precision", "fp16")
check(p.returncode == 1 and "fp16" in p.stderr, "fp16 on the CPU is refused")
# --backend auto on a machine whose GPU backend cannot run: the CPU's
# refusal says why the GPU was not used
v = subprocess.run([exe, "version"], capture_output=True, text=True).stdout
if "cannot run here" in v or "cuda backend: not loaded" in v:
    p = run(*SMALL, "--backend", "auto", "--precision", "fp16")
    check(p.returncode == 1 and "fp16" in p.stderr
          and "(--backend auto ran the CPU backend: cuda: " in p.stderr,
          "auto on the CPU says why: " + p.stderr)

p = run(*SMALL, "--format", "json")
check(p.returncode == 0, "json run: " + p.stderr)
rec = json.loads(p.stdout)
check(rec["kind"] == "resnet50" and rec["batch_per_device"] == 2 and rec["steps"] == 2,
      "json record fields")
check(len(rec["loss_samples"]) == 2 and rec["images_per_sec"] > 0, "json samples")
# the hyperparameters as typed, not as a float widened to double
check((rec["lr"], rec["momentum"], rec["weight_decay"]) == (0.1, 0.9, 1e-4),
      "lr/momentum/weight_decay as typed: %r" % ((rec["lr"], rec["momentum"], rec["weight_decay"]),))
# a ref implementation is never hidden: counted in the record, warned about
nref = rec["details"]["ref_prims"]
check(isinstance(nref, int) and (nref == 0) == ("reference implementation" not in p.stderr),
      "ref primitives %r counted and warned about: %s" % (nref, p.stderr))

# with --format json stdout carries the record (pointed at stderr while the
# engine runs): --save /dev/stdout is refused before anything runs (it wrote
# the parameters into stderr's file)
for opt in ("--save", "--save-grads"):
    q = subprocess.run([exe, "train", *SMALL, "--format", "json", opt, "/dev/stdout"],
                       capture_output=True)
    check(q.returncode == 2 and b"is this command's stdout" in q.stderr and not q.stdout
          and len(q.stderr) < 4096, "%s /dev/stdout: rc %d, %d bytes out, %d bytes err: %r"
          % (opt, q.returncode, len(q.stdout), len(q.stderr), q.stderr[:300]))

# the table's stdout too, and stderr: `--save out.txt > out.txt` replaced
# the file and the table printed after it was lost (exit 0)
import tempfile
with tempfile.TemporaryDirectory() as d:
    for opt, fd in (("--save", 1), ("--save-grads", 2)):
        out = os.path.join(d, "out.txt")
        with open(out, "wb") as f:
            q = subprocess.run([exe, "train", *SMALL, opt, out], stdout=f if fd == 1 else None,
                               stderr=f if fd == 2 else subprocess.PIPE)
        said = open(out, "rb").read() if fd == 2 else q.stderr
        want = b"is this command's %s, which carries" % (b"stdout" if fd == 1 else b"stderr")
        check(q.returncode == 2 and want in said, "%s into its own %s: rc %d, %r"
              % (opt, "stdout" if fd == 1 else "stderr", q.returncode, said[:300]))

# an option value a float cannot hold is a usage error, not a run failure or a 0
for opt, v in (("--lr", "1e39"), ("--momentum", "1e39"), ("--weight-decay", "1e-46")):
    q = subprocess.run([exe, "train", *SMALL, opt, v], capture_output=True, text=True)
    check(q.returncode == 2 and ("gpubench train: %s: '%s' is not a number >= 0 that a float "
                                 "holds" % (opt, v)) in q.stderr,
          "%s %s: rc %d, %r" % (opt, v, q.returncode, q.stderr[-300:]))

# --bucket-mb as typed in the record (0.10000000149011612: parsed as a float)
q = subprocess.run([exe, "train", *SMALL, "--devices", "2", "--bucket-mb", "0.1", "--format",
                    "json"], capture_output=True, text=True)
check(q.returncode == 0 and json.loads(q.stdout)["details"]["bucket_mb"] == 0.1,
      "--bucket-mb 0.1: rc %d, %r" % (q.returncode, q.returncode == 0 and
                                      json.loads(q.stdout)["details"].get("bucket_mb")))

# the seed is carried with every digit up to 2^53 (as a double cJSON wrote
# 5000000000000001 as 5e+15)
for seed in ("5000000000000001", "9007199254740992"):
    q = subprocess.run([exe, "train", *SMALL, "--seed", seed, "--format", "json"],
                       capture_output=True, text=True)
    check(q.returncode == 0 and json.loads(q.stdout)["seed"] == int(seed),
          "--seed %s: rc %d, seed %r" % (seed, q.returncode,
                                         q.returncode == 0 and json.loads(q.stdout).get("seed")))

# --threads 0 takes the CPUs the process may run on (taskset), not every
# online one (they contended)
if shutil.which("taskset") and len(os.sched_getaffinity(0)) >= 2:
    cpu = min(os.sched_getaffinity(0))
    q = subprocess.run(["taskset", "-c", str(cpu), exe, "train", *small("--threads", "--steps"),
                        "--steps", "1", "--format", "json"], capture_output=True, text=True)
    check(q.returncode == 0 and json.loads(q.stdout)["threads"] == 1,
          "--threads 0 under taskset -c %d: rc %d %s" % (cpu, q.returncode, q.stdout[:200]))

# a result that cannot be written (stdout on a full disk) fails, said once
# in both formats (the table's was said by train and again by main)
for fmt in ("table", "json"):
    with open("/dev/full", "w") as full:
        q = subprocess.run([exe, "train", *small("--steps"), "--steps", "1", "--format", fmt],
                           stdout=full, stderr=subprocess.PIPE, text=True)
    lines = [l for l in q.stderr.splitlines() if "cannot write" in l]
    check(q.returncode == 1 and len(lines) == 1 and "No space left on device" in lines[0],
          "%s to /dev/full: rc %d, %r" % (fmt, q.returncode, q.stderr))

# GB_CPU_MEM_CHECK is 0 or 1: anything else is refused, not taken for either
q = subprocess.run([exe, "train", *SMALL], capture_output=True, text=True,
                   env=dict(os.environ, GB_CPU_MEM_CHECK="maybe"))
check(q.returncode != 0 and "GB_CPU_MEM_CHECK=maybe: 0 turns the memory check off" in q.stderr,
      "GB_CPU_MEM_CHECK=maybe refused: rc %d %s" % (q.returncode, q.stderr))

# GB_CPU_WINO picks our AVX2 Winograd's passes; a misspelt one is an error on
# every CPU (on an AVX-512 one oneDNN's Winograd runs and the passes change
# nothing, but a typo must not pass for an A/B run)
for val in ("totally_bogus", "fwd,bogus"):
    q = subprocess.run([exe, "train", *SMALL, "--format", "json"], capture_output=True, text=True,
                       env=dict(os.environ, GB_CPU_WINO=val))
    check(q.returncode != 0 and "GB_CPU_WINO=%s: unknown pass" % val in q.stderr,
          "GB_CPU_WINO=%s refused: rc %d %s" % (val, q.returncode, q.stderr))
if json.loads(p.stdout)["versions"]["isa"] == "avx2":
    for val, ok in (("none", True), ("fwd,bwd_weights", True), ("fwd,bwd_dat", False)):
        q = subprocess.run([exe, "train", *SMALL, "--format", "json"], capture_output=True,
                           text=True, env=dict(os.environ, GB_CPU_WINO=val))
        check((q.returncode == 0) == ok, "GB_CPU_WINO=%s: rc %d %s" % (val, q.returncode, q.stderr))
        if not ok:
            check("bwd_dat'" in q.stderr, "GB_CPU_WINO error names the pass: " + q.stderr)
        else:
            impls = json.loads(q.stdout)["details"]["impls"]
            check(("gpubench:wino_4x3:avx2" in impls) == (val != "none"),
                  "GB_CPU_WINO=%s: impls %r" % (val, impls))

# --backend cuda from the build tree, no GB_CUDA_LIB: bin/../lib holds the
# library (where an installed gpubench has it); on a machine without a GPU
# the library loads and says so, it is never "not available"
lib = os.path.join(os.path.dirname(exe), "..", "lib", "libgpubench_cuda.so")
if os.path.exists(lib):
    env = {k: v for k, v in os.environ.items() if k != "GB_CUDA_LIB"}
    q = subprocess.run([exe, "train", "--backend", "cuda", *SMALL], capture_output=True, text=True,
                       env=env)
    check("could not be loaded" not in q.stderr and "no libgpubench_cuda.so" not in q.stderr,
          "the build tree's gpubench finds its CUDA library: " + q.stderr)
    # version says where it is and whether it can run here
    v = subprocess.run([exe, "version"], capture_output=True, text=True, env=env).stdout
    check("cpu backend: built in" in v and "cuda backend: " in v and "libgpubench_cuda.so" in v
          and "not loaded" not in v, "version names both backends: " + v)
    # a library there that will not load is named, with why (it said it was
    # not found: "looked for libgpubench_cuda.so next to the executable")
    with tempfile.TemporaryDirectory() as d:
        os.mkdir(os.path.join(d, "bin"))
        os.mkdir(os.path.join(d, "lib"))
        shutil.copy(exe, os.path.join(d, "bin", "gpubench"))
        with open(os.path.join(d, "lib", "libgpubench_cuda.so"), "w") as f:
            f.write("not a library\n")
        q = subprocess.run([os.path.join(d, "bin", "gpubench"), "train", "--backend", "cuda",
                            *SMALL], capture_output=True, text=True, env=env)
        check(q.returncode == 1 and "libgpubench_cuda.so could not be loaded" in q.stderr
              and "bin/../lib/libgpubench_cuda.so" in q.stderr, "a broken library: " + q.stderr)
        os.remove(os.path.join(d, "lib", "libgpubench_cuda.so"))
        v = subprocess.run([os.path.join(d, "bin", "gpubench"), "version"], capture_output=True,
                           text=True, env=env).stdout
        check("cuda backend: not loaded: cuda backend not available: no libgpubench_cuda.so" in v,
              "version without the library: " + v)
        # $GB_CUDA_LIB that does not load: the backend named once ("not
        # loaded: cuda backend: /nonexistent.so: ...")
        v = subprocess.run([os.path.join(d, "bin", "gpubench"), "version"], capture_output=True,
                           text=True, env=dict(env, GB_CUDA_LIB="/nonexistent.so")).stdout
        check("cuda backend: not loaded: /nonexistent.so: " in v, "version, a bad $GB_CUDA_LIB: " + v)
    if q.returncode != 0:
        check("cuda" in q.stderr.lower(), "--backend cuda without a GPU says why: " + q.stderr)

# A run too large for the machine's memory is refused before it touches
# it, not killed by the kernel after minutes of page faults: by the engine's
# lower bound (images, parameters, every replica's slabs and convolution
# outputs) at once, and by the CPU backend's exact arenas when the bound
# still fits.
for args, want in ((["--batch", "65536"], "smaller --batch"),
                   (["--devices", "1024", "--batch", "2", "--image-size", "32"],
                    "fewer --devices")):
    q = run(*args, "--steps", "1", "--warmup", "0")
    check(q.returncode == 1 and "host memory" in q.stderr and want in q.stderr
          and "GB_CPU_MEM_CHECK=0" in q.stderr, "%s refused up front: %s" % (args, q.stderr))
with open("/proc/meminfo") as f:
    avail_gib = [int(l.split()[1]) for l in f if l.startswith("MemAvailable:")][0] / 2**20
if avail_gib < 64:
    # ~76 MB per image at 224x224 in the arena, ~46 by the lower bound:
    # 1.25x the memory there is passes the bound and fails the arena's check
    b = int(avail_gib * 1.25 / 0.074)
    q = run("--batch", str(b), "--steps", "1", "--warmup", "0", "--threads", "2")
    check(q.returncode == 1 and "cpu backend: the model, its gradients" in q.stderr
          and "GiB this machine has available" in q.stderr,
          "batch %d (%.1f GiB available) refused by the arena check: %s" % (b, avail_gib, q.stderr))
else:
    print("skip: the arena check's case needs a machine with under 64 GiB available")

# oneDNN writes its trace to stdout: with --format json it goes to stderr,
# and stdout stays the record alone
q = subprocess.run([exe, "train", *SMALL, "--format", "json"], capture_output=True, text=True,
                   env=dict(os.environ, ONEDNN_VERBOSE="1"))
check(q.returncode == 0 and json.loads(q.stdout)["steps"] == 2, "json with ONEDNN_VERBOSE")
check("onednn_verbose" in q.stderr, "ONEDNN_VERBOSE's trace on stderr")

with tempfile.TemporaryDirectory() as d:
    # a bad save path is refused before the run, naming the path the user gave
    q = run(*SMALL, "--save", os.path.join(d, "no", "w.safetensors"))
    check(q.returncode == 1 and os.path.join(d, "no") in q.stderr and ".tmp." not in q.stderr
          and q.stdout == "", "missing save directory: " + q.stderr)
    # a disk that fills up while saving (RLIMIT_FSIZE): the result is printed
    # all the same, the error follows, exit 1
    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, resource.RLIM_INFINITY))
    save = os.path.join(d, "w.safetensors")
    for fmt in ("table", "json"):
        q = subprocess.run([exe, "train", *SMALL, "--save", save, "--format", fmt],
                           capture_output=True, text=True, preexec_fn=small_files)
        check(q.returncode == 1 and "write error" in q.stderr and save in q.stderr,
              "full disk: rc %d %s" % (q.returncode, q.stderr))
        check(("img/s" in q.stdout) if fmt == "table" else json.loads(q.stdout)["steps"] == 2,
              "full disk: the %s result still printed: %r" % (fmt, q.stdout[:200]))
        check(not os.path.exists(save) and os.listdir(d) == [], "no partial file: %r" % os.listdir(d))

with tempfile.TemporaryDirectory() as d:
    # one file named twice, however it is spelled, and before it exists
    os.mkdir(os.path.join(d, "sub"))
    x = os.path.join(d, "x.st")
    for a, b in ((x, os.path.join(d, ".", "x.st")), (os.path.join(d, "sub", "..", "x.st"), x)):
        q = run(*SMALL, "--save", a, "--save-grads", b)
        check(q.returncode == 1 and "name the same file" in q.stderr and not os.path.exists(x),
              "--save %s --save-grads %s: %s" % (a, b, q.stderr))
    # the inputs are never overwritten (--save may replace its own --load)
    q = run(*SMALL, "--save", x)
    check(q.returncode == 0 and os.path.exists(x), "a save to load: " + q.stderr)
    q = run(*SMALL, "--load", x, "--save-grads", x)
    check(q.returncode == 1 and "--save-grads names the --load file" in q.stderr,
          "--save-grads onto --load: " + q.stderr)
    q = run(*SMALL, "--data", x, "--save", os.path.join(d, "sub", "..", "x.st"))
    check(q.returncode == 1 and "--save names the --data file" in q.stderr,
          "--save onto --data: " + q.stderr)
    # a file replaced keeps its mode (a private checkpoint stays private)
    os.chmod(x, 0o600)
    q = run(*SMALL, "--load", x, "--save", x)
    check(q.returncode == 0 and os.stat(x).st_mode & 0o777 == 0o600,
          "mode kept: %o %s" % (os.stat(x).st_mode & 0o777, q.stderr))
    # weights that diverged are not saved (--load would refuse them); the
    # gradients still are, and the run says why it exits 1
    w, g = os.path.join(d, "w.st"), os.path.join(d, "g.st")
    q = run(*SMALL, "--lr", "1e30", "--save", w, "--save-grads", g)
    check(q.returncode == 1 and "not finite after the run" in q.stderr and not os.path.exists(w)
          and os.path.exists(g), "diverged save: rc %d %s" % (q.returncode, q.stderr))

# a run that diverges is invalid, said with the step, though ReLU and max
# pool turned the NaN weights into finite, meaningless losses (it was valid:
# lr 1 at 16 px leaves NaN weights after timed step 2, the losses looked
# finite); the later losses are NaN, as torch's; as processes too, whose
# reports carried a NaN loss the launcher refused
for extra in ([], ["--devices", "2", "--launch", "processes", "--threads", "1"]):
    q = run(*small("--image-size", "--steps", "--threads"), "--image-size", "16", "--steps", "4",
            *(extra or ["--threads", "2"]), "--lr", "1", "--format", "json")
    check(q.returncode == 0, "diverged %r: rc %d %s" % (extra, q.returncode, q.stderr))
    rec = json.loads(q.stdout)
    check(rec["valid"] is False and "the parameters are not finite from timed step" in
          rec["invalid_reason"] and "the run diverged" in rec["invalid_reason"],
          "diverged %r is invalid: %r" % (extra, rec["invalid_reason"]))
    check(rec["loss_samples"][-1] is None and rec["skipped_steps"] == 0,
          "diverged %r: %r" % (extra, rec["loss_samples"]))
q = run(*SMALL, "--format", "json")
rec = json.loads(q.stdout)
check("not finite" not in (rec["invalid_reason"] or "") and rec["skipped_steps"] == 0 and
      rec["skipped_warmup_steps"] == 0, "a sane run: %r %r" % (rec["invalid_reason"],
                                                                rec.get("skipped_steps")))

# SIGTERM while the file is written: the write finishes (or is removed)
# first, then the signal ends the run; no NAME.tmp.* is left behind
with tempfile.TemporaryDirectory() as d:
    w = os.path.join(d, "w.st")
    pr = subprocess.Popen([exe, "train", *SMALL, "--save", w], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    seen = False
    while pr.poll() is None and not seen:
        seen = any(".tmp." in n for n in os.listdir(d))
        if seen:
            pr.send_signal(signal.SIGTERM)
        else:
            time.sleep(0.002)
    pr.wait()
    if seen:
        check(pr.returncode == -signal.SIGTERM, "the signal still ends the run: %d" % pr.returncode)
        check(os.listdir(d) == ["w.st"], "no temporary left: %r" % os.listdir(d))
    else:
        print("skip: the save was over before the test saw its temporary file")

# more threads than cores: said before the run (here one refused at once)
usable = len(os.sched_getaffinity(0))
q = run(*small("--threads"), "--threads", str(4 * usable), "--precision", "fp16")
check("is above the %d core(s) this process may run on" % usable in q.stderr,
      "threads note: " + q.stderr)

# replicas: the timed window opens when every replica is ready, so it spans
# the timed steps, not a slower replica's setup
q = run(*SMALL, "--devices", "2", "--format", "json")
rec = json.loads(q.stdout)
span = rec["timed_window_ms"][1] - rec["timed_window_ms"][0]
check(span <= sum(rec["step_ms_samples"]) * 1.2 + 100,
      "window %d ms for steps %r" % (span, rec["step_ms_samples"]))

p = run(*SMALL, "--no-cuda-graph", "--format", "json")
check(p.returncode == 2 and "--no-cuda-graph is for --backend cuda" in p.stderr,
      "--no-cuda-graph on the CPU backend (the default) is refused, not ignored: " + p.stderr)
p = run(*SMALL, "--backend", "auto", "--no-cuda-graph", "--format", "json")
check(p.returncode == 0 and json.loads(p.stdout)["steps"] == 2,
      "--no-cuda-graph with --backend auto (a no-op where auto picks the CPU)")

p = run(*SMALL)
check(p.returncode == 0 and "img/s" in p.stdout and "oneDNN" in p.stdout and "peak RSS" in p.stdout,
      "table output")
print("PASS")
