#!/usr/bin/env python3
"""test_partial.py -- a part of a job hangs while the rest trains on: `lockstep run` and
`lockstep watch` notice it within the stall time, say which communicator (or job) stalled while
what else progressed, and diagnose the stalled part only. A healthy job whose communicators
progress at very different rates is never called stalled.

Usage: test_partial.py CASE   (paths from the environment meson sets, see meson.build)
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import expect, run  # noqa: E402
from test_live import (LAUNCH, LOCKSTEP, SHIM, base_env, expect_job_gone,  # noqa: E402
                       stop_launchers)

PARTIAL = os.environ["PARTIAL"]

# The bound on every case: a stall of 2 s is seen in seconds; the launcher's own timeout ends a
# job nobody stopped (today's global progress never calls a partial hang a stall) well before.
LAUNCHER_TIMEOUT = "40"
CASE_TIMEOUT = 90


def lockstep_run(tmp, mode, extra_env=None, stall=2, np=8):
    """`lockstep run --stall 2` of `partial MODE` on np ranks; returns (process, JSON report)."""
    d = os.path.join(tmp, "traces-" + mode)
    js = os.path.join(tmp, mode + ".json")
    cmd = [LOCKSTEP, "run", "--dir", d, "--stall", str(stall), "--json", js, "--", LAUNCH,
           "--np", str(np), "--timeout", LAUNCHER_TIMEOUT, "--", PARTIAL, mode]
    p = subprocess.run(cmd, env=base_env(extra_env), capture_output=True, text=True,
                       timeout=CASE_TIMEOUT)
    report = json.load(open(js)) if os.path.exists(js) else None
    expect_job_gone(d)
    return p, report


def expect_stalled(p, report, label):
    expect(p.returncode == 3, f"{label}: lockstep run exited {p.returncode}, expected 3\n"
           f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    expect(report is not None and report.get("stall"), f"{label}: no stall in the JSON report")
    expect(report["findings"], f"{label}: no findings")
    return report["stall"], report["findings"]


def expect_only_about(findings, ranks, label):
    """No finding names a rank outside `ranks`: nothing about the part that trained on."""
    for f in findings:
        other = set(f["ranks"]) - set(ranks)
        expect(not other, f"{label}: a finding about ranks {sorted(other)} that progressed: "
               f"[{f['kind']}] {f['summary']}")


# The emulator behaving like a GPU: calls return at once, ranks wait in their stream.
GPU_LIKE = {"LOCKSTEP_EMU_ASYNC": "1"}


def replicas(tmp, gpu):
    """Two data-parallel replicas of 4 ranks (ncclCommSplit by rank / 4); rank 5 stops calling
    while replica 0 trains on (its last rank late at every step: the snapshot catches ranks 0-2
    inside an AllReduce that rank 3 has not reached)."""
    p, report = lockstep_run(tmp, "replicas", {"PARTIAL_STEP_MS": "0", **(GPU_LIKE if gpu else {})})
    stall, findings = expect_stalled(p, report, "replicas")
    expect(("GPU to complete collective" in stall["why"]) == gpu, f"replicas: why {stall['why']}")
    expect(stall["scope"] == "communicator" and stall["partial"] and
           stall["ranks"] == [4, 5, 6, 7] and stall["waiting"] == [4, 6, 7],
           f"replicas: stall {stall}")
    healthy = [q for q in stall["progressed"] if q["ranks"] == [0, 1, 2, 3]]
    expect(healthy and stall["no_progress_s"] >= 2, f"replicas: progressed {stall['progressed']}")
    f = findings[0]
    expect(f["kind"] == "missing_ranks" and f["consequence_of"] is None and
           f["comm"] == stall["comm"] and f["missing"] == [5] and f["waiting"] == [4, 6, 7],
           f"replicas: first finding {f['kind']} {f.get('comm')} {f['summary']}")
    expect_only_about(findings, [4, 5, 6, 7], "replicas")
    expect(all(x.get("comm") != healthy[0]["comm"] for x in findings),
           "replicas: a finding on replica 0's communicator")
    first = p.stdout.splitlines()[0]
    expect(f"comm {stall['comm'][:8]} (ranks 4-7) made no progress for" in first and
           f"while comm {healthy[0]['comm'][:8]} (ranks 0-3) progressed" in first,
           f"replicas: the report's first line: {first}")
    expect("partial: rank 5 stopped calling" in p.stderr, "replicas: the victim never stopped")


def case_replicas(tmp):
    replicas(tmp, False)


def case_replicas_gpu(tmp):
    """The same on a GPU-like emulator: replica 1's ranks wait in their streams for AllReduce
    #21, not in NCCL."""
    replicas(tmp, True)


def pipeline(tmp, grouped, gpu=False):
    """Pipeline pairs (split by rank / 2), each sending activations from its even to its odd
    rank; receiver 5 stops while the other pairs go on (pair 1's receiver late at every step)."""
    label = "pipeline" + (" (grouped)" if grouped else "") + (" (GPU-like)" if gpu else "")
    p, report = lockstep_run(tmp, "pipeline",
                             {"PARTIAL_STEP_MS": "0", "PARTIAL_GROUPED": "1" if grouped else "0",
                              **(GPU_LIKE if gpu else {})})
    stall, findings = expect_stalled(p, report, label)
    expect(("GPU to complete a send or receive" in stall["why"]) == gpu,
           f"{label}: why {stall['why']}")
    expect(stall["scope"] == "communicator" and stall["partial"] and
           stall["ranks"] == [4, 5] and stall["waiting"] == [4], f"{label}: stall {stall}")
    expect(stall["progressed_count"] >= 3, f"{label}: the other pairs progressed: {stall}")
    f = findings[0]
    expect(f["kind"] == "p2p_unmatched" and f["consequence_of"] is None and
           f["comm"] == stall["comm"] and f["src"] == 4 and f["dst"] == 5,
           f"{label}: first finding [{f['kind']}] {f['summary']}")
    expect_only_about(findings, [4, 5], label)


def case_pipeline(tmp):
    pipeline(tmp, False)


def case_pipeline_grouped(tmp):
    pipeline(tmp, True)


def case_pipeline_gpu(tmp):
    """On a GPU-like emulator the Send returns at once: rank 4 waits in its stream, and only
    the stream's oldest operation not completed says on which communicator."""
    pipeline(tmp, False, gpu=True)


def start_job(d, job, extra):
    env = base_env({"LD_PRELOAD": SHIM, "LOCKSTEP_DIR": d, "LOCKSTEP_JOB": job,
                    "PARTIAL_STEP_MS": "0", **extra})
    return subprocess.Popen([LAUNCH, "--np", "4", "--timeout", LAUNCHER_TIMEOUT, "--", PARTIAL,
                             "job"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def case_two_jobs(tmp):
    """Two jobs trace into one folder (job ids train-a and train-b); rank 2 of train-b stops,
    train-a trains on. `lockstep watch` reports train-b only and leaves train-a alone."""
    d = os.path.join(tmp, "shared")
    os.mkdir(d, 0o700)
    jobs = [start_job(d, "train-a", {"PARTIAL_VICTIM": "-1"}),
            start_job(d, "train-b", {"PARTIAL_VICTIM": "2", "PARTIAL_LAG_MS": "0"})]
    try:
        js = os.path.join(tmp, "watch.json")
        p = subprocess.run([LOCKSTEP, "watch", "--stall", "2", "--json", js, d],
                           env=base_env(), capture_output=True, text=True, timeout=CASE_TIMEOUT)
        expect(p.returncode == 3, f"watch exited {p.returncode}\n{p.stdout}\n{p.stderr}")
        expect(jobs[0].poll() is None, "train-a should still be training")
        report = json.load(open(js))
        stall = report["stall"]
        expect(stall["scope"] == "job" and stall["job"] == "train-b" and stall["partial"] and
               stall["ranks"] == [0, 1, 2, 3] and
               [q["job"] for q in stall["progressed"]] == ["train-a"], f"stall {stall}")
        f = report["findings"][0]
        expect(f["kind"] == "missing_ranks" and f["job"] == "train-b" and f["missing"] == [2] and
               f["waiting"] == [0, 1, 3], f"first finding [{f['kind']}] {f['summary']}")
        expect(all(x["job"] == "train-b" for x in report["findings"]),
               f"findings about train-a: {[x['summary'] for x in report['findings']]}")
        expect([j["job"] for j in report["jobs"]] == ["train-b"], f"jobs {report['jobs']}")
        first = p.stdout.splitlines()[0]
        expect("job train-b (ranks 0-3) made no progress for" in first and
               "while job train-a (ranks 0-3) progressed" in first, f"first line: {first}")
    finally:
        stop_launchers(jobs)


def case_weight_sync(tmp):
    """RL weight sync (partial.c weight_sync): rank 0 waits in the broadcast to the engine's rank
    2, which serves on; rank 1 waits for rank 0 in its next all-gather; rank 3, the engine's
    other rank, waits for the slower rank 2 inside NCCL most of the time. One root cause: rank 2
    missing from the broadcast; rank 1's wait follows from it. The engine's communicator
    progressed during the stall, so a finding about it (rank 3 waiting for rank 2 at the moment
    of the snapshot) is left out, and it is no one's cause either (was: it took the blame for
    rank 2, then was dropped, and both findings about the stalled part came out independent)."""
    p, report = lockstep_run(tmp, "weight_sync", np=4,
                             extra_env={"PARTIAL_STEPS": "10", "PARTIAL_STEP_MS": "1",
                                        "PARTIAL_LAG_MS": "20"})
    stall, findings = expect_stalled(p, report, "weight_sync")
    expect_only_about(findings, [0, 1, 2], "weight_sync")
    roots = [f for f in findings if f["consequence_of"] is None]
    expect(len(roots) == 1 and roots[0]["kind"] == "missing_ranks" and
           roots[0]["missing"] == [2] and roots[0]["waiting"] == [0],
           f"roots {[(f['kind'], f['summary']) for f in roots]}")
    root = findings.index(roots[0])
    rank1 = [f for f in findings if f["kind"] == "missing_ranks" and f["waiting"] == [1]]
    expect(len(rank1) == 1 and rank1[0]["missing"] == [0] and rank1[0]["consequence_of"] == root,
           f"rank 1's wait: {[(f['consequence_of'], f['summary']) for f in rank1]}")


def case_rates(tmp):
    """Healthy: replica 0 steps every few ms, replica 1 every 0.6 s with its last rank 0.3 s
    late (its others wait that long inside NCCL), the world communicator idle for 6 s with
    nobody in it until the last step. Never a stall, with --stall 2."""
    p, report = lockstep_run(tmp, "rates")
    expect(p.returncode == 0, f"rates: lockstep run exited {p.returncode}\n{p.stderr[-3000:]}")
    expect("no progress" not in p.stderr, f"rates: taken for a stall: {p.stderr[-3000:]}")
    expect(report is not None and report["findings"] == [] and "stall" not in report,
           "rates: a clean run should report no findings")


if __name__ == "__main__":
    sys.exit(run(globals(), "lockstep-partial-"))
