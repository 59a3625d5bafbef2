#!/usr/bin/env python3
"""qemu_instructions.py -- the shim's instructions per call on a machine valgrind does not run
on here: aarch64, under qemu-user. qemu executes one guest instruction per translation block
with -singlestep and logs each block it runs (-d exec,nochain), tagged with the guest thread's
CPU index: the calling thread's lines (the thread whose count grows with the calls) are the
instructions it ran. As callgrind does on x86-64
(bench/run_bench.py), a run of 2N calls minus one of N, per added call, shim minus no shim,
removes start-up; the shim's heartbeat thread has a CPU index of its own and is not counted.

Usage: qemu_instructions.py BUILD_DIR [--calls N] [--qemu qemu-aarch64-static]
  BUILD_DIR: a build of bench/shim_bench for the guest (build-aarch64 from scripts/test-aarch64;
  an x86-64 build with --qemu qemu-x86_64-static checks the method against callgrind's counts).
Prints a Markdown table (docs/performance.md, "aarch64").
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

CASES = [("call sites off (depth 0), shallow stack", "0", 0),
         ("call sites off (depth 0), deep stack", "0", 20),
         ("default (depth 16), shallow stack", "16", 0),
         ("default (depth 16), deep stack", "16", 20)]


def count(a, calls, frames, depth, shim):
    """Instructions each guest thread (by qemu's CPU index) ran in one shim_bench run."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env["LD_LIBRARY_PATH"] = os.path.join(a.build, "tests", "emulator")
    with tempfile.TemporaryDirectory(prefix="lockstep-qemu-ir-") as d:
        if shim:
            env.update(LD_PRELOAD=os.path.join(a.build, "shim", "liblockstep.so"),
                       LOCKSTEP_DIR=d, LOCKSTEP_STACK_DEPTH=depth)
        cmd = [a.qemu, "-singlestep", "-d", "exec,nochain", "-D", "/dev/stderr",
               os.path.join(a.build, "bench", "shim_bench"), "--calls", str(calls), "--reps", "1",
               "--frames", str(frames)]
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        per_cpu = collections.Counter()
        for line in p.stderr:
            if line.startswith(b"Trace "):
                per_cpu[line[6:line.index(b":")]] += 1
        if p.wait() != 0:
            sys.exit(f"qemu_instructions: {' '.join(cmd)} failed ({p.returncode})")
        return per_cpu


def per_call(a, n, added, frames, depth, shim):
    """(2N run - N run) / added calls, for the thread whose count grew the most: the caller."""
    c1, c2 = (count(a, k, frames, depth, shim) for k in (n, 2 * n))
    return max((c2[cpu] - c1[cpu]) / added for cpu in c2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--qemu", default="qemu-aarch64-static")
    a = ap.parse_args()
    n = a.calls
    added = (2 * n + 2 * n // 10) - (n + n // 10)  # shim_bench warms up with calls/10 + 1
    version = subprocess.run([a.qemu, "--version"], capture_output=True, text=True).stdout
    print(f"Instructions per call of the calling thread under `{a.qemu} -singlestep -d exec` "
          f"({version.splitlines()[0]}; {n} and {2 * n} calls):\n")
    print("| case | no shim instr/call | shim instr/call | shim cost instr/call |")
    print("|---|---:|---:|---:|")
    base = {}
    for name, depth, frames in CASES:
        per = []
        for shim in (False, True):
            key = (frames, shim)
            if shim or key not in base:
                base[key] = per_call(a, n, added, frames, depth, shim)
            per.append(base[key])
        print(f"| {name} | {per[0]:.0f} | {per[1]:.0f} | **{per[1] - per[0]:.0f}** |", flush=True)


if __name__ == "__main__":
    main()
