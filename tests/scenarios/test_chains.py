#!/usr/bin/env python3
"""test_chains.py -- hangs whose causes chain, end to end: NCCL programs (chains.c) run as ranks on
the CPU emulator under the real shim, stopped by their launcher (or by `lockstep run`), then
judged post-mortem and live. Each case names the one root cause a person must act on and checks
that every other finding follows from it (the wait-for graph, docs/analyzer.md): a rank missing
from one communicator because it waits in another one's collective that can never complete,
pipeline-parallel chains of sends and receives, a node that fails while the others run on, a rank
that never reached NCCL, a refused call that ends the program, cycles and deaths others wait
behind. Sizes and timings are drawn at random (the seed is printed; LOCKSTEP_TEST_SEED repeats).

Usage: test_chains.py CASE   (paths come from the environment meson sets)
"""
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import Skip, emulated, expect, run  # noqa: E402
import test_realjobs as rj  # noqa: E402
from test_realjobs import follows, one_line, one_root, rank, roots  # noqa: E402

CHAINS = os.environ["CHAINS"]
LAUNCH = rj.LAUNCH
LOCKSTEP = rj.LOCKSTEP
rng = rj.rng
note = rj.note
HUNG = rj.HUNG


def chains_cmd(mode, np, launcher=()):
    return [LAUNCH, "--np", str(np), "--seed", str(rng.randrange(1 << 30)), *launcher, "--",
            CHAINS, mode]


def scenario(tmp, mode, np=4, env=None, launcher=(), want_rc=HUNG):
    """Runs `chains MODE` as np ranks until the launcher stops it; returns the trace folder."""
    d = os.path.join(tmp, "traces")
    os.makedirs(d, exist_ok=True)
    p = subprocess.run(chains_cmd(mode, np, launcher), env=rj.rank_env(d, env),
                       capture_output=True, text=True, timeout=180)
    print(p.stderr[-4000:], end="")
    if want_rc is not None:
        expect(p.returncode == want_rc, f"launcher exited {p.returncode}, want {want_rc}")
    return d


def lockstep_run(tmp, mode, np=4, env=None, stall=2, want_rc=3):
    """`lockstep run` on a chains scenario: (report dict, text on stdout)."""
    d = os.path.join(tmp, "run")
    js = os.path.join(tmp, "run.json")
    cmd = [LOCKSTEP, "run", "--dir", d, "--stall", str(stall), "--json", js, "--",
           *chains_cmd(mode, np)]
    p = subprocess.run(cmd, env=rj.clean_env(env), capture_output=True, text=True, timeout=240)
    print(p.stderr[-4000:], end="")
    expect(p.returncode == want_rc, f"lockstep run exited {p.returncode}, want {want_rc}:\n"
                                    f"{p.stdout}\n{p.stderr}")
    return json.load(open(js)), p.stdout


def timeout(lo, hi):
    """The launcher's stop: once no rank made progress in the emulator for lo..hi seconds while
    one waits there (the hang has set in, however slow the machine is to get there), at the
    latest after a minute and a half."""
    return ("--stop-when-stuck", str(round(rng.uniform(lo, hi), 2)), "--timeout", "90")


def deadline(lo, hi):
    """A plain timeout, for jobs where a rank never reaches the emulator (nothing marks it)."""
    return ("--timeout", str(round(rng.uniform(lo, hi), 2)))


def all_follow(r, cause=0):
    """Every finding but trace_incomplete warnings follows, directly or not, from `cause`."""
    for i, f in enumerate(r["findings"]):
        if i == cause or f["kind"] == "trace_incomplete":
            continue
        at, hops = f["consequence_of"], 0
        while at is not None and at != cause and hops < 50:
            at, hops = r["findings"][at]["consequence_of"], hops + 1
        expect(at == cause, f"finding {i} ({f['kind']}) does not follow from {cause}: "
                            f"{f['summary']}")


def waits_for(r, rank):
    """The waits_for class holding `rank`."""
    got = [w for w in r["waits_for"] if rank in w["ranks"]]
    expect(len(got) == 1, f"rank {rank} in {len(got)} waits_for classes: {r['waits_for']}")
    return got[0]


# ---------------------------------------------------------------- across communicators


def check_cross_mismatch(r, text, np, diff):
    f = one_root(r, "op_mismatch" if diff == "op" else "count_mismatch")
    expect(sorted(f["ranks"]) == [0, 1], f"{f}")
    m = follows(r, "missing_ranks", 0)[0]
    expect(m["missing"] == [0, 1] and m["waiting"] == list(range(2, np)), f"{m}")
    one_line(text, r"why: AllReduce #\d+ on comm [0-9a-f]{8} waits for rank [01], which waits in "
                   r"\w+ #1 on comm [0-9a-f]{8}, which can never complete",
             "why the world's AllReduce waits")
    w = waits_for(r, 2)
    expect(w["state"] == "waits" and w["waits"][0]["for"] == [0, 1] and w["root"] == 0, f"{w}")


def case_cross_mismatch(tmp):
    """Ranks 0 and 1 call different things in their stage's collective; the other ranks wait in
    the world's next AllReduce for them: one root, the mismatch."""
    np, diff, steps = rng.randrange(4, 7), rng.choice(["op", "count"]), rng.randrange(1, 4)
    note(f"{np} ranks, the stage differs in {diff}, {steps} steps")
    d = scenario(tmp, "cross_mismatch", np, {"SCENARIO_DIFF": diff, "SCENARIO_STEPS": str(steps)},
                 timeout(0.5, 1.2))
    check_cross_mismatch(*rj.analyze(d), np, diff)


def case_cross_mismatch_live(tmp):
    np, diff = rng.randrange(4, 7), rng.choice(["op", "count"])
    note(f"{np} ranks, the stage differs in {diff}")
    r, text = lockstep_run(tmp, "cross_mismatch", np, {"SCENARIO_DIFF": diff})
    check_cross_mismatch(r, text, np, diff)


def case_cross_gpu_stuck(tmp):
    """The stage's collective is stuck on the GPU (a dead link); the stage ranks either wait for
    it or go on and queue the world's next AllReduce behind it on their stream. The world waits:
    one root, the stuck collective."""
    np, nosync = rng.randrange(3, 7), rng.choice(["0", "1"])
    note(f"{np} ranks, stage ranks go on without waiting: {nosync}")
    env = {"LOCKSTEP_EMU_ASYNC": "1", "LOCKSTEP_EMU_HANG_COLL": "1:2", "SCENARIO_NOSYNC": nosync}
    d = scenario(tmp, "cross_gpu_stuck", np, env, timeout(0.5, 1.2))
    r, text = rj.analyze(d)
    f = one_root(r, "stuck_in_flight")
    expect(f["seq"] == 1 and sorted(f["ranks"]) == [0, 1], f"{f}")
    expect(len([g for g in r["findings"] if g["kind"] == "stuck_in_flight"]) == 1,
           f"the world's AllReduce queued behind it is not stuck of its own: {rj.kinds(r)}")
    all_follow(r)
    w = waits_for(r, np - 1)
    expect(w["root"] == 0 and w["hops"] >= 2, f"{w}")
    one_line(text, r"who waits for it \(%d ranks\)" % np, "who waits for the stuck collective")


# ---------------------------------------------------------------- pipeline parallel


def pp_shape():
    tp, pp = rng.choice([(4, 4), (2, 4), (4, 2), (2, 2)])
    dp = rng.choice([2, 4]) if tp * pp == 16 else rng.choice([4, 8])
    return tp, pp, dp


def check_pp(r, text, tp, pp, dp, victim):
    f = one_root(r, "missing_ranks")
    t, p, d = victim % tp, victim // tp % pp, victim // (tp * pp)
    group = [d * tp * pp + p * tp + k for k in range(tp)]
    expect(f["missing"] == [victim] and sorted(f["waiting"] + f["missing"]) == group,
           f"the root is not the victim's tensor-parallel AllReduce ({group}): {f}")
    all_follow(r)  # the p2p_unmatched among them (a victim stuck in its backward pass on the
    # first stage leaves none: its sends and receives of that pass were all done)
    one_line(text, r"rank %d never called it" % victim, "that the victim never called it")
    w = waits_for(r, victim)
    expect(w["state"] in ("running", "dead") and w["hops"] == 0 and w["root"] == 0, f"{w}")


def case_pp_chain(tmp):
    """Tensor x pipeline x data parallel (up to 64 ranks): one rank stays busy before its
    tensor-parallel AllReduce; its stage peers wait there, the next and previous stages wait in
    receives from it and from each other, the other replicas in the data-parallel AllReduce.
    One root cause, the victim's; every p2p_unmatched follows from it."""
    tp, pp, dp = pp_shape()
    np = tp * pp * dp
    victim, where = rng.randrange(np), rng.choice(["forward", "backward"])
    steps = rng.randrange(1, 3)
    note(f"TP {tp} x PP {pp} x DP {dp}, victim {victim} stops in its {where} pass, {steps} steps")
    env = {"SCENARIO_TP": str(tp), "SCENARIO_PP": str(pp), "SCENARIO_VICTIM": str(victim),
           "SCENARIO_WHERE": where, "SCENARIO_STEPS": str(steps), "SCENARIO_STEP_MS": "2"}
    d = scenario(tmp, "pp_chain", np, env, timeout(0.8, 1.5))
    check_pp(*rj.analyze(d), tp, pp, dp, victim)


def case_pp_chain_live(tmp):
    tp, pp, dp = 2, 2, 4
    victim = rng.randrange(16)
    note(f"TP 2 x PP 2 x DP 4 under lockstep run, victim {victim}")
    env = {"SCENARIO_TP": "2", "SCENARIO_PP": "2", "SCENARIO_VICTIM": str(victim),
           "SCENARIO_STEP_MS": "2", "SCENARIO_WHERE": rng.choice(["forward", "backward"])}
    r, text = lockstep_run(tmp, "pp_chain", 16, env)
    check_pp(r, text, tp, pp, dp, victim)


# ---------------------------------------------------------------- a node fails


def node(tmp, host, offset, size, world, idfile, env, launcher):
    """One simulated node: its own launcher, host name and trace folder."""
    d = os.path.join(tmp, host)
    os.makedirs(d, exist_ok=True)
    inner = chains_cmd("node_failure", size, ("--rank-offset", str(offset), "--world-size",
                                              str(world), "--idfile", idfile, *launcher))
    cmd = ["unshare", "-u", "sh", "-c", 'hostname "$0" && exec "$@"', host, *inner]
    return d, subprocess.Popen(cmd, env=rj.rank_env(d, env), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)


def node_failure(tmp, size, nodes, steps, last_env=None, stop=(2, 3)):
    """The last of `nodes` nodes of `size` ranks dies after `steps` steps; last_env: more
    environment for its ranks alone; stop: the launcher's stop once stuck that long (s)."""
    if os.geteuid() != 0 or subprocess.run(["unshare", "-u", "true"]).returncode != 0:
        raise Skip("needs root for a UTS namespace per simulated node (unshare -u)")
    world = size * nodes
    sig = rng.choice(["TERM", "KILL"])
    note(f"{nodes} nodes of {size} ranks; the last dies after {steps} steps; the others are "
         f"stopped with SIG{sig}")
    env = {"SCENARIO_NODE_SIZE": str(size), "SCENARIO_STEPS": str(steps)}
    idfile = os.path.join(tmp, "id")
    runs = [node(tmp, f"node{n}", n * size, size, world, idfile,
                 {**env, **(last_env or {})} if n == nodes - 1 else env,
                 ("--kill-signal", sig, *timeout(*stop))) for n in range(nodes)]
    for _, p in runs:
        print(p.communicate(timeout=120)[0][-2000:], end="")
    dirs = [d for d, _ in runs]
    r, text = rj.analyze_paths(dirs)
    f = one_root(r, "rank_crashed")
    lost = list(range(world - size, world))
    expect(f["dead"] == lost, f"{f}")
    # Killed without a record too, the others' last heartbeats are the newest sign of the job:
    # post mortem nothing says they are gone ("while the other ranks live on").
    one_line(text, r"ranks? [-\d,]+ on host node%d ended together at [^)]*\)(, [\d.]+ s before "
                   r"the rest| while the other ranks live on): the node failed" % (nodes - 1),
             "that the node failed")
    m = follows(r, "missing_ranks", 0)[0]
    expect(m["missing"] == lost, f"{m}")
    rj.no_death_blamed(r, list(range(world - size)), "the ranks that outlived the node")


def case_node_failure(tmp):
    """Every rank of the last node dies at one instant (no exit records); the other nodes' ranks
    wait on in the next AllReduce for seconds until their launcher stops them. Post mortem the
    node failure is the root cause, first: not 'stopped with the job'."""
    size, nodes = rng.choice([(2, 2), (4, 2), (2, 3), (2, 4)])
    node_failure(tmp, size, nodes, rng.randrange(1, 4))


def case_node_failure_late(tmp):
    """The same on a node whose scheduler starves the shim's heartbeat thread: each of its
    heartbeats comes up to 150-300 ms late, a random amount each time (the test shim's
    LOCKSTEP_TEST_BEAT_LATE_MS), so the ranks killed together left their last heartbeats up to
    that far apart. Each heartbeat says how
    late it came (end_why.beat_late_us) and the death windows widen by it: one wave, the node
    failed. (Read with the fixed window, the rank whose last heartbeat is oldest died 'first'
    and the others were stopped after it.) The node computes 0.6 s a step, so that its
    heartbeats had time to say how late they come before it dies. A heartbeat that late makes
    a silence read as gone only after 1 s + twice the lateness (up to 1.6 s), and the node dies
    up to 0.6 s after the others' last progress: the launcher stops the job 3-4 s after that
    progress, not 2-3 s (at 2.05 s, ranks killed 1.47 s before still read as alive: 3 runs in
    9 failed so)."""
    late = rng.choice([150, 200, 300])
    note(f"the last node's heartbeats come {late} ms late")
    node_failure(tmp, 4, 2, rng.randrange(1, 4),
                 {"LD_PRELOAD": rj.TEST_SHIM, "LOCKSTEP_TEST_BEAT_LATE_MS": str(late),
                  "SCENARIO_STEP_MS": "600"}, stop=(3, 4))


# ---------------------------------------------------------------- never reached NCCL


def check_late_init(r, text, np, victim, stopped, how=None):
    """how: what the victim did before NCCL, as its mark (the shim's, from its start) tells:
    "exit" (status 1), "signal" (ended with no status), "runs"; None: not checked."""
    f = one_root(r, "comm_init_mismatch")
    expect(f["missing"] == [victim] and f["waiting"] == [k for k in range(np) if k != victim],
           f"{f}")
    one_line(text, r"wait in CommInitRank of comm [0-9a-f]{8} \(%d ranks, from [^)]*\)+ for "
                   r"rank %d \(no trace: it never reached NCCL" % (np, victim),
             "that the others wait in init for the victim")
    said = {"exit": r"pid \d+ exited with status 1 before its first NCCL call",
            "signal": r"pid \d+ ended before its first NCCL call, by a signal",
            "runs": r"pid \d+ runs and has made no NCCL call yet"}
    if how:
        expect(re.search(r"rank %d \(no trace: it never reached NCCL \u2014 %s" %
                         (victim, said[how]), f["summary"]),
               f"the summary does not say what rank {victim}'s mark says ({how}): "
               f"{f['summary']}")
    if stopped:
        return
    w = waits_for(r, victim)
    expect(w["state"] == "no_trace" and w["root"] == 0, f"{w}")


def case_late_init(tmp):
    """One rank is busy (a dataset download) or exits before its first NCCL call: no trace of it
    at all. The others wait in ncclCommInitRank for it, and the report says so."""
    np = rng.randrange(3, 7)
    victim, how = rng.randrange(1, np), rng.choice(["busy", "exit"])
    note(f"{np} ranks, rank {victim} {how} before its first NCCL call")
    d = scenario(tmp, "late_init", np, {"SCENARIO_VICTIM": str(victim), "SCENARIO_INIT": how},
                 deadline(3, 5))
    # the launcher's SIGTERM at its deadline ends a busy victim with no status of its own
    check_late_init(*rj.analyze(d), np, victim, False, "exit" if how == "exit" else "signal")


def case_late_init_live(tmp):
    np, victim = 4, rng.randrange(1, 4)
    r, text = lockstep_run(tmp, "late_init", np, {"SCENARIO_VICTIM": str(victim),
                                                  "SCENARIO_INIT": "exit"})
    check_late_init(r, text, np, victim, True, "exit")


def case_late_init_default(tmp):
    """`lockstep run` with the default bounds while the victim has not reached NCCL: it left a
    mark (the shim's, from its start) that says what it does. Ended (exit 1, or SIGKILL as the
    OOM killer ends it): the others wait for no rank that runs, the short bound of a wait for
    ended ranks (3 s). Asleep for good: the short bound (25 s). Computing: slow, said once with
    the rank named as one with no NCCL call yet, and a stall only at the long bound (here 12 s).
    Had the mark not been read, each would be a rank that may still be starting: the long bound
    (100 s here, the test's timeout before)."""
    np, victim = 4, rng.randrange(1, 4)
    how = rng.choice(["exit", "kill", "sleep", "busy"])
    note(f"{np} ranks, rank {victim} before its first NCCL call: {how}")
    env = {"SCENARIO_VICTIM": str(victim), "SCENARIO_INIT": "busy" if how in ("sleep", "busy")
           else how, "SCENARIO_BUSY": "sleep" if how == "sleep" else "compute",
           "SCENARIO_DELAY_MS": "3600000"}
    bounds = ("--stall-short", "3", "--stall-long", "12") if how == "busy" else (
        "--stall-long", "100")
    d = os.path.join(tmp, "run")
    js = os.path.join(tmp, "run.json")
    cmd = [LOCKSTEP, "run", "--dir", d, *bounds, "--json", js, "--", *chains_cmd("late_init", np)]
    p = subprocess.run(cmd, env=rj.clean_env(env), capture_output=True, text=True, timeout=170)
    print(p.stderr[-4000:], end="")
    expect(p.returncode == 3, f"lockstep run exited {p.returncode}, want 3:\n{p.stdout}")
    r = json.load(open(js))
    check_late_init(r, p.stdout, np, victim, True,
                    {"exit": "exit", "kill": "signal"}.get(how, "runs"))
    st = r["stall"]
    if how in ("exit", "kill"):
        expect(st["bound"] == "short" and st["short_s"] < 25,
               f"not the short bound of a wait for a rank that ended: {st}")
        expect(f"rank {victim} (pid" in st["awaited"] and "ended" in st["awaited"] and
               "before its first NCCL call" in st["awaited"], f"awaited: {st['awaited']}")
        if how == "exit":
            expect("with status 1" in st["awaited"], f"awaited: {st['awaited']}")
    elif how == "sleep":
        expect(st["bound"] == "short", f"an asleep rank before NCCL not held to the short bound: "
                                       f"{st}")
    else:
        expect(st["bound"] == "long", f"a computing rank before NCCL stopped before the long "
                                      f"bound: {st}")
        slow = [line for line in p.stderr.splitlines() if "not a hang yet" in line]
        expect(slow and f"rank {victim} (pid" in slow[0] and "no NCCL call yet" in slow[0],
               f"the slow line does not name rank {victim} as one with no NCCL call yet: "
               f"{slow}")
        # where it is, from its live stack (read from outside: not under qemu-user)
        expect(emulated() or re.search(r"now in .*\(load_batch\)", slow[0]),
               f"the slow line does not say where rank {victim} is: {slow[0]}")


# ---------------------------------------------------------------- refused, then exited


def case_refused_exit(tmp):
    """The victim's Broadcast names a root out of range: NCCL refuses it, the program's check
    ends it with status 1; the others wait in that Broadcast. The refused call is the root, the
    exit follows from it."""
    np, steps = rng.randrange(3, 7), rng.randrange(1, 4)
    note(f"{np} ranks, {steps} steps")
    d = scenario(tmp, "refused_exit", np, {"SCENARIO_STEPS": str(steps)}, timeout(0.5, 1.2))
    r, text = rj.analyze(d)
    f = one_root(r, "nccl_error")
    expect(f["refused"] and f["ranks"] == [np - 1], f"{f}")
    follows(r, "rank_exited", 0, dead=[np - 1])
    m = follows(r, "missing_ranks", 0)[0]
    expect(m["missing"] == [np - 1] and m["seq"] == steps + 1, f"{m}")


# ---------------------------------------------------------------- behind deaths and cycles


def case_death_in_child(tmp):
    """Pairs exchange, then the world reduces; the victim is OOM-killed in its compute; its
    partner waits in the pair, every other pair in the world; the launcher tears the job down
    50 ms to 2.5 s later. One root, the death."""
    np = rng.choice([4, 6, 8])
    victim = rng.randrange(np)
    sig, delay = rng.choice(["TERM", "KILL"]), rng.randrange(50, 2500)
    note(f"{np} ranks, rank {victim} OOM-killed, SIG{sig} to the rest {delay} ms later")
    d = scenario(tmp, "death_in_child", np, {"SCENARIO_VICTIM": str(victim)},
                 ("--fail-fast", "--fail-fast-signal", sig, "--fail-fast-delay", str(delay)),
                 want_rc=None)
    r, text = rj.analyze(d)
    f = one_root(r, "rank_crashed")
    expect(f["dead"] == [victim], f"{f}")
    all_follow(r)


def case_cycle_behind(tmp):
    """Ranks 0 and 1 both receive first from each other; the others wait in the world's next
    AllReduce for them: one root, the cycle."""
    np = rng.randrange(3, 7)
    d = scenario(tmp, "cycle_behind", np, {"SCENARIO_STEPS": str(rng.randrange(1, 4))},
                 timeout(0.5, 1.2))
    r, text = rj.analyze(d)
    f = one_root(r, "deadlock_cycle")
    expect(f["cycle"] in ([0, 1], [1, 0]), f"{f}")
    m = follows(r, "missing_ranks", 0)[0]
    expect(m["missing"] == [0, 1], f"{m}")
    one_line(text, r"why: AllReduce #\d+ on comm [0-9a-f]{8} waits for rank [01], which waits in a "
                   r"cycle", "that the world waits behind the cycle")


def case_two_causes(tmp):
    """In one pair a rank is late, in another a rank calls a different count; the rest wait in
    the world for both: two root causes, each with its own waits."""
    np = rng.choice([6, 8])
    env = {"SCENARIO_VICTIM": "1", "SCENARIO_VICTIM2": "2"}
    d = scenario(tmp, "two_causes", np, env, timeout(0.5, 1.2))
    r, text = rj.analyze(d)
    got = sorted(f["kind"] for f in roots(r))
    expect(got == ["count_mismatch", "missing_ranks"], f"roots: {got}")
    world = [f for f in r["findings"] if f["kind"] == "missing_ranks" and 4 in f["waiting"]]
    expect(world and world[0]["consequence_of"] is not None, f"{world}")


def case_abort_in_child(tmp):
    """The victim aborts its pair's communicator after a bad batch; its partner waits in the
    pair, the others in the world: one root, the abort."""
    np = rng.choice([4, 6])
    d = scenario(tmp, "abort_in_child", np, {"SCENARIO_STEPS": str(rng.randrange(1, 3))},
                 timeout(0.5, 1.2))
    r, text = rj.analyze(d)
    f = one_root(r, "comm_aborted")
    expect(f["rank"] == np - 1, f"{f}")
    all_follow(r)



# ---------------------------------------------------------------- a healthy pair caught by the stop


def caught(tmp, where, late, catch_ms):
    """caught_mid_step: the last pair deadlocks send/send; pair {0,1} trains on for 2 s, then its
    rank `late` stays away and has the launcher stop the job catch_ms later, its partner waiting
    for it in the pair's next call. Returns (report, text, np)."""
    np = rng.choice([4, 6, 8])
    note(f"{np} ranks, pair {{0,1}} steps by {where}, rank {late} away {catch_ms} ms at the stop")
    env = {"SCENARIO_WHERE": where, "SCENARIO_LATE": str(late), "SCENARIO_CATCH_MS": str(catch_ms),
           "SCENARIO_MARK": os.path.join(tmp, "deadlocked"), "SCENARIO_STEPS": "3"}
    d = scenario(tmp, "caught_mid_step", np, env, ("--timeout", "90"))
    r, text = rj.analyze(d)
    f = r["findings"][0] if r["findings"] else {}
    expect(f.get("kind") == "deadlock_cycle" and sorted(f["cycle"]) == [np - 2, np - 1],
           f"first finding is not the last pair's deadlock: {f}")
    partner = rank(r, 1 - late)
    inside = partner["last_call"] or {}
    expect(partner["state"] == "vanished" and inside.get("result") == "Pending",
           f"rank {1 - late} was not caught inside its call: {partner}")
    return r, text, np


def check_caught_young(r, text):
    one_root(r, "deadlock_cycle")
    for f in r["findings"]:
        expect(not {0, 1} & set(f["ranks"]), f"a finding about the healthy pair: {f['summary']}")
    one_line(text, r"ranks? [-0-9,]+ (was|were) stopped with the job \(no exit record: SIGKILL, "
                   r"all at once", "that the healthy ranks were stopped with the job, not a cause")


def case_caught_mid_step(tmp):
    """A healthy pipeline pair caught by the launcher's stop mid-step: one rank waits in a Send or
    Recv its partner, 300 ms away in its own work, has not posted yet. The partner was on its way
    (no older wait than ranks take to meet): the pair is under way, not a second root cause."""
    late = rng.choice([0, 1])
    r, text, _ = caught(tmp, "send", late, 300)
    check_caught_young(r, text)


def case_caught_mid_allreduce(tmp):
    """The same with the pairs stepping by an AllReduce: rank 0 waits in it for rank 1, which
    was on its way when the job was stopped."""
    r, text, _ = caught(tmp, "allreduce", 1, 300)
    check_caught_young(r, text)


def case_caught_late(tmp):
    """The same pair, but its late rank stays away 2.5 s before the stop, far longer than the
    pair's ranks take to meet: that wait is a root cause of its own, beside the deadlock."""
    late = rng.choice([0, 1])
    r, text, np = caught(tmp, rng.choice(["send", "allreduce"]), late, 2500)
    got = sorted(f["kind"] for f in roots(r) if f["kind"] != "trace_incomplete")
    expect(len(got) == 2 and "deadlock_cycle" in got, f"roots: {got}")
    second = [f for f in roots(r) if f["kind"] in ("p2p_unmatched", "missing_ranks")]
    expect(second and sorted(second[0]["ranks"]) == [0, 1] and
           f"rank {late} never " in second[0]["summary"], f"no root says rank {late} is missing: "
                                                        f"{[f['summary'] for f in second]}")


if __name__ == "__main__":
    sys.exit(run(globals(), "lockstep-chains-"))
