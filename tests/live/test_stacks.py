#!/usr/bin/env python3
"""test_stacks.py -- live stacks must not change the job they look at.

Ranks wait outside NCCL in the ways programs wait (sleep, nanosleep, poll, select, epoll_wait,
pthread_cond_timedwait, read on a pipe, a main thread joining a data-loader thread in read,
Python's time.sleep: tests/live/sleepers.c and sleepers.py). Their stacks are read again and
again from outside (`lockstep stacks`: ptrace for microseconds, or not stopping them at all)
while they wait; every wait keeps its full length (measured by the rank itself) and ends
normally, and the stacks name where each rank waits. Under `lockstep run` the diagnosis names
the place, the thread doing the work when it is not the main thread, and says so when ptrace
is refused.

Usage: test_stacks.py CASE   (paths from the environment meson sets, see meson.build)
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import Skip, expect, needs, run  # noqa: E402
from report_ranks import per_rank  # noqa: E402
from test_live import LAUNCH, LOCKSTEP, SHIM, base_env  # noqa: E402

SLEEPERS = os.environ["SLEEPERS"]
PYRANKS = os.environ["PYRANKS_LIB"]
HERE = os.path.dirname(os.path.abspath(__file__))
PY_SLEEPER = os.path.join(HERE, "sleepers.py")

# The C ways to wait and the function each waits in.
C_WAITS = {"sleep": "wait_in_sleep", "nanosleep": "wait_in_nanosleep", "poll": "wait_in_poll",
           "select": "wait_in_select", "epoll": "wait_in_epoll", "cond": "wait_in_cond",
           "read": "wait_in_read", "join": "wait_in_read"}


def sleep_line():
    with open(PY_SLEEPER) as f:
        for n, line in enumerate(f, 1):
            if "# @sleep" in line:
                return n
    raise AssertionError("no @sleep marker in sleepers.py")


def job_env(extra=None):
    """test_live's environment for a job, with the Python rank's library and no opt-in
    in-process sampler inherited from the caller."""
    env = base_env(dict({"PYRANKS_LIB": PYRANKS, "PYTHONDONTWRITEBYTECODE": "1",
                         "NO_COLOR": "1"}, **(extra or {})))
    if "LOCKSTEP_STACK_SIGNAL" not in (extra or {}):
        env.pop("LOCKSTEP_STACK_SIGNAL", None)
    return env


def program(how):
    if how == "python":
        return [sys.executable, PY_SLEEPER]
    if how == "python_thread":
        return [sys.executable, PY_SLEEPER, "thread"]
    return [SLEEPERS, how]


def expected_place(how):
    if how.startswith("python"):
        return f"sleepers.py:{sleep_line()} (wait_for_download)"
    return f"({C_WAITS[how]})"


def stacks(dirs):
    r = subprocess.run([LOCKSTEP, "stacks", "--json", *dirs], env=job_env(),
                       capture_output=True, text=True, timeout=60)
    expect(r.returncode == 0, f"lockstep stacks exited {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)["ranks"]


def work_where(rank):
    for t in rank["threads"]:
        if t["doing_the_work"]:
            return t, (t["python"] or t["where"] or "")
    return None, ""


@needs("ptrace")
def case_untouched(tmp):
    """Every way to wait, at once, each job of 2 ranks; stacks read over and over while they
    wait. Each wait keeps its length and ends normally; the stacks name where it waits (for
    python_thread: in a Python thread that never called NCCL, found through the interpreter's
    thread list)."""
    wait_ms = 8000
    hows = list(C_WAITS) + ["python", "python_thread"]
    jobs = {}
    for how in hows:
        d = os.path.join(tmp, how)
        os.makedirs(d)
        env = job_env({"LD_PRELOAD": SHIM, "LOCKSTEP_DIR": d, "SLEEPER_MS": str(wait_ms)})
        p = subprocess.Popen([LAUNCH, "--np", "2", "--", *program(how)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        jobs[how] = (p, d)
    seen = {how: 0 for how in hows}
    held = []
    rounds = 0
    t0 = time.time()
    try:
        # Every rank has its trace before the first read (a slow start-up under a sanitizer).
        while time.time() - t0 < 20 and not all(
                len([f for f in os.listdir(d) if f.endswith(".trace")]) == 2
                for _, d in jobs.values()):
            time.sleep(0.05)
        # The last read ends well before any rank can exit: a sanitizer's leak check at exit
        # suspends every thread with ptrace, which fails on a thread held by a read right then
        # (a read under a sanitizer takes up to 1.5 s here).
        while time.time() - t0 < wait_ms / 1000.0 - 2.5:
            ranks = stacks([d for _, d in jobs.values()])
            rounds += 1
            for r in ranks:
                held += [x["held_us"] for x in r["threads"] if x["read"] == "held"]
                how = os.path.basename(os.path.dirname(r["trace"]))
                t, where = work_where(r)
                if how in seen and r["rank"] == 1 and t and expected_place(how) in where:
                    seen[how] += 1
        outs = {}
        for how, (p, d) in jobs.items():
            out, err = p.communicate(timeout=60)
            outs[how] = (p.returncode, err)
    finally:
        for p, _ in jobs.values():
            if p.poll() is None:
                p.kill()
    for how in hows:
        rc, err = outs[how]
        expect(rc == 0, f"{how}: the job exited {rc}: {err[-1500:]}")
        m = re.search(rf"slept {how} ([0-9.]+) (\S+)", err)
        expect(m, f"{how}: the sleeper did not report: {err[-1500:]}")
        took, result = float(m.group(1)), m.group(2)
        expect(result == "ok", f"{how}: the wait ended with {result} (a stack read interrupted it)")
        expect(took >= wait_ms / 1000.0 - 0.005,
               f"{how}: the wait lasted {took:.3f} s of {wait_ms / 1000:.3f} s: cut short")
        expect(took < wait_ms / 1000.0 + 2.0, f"{how}: the wait lasted {took:.3f} s")
        expect(seen[how] >= 2, f"{how}: {seen[how]} of {rounds} reads named "
                               f"{expected_place(how)}")
    held.sort()
    expect(held, "no thread was held for a read")
    print(f"{rounds} reads of {len(hows)} jobs; every wait kept its length; threads held "
          f"median {held[len(held) // 2]:.0f} us, max {held[-1]:.0f} us over {len(held)} reads")


@needs("ptrace")
def case_poller(tmp):
    """A rank that polls (6 ms of CPU, 14 ms asleep, over and over) waits; it does not run. Read
    20 times, the stacks find its thread asleep in nanosleep, at wait_in_poller, on every read
    but one at most: a thread caught running is looked at again until it blocks (was: read once,
    a third of the reads said "running", and a stuck-outside finding told the poller apart from
    the others as running code)."""
    d = os.path.join(tmp, "poller")
    os.makedirs(d)
    env = job_env({"LD_PRELOAD": SHIM, "LOCKSTEP_DIR": d, "SLEEPER_MS": "600000"})
    p = subprocess.Popen([LAUNCH, "--np", "2", "--", *program("poller")], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reads, asleep, seen = 0, 0, []
    try:
        deadline = time.time() + 60
        while time.time() < deadline:  # the poller polls (its first AllReduce is behind it)
            if len([f for f in os.listdir(d) if f.endswith(".trace")]) < 2:
                time.sleep(0.05)
                continue
            r = [x for x in stacks([d]) if x["rank"] == 1]
            t, where = work_where(r[0]) if r else (None, "")
            if "wait_in_poller" in where:
                break
            time.sleep(0.1)
        expect(time.time() < deadline, "rank 1 never reached wait_in_poller")
        for _ in range(20):
            r = [x for x in stacks([d]) if x["rank"] == 1]
            t, where = work_where(r[0]) if r else (None, "")
            reads += 1
            got = (t or {}).get("state"), (t or {}).get("syscall"), where
            seen.append(got)
            asleep += got[0] == "S" and (got[1] or "").endswith("nanosleep") and \
                "wait_in_poller" in where
    finally:  # the launcher forwards the stop to its ranks (each in a group of its own)
        p.send_signal(signal.SIGTERM)
        try:
            p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            raise
    expect(asleep >= reads - 1,
           f"{asleep} of {reads} reads found the poller asleep in nanosleep: "
           f"{[g for g in seen if g[0] != 'S' or 'nanosleep' not in (g[1] or '')][:4]}")
    print(f"{asleep} of {reads} reads found the poller asleep in nanosleep at wait_in_poller")


def lockstep_run(tmp, how, np=3, extra=None, wrap=()):
    d = os.path.join(tmp, "run-" + how)
    js = os.path.join(tmp, how + ".json")
    env = job_env(dict({"SLEEPER_MS": "60000"}, **(extra or {})))
    cmd = [*wrap, LOCKSTEP, "run", "--dir", d, "--stall", "1", "--json", js, "--",
           LAUNCH, "--np", str(np), "--", *program(how)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    report = json.load(open(js)) if os.path.exists(js) else None
    expect(p.returncode == 3, f"{how}: lockstep run exited {p.returncode}\n{p.stderr[-2000:]}")
    expect(report and report["findings"], f"{how}: no findings\n{p.stdout}")
    return p, report


@needs("ptrace")
def case_diagnosis(tmp):
    """The diagnosis of a hang whose late rank waits outside NCCL names where it waits: a
    thread blocked in epoll_wait (read without stopping it), the data-loader thread a main
    thread joins, a Python time.sleep."""
    for how in ("epoll", "join", "python"):
        p, report = lockstep_run(tmp, how)
        f = report["findings"][0]
        expect(f["kind"] == "missing_ranks", f"{how}: first finding {f['kind']}")
        expect(expected_place(how) in f["summary"],
               f"{how}: the summary does not say where rank 2 waits ({expected_place(how)}):\n"
               f"{f['summary']}")
        rank2 = [r for r in per_rank(report) if r["rank"] == 2][0]
        live = rank2.get("live") or {}
        expect(live.get("stacks") == "ptrace", f"{how}: stacks read as {live.get('stacks')}")
        work = [t for t in live.get("threads", []) if t["doing_the_work"]]
        expect(len(work) == 1, f"{how}: {len(work)} threads doing the work: {live}")
        if how == "join":
            expect(work[0]["name"] == "loader",
                   f"join: the work thread is {work[0]['name']}, not the loader")
            expect('in thread "loader"' in f["summary"] and
                   re.search(r"while the main thread waits in (pthread_join|futex) at "
                             r"sleepers\.c:\d+ \(wait_in_join\)", f["summary"]),
                   f"join: the summary does not name the loader thread and the join:\n"
                   f"{f['summary']}")
        if how == "epoll":
            expect(work[0]["read"] == "not_stopped" and work[0]["syscall"] == "epoll_wait",
                   f"epoll: the waiting thread was read as {work[0]['read']} in "
                   f"{work[0]['syscall']}")
        expect(expected_place(how) in p.stdout, f"{how}: the text report misses the place")


def case_refused(tmp):
    """Where ptrace is refused (here: ranks that made themselves non-dumpable, and a lockstep
    without CAP_SYS_PTRACE), the report says so once and the diagnosis goes on."""
    setpriv = shutil.which("setpriv")
    if not setpriv:
        raise Skip("setpriv (util-linux) not installed")
    if os.geteuid() == 0:
        wrap = (setpriv, "--bounding-set", "-sys_ptrace", "--inh-caps", "-sys_ptrace")
    else:
        wrap = ()  # an unprivileged user has no CAP_SYS_PTRACE anyway
    p, report = lockstep_run(tmp, "epoll", extra={"SLEEPER_NODUMP": "1"}, wrap=wrap)
    f = report["findings"][0]
    expect(f["kind"] == "missing_ranks", f"refused: first finding {f['kind']}")
    rank2 = [r for r in per_rank(report) if r["rank"] == 2][0]
    stacks_how = (rank2.get("live") or {}).get("stacks") or ""
    expect(stacks_how.startswith("refused: ptrace refused"),
           f"refused: stacks say {stacks_how!r}")
    # Without --signal-stacks the shim installs no signal handler in the ranks.
    d = os.path.join(tmp, "run-epoll")
    for name in os.listdir(d):
        if name.endswith(".trace"):
            with open(os.path.join(d, name), "rb") as fh:
                sig = int.from_bytes(fh.read(1204)[1200:1204], "little")
            expect(sig == 0, f"refused: {name} has a live-stack signal handler ({sig})")
    lines = [ln for ln in p.stdout.splitlines() if "no live stacks for" in ln]
    expect(len(lines) == 1 and "3 ranks" in lines[0] and "CAP_SYS_PTRACE" in lines[0],
           f"refused: the text report should say it once for the 3 ranks: {lines}\n{p.stdout}")



def case_signal_stacks(tmp):
    """--signal-stacks: where ptrace is refused, the shim's in-process sampler answers (an
    opt-in: lockstep run sets LOCKSTEP_STACK_SIGNAL for the job; without it the shim installs
    no handler). A rank in pthread_cond_timedwait (which its signal does not cut short) is
    found where it waits."""
    setpriv = shutil.which("setpriv")
    if not setpriv:
        raise Skip("setpriv (util-linux) not installed")
    wrap = (setpriv, "--bounding-set", "-sys_ptrace", "--inh-caps", "-sys_ptrace") \
        if os.geteuid() == 0 else ()
    d = os.path.join(tmp, "run-cond")
    js = os.path.join(tmp, "cond.json")
    env = job_env({"SLEEPER_MS": "60000", "SLEEPER_NODUMP": "1"})
    p = subprocess.run([*wrap, LOCKSTEP, "run", "--signal-stacks", "--dir", d, "--stall", "1",
                        "--json", js, "--", LAUNCH, "--np", "3", "--", SLEEPERS, "cond"],
                       env=env, capture_output=True, text=True, timeout=120)
    expect(p.returncode == 3, f"signal: lockstep run exited {p.returncode}\n{p.stderr[-2000:]}")
    report = json.load(open(js))
    f = report["findings"][0]
    rank2 = [r for r in per_rank(report) if r["rank"] == 2][0]
    live = rank2.get("live") or {}
    expect(live.get("stacks") == "signal", f"signal: stacks read as {live.get('stacks')!r}")
    expect(f["kind"] == "missing_ranks" and "(wait_in_cond)" in f["summary"],
           f"signal: the summary does not name wait_in_cond:\n{f['summary']}")


if __name__ == "__main__":
    sys.exit(run(globals(), "lockstep-stacks-"))
