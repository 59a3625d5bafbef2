#!/usr/bin/env python3
"""test_bounds.py -- the two stall bounds of `lockstep run` with no --stall (docs/live.md, "Two
bounds"): a wait for a rank that makes no progress at all (asleep, on a lock) is a stall after the
short bound; a wait for a rank that works is slow, said on stderr once, and a stall only after the
long bound; a rank that turns from busy to asleep is a stall a short bound after it stopped
working; an interrupt ends a job whose ranks ignore it and says so (tests/live/bounds.c).

Usage: test_bounds.py CASE   (paths from the environment meson sets, see meson.build)
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import emulated, expect, run  # noqa: E402
from test_live import (LAUNCH, LOCKSTEP, SHIM, base_env, expect_job_gone,  # noqa: E402
                       first, stop_launchers)

BOUNDS = os.environ["BOUNDS"]
NP = 4
CULPRIT = NP - 1


def run_bounds(tmp, name, mode, run_args=(), extra_env=None, timeout=240):
    """`lockstep run [run_args] --json FILE -- launch --np 4 -- bounds MODE`; returns (process,
    report dict or None, trace dir)."""
    d = os.path.join(tmp, "traces-" + name)
    js = os.path.join(tmp, name + ".json")
    cmd = [LOCKSTEP, "run", "--dir", d, *run_args, "--json", js, "--", LAUNCH, "--np", str(NP),
           "--", BOUNDS, mode]
    p = subprocess.run(cmd, env=base_env(extra_env), capture_output=True, text=True,
                       timeout=timeout)
    report = json.load(open(js)) if os.path.exists(js) else None
    return p, report, d


def stall_of(p, report, what, bound):
    expect(p.returncode == 3, f"{what}: lockstep run exited {p.returncode}, expected 3\n"
                              f"{p.stderr[-3000:]}")
    expect(report is not None and "stall" in report, f"{what}: no stall in the JSON report")
    stall = report["stall"]
    expect(stall["bound"] == bound, f"{what}: decided by the {stall['bound']} bound, expected "
                                    f"{bound}: {stall}")
    return stall


def expect_missing_culprit(report, what):
    f = first(report, what)
    expect(f["kind"] == "missing_ranks" and f.get("missing") == [CULPRIT],
           f"{what}: first finding {f['kind']} {f.get('missing')}: {f['summary']}")


def case_asleep_default(tmp):
    """No option at all: the culprit sleeps for good in load_batch() while the others wait in
    the all-reduce. The first line says both default bounds; the stall is decided by the short
    one (at most 25 s: the job's rhythm brings it down to 10 s), long before the long one."""
    p, report, d = run_bounds(tmp, "asleep_default", "asleep")
    first_line = p.stderr.splitlines()[0] if p.stderr else ""
    expect("stall after 25 s when the ranks waited for make no progress, 300 s while they work"
           in first_line, f"asleep_default: the first line does not say the bounds: {first_line}")
    stall = stall_of(p, report, "asleep_default", "short")
    expect(10 <= stall["short_s"] <= 25 and stall["long_s"] >= 300,
           f"asleep_default: bounds {stall['short_s']} and {stall['long_s']}")
    expect(stall["no_progress_s"] < stall["long_s"],
           f"asleep_default: stopped after {stall['no_progress_s']} s")
    expect("the short bound (" in p.stderr and "decided: no rank it waits for worked" in p.stderr,
           f"asleep_default: the bound that decided was not said: {p.stderr[-2000:]}")
    expect_missing_culprit(report, "asleep_default")
    expect("not a hang yet" not in p.stderr,
           f"asleep_default: a sleeping rank was called busy: {p.stderr[-2000:]}")
    expect_job_gone(d)


def case_exits_default(tmp):
    """No option: the culprit exits while the others wait in the all-reduce for it. A wait only
    for ranks whose processes ended is held to an eighth of the short bound (3 s): the live
    diagnosis names the exit."""
    p, report, d = run_bounds(tmp, "exits_default", "exits")
    stall = stall_of(p, report, "exits_default", "short")
    expect(stall["short_s"] <= 3.01 and stall["no_progress_s"] < 10,
           f"exits_default: short bound {stall['short_s']}, stopped after "
           f"{stall['no_progress_s']} s")
    f = first(report, "exits_default")
    expect(f["kind"] == "rank_exited", f"exits_default: first finding {f['kind']}: {f['summary']}")
    expect_job_gone(d)


def case_locked(tmp):
    """The culprit blocks for good on a lock it holds (no CPU, no sleep): the short bound."""
    p, report, d = run_bounds(tmp, "locked", "locked",
                              ("--stall-short", "3", "--stall-long", "120"))
    stall = stall_of(p, report, "locked", "short")
    expect(stall["no_progress_s"] < 60, f"locked: stopped after {stall['no_progress_s']} s")
    expect_missing_culprit(report, "locked")
    expect_job_gone(d)


def case_busy(tmp):
    """The culprit computes for 8 s in save_checkpoint() while the others wait: slow, not hung.
    Not stopped (short bound 3 s), and stderr says once what the wait is for; the job ends
    clean."""
    p, report, d = run_bounds(tmp, "busy", "busy", ("--stall-short", "3", "--stall-long", "120"),
                              {"BOUNDS_WORK_MS": "8000"})
    expect(p.returncode == 0, f"busy: lockstep run exited {p.returncode}\n{p.stderr[-3000:]}")
    expect("no progress for" not in p.stderr, f"busy: taken for a stall: {p.stderr[-2000:]}")
    slow = [line for line in p.stderr.splitlines() if "not a hang yet" in line]
    expect(slow, f"busy: nothing said of the slow wait: {p.stderr[-2000:]}")
    expect(f"rank {CULPRIT} (pid" in slow[0] and "of a CPU" in slow[0] and
           "ranks 0-2 wait in" in slow[0],
           f"busy: the slow line does not name the busy rank: {slow[0]}")
    expect(len(slow) <= 3, f"busy: said {len(slow)} times, not once per change: {slow}")
    # where the busy rank is, from its live stack (read from outside: not under qemu-user),
    # named by file and line as a report names a stack
    expect(emulated() or re.search(r"now in .*bounds\.c:\d+ \(save_checkpoint\)", slow[0]),
           f"busy: the slow line does not say where rank {CULPRIT} is (bounds.c:N "
           f"(save_checkpoint)): {slow[0]}")
    expect(report is not None and report["findings"] == [],
           f"busy: findings of a clean run: {report and report['findings']}")


def case_busy_asleep(tmp):
    """The culprit computes for 6 s, then sleeps for good: slow while it computes (said), a
    stall a short bound after it stopped computing, never before."""
    p, report, d = run_bounds(tmp, "busy_asleep", "busy_asleep",
                              ("--stall-short", "3", "--stall-long", "120"),
                              {"BOUNDS_WORK_MS": "6000"})
    stall = stall_of(p, report, "busy_asleep", "short")
    err = p.stderr
    expect("not a hang yet" in err and err.index("not a hang yet") < err.index("no progress for"),
           f"busy_asleep: the slow wait was not said before the stall: {err[-2500:]}")
    # Not stopped while it computed: the part was idle for the work and a short bound.
    expect(stall["no_progress_s"] >= 6.0 + stall["short_s"] - 0.5,
           f"busy_asleep: stopped {stall['no_progress_s']:.1f} s after the others began to wait "
           f"(6 s of work, short bound {stall['short_s']})")
    expect(stall["no_progress_s"] < 60, f"busy_asleep: {stall['no_progress_s']} s")
    expect_missing_culprit(report, "busy_asleep")
    expect_job_gone(d)


def case_busy_forever(tmp):
    """The culprit computes for good: the long bound ends the wait, and says the rank worked."""
    p, report, d = run_bounds(tmp, "busy_forever", "busy_forever",
                              ("--stall-short", "2", "--stall-long", "8"))
    stall = stall_of(p, report, "busy_forever", "long")
    expect(stall["no_progress_s"] >= 8 - 0.2, f"busy_forever: {stall['no_progress_s']} s")
    expect(f"rank {CULPRIT}" in stall["awaited"] and "of a CPU" in stall["awaited"],
           f"busy_forever: what the awaited rank did: {stall['awaited']}")
    expect("the long bound (8 s) decided" in p.stderr,
           f"busy_forever: the bound that decided was not said: {p.stderr[-2000:]}")
    expect_missing_culprit(report, "busy_forever")
    expect_job_gone(d)


def case_interrupt(tmp):
    """SIGINT to run while the ranks (which ignore it) train: the job ends within seconds, run
    exits 130, and the report says the ranks were interrupted, not that they crashed."""
    d = os.path.join(tmp, "traces-interrupt")
    js = os.path.join(tmp, "interrupt.json")
    cmd = [LOCKSTEP, "run", "--dir", d, "--json", js, "--", LAUNCH, "--np", str(NP), "--",
           BOUNDS, "ignore_int"]
    p = subprocess.Popen(cmd, env=base_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    # The interrupt once every rank trains: its trace exists and has moved.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and p.poll() is None:
        names = [n for n in os.listdir(d) if n.endswith(".trace")] if os.path.isdir(d) else []
        if len(names) >= NP and all(os.path.getsize(os.path.join(d, n)) > 0 for n in names):
            break
        time.sleep(0.2)
    time.sleep(1.0)  # a few steps, so that each rank is inside its loop
    if p.poll() is not None:
        out, err = p.communicate()
        expect(False, f"interrupt: run ended before the interrupt: {err[-2000:]}")
    p.send_signal(signal.SIGINT)
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        expect(False, f"interrupt: run still ran 60 s after SIGINT: {err[-2000:]}")
    expect(p.returncode == 130, f"interrupt: run exited {p.returncode}, expected 130\n"
                                f"{err[-2500:]}")
    expect("the job was interrupted (SIGINT) after" in err, f"interrupt: stderr {err[-2000:]}")
    expect("interrupted (SIGINT) after" in out and "SIGINT to rank" in out,
           f"interrupt: the report does not say the job was interrupted: {out[-2500:]}")
    expect("no exit record" not in out and "crashed" not in out,
           f"interrupt: interrupted ranks reported as crashed: {out[-2500:]}")
    expect_job_gone(d)


def case_watch_slow(tmp):
    """`watch --keep --metrics` beside a job whose rank computes for 8 s while the others wait:
    the communicator is slow in the metrics (lockstep_comm_slow 1) and the status file, stderr
    says so once, nothing is reported stalled; afterwards it is 0 again."""
    d = os.path.join(tmp, "traces")
    os.mkdir(d, 0o700)
    prom, status = os.path.join(tmp, "m.prom"), os.path.join(tmp, "status.json")
    err_path = os.path.join(tmp, "watch.err")
    with open(err_path, "w") as err:
        watch = subprocess.Popen([LOCKSTEP, "watch", "--keep", "--stall-short", "2",
                                  "--stall-long", "120", "--metrics", prom, "--status", status, d],
                                 env=base_env(), stdout=subprocess.DEVNULL, stderr=err)
    job = None
    try:
        job = subprocess.Popen([LAUNCH, "--np", str(NP), "--", BOUNDS, "busy"],
                               env=base_env({"LD_PRELOAD": SHIM, "LOCKSTEP_DIR": d,
                                             "BOUNDS_WORK_MS": "8000"}),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
        seen, seen_status = [], False
        deadline = time.monotonic() + 120
        while job.poll() is None and time.monotonic() < deadline:
            try:
                text = open(prom).read()
            except OSError:
                text = ""
            seen += [line for line in text.splitlines()
                     if line.startswith("lockstep_comm_slow{") and line.endswith(" 1")]
            try:
                st = json.load(open(status))
                seen_status |= any(c["slow"] for c in st["communicators"])
            except (OSError, ValueError, KeyError):
                pass  # not written yet, or replaced while read
            time.sleep(0.1)
        expect(job.wait(timeout=60) == 0, f"watch_slow: the job exited {job.returncode}")
        expect(seen, "watch_slow: lockstep_comm_slow was never 1 while rank 3 computed")
        expect(seen_status, "watch_slow: the status file never said a communicator was slow")
        time.sleep(1.0)  # a write after the job moved on
        text = open(prom).read()
        expect(not any(line.startswith("lockstep_comm_slow{") and line.endswith(" 1")
                       for line in text.splitlines()),
               f"watch_slow: still slow after the job went on:\n{text}")
        expect("lockstep_stalls_total" in text and
               not any(line.startswith("lockstep_stalls_total{") and not line.endswith(" 0")
                       for line in text.splitlines()),
               f"watch_slow: a stall was reported:\n{text}")
        err = open(err_path).read()
        expect("not a hang yet" in err and "no progress for" not in err,
               f"watch_slow: watch said:\n{err[-2000:]}")
    finally:
        if job:
            stop_launchers([job])
        watch.send_signal(signal.SIGTERM)
        watch.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(run(globals(), "bounds-"))
