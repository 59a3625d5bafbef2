#!/usr/bin/env python3
"""Hunts for wrong diagnoses of moments: runs live jobs of the test programs and analyzes each
in a tight loop while it starts, runs and hangs, then prints every distinct diagnosis seen (the
numbers masked) with how often, and the reports that break a rule no moment may break.

    bench/live_transients.py BUILD SECONDS [PROGRAM:MODE[:NP]]...

BUILD is a build folder (build, or build-aarch64: under qemu a job is slow enough for the
analyzer to catch the moments that take microseconds on the host); PROGRAM is realjobs,
scenarios or chains (default realjobs, NP 4). Without modes, every realjobs mode that one
launch of 4 ranks runs. The analyzer is BUILD's, or $LOCKSTEP_BIN (the host's for an aarch64
build). Exits 1 when a rule was broken:

  * a ring called wrapped (trace_incomplete "wrapped") for a rank whose ring did not wrap;
  * a record called half-written by a rank that is alive (it is being written);
  * one launch's traces split into several jobs;
  * an analysis that failed (other than "no trace files" before the first rank made its trace).

Most distinct diagnoses are real moments (a rank still inside CommInitRank while the others
enter their first collective); read them, and turn a wrong one into a rule here and a
deterministic test (tracegen, or a unit test of the reader) beside its fix.
"""
import collections
import json
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
from report_ranks import per_rank  # noqa: E402

REALJOBS_MODES = ["watchdog", "oom_kill", "far_apart", "child_comm", "open_group", "comm_abort",
                  "sigstop", "async_error", "bad_args", "wrong_world"]


def masked(s):
    s = re.sub(r"\b[0-9a-f]{8}\b", "C", s)
    return re.sub(r"\d+(\.\d+)?", "N", s)


def broken_rules(r):
    ranks = {(x["job"], x["rank"]): x for x in per_rank(r)}
    out = []
    for f in r["findings"]:
        if f["kind"] != "trace_incomplete":
            continue
        who = [ranks.get((f.get("job"), k), {}) for k in f.get("ranks", [])]
        if f.get("reason") == "wrapped" and not all(x.get("wrapped") for x in who):
            out.append("a ring called wrapped that did not wrap: " + f["summary"])
        if f.get("reason") == "half_written" and any(
                x.get("state") in ("in_call", "idle") for x in who):
            out.append("a live rank called dead while writing: " + f["summary"])
    if len(r.get("jobs", [])) > 1:
        out.append(f"one launch made {len(r['jobs'])} jobs")
    return out


def stop(job, d):
    """Kills the ranks (their pids are in their traces' headers: the launcher starts each in a
    session of its own), then the launcher."""
    for name in os.listdir(d):
        if name.endswith(".trace"):
            with open(os.path.join(d, name), "rb") as f:
                pid = struct.unpack("<i", f.read(124)[120:124])[0]
            try:
                if pid > 0:
                    os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    os.killpg(job.pid, signal.SIGKILL)
    job.wait()


def hunt(build, lockstep, env, spec, seconds):
    prog, mode, np = (spec.split(":") + ["4"])[:3] if ":" in spec else ("realjobs", spec, "4")
    exe = os.path.join(build, "tests", "scenarios", prog)
    tmp = tempfile.mkdtemp(prefix="lockstep-transients-")
    d = os.path.join(tmp, "traces")
    os.makedirs(d)
    job_env = dict(env, LD_PRELOAD=os.path.join(build, "shim", "liblockstep.so"), LOCKSTEP_DIR=d)
    job = subprocess.Popen([os.path.join(build, "tests", "launcher", "launch-ranks"), "--np", np,
                            "--timeout", str(seconds + 30), "--", exe, mode], env=job_env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    seen, broken, n = collections.Counter(), collections.Counter(), 0
    deadline = time.time() + seconds
    try:
        while time.time() < deadline:
            p = subprocess.run([lockstep, "analyze", "--json", "--ranks", "all", d],
                               capture_output=True, text=True, env=env)
            n += 1
            if p.returncode not in (0, 1):
                if "no trace files" not in p.stderr or seen:
                    broken[f"exit status {p.returncode}: {p.stderr.strip()[:200]}"] += 1
                continue
            r = json.loads(p.stdout)
            seen[" | ".join(f["kind"] + ("" if f.get("consequence_of") is not None else " (root)")
                            + ": " + masked(f["summary"]) for f in r["findings"])] += 1
            for b in broken_rules(r):
                broken[b] += 1
    finally:
        stop(job, d)
        subprocess.run(["rm", "-rf", tmp])
    print(f"== {spec}: {n} analyses, {len(seen)} distinct diagnoses", flush=True)
    for k, c in seen.most_common():
        print(f"  {c:5d}  {k or '(no finding)'}")
    for k, c in broken.items():
        print(f"  BROKEN {c:5d}  {k}")
    return not broken


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    build, seconds = os.path.abspath(sys.argv[1]), float(sys.argv[2])
    lockstep = os.environ.get("LOCKSTEP_BIN") or os.path.join(build, "analyzer", "lockstep")
    emu = os.path.join(build, "tests", "emulator")
    env = dict(os.environ, LD_LIBRARY_PATH=emu + ":" + os.environ.get("LD_LIBRARY_PATH", ""),
               NO_COLOR="1")
    for k in ("LD_PRELOAD", "LOCKSTEP_DIR", "LOCKSTEP_JOB", "RANK", "WORLD_SIZE"):
        env.pop(k, None)
    ok = True
    for spec in sys.argv[3:] or REALJOBS_MODES:
        ok &= hunt(build, lockstep, env, spec, seconds)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
