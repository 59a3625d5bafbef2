#!/usr/bin/env python3
"""test_outside.py -- a job stuck with no rank in NCCL is noticed from its ranks' activity
(CPU, I/O, disk waits and timed sleeps, from /proc) and explained from their live stacks as a
stuck_outside_nccl finding; a job whose rank computes or downloads, or whose ranks write a
checkpoint, for longer than --stall with no NCCL call is left alone (tests/live/outside.c,
outside.py).

Usage: test_outside.py CASE   (paths from the environment meson sets, see meson.build)
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import expect, needs, run  # noqa: E402
from test_live import LAUNCH, LOCKSTEP, base_env, expect_job_gone  # noqa: E402

OUTSIDE = os.environ["OUTSIDE"]
PYRANKS = os.environ["PYRANKS_LIB"]
HERE = os.path.dirname(os.path.abspath(__file__))
PY_OUTSIDE = os.path.join(HERE, "outside.py")
STALL = 1.5


def sanitized():
    """True when the programs are built with AddressSanitizer: a thread blocked in a socket read
    is read without stopping it (live_threads.h), and the unwinder cannot get past ASan's
    frame-pointer-less read interceptor, so its stack ends there."""
    r = subprocess.run(["ldd", OUTSIDE], capture_output=True, text=True)
    return "libasan" in r.stdout


def line_of(path, marker):
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if marker in line:
                return n
    raise AssertionError(f"no {marker} marker in {path}")


def run_outside(tmp, name, program, stall=STALL, extra_env=None, timeout=120):
    """`lockstep run` on a job of 4 ranks; returns (process, report dict or None, trace dir,
    seconds from start to the end of run)."""
    d = os.path.join(tmp, "traces-" + name)
    js = os.path.join(tmp, name + ".json")
    env = base_env(dict({"OUTSIDE_SOCK": os.path.join(tmp, name + ".sock"),
                         "OUTSIDE_CKPT": os.path.join(tmp, name + ".ckpt"),
                         "PYRANKS_LIB": PYRANKS, "PYTHONDONTWRITEBYTECODE": "1"},
                        **(extra_env or {})))
    cmd = [LOCKSTEP, "run", "--dir", d, "--stall", str(stall), "--json", js, "--",
           LAUNCH, "--np", "4", "--", *program]
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    took = time.monotonic() - t0
    report = json.load(open(js)) if os.path.exists(js) else None
    return p, report, d, took


def stuck_finding(report, what):
    expect(report is not None, f"{what}: no JSON report")
    fs = [f for f in report["findings"] if f["kind"] == "stuck_outside_nccl"]
    expect(fs, f"{what}: no stuck_outside_nccl finding: "
               f"{[(f['kind'], f['summary']) for f in report['findings']]}")
    return fs[0]


def expect_stalled_outside(p, what):
    expect(p.returncode == 3, f"{what}: lockstep run exited {p.returncode}, expected 3\n"
                              f"{p.stderr[-2000:]}")
    expect("no rank is in NCCL" in p.stderr, f"{what}: the stall was not said to be outside "
                                             f"NCCL: {p.stderr[-1500:]}")


@needs("ptrace")
def case_lock(tmp):
    """Ranks 1-3 wait in a socket barrier, rank 0 on a lock it already holds: stalled outside
    NCCL (exit 3), rank 0 named apart as the odd one, each class with where it waits and what
    it blocks in; the JSON twin; the job is stopped. Seen within --stall + 1 s of the last sign
    of life (plus start-up, measured from the report's own stall figures)."""
    p, report, d, took = run_outside(tmp, "lock", [OUTSIDE, "lock"])
    expect_stalled_outside(p, "lock")
    f = stuck_finding(report, "lock")
    expect(report["findings"][0]["kind"] == "stuck_outside_nccl",
           f"lock: the first finding is {report['findings'][0]['kind']}")
    expect(f["odd"] == [0] and f["waiting"] == [1, 2, 3], f"lock: odd/waiting {f}")
    cls = f["classes"]
    expect(len(cls) == 2 and cls[0]["ranks"] == [0] and cls[1]["ranks"] == [1, 2, 3],
           f"lock: classes {cls}")
    expect("load_shard" in cls[0]["where"] or "prepare_data" in cls[0]["where"],
           f"lock: rank 0's place {cls[0]['where']}")
    expect("lock" in cls[0]["blocked_in"] or "futex" in cls[0]["blocked_in"],
           f"lock: rank 0 blocks in {cls[0]['blocked_in']}")
    expect("barrier_wait" in cls[1]["where"] or sanitized(),
           f"lock: the others' place {cls[1]['where']}")
    expect("socket read" in cls[1]["blocked_in"], f"lock: the others block in "
                                                  f"{cls[1]['blocked_in']}")
    expect(all(c["cpu_share"] < 0.3 for c in cls), f"lock: CPU shares {cls}")
    expect(f["since_s"] is not None and f["since_s"] >= STALL - 0.3, f"lock: since_s {f}")
    expect("[stuck_outside_nccl]" in p.stdout and "rank 0 waits in" in p.stdout,
           f"lock: the text report: {p.stdout[-2000:]}")
    stall = report.get("stall", {})
    expect(stall.get("outside_nccl") is True and stall.get("scope") == "job",
           f"lock: the report's stall {stall}")
    # Seen on time: the stall's own idle time at the report is within --stall + 1 s.
    expect(stall["no_progress_s"] < STALL + 1.0,
           f"lock: reported {stall['no_progress_s']:.2f} s after the last activity "
           f"(--stall {STALL})")
    expect_job_gone(d)
    # The folder afterwards: analyze says the same from the probe kept beside the traces.
    a = subprocess.run([LOCKSTEP, "analyze", "--json", d], capture_output=True, text=True,
                       timeout=60)
    kinds = [x["kind"] for x in json.loads(a.stdout)["findings"]]
    expect("stuck_outside_nccl" in kinds, f"lock: analyze afterwards: {kinds}")
    # CI annotations stand at the lines where the ranks wait.
    src = os.path.dirname(os.path.dirname(HERE))
    g = subprocess.run([LOCKSTEP, "analyze", "--format", "github", d], capture_output=True,
                       text=True, timeout=60, env=dict(os.environ, GITHUB_WORKSPACE=src))
    lock_line = line_of(os.path.join(HERE, "outside.c"), "held already: a lock taken twice")
    expect(f"file=tests/live/outside.c,line={lock_line},title=lockstep stuck_outside_nccl"
           in g.stdout, f"lock: no annotation at the lock (line {lock_line}): {g.stdout}")


def case_compute(tmp):
    """Rank 0 computes for twice --stall while the others wait in the socket barrier: the job
    progresses (rank 0's CPU), nothing is stopped, and it ends well."""
    p, report, d, took = run_outside(tmp, "compute", [OUTSIDE, "compute"],
                                     extra_env={"OUTSIDE_WORK_MS": str(int(STALL * 2500))})
    expect(p.returncode == 0, f"compute: lockstep run exited {p.returncode}\n{p.stderr[-2000:]}")
    expect("no progress" not in p.stderr, f"compute: taken for a stall: {p.stderr[-1500:]}")
    expect(report is not None and report["findings"] == [],
           f"compute: findings {report and report['findings']}")


def case_checkpoint(tmp):
    """Every rank writes a checkpoint for twice --stall (I/O, a little CPU, fsync): the job
    progresses, nothing is stopped."""
    p, report, d, took = run_outside(tmp, "checkpoint", [OUTSIDE, "checkpoint"],
                                     extra_env={"OUTSIDE_WORK_MS": str(int(STALL * 2500))})
    expect(p.returncode == 0,
           f"checkpoint: lockstep run exited {p.returncode}\n{p.stderr[-2000:]}")
    expect("no progress" not in p.stderr, f"checkpoint: taken for a stall: {p.stderr[-1500:]}")
    expect(report is not None and report["findings"] == [],
           f"checkpoint: findings {report and report['findings']}")


def case_download(tmp):
    """Rank 0 downloads a data set slowly (512 KiB/s over a socket, next to no CPU) for twice
    --stall while the others wait in the socket barrier: its I/O is progress, nothing is
    stopped."""
    feed = os.path.join(tmp, "feed.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(feed)
    srv.listen(1)
    seconds = STALL * 2.5

    def serve():
        c, _ = srv.accept()
        end = time.monotonic() + seconds
        block = b"x" * 16384
        while time.monotonic() < end:
            c.sendall(block)
            time.sleep(0.03)
        c.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    p, report, d, took = run_outside(tmp, "download", [OUTSIDE, "download"],
                                     extra_env={"OUTSIDE_FEED": feed})
    t.join(timeout=30)
    expect(p.returncode == 0, f"download: lockstep run exited {p.returncode}\n{p.stderr[-2000:]}")
    expect("no progress" not in p.stderr, f"download: taken for a stall: {p.stderr[-1500:]}")
    expect(took >= seconds, f"download: the job took {took:.1f} s, less than the download")
    expect(report is not None and report["findings"] == [],
           f"download: findings {report and report['findings']}")


@needs("ptrace")
def case_exited(tmp):
    """Rank 2 exits with status 1 instead of joining the socket barrier: rank 0 waits in accept,
    ranks 1 and 3 in their read. The stall outside NCCL follows from rank 2's exit (the root
    cause), and the classes still say where each waits."""
    p, report, d, took = run_outside(tmp, "exited", [OUTSIDE, "exited"])
    expect_stalled_outside(p, "exited")
    first = report["findings"][0]
    expect(first["kind"] == "rank_exited" and first["rank"] == 2,
           f"exited: the root cause is {first['kind']}: {first['summary']}")
    f = stuck_finding(report, "exited")
    expect(f.get("follows_death_of") == 2 and f["consequence_of"] == 0,
           f"exited: the stuck ranks do not follow from rank 2's exit: {f}")
    cls = f["classes"]
    expect([c["ranks"] for c in cls] == [[0], [1, 3]], f"exited: classes {cls}")
    expect("accept" in cls[0]["blocked_in"] and ("barrier_serve" in cls[0]["where"] or sanitized()),
           f"exited: rank 0 {cls[0]}")
    expect_job_gone(d)


@needs("ptrace")
def case_python(tmp):
    """The Python ranks: the classes name the Python lines (the lock taken twice in
    load_shard, the recv of the barrier)."""
    p, report, d, took = run_outside(tmp, "python", [sys.executable, PY_OUTSIDE])
    expect_stalled_outside(p, "python")
    f = stuck_finding(report, "python")
    cls = f["classes"]
    expect(len(cls) == 2 and cls[0]["ranks"] == [0] and cls[1]["ranks"] == [1, 2, 3],
           f"python: classes {cls}")
    lock_at = f"outside.py:{line_of(PY_OUTSIDE, '# @lock')}"
    barrier_at = f"outside.py:{line_of(PY_OUTSIDE, '# @barrier')}"
    expect(lock_at in cls[0]["where"], f"python: rank 0 at {cls[0]['where']}, not {lock_at}")
    expect(barrier_at in cls[1]["where"],
           f"python: ranks 1-3 at {cls[1]['where']}, not {barrier_at}")
    expect(lock_at in f["summary"], f"python: the summary: {f['summary']}")
    expect_job_gone(d)


def case_watch(tmp):
    """watch (a job started elsewhere) notices the same stall outside NCCL and exits 3; with
    --kill the job is stopped."""
    d = os.path.join(tmp, "w")
    os.mkdir(d, 0o700)
    js = os.path.join(tmp, "watch.json")
    env = base_env({"OUTSIDE_SOCK": os.path.join(tmp, "w.sock"), "LD_PRELOAD":
                    os.environ["LOCKSTEP_SHIM"], "LOCKSTEP_DIR": d})
    job = subprocess.Popen([LAUNCH, "--np", "4", "--", OUTSIDE, "lock"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)
    try:
        w = subprocess.run([LOCKSTEP, "watch", "--stall", str(STALL), "--kill", "--json", js, d],
                           env=base_env(), capture_output=True, text=True, timeout=120)
        expect(w.returncode == 3, f"watch exited {w.returncode}\n{w.stderr[-2000:]}")
        expect("no rank is in NCCL" in w.stderr, f"watch: {w.stderr[-1500:]}")
        f = stuck_finding(json.load(open(js)), "watch")
        expect(f["odd"] == [0], f"watch: odd {f['odd']}")
        job.wait(timeout=60)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()


def case_keep(tmp):
    """watch --keep of a job whose rank 0 waits 6 s on a lock while the others wait in the socket
    barrier, then serves on for 3 s: the stall outside NCCL is reported once, its end ("resumed") is
    said when rank 0 comes back, the status file showed it stalled and then not, and watch
    outlives the job."""
    d = os.path.join(tmp, "k")
    os.mkdir(d, 0o700)
    prom = os.path.join(tmp, "m.prom")
    status = os.path.join(tmp, "m.json")
    err_path = os.path.join(tmp, "watch.err")
    env = base_env({"OUTSIDE_SOCK": os.path.join(tmp, "k.sock"), "LD_PRELOAD":
                    os.environ["LOCKSTEP_SHIM"], "LOCKSTEP_DIR": d, "OUTSIDE_WORK_MS": "6000",
                    "OUTSIDE_TAIL_STEPS": "60"})
    with open(err_path, "w") as err, open(os.path.join(tmp, "watch.out"), "w") as out:
        w = subprocess.Popen([LOCKSTEP, "watch", "--keep", "--stall", str(STALL), "--metrics",
                              prom, d], env=base_env(), stdout=out, stderr=err)
    job = subprocess.Popen([LAUNCH, "--np", "4", "--", OUTSIDE, "wedge"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)
    seen = []
    try:
        deadline = time.time() + 120
        while job.poll() is None and time.time() < deadline:
            try:
                jobs = json.load(open(status))["jobs"]
                v = bool(jobs and jobs[0]["stalled"])
                if not seen or seen[-1] != v:
                    seen.append(v)
            except (OSError, ValueError, KeyError, IndexError):
                pass
            time.sleep(0.1)
        expect(job.wait(timeout=30) == 0, f"keep: the job failed: {job.stderr.read()[-1500:]}")
        deadline = time.time() + 30
        while time.time() < deadline and "every traced process has ended" not in open(
                err_path).read():
            time.sleep(0.1)
        err = open(err_path).read()
        expect(w.poll() is None, f"keep: watch exited {w.returncode}: {err[-1500:]}")
        expect(err.count("no rank is in NCCL") == 1, f"keep: stalls said: {err[-2000:]}")
        expect(re.search(r"resumed after [0-9.]+ s", err), f"keep: no resume said: {err[-1500:]}")
        expect(True in seen and seen[-1] is False, f"keep: the status file went {seen}")
        out = open(os.path.join(tmp, "watch.out")).read()
        expect(out.count("[stuck_outside_nccl]") == 1, f"keep: reports: {out[-2000:]}")
        w.send_signal(signal.SIGTERM)
        expect(w.wait(timeout=30) == 0, "keep: watch did not exit 0 on SIGTERM")
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
        if w.poll() is None:
            w.kill()
            w.wait()


if __name__ == "__main__":
    sys.exit(run(globals(), "lockstep-outside-"))
