#!/usr/bin/env python3
"""bench_python.py -- what Python call sites cost per NCCL call.

    bench_python.py [N] [--build DIR] [--reps R] [--callgrind]

One rank calls `pr_loop(N)` (libpyranks.so: N AllReduces of one float on the CPU emulator,
timed inside C with clock_gettime, so ctypes is not in the measurement) from a Python stack
about 10 frames deep, R times per configuration: without the shim, then under the shim with
LOCKSTEP_PYTHON_DEPTH=0, the default (16) and 64. Prints a markdown table of the median ns
per call and the difference to depth 0. N defaults to 1,000,000; DIR to the `build` folder
next to tests/ (or $LOCKSTEP_BUILD). --callgrind also counts instructions per call with
valgrind (Ir of a run with 2K calls minus one with K, per added call, K = 20,000), which are
repeatable where timings are not. Not a test: timings on shared machines are noisy.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STACK = 10  # Python frames above the call: descend() x 8, main, <module>


def child(n, reps):
    """Runs in the measured process: prints one JSON list of ns per call, one per rep."""
    sys.path.insert(0, HERE)
    import pyranks

    lib = pyranks.load()
    lib.pr_init()

    def descend(k):
        if k > 0:
            return descend(k - 1)
        if lib.pr_loop(max(n // 10, 1)) < 0:  # warm up: trace, caches, the site index
            raise SystemExit("pr_loop failed")
        # The steady state: the heartbeat publishes the first TSC conversion 20 ms after the
        # trace starts (under valgrind a thread that never sleeps may keep it from running).
        time.sleep(0.1)
        out = []
        for _ in range(reps):
            ns = lib.pr_loop(n)
            if ns < 0:
                raise SystemExit("pr_loop failed")
            out.append(ns / n)
        return out

    per_call = descend(STACK - 2)
    lib.pr_destroy()
    print(json.dumps(per_call))


CONFIGS = [  # (label, preload the shim, LOCKSTEP_PYTHON_DEPTH or None for the default)
    ("no shim", False, None),
    ("shim, LOCKSTEP_PYTHON_DEPTH=0", True, "0"),
    ("shim, default depth (16)", True, None),
    ("shim, LOCKSTEP_PYTHON_DEPTH=64", True, "64"),
]


def measure(build, n, reps, preload, depth, trace_dir, valgrind=False):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("LOCKSTEP_"):
            del env[k]
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LD_PRELOAD"):
        env.pop(k, None)
    env["LD_LIBRARY_PATH"] = os.path.join(build, "tests", "emulator") + ":" + \
        env.get("LD_LIBRARY_PATH", "")
    env["PYRANKS_LIB"] = os.path.join(build, "tests", "python", "libpyranks.so")
    env["LOCKSTEP_DIR"] = trace_dir
    if preload:
        env["LD_PRELOAD"] = os.path.join(build, "shim", "liblockstep.so")
    if depth is not None:
        env["LOCKSTEP_PYTHON_DEPTH"] = depth
    cmd = [sys.executable, os.path.abspath(__file__), "--child", str(n), str(reps)]
    if valgrind:
        cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"] + cmd
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
    if valgrind:
        m = re.search(r"Collected : (\d+)", p.stderr)
        if p.returncode != 0 or not m:
            raise SystemExit(f"bench_python: callgrind failed: {p.stderr[-2000:]}")
        return int(m.group(1))
    if p.returncode != 0:
        raise SystemExit(f"bench_python: the measured process failed ({p.returncode}): "
                         f"{p.stderr.strip()}")
    for line in p.stderr.splitlines():
        if line.startswith("lockstep:"):
            print(f"(shim said: {line})", file=sys.stderr)
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(int(sys.argv[2]), int(sys.argv[3]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", nargs="?", type=int, default=1000000, help="calls per measurement")
    ap.add_argument("--build", default=os.environ.get("LOCKSTEP_BUILD",
                                                      os.path.join(HERE, "..", "..", "build")))
    ap.add_argument("--reps", type=int, default=5, help="measurements per configuration")
    ap.add_argument("--callgrind", action="store_true", help="also count instructions per call")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    for need in ("shim/liblockstep.so", "tests/python/libpyranks.so",
                 "tests/emulator/libnccl.so.2"):
        if not os.path.exists(os.path.join(build, need)):
            raise SystemExit(f"bench_python: {os.path.join(build, need)} missing (--build DIR)")
    rows = []
    with tempfile.TemporaryDirectory(prefix="lockstep-bench-python-") as tmp:
        for i, (label, preload, depth) in enumerate(CONFIGS):
            d = os.path.join(tmp, str(i))
            os.makedirs(d)
            per_call = measure(build, a.n, a.reps, preload, depth, d)
            rows.append((label, statistics.median(per_call), min(per_call), max(per_call)))
        ir = []
        if a.callgrind:
            k = 20000
            for i, (label, preload, depth) in enumerate(CONFIGS):
                runs = []
                for calls in (k, 2 * k):
                    d = os.path.join(tmp, f"cg{i}-{calls}")
                    os.makedirs(d)
                    runs.append(measure(build, calls, 1, preload, depth, d, valgrind=True))
                # Each child makes n + n // 10 calls (warm-up and one measurement).
                ir.append((label, (runs[1] - runs[0]) / (k + k // 10)))
    base = rows[1][1]
    print(f"Python call sites: {a.n:,} AllReduces per measurement (1 rank, CPU emulator), "
          f"{STACK} Python frames above the call, median of {a.reps}, "
          f"Python {sys.version.split()[0]}\n")
    print("| configuration | ns per call (median) | min - max | vs depth 0 |")
    print("|---|---:|---:|---:|")
    for label, med, lo, hi in rows:
        diff = "" if label == "no shim" else f"{med - base:+.1f}"
        print(f"| {label} | {med:.1f} | {lo:.1f} - {hi:.1f} | {diff} |")
    if ir:
        print("\nInstructions per call (`valgrind --tool=callgrind`, Ir of 44,000 calls minus "
              "22,000, per call):\n")
        print("| configuration | instructions per call | vs depth 0 |")
        print("|---|---:|---:|")
        for label, per in ir:
            diff = "" if label == "no shim" else f"{per - ir[1][1]:+.0f}"
            print(f"| {label} | {per:.0f} | {diff} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
