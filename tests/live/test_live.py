#!/usr/bin/env python3
"""test_live.py -- `lockstep run` and `lockstep watch` on real hanging NCCL programs: the
stall is noticed, diagnosed while the ranks live, the job is stopped, and the exit status
says so. Also jobs that must NOT be taken for stalls, many nodes, and lockstep-gather.

Usage: test_live.py CASE   (paths from the environment meson sets, see meson.build)
"""
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import expect, needs, run  # noqa: E402
from report_ranks import per_rank  # noqa: E402

LOCKSTEP = os.environ["LOCKSTEP_BIN"]
LAUNCH = os.environ["LAUNCH_RANKS"]
EMU_DIR = os.environ["EMULATOR_DIR"]
SCENARIOS = os.environ["SCENARIOS"]
SHIM = os.environ["LOCKSTEP_SHIM"]
GATHER = os.environ["GATHER_SCRIPT"]


def base_env(extra=None):
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = EMU_DIR + ":" + env.get("LD_LIBRARY_PATH", "")
    env.pop("LD_PRELOAD", None)
    env.pop("LOCKSTEP_DIR", None)
    env.update(extra or {})
    return env


def tagged_env(tmp, tag, extra=None):
    """The environment of a job on the emulator whose segments are named by `tag`
    (LOCKSTEP_EMU_TAG), with none of the shim's or launcher's settings of the caller."""
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = EMU_DIR + ":" + env.get("LD_LIBRARY_PATH", "")
    for k in ("LD_PRELOAD", "LOCKSTEP_DIR", "LOCKSTEP_RING", "RANK", "WORLD_SIZE", "LOCAL_RANK",
              "LOCAL_WORLD_SIZE", "SLURM_CONF"):
        env.pop(k, None)
    env["LOCKSTEP_TEST_IDFILE"] = os.path.join(tmp, "id")
    env["LOCKSTEP_EMU_TAG"] = tag
    env.update(extra or {})
    return env


def remove_tagged_segments(tag):
    """Removes the emulator's segments of jobs run with tagged_env(tag)."""
    for f in os.listdir("/dev/shm"):
        if f.startswith("lsemu-%s-" % tag):
            try:
                os.unlink(os.path.join("/dev/shm", f))
            except OSError:
                pass


def lockstep_run(tmp, mode, np=4, stall=2, extra_env=None, launcher_args=(), run_args=()):
    """Runs `lockstep run` on a scenario; returns (process, report dict or None, trace dir)."""
    d = os.path.join(tmp, "traces-" + mode)
    js = os.path.join(tmp, mode + ".json")
    cmd = [LOCKSTEP, "run", "--dir", d, "--stall", str(stall), "--json", js, *run_args, "--",
           LAUNCH, "--np", str(np), *launcher_args, "--", SCENARIOS, mode]
    p = subprocess.run(cmd, env=base_env(extra_env), capture_output=True, text=True, timeout=120)
    report = json.load(open(js)) if os.path.exists(js) else None
    return p, report, d


def trace_pids(d):
    """Pids recorded in the trace headers of a folder (offset 120, little-endian int32)."""
    pids = []
    for name in os.listdir(d):
        if name.endswith(".trace"):
            with open(os.path.join(d, name), "rb") as f:
                pids.append(int.from_bytes(f.read(124)[120:124], "little"))
    return pids


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):  # gone while being read
        return False


def expect_job_gone(d):
    pids = trace_pids(d)
    expect(pids, "no traces were written")
    deadline = time.time() + 5
    while time.time() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    left = [p for p in pids if alive(p)]
    expect(not left, f"processes of the job still alive after the run: {left}")


def stop_launchers(jobs):
    """Ends launchers (started in sessions of their own) that still run: SIGTERM, which
    launch-ranks passes to its ranks, then SIGKILL to the session of one that does not end."""
    for job in jobs:
        if job.poll() is None:
            job.send_signal(signal.SIGTERM)
    for job in jobs:
        try:
            job.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()


def first(report, label=""):
    expect(report is not None, f"{label}: no JSON report written")
    expect(report["findings"], f"{label}: no findings; ranks: " +
           "; ".join(f"{r['rank']} {r['state']} {r.get('waiting_on', '')} "
                     f"{(r.get('current') or r.get('last_call') or {}).get('op')}"
                     for r in (per_rank(report) if report.get("ranks") else [])))
    return report["findings"][0]


# Each hang scenario and the first finding `lockstep run` must report while the ranks live.
HANGS = {
    "prepare_data": ("missing_ranks", 4),
    "uneven_shards": ("op_mismatch", 4),
    "code_path": ("op_mismatch", 4),
    "shape_mismatch": ("count_mismatch", 4),
    "root_mismatch_split": ("root_mismatch", 4),
    "unmatched_send": ("p2p_unmatched", 2),
    "sendrecv_deadlock": ("deadlock_cycle", 2),
    "cross_comm_deadlock": ("missing_ranks", 4),  # rank 3 alone out of order: not a deadlock
    "segfault": ("rank_crashed", 4),
    "early_exit": ("rank_exited", 4),
}


# The stall threshold of the hang cases: the ranks reach their hang within milliseconds.
HANG_STALL = 1
# The threshold of the runs that must not stall: pauses and slow steps outlast it, and ranks that
# wake late from a pause on a loaded 2-core machine must not (at 0.5 s a slow step was taken for
# a stall; at 1 s a rank that overslept a pause by 2 s in CI was a real straggler).
PAUSE_STALL = 2.5


def run_hang(tmp, mode):
    kind, np = HANGS[mode]
    p, report, d = lockstep_run(tmp, mode, np=np, stall=HANG_STALL)
    expect(p.returncode == 3, f"{mode}: lockstep run exited {p.returncode}, expected 3\n{p.stderr}")
    f = first(report)
    expect(f["kind"] == kind, f"{mode}: first finding {f['kind']}, expected {kind}")
    expect(f"[{kind}]" in p.stdout, f"{mode}: the text report was not printed")
    expect("no progress for" in p.stderr, f"{mode}: the stall was not announced")
    expect_job_gone(d)
    return p, report


def case_hangs(tmp):
    for mode in HANGS:
        if mode != "prepare_data":
            run_hang(tmp, mode)


def case_hangs_async(tmp):
    """The same hangs with the emulator behaving like a GPU: calls return at once, ranks wait
    in the stream synchronize, and the stall is noticed from GPU completion."""
    async_env = {"LOCKSTEP_EMU_ASYNC": "1", "SCENARIO_DELAY_MS": "60000"}
    for mode in ("prepare_data", "uneven_shards", "unmatched_send", "sendrecv_deadlock"):
        kind, np = HANGS[mode]
        p, report, d = lockstep_run(tmp, mode, np=np, stall=HANG_STALL, extra_env=async_env)
        expect(p.returncode == 3, f"{mode} (async): exit {p.returncode}\n{p.stderr}")
        got = first(report, f"{mode} (async)")["kind"]
        expect(got == kind, f"{mode} (async): first finding {got}, expected {kind}")
        expect("not yet completed" in p.stderr or "inside an NCCL call" in p.stderr,
               f"{mode} (async): stall reason {p.stderr}")
        expect_job_gone(d)
    # A collective every rank issued and no GPU finishes (a dead link).
    p, report, d = lockstep_run(tmp, "clean", stall=HANG_STALL,
                                extra_env=dict(async_env, LOCKSTEP_EMU_HANG_COLL="4"))
    expect(p.returncode == 3, f"dead link: exit {p.returncode}\n{p.stderr}")
    f = first(report, "dead link")
    expect(f["kind"] == "stuck_in_flight" and f["seq"] == 4 and f["ranks"] == [0, 1, 2, 3],
           f"dead link: {f}")
    expect("not yet completed" in p.stderr, f"dead link: stall reason {p.stderr}")
    # No GPU is behind the others: the finding names no rank apart, every rank is in a class.
    expect(f["lagging"] == [] and report["rank_detail"] == [],
           f"dead link: lagging {f['lagging']}, ranks named {report['rank_detail']}")
    expect_job_gone(d)
    # A collective stuck behind a long "kernel" queued on one rank's stream, right after a burst
    # of collectives: the stuck one is the last call, not the burst before it (the shim covers
    # earlier work with an event of its own before a call that comes after a gap).
    p, report, d = lockstep_run(tmp, "stream_blocked", stall=HANG_STALL, extra_env=async_env)
    expect(p.returncode == 3, f"stream_blocked: exit {p.returncode}\n{p.stderr}")
    f = first(report, "stream_blocked")
    expect(f["kind"] == "stuck_in_flight" and f["seq"] == 5 and f["ranks"] == [0, 1, 2, 3],
           f"stream_blocked: {f['kind']} #{f.get('seq')}: {f['summary']}")
    expect(f.get("lagging") in ([], [3]), f"stream_blocked: lagging {f.get('lagging')}")
    expect([x["rank"] for x in report["rank_detail"]] == f.get("lagging"),
           f"stream_blocked: ranks named {[x['rank'] for x in report['rank_detail']]}, "
           f"lagging {f.get('lagging')}")
    expect("rank 3's GPU never started #5" in p.stdout,
           f"stream_blocked: the victim's GPU evidence is missing:\n{p.stdout}")
    expect_job_gone(d)
    # Long pauses between steps in async mode: not a stall. The pause is longer than the stall
    # threshold, and the threshold longer than a rank can oversleep the pause on a loaded CI
    # machine (at 1 s, one rank woke 2 s after the others there: a real straggler for 1 s).
    p, report, d = lockstep_run(tmp, "pauses", stall=PAUSE_STALL,
                                extra_env={"LOCKSTEP_EMU_ASYNC": "1",
                                           "SCENARIO_DELAY_MS": str(int(PAUSE_STALL * 1500)),
                                           "SCENARIO_STEPS": "2"})
    expect(p.returncode == 0 and report["findings"] == [],
           f"pauses (async): exit {p.returncode}, {p.stderr}")
    # Bursts on the legacy stream, each synchronized, then a pause outside NCCL: the shim's
    # heartbeat covers a burst's tail with an event of its own, from a thread that has no CUDA
    # context (the stream's context made current first): all done, not a stall. On a GPU the
    # heartbeat could not, so a job waiting in a Gloo barrier was stopped with "no problems".
    p, report, d = lockstep_run(tmp, "burst_pauses", np=2, stall=PAUSE_STALL,
                                extra_env={"LOCKSTEP_EMU_ASYNC": "1",
                                           "SCENARIO_DELAY_MS": str(int(PAUSE_STALL * 1500)),
                                           "SCENARIO_STEPS": "2"})
    expect(p.returncode == 0 and report["findings"] == [],
           f"burst_pauses (async): exit {p.returncode}, {p.stderr}")


@needs("ptrace")
def case_prepare_data(tmp):
    """The busy rank is named as alive and not in NCCL, with where it is right now."""
    p, report = run_hang(tmp, "prepare_data")
    f = first(report)
    expect(f["missing"] == [3] and f["waiting"] == [0, 1, 2], f"missing/waiting {f}")
    r3 = [r for r in per_rank(report) if r["rank"] == 3][0]
    live = r3.get("live")
    expect(live is not None, "no live facts for the missing rank")
    expect(live["activity"] == "busy", f"rank 3 should be busy, is {live['activity']}")
    expect(any("prepare_data" in fr for fr in live["stack"]), f"live stack {live['stack']}")
    expect("not in NCCL" in f["summary"] and "prepare_data" in f["summary"],
           f"summary does not say where the missing rank is: {f['summary']}")


def case_no_false_stall(tmp):
    """Long pauses with nothing outstanding, and slow steps that keep finishing: not stalls.
    The pauses last 2.5 times the stall threshold, the steps 1.5 times (the last rank an eighth
    longer than the others: they wait in NCCL for 0.19 thresholds)."""
    stall = PAUSE_STALL
    for mode, delay in (("pauses", 2.5 * stall), ("slow_steps", 1.5 * stall)):
        p, report, d = lockstep_run(tmp, mode, np=4, stall=stall,
                                    extra_env={"SCENARIO_DELAY_MS": str(int(delay * 1000)),
                                               "SCENARIO_STEPS": "2"})
        expect(p.returncode == 0, f"{mode}: lockstep run exited {p.returncode}\n{p.stderr}")
        expect("no progress" not in p.stderr, f"{mode}: taken for a stall: {p.stderr}")
        expect(report is not None and report["findings"] == [],
               f"{mode}: a clean run should report no findings")


def case_crash_status(tmp):
    """A rank crashes and the launcher stops the job: run exits with the job's status and
    reports the crash."""
    p, report, d = lockstep_run(tmp, "segfault", stall=30, launcher_args=("--fail-fast",))
    expect(p.returncode == 128 + 11, f"exit {p.returncode}, expected 139 (the job's own)")
    f = first(report)
    expect(f["kind"] == "rank_crashed" and f["signal"] == 11 and f["rank"] == 3, f"{f}")
    expect("post-mortem" in p.stderr and "[rank_crashed]" in p.stdout, "post-mortem printed")


def case_github(tmp):
    """--format github points CI at the divergent source lines, relative to the repository."""
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    p, report, d = lockstep_run(tmp, "code_path", run_args=("--format", "github"),
                                extra_env={"GITHUB_WORKSPACE": src})
    expect(p.returncode == 3, f"exit {p.returncode}")
    lines = [l for l in p.stdout.splitlines() if l.startswith("::error ")]
    expect(any("file=tests/scenarios/scenarios.c,line=" in l for l in lines),
           f"no annotation at the scenario's source: {lines}")
    expect(len(lines) >= 2, "one annotation per class of the mismatch")


def case_watch(tmp):
    """watch, on a job started elsewhere with LD_PRELOAD set by hand; --kill stops it."""
    d = os.path.join(tmp, "w")
    os.mkdir(d, 0o700)
    env = base_env({"LD_PRELOAD": SHIM, "LOCKSTEP_DIR": d})
    job = subprocess.Popen([LAUNCH, "--np", "4", "--", SCENARIOS, "uneven_shards"], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    try:
        js = os.path.join(tmp, "w.json")
        p = subprocess.run([LOCKSTEP, "watch", "--stall", "2", "--json", js, "--kill", d],
                           env=base_env(), capture_output=True, text=True, timeout=60)
        expect(p.returncode == 3, f"watch exited {p.returncode}\n{p.stderr}")
        expect(first(json.load(open(js)))["kind"] == "op_mismatch", "watch's finding")
        expect_job_gone(d)
    finally:
        stop_launchers([job])  # a failed case


def case_watch_clean(tmp):
    """watch on a job that ends cleanly: post-mortem, exit 0."""
    d = os.path.join(tmp, "w")
    os.mkdir(d, 0o700)
    env = base_env({"LD_PRELOAD": SHIM, "LOCKSTEP_DIR": d})
    job = subprocess.Popen([LAUNCH, "--np", "2", "--", SCENARIOS, "clean"], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    p = subprocess.run([LOCKSTEP, "watch", "--stall", "5", d], env=base_env(),
                       capture_output=True, text=True, timeout=60)
    job.wait()
    expect(p.returncode == 0, f"watch exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    expect("ended" in p.stderr, "watch should say the job ended")


def case_two_nodes(tmp):
    """Two simulated nodes, each with its own `lockstep run` and trace folder, one gather
    folder: the runner of rank 0 diagnoses the whole job."""
    gather = os.path.join(tmp, "gather")
    idfile = os.path.join(tmp, "id")
    procs = []
    for node in range(2):
        d = os.path.join(tmp, f"node{node}")
        js = os.path.join(tmp, f"node{node}.json")
        cmd = [LOCKSTEP, "run", "--dir", d, "--stall", "2", "--json", js, "--ranks", "all",
               "--", LAUNCH, "--np", "2", "--rank-offset", str(2 * node), "--world-size", "4",
               "--idfile", idfile, "--", SCENARIOS, "uneven_shards"]
        env = base_env({"LOCKSTEP_GATHER_DIR": gather, "LOCKSTEP_GATHER_WAIT": "10"})
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=90) for p in procs]
    for i, p in enumerate(procs):
        expect(p.returncode == 3, f"node {i}: exit {p.returncode}\n{outs[i][1]}")
    expect(os.path.exists(os.path.join(tmp, "node0.json")), "rank 0's runner wrote the report")
    report = json.load(open(os.path.join(tmp, "node0.json")))
    expect(sorted(r["rank"] for r in per_rank(report)) == [0, 1, 2, 3],
           f"the report covers ranks {[r['rank'] for r in per_rank(report)]}")
    f = first(report)
    expect(f["kind"] == "op_mismatch" and sorted(f["ranks"]) == [0, 1, 2, 3], f"{f}")
    # Each node gave its node summary, not its traces: rank 0's runner read the ranks there.
    expect(all(".summary/" in r["trace"] for r in per_rank(report)),
           f"ranks not read from node summaries: {[r['trace'] for r in per_rank(report)]}")
    expect("[op_mismatch]" in outs[0][0], "rank 0's runner printed the diagnosis")
    expect("rank 0 diagnoses" in outs[1][1], "the other runner defers to rank 0's")


def case_gather_script(tmp):
    """lockstep-gather over 'ssh' (a stand-in that runs the command here) puts each host's
    traces in DEST/<host>, and analyze reads them all."""
    p, report, d = lockstep_run(tmp, "uneven_shards")
    fake_ssh = os.path.join(tmp, "fake-ssh")
    with open(fake_ssh, "w") as f:
        f.write('#!/bin/sh\nshift\nexec "$@"\n')
    os.chmod(fake_ssh, 0o755)
    dest = os.path.join(tmp, "gathered")
    g = subprocess.run([GATHER, "--src", d, "--hosts", "nodeA,nodeB", dest],
                       env=base_env({"LOCKSTEP_GATHER_SSH": fake_ssh}), capture_output=True,
                       text=True, timeout=60)
    expect(g.returncode == 0, f"lockstep-gather failed: {g.stderr}")
    for h in ("nodeA", "nodeB"):
        n = len([x for x in os.listdir(os.path.join(dest, h)) if x.endswith(".trace")])
        expect(n == 4, f"{h}: {n} traces gathered")
    bad = subprocess.run([GATHER, "--src", d, "--hosts", "a;rm -rf /", dest],
                         env=base_env({"LOCKSTEP_GATHER_SSH": fake_ssh}), capture_output=True,
                         text=True, timeout=60)
    expect(bad.returncode == 2 and "refusing host name" in bad.stderr, "bad host names refused")
    a = subprocess.run([LOCKSTEP, "analyze", "--json", os.path.join(dest, "nodeA")],
                       capture_output=True, text=True, timeout=60)
    expect(a.returncode == 1 and json.loads(a.stdout)["findings"][0]["kind"] == "op_mismatch",
           "analyze on the gathered traces")


if __name__ == "__main__":
    sys.exit(run(globals(), "lockstep-live-"))
