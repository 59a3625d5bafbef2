#!/usr/bin/env python3
"""test_scenarios.py -- the failure scenarios end to end: a real NCCL program (scenarios.c) run
as ranks on the CPU emulator under the real shim, stopped by the launcher once it hangs,
then `lockstep analyze` on the traces it left, with assertions on the JSON report (and, where
people read it, the text). The traces themselves (trace_query) are the independent witness
for communicator ids and sequence numbers.

Usage: test_scenarios.py CASE   (paths come from the environment meson sets, see meson.build)
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import Failure, expect, run  # noqa: E402
from report_ranks import check_classes, per_rank  # noqa: E402
import summary_equiv  # noqa: E402

SHIM = os.environ["LOCKSTEP_SHIM"]
LAUNCH = os.environ["LAUNCH_RANKS"]
EMU_DIR = os.environ["EMULATOR_DIR"]
QUERY = os.environ["TRACE_QUERY"]
LOCKSTEP = os.environ["LOCKSTEP_BIN"]
SCENARIOS = os.environ["SCENARIOS"]

HUNG = 124  # the launcher's status when it had to stop the ranks
# A job expected to hang is stopped once no rank made progress in NCCL for this long while one
# waits there (launch-ranks --stop-when-stuck), well before its timeout; what the traces hold
# then is the hang. Cases that measure how long the job ran keep to the timeout alone.
STUCK_S = 0.5


# ---------------------------------------------------------------- running and analyzing


# SCENARIO_ASYNC=1 runs the ranks GPU-style: NCCL calls return at once, the ranks hang in the
# stream synchronize, and "still waiting" means "not completed on the GPU".
ASYNC = os.environ.get("SCENARIO_ASYNC") == "1"


def pending(rec):
    """The call has not completed: still inside NCCL, or (async) not done on the GPU."""
    return rec["complete_ns"] == 0 if ASYNC else rec["in_flight"]


def rank_env(trace_dir, extra):
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = EMU_DIR + ":" + env.get("LD_LIBRARY_PATH", "")
    env["LD_PRELOAD"] = SHIM
    env["LOCKSTEP_DIR"] = trace_dir
    for k in ("LOCKSTEP_RING", "LOCKSTEP_DISABLE", "SCENARIO_VICTIM", "SCENARIO_STEPS",
              "SCENARIO_DELAY_MS", "RANK", "WORLD_SIZE"):
        env.pop(k, None)
    env.pop("LOCKSTEP_EMU_ASYNC", None)
    if ASYNC:
        env["LOCKSTEP_EMU_ASYNC"] = "1"
    env.update(extra or {})
    return env


def launch_cmd(mode, np, timeout, kill_signal=None, stuck=None):
    cmd = [LAUNCH, "--np", str(np)]
    if timeout:
        cmd += ["--timeout", str(timeout)]
    if stuck:
        cmd += ["--stop-when-stuck", str(stuck)]
    if kill_signal:
        cmd += ["--kill-signal", kill_signal]
    return cmd + ["--", SCENARIOS, mode]


def scenario(tmp, mode, np=4, env=None, timeout=3, want_rc=HUNG, stuck=STUCK_S):
    """Runs `scenarios MODE` as np ranks until it ends or the launcher stops it; returns the
    trace folder. want_rc: the launcher's status (124: the job hung and was stopped, at the
    timeout or, with `stuck`, once stuck that long)."""
    d = os.path.join(tmp, "traces")
    os.makedirs(d, exist_ok=True)
    stuck = stuck if want_rc == HUNG else None
    p = subprocess.run(launch_cmd(mode, np, timeout, stuck=stuck), env=rank_env(d, env),
                       capture_output=True, text=True, timeout=120)
    expect(p.returncode == want_rc,
           f"launcher exited {p.returncode}, want {want_rc}: {p.stdout} {p.stderr}")
    expect(len(trace_files(d)) == np, f"{len(trace_files(d))} traces for {np} ranks")
    return d


def trace_files(d):
    return sorted(f for f in os.listdir(d) if f.endswith(".trace"))


def analyzer_env():
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env["NO_COLOR"] = "1"
    return env


def analyze(d, want_rc=1, all_ranks=False):
    """`lockstep analyze --json` (with --ranks all: every rank's own object): the report as a
    dict, after checking the exit status and what must hold of its ranks' classes."""
    opts = ["--ranks", "all"] if all_ranks else []
    p = subprocess.run([LOCKSTEP, "analyze", "--json", *opts, d], capture_output=True, text=True,
                       timeout=60, env=analyzer_env())
    expect(p.returncode == want_rc,
           f"analyze --json exited {p.returncode}, want {want_rc}: {p.stderr}{p.stdout}")
    try:
        r = json.loads(p.stdout)
    except ValueError as e:
        raise Failure(f"analyze --json printed no JSON ({e}): {p.stdout[:400]!r}")
    # The same traces summarized per host, as nodes would, must be diagnosed alike.
    problem = summary_equiv.check(LOCKSTEP, [*opts, d], p.returncode, p.stdout,
                                  env=analyzer_env())
    expect(problem is None, f"{problem}")
    expect(r.get("lockstep_report") == 2, "report version")
    problems = check_classes(r)
    expect(not problems, f"the report's rank classes: {problems}")
    expect(r["unreadable"] == [], f"unreadable traces: {r['unreadable']}")
    return r


def analyze_text(d, want_rc=1):
    p = subprocess.run([LOCKSTEP, "analyze", d], capture_output=True, text=True, timeout=60,
                       env=analyzer_env())
    expect(p.returncode == want_rc, f"analyze exited {p.returncode}, want {want_rc}: {p.stderr}")
    return p.stdout


def traces(d):
    """The traces of a folder as trace_query prints them, by global rank."""
    p = subprocess.run([QUERY, d], capture_output=True, text=True, timeout=60)
    expect(p.returncode == 0, f"trace_query failed: {p.stderr}")
    return {t["rank"]: t for t in json.loads(p.stdout)}


def world_comm(ts):
    """The world communicator's id, which every rank must have computed alike."""
    ids = {c["id"] for t in ts.values() for c in t["comms"] if c["create_op"] == "CommInitRank"}
    expect(len(ids) == 1, f"ranks disagree on the world communicator: {ids}")
    recs = {r["comm"] for t in ts.values() for r in t["records"] if r["op"] == "CommInitRank"}
    expect(recs <= ids, f"CommInitRank records name {recs}, the comm tables {ids}")
    return ids.pop()


def colls(t, comm):
    """The collectives of one trace on one communicator, in issue order."""
    return [r for r in t["records"]
            if r["comm"] == comm and r["seq"] > 0 and r["op"] not in ("Send", "Recv")]


def last_coll(t, comm):
    c = colls(t, comm)
    expect(c, f"rank {t['rank']}: no collective on comm {comm}")
    return c[-1]


def kinds(r):
    return [f["kind"] for f in r["findings"]]


def first(r, kind):
    """The first finding, which must be of `kind`."""
    expect(r["findings"], f"no findings, want {kind}")
    f = r["findings"][0]
    expect(f["kind"] == kind, f"first finding is {f['kind']}, want {kind}: {f['summary']}")
    expect(f["consequence_of"] is None, f"the first finding follows from {f['consequence_of']}")
    return f


def cls(f, ranks, role=None):
    """The one class of a finding holding exactly `ranks`."""
    got = [c for c in f.get("classes") or [] if c["ranks"] == ranks
           and (role is None or c["role"] == role)]
    expect(len(got) == 1,
           f"{f['kind']}: no single class {role or ''} with ranks {ranks}: {f.get('classes')}")
    return got[0]


def site_has(c, func):
    expect(c["callsite"] and func in c["callsite"],
           f"call site {c['callsite']!r} of ranks {c['ranks']} does not name {func}")


def states(r):
    return {x["rank"]: x["state"] for x in per_rank(r)}


def expect_stopped_together(r, ranks):
    """Ranks the launcher killed at its timeout: vanished, and no rank_crashed about them."""
    st = states(r)
    for k in ranks:
        expect(st.get(k) == "vanished", f"rank {k} is {st.get(k)}, want vanished")
    blamed = [f["rank"] for f in r["findings"] if f["kind"] in ("rank_crashed", "rank_exited")]
    expect(not set(blamed) & set(ranks), f"ranks stopped by the launcher blamed: {blamed}")


def check_mismatch(r, ts, kind, seq, comm, classes):
    """A hang on a mismatch: exactly one finding, of `kind`, at comm/seq, with `classes`
    given as [(ranks, {key: value}, callsite function)]; the traces agree on seq."""
    expect(kinds(r) == [kind], f"findings {kinds(r)}, want [{kind}]")
    f = first(r, kind)
    expect(f["comm"] == comm, f"comm {f['comm']}, want {comm}")
    expect(f["seq"] == seq, f"seq {f['seq']}, want {seq}")
    want_ranks = sorted(k for ranks, _, _ in classes for k in ranks)
    expect(f["ranks"] == want_ranks, f"ranks {f['ranks']}, want {want_ranks}")
    expect(len(f["classes"]) == len(classes), f"{len(f['classes'])} classes: {f['classes']}")
    for ranks, fields, func in classes:
        c = cls(f, ranks, "called")
        for k, v in fields.items():
            expect(c[k] == v, f"class {ranks}: {k} = {c[k]!r}, want {v!r}")
        site_has(c, func)
        for k in ranks:  # the shim recorded exactly that: the rank's last call is #seq
            rec = last_coll(ts[k], comm)
            expect(rec["seq"] == seq and pending(rec) and rec["op"] == c["op"],
                   f"rank {k}'s trace ends in {rec['op']} #{rec['seq']}, not in flight #{seq}")
    expect_stopped_together(r, want_ranks)
    return f


# ---------------------------------------------------------------- cases


def check_prepare_data(r, ts, d, victim=3, np=4):
    world = world_comm(ts)
    f = first(r, "missing_ranks")
    others = [k for k in range(np) if k != victim]
    expect(f["missing"] == [victim], f"missing {f['missing']}")
    expect(f["waiting"] == others, f"waiting {f['waiting']}")
    expect(f["ranks"] == list(range(np)), f"ranks {f['ranks']}")
    expect(f["comm"] == world, f"comm {f['comm']}, want the world {world}")
    expect(f["seq"] == 3, f"seq {f['seq']}, want 3 (two steps, then the barrier)")
    w = cls(f, others, "waiting")
    expect(w["op"] == "AllReduce" and w["count"] == 1 and w["seq"] == 3, f"waiting class {w}")
    site_has(w, "barrier")
    m = cls(f, [victim], "missing")
    expect(m["op"] == "AllReduce" and m["seq"] == 2 and m["count"] == 1024, f"missing class {m}")
    site_has(m, "train_step")
    for k in others:
        rec = last_coll(ts[k], world)
        expect(rec["seq"] == 3 and rec["count"] == 1 and pending(rec),
               f"rank {k}'s trace: last {rec}")
    rec = last_coll(ts[victim], world)
    expect(rec["seq"] == 2 and not pending(rec), f"victim's trace: last {rec}")
    return f


def expect_busy_for(text, stopped, lo_s, hi_s, where=None):
    """The text says the victim was stopped while busy outside NCCL, for how long, how it was
    stopped, and (where the shim caught the stopping signal) in which function."""
    m = re.search(r"rank 3 never called it \u2014 it was busy (at (.*?) \()?outside NCCL for "
                  r"([0-9.]+) (ns|us|ms|s)\)? when " + re.escape(stopped), text)
    expect(m, f"the text does not say how long the missing rank was busy outside NCCL:\n{text}")
    busy = float(m.group(3)) * {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1}[m.group(4)]
    expect(lo_s <= busy <= hi_s, f"busy outside NCCL for {busy} s, want {lo_s}..{hi_s}")
    if where:
        expect(m.group(2) and where in m.group(2),
               f"the text does not say the missing rank was busy in {where}:\n{text}")


def case_prepare_data(tmp):
    """A rank still preparing data when the others reach the barrier; the launcher kills the
    job after 3 s (the text's busy time is measured against that). The victim is named
    missing, the others waiting, at the barrier's seq."""
    d = scenario(tmp, "prepare_data", stuck=None)
    r, ts = analyze(d), traces(d)
    check_prepare_data(r, ts, d)
    expect(kinds(r) == ["missing_ranks"], f"findings {kinds(r)}")
    expect_stopped_together(r, [0, 1, 2, 3])
    text = analyze_text(d)
    expect("[missing_ranks]" in text and "rank 3 never called it" in text, text)
    expect("ranks 0-2 wait in AllReduce #3" in text, text)
    # About the launcher's 3 s less the two training steps.
    expect_busy_for(text, "the whole job was stopped (SIGKILL: no exit record)", 1.5, 4)


def case_prepare_data_live(tmp):
    """The same, analyzed while the job is still hung: the victim is alive and idle; then
    the launcher is told to stop (SIGTERM, forwarded to the ranks) and the post-mortem
    diagnosis is the same."""
    d = os.path.join(tmp, "traces")
    os.makedirs(d)
    launcher = subprocess.Popen(launch_cmd("prepare_data", 4, 30),
                                env=rank_env(d, {"SCENARIO_DELAY_MS": "25000"}),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline, r = time.time() + 15, None
        while time.time() < deadline:
            time.sleep(0.2)
            if len(trace_files(d)) < 4:
                continue
            p = subprocess.run([LOCKSTEP, "analyze", "--json", d], capture_output=True,
                               text=True, timeout=60, env=analyzer_env())
            if p.returncode == 1:
                r = json.loads(p.stdout)
                if r["findings"] and r["findings"][0].get("waiting") == [0, 1, 2]:
                    break
        expect(r and r["findings"], "the live job never showed ranks 0-2 waiting")
        expect(launcher.poll() is None, "the job ended by itself")
        ts = traces(d)
        check_prepare_data(r, ts, d)
        st = states(r)
        expect(st == {0: "in_call", 1: "in_call", 2: "in_call", 3: "idle"}, f"states {st}")
        waiting = {x["rank"]: x for x in per_rank(r) if x["rank"] < 3}
        expect(all(x["current"] and x["current"]["seq"] == 3 for x in waiting.values()),
               "ranks 0-2 are not inside the barrier")
        text = analyze_text(d)
        expect("rank 3 never called it" in text and "it is alive" in text,
               f"the text does not say the missing rank is alive:\n{text}")
    finally:
        if launcher.poll() is None:
            launcher.send_signal(signal.SIGTERM)
        _, err = launcher.communicate(timeout=30)
    expect(launcher.returncode != 0, "launcher status after SIGTERM")
    r = analyze(d)
    check_prepare_data(r, traces(d), d)
    expect(kinds(r) == ["missing_ranks"], f"after SIGTERM: findings {kinds(r)}")
    st = states(r)
    expect(all(st[k] == "crashed" for k in range(4)), f"states after SIGTERM {st}")
    expect(all(x["signal"] == 15 for x in per_rank(r)), "SIGTERM recorded")
    expect_busy_for(analyze_text(d), "the whole job was stopped (SIGTERM)", 1e-3, 20,
                    where="prepare_data")


def case_uneven_shards(tmp):
    """One rank runs one step fewer: its validation AllGather meets the others' AllReduce."""
    d = scenario(tmp, "uneven_shards", env={"SCENARIO_STEPS": "7"})
    r, ts = analyze(d), traces(d)
    check_mismatch(r, ts, "op_mismatch", 7, world_comm(ts),
                   [([0, 1, 2], {"op": "AllReduce", "count": 1024}, "train_step"),
                    ([3], {"op": "AllGather", "count": 4}, "validate")])


def case_late_start(tmp):
    """One rank's program starts seconds after the others (a slow node's Python imports): the
    launcher's timeout of 1.5 s counts from the moment every rank has started (each loaded NCCL),
    not from the launch (was: from the launch, the late rank was stopped before it started and
    the job left 3 traces of 4). No stop-when-stuck: the timeout alone stops the job."""
    late = 3.0
    d = os.path.join(tmp, "traces")
    os.makedirs(d, exist_ok=True)
    late_sh = f'if [ "$RANK" = 3 ]; then sleep {late}; fi; exec "$0" "$@"'
    t0 = time.time()
    p = subprocess.run([LAUNCH, "--np", "4", "--timeout", "1.5", "--", "sh", "-c", late_sh,
                        SCENARIOS, "uneven_shards"], env=rank_env(d, {"SCENARIO_STEPS": "5"}),
                       capture_output=True, text=True, timeout=120)
    took = time.time() - t0
    expect(p.returncode == HUNG, f"launcher exited {p.returncode}, want {HUNG}: {p.stderr}")
    expect(took >= late + 1.5, f"the job was stopped {took:.2f} s after the launch, before "
                               f"rank 3 ({late} s late) had 1.5 s")
    expect(len(trace_files(d)) == 4, f"{len(trace_files(d))} traces for 4 ranks")
    r, ts = analyze(d), traces(d)
    check_mismatch(r, ts, "op_mismatch", 5, world_comm(ts),
                   [([0, 1, 2], {"op": "AllReduce"}, "train_step"),
                    ([3], {"op": "AllGather"}, "validate")])


def case_code_path(tmp):
    """Rank 1 (SCENARIO_VICTIM) takes the evaluation branch: Broadcast where others AllReduce."""
    d = scenario(tmp, "code_path", env={"SCENARIO_VICTIM": "1"})
    r, ts = analyze(d), traces(d)
    f = check_mismatch(r, ts, "op_mismatch", 3, world_comm(ts),
                       [([0, 2, 3], {"op": "AllReduce", "redop": "sum", "root": None},
                         "train_step"),
                        ([1], {"op": "Broadcast", "count": 16, "root": 0},
                         "eval_broadcast_config")])
    text = analyze_text(d)
    expect("ranks 0,2-3 call AllReduce" in text and "rank 1 calls Broadcast" in text, text)
    expect("eval_broadcast_config" in text and "train_step" in text, text)
    expect(f["summary"].startswith("collective #3 on comm " + f["comm"][:8]), f["summary"])


def case_shape_mismatch(tmp):
    """DDP-style parameter verification: the victim gathers 12 shapes, the others 10."""
    d = scenario(tmp, "shape_mismatch")
    r, ts = analyze(d), traces(d)
    check_mismatch(r, ts, "count_mismatch", 1, world_comm(ts),
                   [([0, 1, 2], {"op": "AllGather", "count": 10, "dtype": "int64"},
                     "verify_params"),
                    ([3], {"op": "AllGather", "count": 12, "dtype": "int64"}, "verify_params")])


def case_dtype_mismatch(tmp):
    d = scenario(tmp, "dtype_mismatch")
    r, ts = analyze(d), traces(d)
    check_mismatch(r, ts, "dtype_mismatch", 2, world_comm(ts),
                   [([0, 1, 2], {"op": "AllReduce", "count": 256, "dtype": "fp32"},
                     "mode_dtype_mismatch"),
                    ([3], {"op": "AllReduce", "count": 256, "dtype": "fp16"},
                     "mode_dtype_mismatch")])


def case_redop_mismatch(tmp):
    d = scenario(tmp, "redop_mismatch")
    r, ts = analyze(d), traces(d)
    check_mismatch(r, ts, "redop_mismatch", 2, world_comm(ts),
                   [([0, 1, 2], {"op": "AllReduce", "dtype": "fp32", "redop": "sum"},
                     "mode_redop_mismatch"),
                    ([3], {"op": "AllReduce", "dtype": "fp32", "redop": "max"},
                     "mode_redop_mismatch")])


def case_root_mismatch_split(tmp):
    """A Broadcast on the split communicator {1,3} disagrees on its root: the finding names
    the split communicator (as the shim recorded it), not the world."""
    d = os.path.join(tmp, "traces")
    os.makedirs(d)
    p = subprocess.run(launch_cmd("root_mismatch_split", 4, 3, stuck=STUCK_S),
                       env=rank_env(d, None),
                       capture_output=True, text=True, timeout=120)
    expect(p.returncode == HUNG, f"launcher exited {p.returncode}: {p.stderr}")
    ts = traces(d)
    world = world_comm(ts)
    split_ids = {}
    for k, t in ts.items():
        sp = [x for x in t["records"] if x["op"] == "CommSplit"]
        expect(len(sp) == 1 and sp[0]["comm"] == world, f"rank {k}: split records {sp}")
        split_ids[k] = "%016x" % sp[0]["count"]
    stage = split_ids[1]
    expect(split_ids[3] == stage and split_ids[0] == split_ids[2] != stage,
           f"split ids per rank {split_ids}")
    r = analyze(d)
    f = check_mismatch(r, ts, "root_mismatch", 2, stage,
                       [([1], {"op": "Broadcast", "root": 0, "count": 64}, "stage_broadcast"),
                        ([3], {"op": "Broadcast", "root": 1, "count": 64}, "stage_broadcast")])
    expect(f["comm"] != world, "the finding names the world communicator")
    c = [c for c in r["communicators"] if c["comm"] == stage]
    expect(len(c) == 1 and c[0]["parent"] == world and c[0]["created_by"] == "CommSplit"
           and c[0]["members"] == [1, 3] and c[0]["color"] == 1, f"split comm entry {c}")
    st = states(r)
    expect(st[0] == st[2] == "exited", f"ranks 0 and 2 (the other stage) finished: {st}")


def case_unmatched_send(tmp):
    """Rank 0 sends to rank 1, which never posts the receive."""
    d = scenario(tmp, "unmatched_send", np=2)
    r, ts = analyze(d), traces(d)
    world = world_comm(ts)
    expect(kinds(r) == ["p2p_unmatched"], f"findings {kinds(r)}")
    f = first(r, "p2p_unmatched")
    expect(f["src"] == 0 and f["dst"] == 1, f"src {f['src']} dst {f['dst']}")
    expect(f["ranks"] == [0, 1] and f["comm"] == world and f["seq"] == 1,
           f"ranks {f['ranks']} comm {f['comm']} seq {f['seq']}")
    c = cls(f, [0], "send")
    expect(c["op"] == "Send" and c["count"] == 256 and c["root"] == 1, f"send class {c}")
    site_has(c, "send_activations")
    expect(not [x for x in ts[1]["records"] if x["op"] == "Recv"], "rank 1 traced a Recv")
    expect_stopped_together(r, [0, 1])


def case_p2p_size_mismatch(tmp):
    """Rank 0 sends 256 floats, rank 1 receives 128."""
    d = scenario(tmp, "p2p_size_mismatch", np=2)
    r, ts = analyze(d), traces(d)
    expect(kinds(r) == ["p2p_size_mismatch"], f"findings {kinds(r)}")
    f = first(r, "p2p_size_mismatch")
    expect(f["src"] == 0 and f["dst"] == 1, f"src {f['src']} dst {f['dst']}")
    expect(f["ranks"] == [0, 1] and f["comm"] == world_comm(ts) and f["seq"] == 1,
           f"ranks {f['ranks']} comm {f['comm']} seq {f['seq']}")
    s, v = cls(f, [0], "send"), cls(f, [1], "recv")
    expect(s["count"] == 256 and v["count"] == 128 and s["dtype"] == v["dtype"] == "fp32",
           f"classes {f['classes']}")
    site_has(s, "send_activations")
    site_has(v, "recv_activations")


def case_sendrecv_deadlock(tmp):
    """Ranks 0 and 1 both send first: each send waits for a receive the peer never posts."""
    d = scenario(tmp, "sendrecv_deadlock", np=2)
    r, ts = analyze(d), traces(d)
    f = first(r, "deadlock_cycle")
    expect(f["cycle"] in ([0, 1], [1, 0]), f"cycle {f['cycle']}")
    expect(f["ranks"] == [0, 1], f"ranks {f['ranks']}")
    rest = r["findings"][1:]
    expect(all(g["consequence_of"] == 0 for g in rest),
           f"later findings not marked as following from the deadlock: {kinds(r)}")
    pairs = sorted((g["src"], g["dst"]) for g in rest if g["kind"] == "p2p_unmatched")
    expect(pairs == [(0, 1), (1, 0)], f"unmatched sends {pairs}")
    for k in (0, 1):
        last = ts[k]["records"][-1]
        expect(last["op"] == "Send" and pending(last) and last["peer"] == 1 - k,
               f"rank {k}'s trace ends in {last}")


def case_cross_comm_deadlock(tmp):
    """Rank 3 enters the second communicator first, the others the world: a cycle across two
    communicators, but every wait of it comes back to rank 3, which alone used them in the other
    order. Rank 3 is the root (missing from the world's #2, inside the other communicator's #1);
    the waits the other way follow from it; no deadlock of all four alike."""
    d = scenario(tmp, "cross_comm_deadlock")
    r, ts = analyze(d), traces(d)
    world = world_comm(ts)
    other = {"%016x" % x["count"] for t in ts.values() for x in t["records"]
             if x["op"] == "CommSplit"}
    expect(len(other) == 1 and world not in other, f"split ids {other}")
    other = other.pop()
    f = first(r, "missing_ranks")
    expect(f["consequence_of"] is None and f["comm"] == world and f["missing"] == [3],
           f"first finding: {f['summary']}")
    expect("deadlock_cycle" not in kinds(r), f"a deadlock of all four: {kinds(r)}")
    miss = [g for g in r["findings"] if g["kind"] == "missing_ranks"]
    expect(len(miss) == 2 and miss[1]["consequence_of"] == 0, f"missing_ranks findings {kinds(r)}")
    on = {g["comm"]: g for g in miss}
    expect(set(on) == {world, other}, f"missing_ranks on {set(on)}")
    expect(on[world]["missing"] == [3] and on[world]["waiting"] == [0, 1, 2]
           and on[world]["seq"] == 2, f"world: {on[world]['summary']}")
    expect(on[other]["missing"] == [0, 1, 2] and on[other]["waiting"] == [3]
           and on[other]["seq"] == 1, f"other: {on[other]['summary']}")
    expect_stopped_together(r, [0, 1, 2, 3])


def check_death(r, ts, kind, victim, np=4):
    """A lone death: first finding `kind` about the victim, then missing_ranks following
    from it at the next training step (#3)."""
    f = first(r, kind)
    others = [k for k in range(np) if k != victim]
    expect(f["rank"] == victim, f"rank {f['rank']}, want {victim}")
    expect(f["waiting"] == others, f"waiting {f['waiting']}")
    expect(victim in f["ranks"] and set(others) <= set(f["ranks"]), f"ranks {f['ranks']}")
    expect(kinds(r) == [kind, "missing_ranks"], f"findings {kinds(r)}")
    m = r["findings"][1]
    expect(m["consequence_of"] == 0 and m["missing"] == [victim] and m["waiting"] == others
           and m["seq"] == 3 and m["comm"] == world_comm(ts), f"then: {m['summary']}")
    expect_stopped_together(r, others)
    return f


def case_segfault(tmp):
    """Rank 1 dereferences NULL after two steps; the others wait in step 3."""
    d = scenario(tmp, "segfault", env={"SCENARIO_VICTIM": "1"})
    r, ts = analyze(d), traces(d)
    f = check_death(r, ts, "rank_crashed", 1)
    expect(f["signal"] == 11 and f["vanished"] is False, f"signal {f['signal']}")
    expect(ts[1]["end_signal"] == 11, "the shim recorded no SIGSEGV")
    x = [x for x in per_rank(r) if x["rank"] == 1][0]
    expect(x["state"] == "crashed" and x["signal"] == 11, f"rank 1: {x}")
    expect("SIGSEGV" in f["summary"], f["summary"])


def case_sigkill(tmp):
    """The victim is SIGKILLed (as by the OOM killer): no end record, reported as vanished.
    The launcher waits 5 s so the victim's death is well apart from the job's stop."""
    d = scenario(tmp, "sigkill", timeout=5, stuck=None)
    r, ts = analyze(d), traces(d)
    f = check_death(r, ts, "rank_crashed", 3)
    expect(f["vanished"] is True and f["signal"] is None, f"vanished {f['vanished']}")
    expect(states(r)[3] == "vanished", f"states {states(r)}")


def case_early_exit(tmp):
    """The victim returns from main after two steps with status 0 while the others go on."""
    d = scenario(tmp, "early_exit")
    r, ts = analyze(d), traces(d)
    f = check_death(r, ts, "rank_exited", 3)
    expect(f["status"] == 0, f"status {f['status']}")
    x = [x for x in per_rank(r) if x["rank"] == 3][0]
    expect(x["state"] == "exited" and x["exit_status"] == 0, f"rank 3: {x}")


def case_missing_trace(tmp):
    """prepare_data with rank 1's trace deleted: the hang is still found, and the report says
    which rank it knows nothing about."""
    d = scenario(tmp, "prepare_data")
    gone = [f for f in trace_files(d) if f.endswith("-r1.trace")]
    expect(len(gone) == 1, f"rank 1's trace: {trace_files(d)}")
    os.unlink(os.path.join(d, gone[0]))
    r, ts = analyze(d), traces(d)
    expect(sorted(ts) == [0, 2, 3], f"traces left {sorted(ts)}")
    expect(r["jobs"][0]["world_size"] == 4 and r["jobs"][0]["traces"] == 3, f"jobs {r['jobs']}")
    f = first(r, "missing_ranks")
    expect(f["missing"] == [3] and f["waiting"] == [0, 2] and f["seq"] == 3
           and f["comm"] == world_comm(ts), f"hang: {f['summary']}")
    inc = [g for g in r["findings"] if g["kind"] == "trace_incomplete"]
    expect(len(inc) == 1 and inc[0]["reason"] == "no_trace" and inc[0]["ranks"] == [1],
           f"trace_incomplete findings {inc}")
    expect(kinds(r) == ["missing_ranks", "trace_incomplete"], f"findings {kinds(r)}")
    c = [c for c in r["communicators"] if c["comm"] == f["comm"]][0]
    expect(c["members"] == [0, None, 2, 3], f"members {c['members']}")


def case_wrapped_ring(tmp):
    """A 64-record ring and 300 steps: every ring wrapped several times before the uneven
    shard's mismatch at #300, which the analyzer still finds from what the rings hold."""
    steps = 300
    d = scenario(tmp, "uneven_shards",
                 env={"LOCKSTEP_RING": "64", "SCENARIO_STEPS": str(steps)})
    r, ts = analyze(d, all_ranks=True), traces(d)
    for k, t in ts.items():
        expect(t["ring_cap"] == 64 and t["wrapped"] and t["next_ticket"] > 4 * 64,
               f"rank {k}: ring {t['ring_cap']}, {t['next_ticket']} tickets")
    check_mismatch(r, ts, "op_mismatch", steps, world_comm(ts),
                   [([0, 1, 2], {"op": "AllReduce", "count": 1024}, "train_step"),
                    ([3], {"op": "AllGather", "count": 4}, "validate")])
    for x in per_rank(r):
        # Every ticket of the ring is a record but those the rank reserved ahead (its block).
        expect(x["wrapped"] is True and x["records"] == 64 - ts[x["rank"]]["nreserved"],
               f"rank {x['rank']}: {x}")
    c = r["communicators"][0]
    expect(c["collectives_issued"] == steps, f"collectives_issued {c['collectives_issued']}")
    # The mismatch is still in every ring: nothing it rests on was overwritten.
    expect(not [g for g in r["findings"] if g["kind"] == "trace_incomplete"],
           "a wrapped ring reported as losing the mismatch")


def case_straggler(tmp):
    """The victim sleeps 1.1 s before each of 3 steps; the job completes."""
    d = scenario(tmp, "straggler", env={"SCENARIO_DELAY_MS": "1100", "SCENARIO_STEPS": "3"},
                 timeout=30, want_rc=0)
    r, ts = analyze(d), traces(d)
    expect(kinds(r) == ["straggler"], f"findings {kinds(r)}")
    f = first(r, "straggler")
    expect(f["rank"] == 3 and f["ranks"] == [3], f"rank {f['rank']} ranks {f['ranks']}")
    expect(1.0 <= f["late_by_s"] < 2.5, f"late_by_s {f['late_by_s']}")
    expect(f["comm"] == world_comm(ts) and 1 <= f["seq"] <= 3, f"comm/seq {f['comm']} {f['seq']}")
    expect("at 3 collectives" in f["summary"], f["summary"])
    expect(all(x["state"] == "exited" and x["exit_status"] == 0 for x in per_rank(r)),
           "every rank exited 0")


def case_clean(tmp):
    """A job that completes: exit 0 and no findings."""
    d = scenario(tmp, "clean", timeout=30, want_rc=0)
    r, ts = analyze(d, want_rc=0), traces(d)
    expect(r["findings"] == [], f"findings {kinds(r)}")
    expect(sorted(x["rank"] for x in per_rank(r)) == [0, 1, 2, 3], "four ranks")
    expect(all(x["state"] == "exited" for x in per_rank(r)), f"states {states(r)}")
    c = r["communicators"][0]
    expect(len(r["communicators"]) == 1 and c["comm"] == world_comm(ts)
           and c["collectives_issued"] == 7 and c["members"] == [0, 1, 2, 3],
           f"communicators {r['communicators']}")
    text = analyze_text(d, want_rc=0)
    expect("no problems found" in text, text)


def case_uneven_shards_32(tmp):
    """32 ranks: ranks 0-30 in one class, 31 in the other, compressed in the text."""
    d = scenario(tmp, "uneven_shards", np=32, timeout=4)
    r, ts = analyze(d), traces(d)
    check_mismatch(r, ts, "op_mismatch", 5, world_comm(ts),
                   [(list(range(31)), {"op": "AllReduce"}, "train_step"),
                    ([31], {"op": "AllGather"}, "validate")])
    expect(r["jobs"][0]["world_size"] == 32, f"jobs {r['jobs']}")
    text = analyze_text(d)
    expect("ranks 0-30 call AllReduce" in text and "rank 31 calls AllGather" in text, text)
    expect("0,1,2" not in text and "0, 1, 2" not in text, f"ranks not compressed:\n{text}")


if __name__ == "__main__":
    sys.exit(run(globals(), "lockstep-scenario-"))
