#!/usr/bin/env python3
"""test_lifetimes.py -- hangs that lie in the lives of communicators and of ranks, end to end:
NCCL programs (lifetimes.c) run as ranks on the CPU emulator under the real shim, stopped by
their launcher (or by `lockstep run`), then judged post-mortem and live. A group created by one
rank alone, groups created in different orders, a split only some ranks make, ranks that
finished while another made one call more: each case names the one root cause a person acts on
(docs/analyzer.md, "Lifetimes"). Sizes and timings are drawn at random (the seed is printed;
LOCKSTEP_TEST_SEED repeats).

Usage: test_lifetimes.py CASE   (paths come from the environment meson sets)
"""
import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import emulated, expect, run  # noqa: E402
import test_realjobs as rj  # noqa: E402
from test_realjobs import follows, one_root, roots  # noqa: E402

LIFETIMES = os.environ["LIFETIMES"]
rng = rj.rng
note = rj.note


def cmd(mode, np, stop=None):
    """The launcher's command: it stops the job once no rank made progress in the emulator for
    half a second to a second while one waits there, or with `stop` its own options (a plain
    timeout where a rank never reaches the emulator)."""
    stop = stop or ("--stop-when-stuck", str(round(rng.uniform(0.5, 1.2), 2)), "--timeout", "90")
    return [rj.LAUNCH, "--np", str(np), "--seed", str(rng.randrange(1 << 30)), *stop, "--",
            LIFETIMES, mode]


def post_mortem(tmp, mode, np, env=None, stop=None):
    """Runs `lifetimes MODE` as np ranks until the launcher stops the hung job; returns the
    report and its text."""
    d = os.path.join(tmp, "traces")
    os.makedirs(d, exist_ok=True)
    p = subprocess.run(cmd(mode, np, stop), env=rj.rank_env(d, env), capture_output=True,
                       text=True, timeout=180)
    print(p.stderr[-3000:], end="")
    expect(p.returncode == rj.HUNG, f"launcher exited {p.returncode}, want {rj.HUNG}")
    return rj.analyze(d)


def post_mortem_when(tmp, mode, np, env, ready, settle):
    """Runs `lifetimes MODE` as np ranks and has the launcher stop it as at its timeout (SIGUSR1)
    `settle` seconds after ready(idfile) says the job is in the state the case wants: the stop
    counts from that state, not from launch (a sanitized or loaded machine takes seconds to get
    there). Returns the report and its text."""
    d = os.path.join(tmp, "traces")
    os.makedirs(d, exist_ok=True)
    idfile = os.path.join(tmp, "id")
    c = cmd(mode, np, ("--timeout", "150", "--idfile", idfile))
    p = subprocess.Popen(c, env=rj.rank_env(d, env), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        limit = time.time() + 120
        while not ready(idfile) and p.poll() is None and time.time() < limit:
            time.sleep(0.05)
        expect(p.poll() is None and ready(idfile),
               f"the job never got there (launcher {p.poll()})")
        time.sleep(settle)
        p.send_signal(signal.SIGUSR1)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    print(err[-3000:], end="")
    expect(p.returncode == rj.HUNG, f"launcher exited {p.returncode}, want {rj.HUNG}")
    return rj.analyze(d)


def live(tmp, mode, np, env=None):
    """`lockstep run --stall 2` on `lifetimes MODE`: the report and its text."""
    js = os.path.join(tmp, "run.json")
    p = subprocess.run([rj.LOCKSTEP, "run", "--dir", os.path.join(tmp, "run"), "--stall", "2",
                        "--json", js, "--", rj.LAUNCH, "--np", str(np), "--seed",
                        str(rng.randrange(1 << 30)), "--", LIFETIMES, mode],
                       env=rj.clean_env(env), capture_output=True, text=True, timeout=240)
    print(p.stderr[-3000:], end="")
    expect(p.returncode == 3, f"lockstep run exited {p.returncode}, want 3:\n{p.stdout}\n"
                              f"{p.stderr[-2000:]}")
    return json.load(open(js)), p.stdout


def summaries(r):
    return [(f["kind"], f["summary"]) for f in r["findings"]]


def no_untraced_words(r):
    """No finding says a member with a trace never reached NCCL."""
    for f in r["findings"]:
        expect("no trace" not in f["summary"], f"a member with a trace is called untraced: "
                                               f"{f['summary']}")


# ---------------------------------------------------------------- endings


def check_alone(r, text, np, victim):
    f = one_root(r, "missing_ranks")
    others = sorted(set(range(np)) - {victim})
    expect(f["waiting"] == [victim] and f["missing"] == others and f["alone"],
           f"waiting {f['waiting']} missing {f['missing']} alone {f.get('alone')}: {f['summary']}")
    expect("no other member will make" in f["summary"] and "finished without it" in f["summary"],
           f"the summary does not say the others finished: {f['summary']}")
    for g in roots(r):
        expect(g["kind"] != "rank_exited", f"a clean exit is a root cause: {g['summary']}")
    rj.one_line(text, r"finished without it \(exited with status 0", "that the others finished")


def case_alone_at_exit(tmp):
    """The victim logs one metric more at the end of training; every other rank finishes (exits
    0, after destroying the communicator or not). The victim made a call nobody else will make:
    it is the root cause, not the ranks that finished ("ranks 1-7 exited with status 0 while rank
    0 still waits for them" was the report)."""
    np, steps, destroy = rng.randrange(3, 9), rng.randrange(1, 4), rng.choice(["0", "1"])
    victim = rng.randrange(np)
    note(f"{np} ranks, victim {victim}, {steps} steps, destroy {destroy}")
    env = {"SCENARIO_STEPS": str(steps), "SCENARIO_DESTROY": destroy,
           "SCENARIO_VICTIM": str(victim)}
    check_alone(*post_mortem(tmp, "alone_at_exit", np, env), np, victim)


def case_alone_at_exit_live(tmp):
    """The same under `lockstep run`."""
    np, victim = rng.randrange(3, 7), 0
    note(f"{np} ranks, victim {victim}")
    check_alone(*live(tmp, "alone_at_exit", np, {"SCENARIO_DESTROY": "1"}), np, victim)


def case_alone_then_send(tmp):
    """As alone_at_exit, but the victim would then send its last activations to the next rank,
    which waits for them: the others finished, the next rank waits for the victim elsewhere. The
    victim's call is still one nobody else will make, and the waiting rank is no reason to doubt
    it (was: the finished ranks, rank_exited, taken for the cause)."""
    np, steps = rng.randrange(4, 9), rng.randrange(1, 3)
    victim = rng.randrange(np)
    nxt = (victim + 1) % np
    note(f"{np} ranks, victim {victim}, {steps} steps")
    r, text = post_mortem(tmp, "alone_then_send", np, {"SCENARIO_STEPS": str(steps),
                                                       "SCENARIO_VICTIM": str(victim)})
    f = one_root(r, "missing_ranks")
    done = sorted(set(range(np)) - {victim, nxt})
    expect(f["waiting"] == [victim] and f["missing"] == sorted(done + [nxt]) and f["alone"],
           f"waiting {f['waiting']} missing {f['missing']} alone {f.get('alone')}: {f['summary']}")
    expect(f"{ranks_words(done)} finished without it" in f["summary"] and
           f"rank {nxt} waits for it elsewhere" in f["summary"],
           f"the summary does not tell the finished from the waiting rank: {f['summary']}")
    for g in roots(r):
        expect(g["kind"] != "rank_exited", f"a clean exit is a root cause: {g['summary']}")


def case_finished_early(tmp):
    """The other side of the same rule: one rank's data ran out a step early, it finished while
    the others started one step more. The rank that finished is the odd one: its clean exit is
    the root cause the others wait for."""
    np, steps = rng.randrange(3, 9), rng.randrange(2, 4)
    victim = rng.randrange(np)
    note(f"{np} ranks, victim {victim}, {steps} steps")
    r, _ = post_mortem(tmp, "finished_early", np, {"SCENARIO_STEPS": str(steps),
                                                    "SCENARIO_VICTIM": str(victim)})
    f = one_root(r, "rank_exited")
    expect(f["dead"] == [victim] and f["status"] == 0 and
           f["waiting"] == sorted(set(range(np)) - {victim}), f"{f}")
    follows(r, "missing_ranks", 0, missing=[victim], alone=False)


# ---------------------------------------------------------------- creations


def check_ckpt(r, text, np, victim, steps):
    f = one_root(r, "missing_ranks")
    expect(f["missing"] == [victim] and f["waiting"] == sorted(set(range(np)) - {victim}) and
           f["seq"] == steps + 1, f"missing {f['missing']} waiting {f['waiting']} seq {f['seq']}: "
                                  f"{f['summary']}")
    expect("CommInitRank" in f["summary"], f"the summary does not say where rank {victim} is: "
                                           f"{f['summary']}")
    for g in r["findings"]:
        if g["kind"] == "missing_ranks":
            expect(g["missing"] == [victim], f"another rank called missing: {g['summary']}")
    init = follows(r, "comm_init_mismatch", 0)[0]
    expect(init["waiting"] == [victim] and victim not in init["missing"] and init["missing"],
           f"the checkpoint group's creation: {init['summary']}")
    no_untraced_words(r)


def case_ckpt_group(tmp):
    """A checkpoint saved under `if rank == victim` creates its 2-rank group at first use; the
    other member never does and goes on with everyone else into the next step. The victim went
    elsewhere before a collective its peers had all made: it is behind on the world, and the
    cycle (the creation waits for ranks that wait for the victim) is its consequence. Was: the
    creation's members called untraced ("no trace: it never reached NCCL") and named by no rank."""
    np, steps = rng.randrange(3, 9), rng.randrange(1, 4)
    victim = rng.randrange(np - 1)
    note(f"{np} ranks, victim {victim}, {steps} steps")
    r, text = post_mortem(tmp, "ckpt_group", np, {"SCENARIO_STEPS": str(steps),
                                                   "SCENARIO_VICTIM": str(victim)})
    check_ckpt(r, text, np, victim, steps)


def case_ckpt_group_live(tmp):
    np, victim = rng.randrange(3, 7), 0
    note(f"{np} ranks, victim {victim}")
    check_ckpt(*live(tmp, "ckpt_group", np), np, victim, 2)


def check_init_order(r, np):
    f = one_root(r, "deadlock_cycle")
    expect(sorted(f["ranks"]) == list(range(np)), f"cycle ranks {f['ranks']}: {f['summary']}")
    low, high = list(range(np // 2)), list(range(np // 2, np))
    got = sorted(sorted(g["missing"]) for g in r["findings"] if g["kind"] == "comm_init_mismatch")
    expect(got == sorted([low, high]), f"the creations' missing ranks {got}, want {low} and "
                                       f"{high}: {summaries(r)}")
    no_untraced_words(r)


def case_init_order(tmp):
    """Two world-sized groups created in different orders by the two halves of the job: each
    half waits in one creation for the other half, which waits in the other creation. A deadlock,
    its members named by rank (they have traces), though no creation is the world's numbering."""
    np = rng.choice([2, 4, 6, 8])
    note(f"{np} ranks")
    check_init_order(post_mortem(tmp, "init_order", np)[0], np)


def case_init_order_live(tmp):
    np = rng.choice([2, 4, 6])
    note(f"{np} ranks")
    check_init_order(live(tmp, "init_order", np)[0], np)


def check_split(r, np, splitters, steps):
    f = one_root(r, "missing_ranks")
    expect(f["missing"] == list(range(splitters)) and
           f["waiting"] == list(range(splitters, np)) and f["seq"] == steps + 1,
           f"missing {f['missing']} waiting {f['waiting']} seq {f['seq']}: {f['summary']}")
    expect("CommSplit" in f["summary"], f"the summary does not say the missing ranks split the "
                                        f"world: {f['summary']}")
    expect(not [g for g in r["findings"] if g["kind"] == "deadlock_cycle"],
           f"a deadlock reported: {summaries(r)}")


def case_split_vs_coll(tmp):
    """Some ranks split the world (a side group only they think they need) while the others go
    on into the world's next collective: one communicator, two paths at the same point. Not a
    deadlock between ranks: the ranks in the split never made the collective the rest wait in."""
    np, steps = rng.randrange(3, 9), rng.randrange(1, 4)
    splitters = rng.randrange(1, np)
    note(f"{np} ranks, {splitters} split, {steps} steps")
    r, _ = post_mortem(tmp, "split_vs_coll", np, {"SCENARIO_STEPS": str(steps),
                                                   "SCENARIO_SPLITTERS": str(splitters)})
    check_split(r, np, splitters, steps)


def case_split_vs_coll_live(tmp):
    np = rng.randrange(3, 7)
    splitters = rng.randrange(1, np)
    note(f"{np} ranks, {splitters} split")
    check_split(live(tmp, "split_vs_coll", np, {"SCENARIO_SPLITTERS": str(splitters)})[0], np,
                splitters, 2)


# ---------------------------------------------------------------- shrinking after a failure


def second_victim(np, victim):
    return np - 2 if victim == np - 1 else np - 1


def check_history(r, victim, root_index=0):
    """Every finding about the victim's death is history (after the present, not its cause)."""
    about = [f for f in r["findings"] if f["kind"] == "rank_crashed" and victim in f["dead"]]
    expect(about, f"no finding says rank {victim} died: {summaries(r)}")
    for i, f in enumerate(r["findings"]):
        old = f["kind"] == "rank_crashed" or (f["kind"] in ("nccl_error", "missing_ranks") and
                                               victim in f.get("missing", []) + f["ranks"] and
                                               f["consequence_of"] is not None)
        if f["kind"] == "rank_crashed":
            expect(f.get("history") and i > root_index, f"the death of rank {victim} is not history "
                                                    f"after the present: {summaries(r)}")
        if f.get("history"):
            expect(i > root_index, f"history before the present: {summaries(r)}")
        elif old and i != root_index:
            expect(False, f"a finding of the recovered failure is not history: {f['summary']}")
    now = [f for f in roots(r) if not f.get("history") and f["kind"] != "trace_incomplete"]
    expect(len(now) == 1, f"{len(now)} root causes of the present: {summaries(r)}")


def check_recover_hang(r, np, victim, v2):
    f = r["findings"][0]
    survivors = sorted(set(range(np)) - {victim, v2})
    expect(f["kind"] == "missing_ranks" and f["consequence_of"] is None and not f.get("history") and
           f["missing"] == [v2] and f["waiting"] == survivors,
           f"first finding, want rank {v2} missing from the shrunk world: {summaries(r)}")
    check_history(r, victim)


def case_shrink_recover_hang(tmp):
    """A failure the job recovered from, then a hang of its own: the victim dies, the survivors'
    watchdog revokes the world, they shrink it without the victim and train on; then one
    survivor stays in its data loader. The present hang is the root cause; the death is history,
    told after it, and nothing of the present follows from it (was: the death first, the hang
    its consequence through the launcher's teardown)."""
    np, steps, after = rng.randrange(4, 9), rng.randrange(1, 3), rng.randrange(1, 5)
    victim = rng.randrange(np)
    v2 = second_victim(np, victim)
    note(f"{np} ranks, victim {victim}, then {v2}, {steps} steps before, {after} after")
    r, _ = post_mortem(tmp, "shrink_recover_hang", np,
                       {"SCENARIO_STEPS": str(steps), "SCENARIO_AFTER": str(after),
                        "SCENARIO_VICTIM": str(victim)})
    check_recover_hang(r, np, victim, v2)


def case_shrink_recover_hang_live(tmp):
    np, victim = rng.randrange(4, 7), 1
    note(f"{np} ranks, victim {victim}")
    r, _ = live(tmp, "shrink_recover_hang", np, {"SCENARIO_VICTIM": str(victim)})
    check_recover_hang(r, np, victim, second_victim(np, victim))


def case_shrink_waits(tmp):
    """The victim dies, the survivors shrink the world without it, but one survivor is still in
    its data loader: the shrink waits for it. A creation like any other: a comm_init_mismatch
    names the survivor, never the rank the shrink excluded on purpose (was: no finding of the
    shrink at all)."""
    np, victim = rng.randrange(4, 9), rng.randrange(4)
    v2 = second_victim(np, victim)
    note(f"{np} ranks, victim {victim}, then {v2}")
    r, _ = post_mortem(tmp, "shrink_waits", np, {"SCENARIO_VICTIM": str(victim)})
    f = r["findings"][0]
    expect(f["kind"] == "comm_init_mismatch" and f["consequence_of"] is None and
           f["missing"] == [v2] and f["waiting"] == sorted(set(range(np)) - {victim, v2}) and
           "CommShrink" in f["summary"], f"first finding: {summaries(r)}")
    for g in r["findings"]:
        expect(victim not in g.get("missing", []) or g.get("history"),
               f"the excluded rank {victim} is named as a culprit: {g['summary']}")
    check_history(r, victim)


def check_disagree(r, np, victim, odd, how):
    f = one_root(r, "comm_init_mismatch")
    cls = sorted(sorted(c["ranks"]) for c in f["classes"])
    others = sorted(set(range(np)) - {victim, odd})
    expect(cls == sorted([[odd], others]), f"classes {cls}, want [{odd}] apart from {others}: "
                                           f"{f['summary']}")
    expect(("CommSplit" if how == "split" else "excluding ranks") in f["summary"],
           f"the summary does not say what rank {odd} made: {f['summary']}")
    for g in r["findings"]:
        expect(victim not in g.get("missing", []) and g["kind"] != "rank_exited",
               f"the drained rank {victim} is blamed: {g['summary']}")


def case_shrink_disagree(tmp):
    """A planned shrink: the victim is drained (destroys the world, exits 0) and the others shrink
    the world without it, but one survivor has another view of the job: it excludes one rank more,
    or splits the world instead. Members made different communicators at one creation of the
    world: none can complete (was: no finding, or the drained rank blamed)."""
    np, victim, how = rng.randrange(4, 9), rng.randrange(3), rng.choice(["shrink", "split"])
    odd = second_victim(np, victim)
    note(f"{np} ranks, drained {victim}, odd {odd} ({how})")
    r, _ = post_mortem(tmp, "shrink_disagree", np, {"SCENARIO_VICTIM": str(victim),
                                                    "SCENARIO_HOW": how})
    check_disagree(r, np, victim, odd, how)


def case_shrink_disagree_live(tmp):
    np, victim, how = rng.randrange(4, 7), 1, rng.choice(["shrink", "split"])
    odd = second_victim(np, victim)
    note(f"{np} ranks, drained {victim}, odd {odd} ({how})")
    r, _ = live(tmp, "shrink_disagree", np, {"SCENARIO_VICTIM": str(victim), "SCENARIO_HOW": how})
    check_disagree(r, np, victim, odd, how)


# ---------------------------------------------------------------- nonblocking creation


def check_nonblocking(r, np, victim, gave_up):
    f = one_root(r, "comm_init_mismatch")
    waiting = sorted(set(range(np)) - {victim})
    expect(f["missing"] == [victim] and f["waiting"] == waiting and
           "CommInitRankConfig" in f["summary"],
           f"missing {f['missing']} waiting {f['waiting']}: {f['summary']}")
    if gave_up:
        ex = follows(r, "rank_exited", 0)
        expect(sorted(x for g in ex for x in g["dead"]) == waiting,
               f"the ranks that gave up: {summaries(r)}")


def case_nonblocking_absent(tmp):
    """The world is created nonblocking: the ranks' ncclCommInitRankConfig returns
    ncclInProgress and they poll ncclCommGetAsyncError, no thread inside NCCL, while the victim
    is still in its data loader and never calls the init. A creation waiting for a member like
    any other (was: no finding: nobody was inside a call). With SCENARIO_GIVE_UP_MS the waiting
    ranks abort the pending communicator and exit 1: their exits follow from the member that
    never came (was: their exits the root cause, the victim a second one)."""
    np, gave_up = rng.randrange(3, 9), rng.choice([0, 1])
    victim = rng.randrange(np)
    note(f"{np} ranks, victim {victim}, {'they give up' if gave_up else 'they poll'}")
    env = {"SCENARIO_VICTIM": str(victim)}
    if gave_up:
        env["SCENARIO_GIVE_UP_MS"] = str(rng.randrange(300, 1200))
    # The victim never reaches the emulator: a plain timeout stops the job.
    r, _ = post_mortem(tmp, "nonblocking_absent", np, env,
                       ("--timeout", str(round(rng.uniform(3, 4.5), 2))))
    check_nonblocking(r, np, victim, gave_up)


def case_nonblocking_absent_live(tmp):
    """The same under `lockstep run`: it notices the stall although no rank is inside NCCL (the
    pending creation is a wait) and stops the job with status 3 (was: it never noticed; the
    launcher's own timeout ended the job)."""
    np = rng.randrange(3, 7)
    victim = rng.randrange(np)
    note(f"{np} ranks, victim {victim}")
    r, _ = live(tmp, "nonblocking_absent", np, {"SCENARIO_VICTIM": str(victim)})
    check_nonblocking(r, np, victim, False)


# ---------------------------------------------------------------- a death inside a collective


def check_link_down(r, victim):
    f = one_root(r, "rank_crashed")
    expect(f["dead"] == [victim] and f["signal"] == 6, f"{f['summary']}")
    follows(r, "stuck_in_flight", 0, seq=f["seq"])


def case_link_down(tmp):
    """Async mode: the victim's link dies inside a collective every rank issued, so no GPU
    completes it; its watchdog aborts the communicator and ends the process (SIGABRT) while the
    others still wait in it. The rank that died inside the collective is what it waits for, GPU
    stuck or not (was: stuck_in_flight with nobody singled out)."""
    np, steps = rng.randrange(3, 9), rng.randrange(1, 4)
    victim = rng.randrange(np)
    note(f"{np} ranks, victim {victim}, {steps} steps")
    r, _ = post_mortem(tmp, "link_down", np, {"LOCKSTEP_EMU_ASYNC": "1",
                                              "SCENARIO_STEPS": str(steps),
                                              "SCENARIO_VICTIM": str(victim)})
    check_link_down(r, victim)


def case_link_down_live(tmp):
    np, victim = rng.randrange(3, 7), 1
    note(f"{np} ranks, victim {victim}")
    r, _ = live(tmp, "link_down", np, {"LOCKSTEP_EMU_ASYNC": "1", "SCENARIO_VICTIM": str(victim)})
    check_link_down(r, victim)


# ---------------------------------------------------------------- two jobs in one folder


def traces_in(d):
    return [f for f in (os.listdir(d) if os.path.isdir(d) else ()) if f.endswith(".trace")]


def case_two_jobs_live(tmp):
    """Two jobs write to one trace folder (a shared LOCKSTEP_DIR, the same rank numbers, no job
    id): `lockstep run` runs job A, which hangs (a checkpoint group only one rank creates), while
    job B, started beside it by another launcher, trains on. run stops A and diagnoses A; B is
    never stopped and finishes by itself with status 0 once told to (was: run stopped B too)."""
    np = rng.randrange(3, 6)
    d = os.path.join(tmp, "shared")
    stop = os.path.join(tmp, "stop-b")
    env_b = rj.rank_env(d, {"SCENARIO_STOP_FILE": stop})
    js = os.path.join(tmp, "run.json")
    # run first (it refuses a folder a running job already writes to), B once A's ranks are in.
    a_out, a_err = os.path.join(tmp, "run.out"), os.path.join(tmp, "run.err")
    with open(a_out, "w") as fo, open(a_err, "w") as fe:
        a = subprocess.Popen([rj.LOCKSTEP, "run", "--dir", d, "--stall", "2", "--json", js, "--",
                              rj.LAUNCH, "--np", str(np), "--seed", str(rng.randrange(1 << 30)),
                              "--", LIFETIMES, "ckpt_group"],
                             env=rj.clean_env(), stdout=fo, stderr=fe, text=True)
    b = None
    try:
        deadline = time.monotonic() + 120
        while a.poll() is None and time.monotonic() < deadline and len(traces_in(d)) < np:
            time.sleep(0.02)
        b = subprocess.Popen(cmd("train_until", np, ("--timeout", "300")), env=env_b,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        a.wait(timeout=240)
        p = subprocess.CompletedProcess(a.args, a.returncode, open(a_out).read(),
                                        open(a_err).read())
        print(p.stderr[-3000:], end="")
        expect(p.returncode == 3, f"lockstep run exited {p.returncode}, want 3:\n{p.stdout}\n"
                                  f"{p.stderr[-2000:]}")
        expect(b.poll() is None, f"job B ended ({b.returncode}) while job A was stopped")
        r = json.load(open(js))
        check_ckpt(r, p.stdout, np, 0, 2)
        with open(stop, "w"):
            pass
        out, err = b.communicate(timeout=120)
        expect(b.returncode == 0, f"job B exited {b.returncode}: {err[-2000:]}")
    finally:
        if a.poll() is None:
            a.kill()
            a.wait(timeout=30)
        if b is not None and b.poll() is None:
            b.kill()
            b.communicate(timeout=30)


# ---------------------------------------------------------------- several members absent


def check_dead_and_busy(r, np, victim, v2):
    got = {g["kind"]: g for g in roots(r) if not g.get("history") and g["kind"] != "trace_incomplete"}
    expect(sorted(got) == ["missing_ranks", "rank_crashed"],
           f"root causes {sorted(got)}, want the death and the busy rank: {summaries(r)}")
    expect(got["rank_crashed"]["dead"] == [victim], f"{got['rank_crashed']['summary']}")
    m = got["missing_ranks"]
    expect(sorted(m["missing"]) == sorted([victim, v2]) and
           m["waiting"] == sorted(set(range(np)) - {victim, v2}), f"{m['summary']}")
    expect(f"rank {v2}: it " in m["summary"], f"the summary does not say where rank {v2} is: "
                                              f"{m['summary']}")


def case_dead_and_busy(tmp):
    """Two ranks fail at once in different ways: one is killed (the OOM killer), another stays
    in its data loader (on the CPU) well past the time the ranks take to gather; the rest wait
    for both. Two independent sinks, two root causes: the death and the busy rank, each named
    with where it is (was: only the dead one; the busy rank, killed by the launcher afterwards,
    was taken for a rank the death had left running)."""
    np = rng.randrange(4, 9)
    victim, v2 = 0, np - 1
    note(f"{np} ranks, rank {victim} killed, rank {v2} busy")
    # Stopped after 2-3 s without progress: past the second a late rank may still be on its way.
    r, _ = post_mortem(tmp, "dead_and_busy", np, {},
                       ("--stop-when-stuck", str(round(rng.uniform(2, 3), 2)), "--timeout", "90"))
    check_dead_and_busy(r, np, victim, v2)


def case_dead_and_busy_live(tmp):
    np = rng.randrange(4, 7)
    note(f"{np} ranks")
    check_dead_and_busy(live(tmp, "dead_and_busy", np)[0], np, 0, np - 1)


# ---------------------------------------------------------------- busy or asleep, after the fact


def case_asleep(tmp):
    """A rank waits off the CPU for something of its own (a sleep, a file, a lock) while the
    others wait for it in the next collective; the launcher stops the job. The report written
    after the job is gone says it was off the CPU (and since when, once it had been on it), from
    the CPU time the shim's heartbeat sampled (was: "busy outside NCCL", as for a rank at
    work)."""
    np, steps = rng.randrange(3, 7), rng.randrange(1, 3)
    victim = rng.randrange(np)
    note(f"{np} ranks, victim {victim}, {steps} steps")
    r, text = post_mortem(tmp, "asleep", np, {"SCENARIO_STEPS": str(steps),
                                              "SCENARIO_VICTIM": str(victim)},
                          ("--stop-when-stuck", str(round(rng.uniform(1, 2), 2)), "--timeout",
                           "90"))
    f = one_root(r, "missing_ranks")
    expect(f["missing"] == [victim], f"{f['summary']}")
    rj.one_line(text, r"it was off the CPU( for [0-9.]+ m?s)? \(asleep, in I/O or blocked\)",
                "that the missing rank was off the CPU")


# ---------------------------------------------------------------- stuck outside NCCL


def check_outside(r, np, victim, live_run):
    f = one_root(r, "stuck_outside_nccl")
    expect(sorted(f["ranks"]) == list(range(np)), f"{f['summary']}")
    if live_run and emulated():  # live stacks need ptrace, which qemu-user lacks
        note("under emulation: the probe cannot read stacks, the odd rank is not checked")
    elif live_run:  # the probe tells the odd one: the rank in the lock
        expect(f["odd"] == [victim] and "save_state" in f["summary"], f"{f['summary']}")
    else:
        expect("off the CPU" in f["summary"], f"{f['summary']}")


def case_outside_barrier(tmp):
    """Every rank waits outside NCCL after collectives that completed everywhere: the others in a
    barrier of the program's own (a store polled every 20 ms), the victim in a lock it already
    holds. Post mortem (the launcher's timeout): stuck outside NCCL, every rank off the CPU for
    seconds before the stop (was: no finding at all)."""
    np = rng.randrange(3, 7)
    victim = rng.randrange(np)
    settle = round(rng.uniform(1.5, 3), 2)
    note(f"{np} ranks, victim {victim}, stopped {settle} s after the others reached the barrier")
    # The others publish their arrival at the barrier (the victim never gets there); the stop
    # comes `settle` s later, so every rank has been off the CPU for more than a second.
    r, _ = post_mortem_when(tmp, "outside_barrier", np, {"SCENARIO_VICTIM": str(victim)},
                            lambda idfile: len(glob.glob(idfile + ".epoch-end.*")) == np - 1,
                            settle)
    check_outside(r, np, victim, False)


def case_outside_barrier_live(tmp):
    """The same under `lockstep run`: the pollers of the barrier wake up again and again to sleep
    some more, which is a wait and not a pause of their own, so the stall is noticed and the
    probe names the rank in the lock (was: run never noticed: their sleeps counted as activity)."""
    np = rng.randrange(3, 6)
    victim = rng.randrange(np)
    note(f"{np} ranks, victim {victim}")
    check_outside(live(tmp, "outside_barrier", np, {"SCENARIO_VICTIM": str(victim)})[0], np,
                  victim, True)


# ---------------------------------------------------------------- out of order inside a cycle


def check_ring_skip(r, text, np, victim):
    f = one_root(r, "p2p_unmatched")
    nbrs = {(victim + 1) % np, (victim - 1) % np}
    expect({f["src"], f["dst"]} & {victim} and ({f["src"], f["dst"]} - {victim}) <= nbrs,
           f"the root's pair {f['src']} -> {f['dst']}, want rank {victim} and a neighbour: "
           f"{f['summary']}")
    expect(not [g for g in r["findings"] if g["kind"] == "deadlock_cycle"],
           f"a deadlock reported: {summaries(r)}")
    rj.one_line(text, rf"every wait of it comes back to rank {victim}", "why it is no deadlock")


def case_ring_skip(tmp):
    """Ring attention: each step exchanges blocks with the ring's neighbours, then all-reduces.
    One rank takes a causal-mask shortcut and skips the exchange: its neighbours wait in the
    exchange for it, it waits in the all-reduce for them. The waits close into a cycle, but every
    cycle comes back to the rank that left calls out: it is the root, not a deadlock of three
    ranks alike (was: deadlock_cycle over it and its neighbours)."""
    np, steps = rng.randrange(3, 9), rng.randrange(1, 3)
    victim = rng.randrange(np)
    note(f"{np} ranks, victim {victim}, {steps} steps")
    r, text = post_mortem(tmp, "ring_skip", np, {"SCENARIO_STEPS": str(steps),
                                                 "SCENARIO_VICTIM": str(victim)})
    check_ring_skip(r, text, np, victim)


def case_ring_open_group(tmp):
    """As ring_skip, but the victim's exchange throws after it queued its send: the send is in
    its trace, in a group it never ended. Never posted, as the diagnosis has it: the victim is the
    root; the finding says its send was queued in a group it never ended (was: "never posted
    the matching Send ... its last call was Send #k"), and the HTML report's picture of the sends
    and receives draws that send as never posted ("queued"), not as a send waiting for its
    receive (was: drawn waiting, the picture telling another story than the diagnosis)."""
    np, steps = rng.randrange(3, 9), rng.randrange(1, 3)
    victim = rng.randrange(np)
    note(f"{np} ranks, victim {victim}, {steps} steps")
    d = os.path.join(tmp, "traces")
    os.makedirs(d, exist_ok=True)
    p = subprocess.run(cmd("ring_open_group", np, None),
                       env=rj.rank_env(d, {"SCENARIO_STEPS": str(steps),
                                           "SCENARIO_VICTIM": str(victim)}),
                       capture_output=True, text=True, timeout=180)
    print(p.stderr[-3000:], end="")
    expect(p.returncode == rj.HUNG, f"launcher exited {p.returncode}, want {rj.HUNG}")
    r, text = rj.analyze(d)
    f = one_root(r, "p2p_unmatched")
    expect(victim in (f["src"], f["dst"]) and
           {f["src"], f["dst"]} - {victim} <= {(victim + 1) % np, (victim - 1) % np},
           f"the root's pair {f['src']} -> {f['dst']}, want rank {victim} and a neighbour: "
           f"{f['summary']}")
    expect(not [g for g in r["findings"] if g["kind"] == "deadlock_cycle"],
           f"a deadlock reported: {summaries(r)}")
    if f["src"] == victim:  # the victim's send, recorded and never posted, is named as such
        expect(f"it queued Send #{steps + 1}" in f["summary"] and
               "in a group it never ended" in f["summary"],
               f"the summary does not say the send was queued in a group never ended: "
               f"{f['summary']}")
    page = os.path.join(tmp, "report.html")
    a = subprocess.run([rj.LOCKSTEP, "analyze", "--html", page, d], env=rj.clean_env(),
                       capture_output=True, text=True, timeout=120)
    expect(a.returncode == 1 and os.path.exists(page), f"analyze --html exited {a.returncode}")
    html = open(page).read()
    nxt = (victim + 1) % np
    lane = re.search(rf'<g class="pair lane[^"]*" data-sender="{victim}" data-receiver="{nxt}">'
                     r'(.*?)</g>\n', html, re.S)
    expect(lane, f"no lane for rank {victim}'s sends to rank {nxt}")
    halves = re.findall(r'<g class="half (send|recv) ([a-z-]+)( cycle)?"><title>(.*?)</title>',
                        lane.group(1), re.S)
    send = [h for h in halves if h[0] == "send"][-1]
    expect(send[1] == "not-posted" and
           send[3].startswith(f"rank {victim} queued Send #{steps + 1} to rank {nxt} in a group "
                              f"it never ended"),
           f"rank {victim}'s queued send is drawn {send[1]!r}: {send[3]!r}")
    recv = [h for h in halves if h[0] == "recv"][-1]
    expect(recv[1] == "waiting", f"rank {nxt}'s receive is drawn {recv[1]!r}: {recv[3]!r}")


def ranks_words(v):
    """Ranks as the report writes them: "rank 3", "ranks 0,2,4", "ranks 0-1,3"."""
    v, runs = sorted(v), []
    for k in v:
        if runs and k == runs[-1][1] + 1:
            runs[-1][1] = k
        else:
            runs.append([k, k])
    body = ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)
    return f"rank {body}" if len(v) == 1 else f"ranks {body}"


def check_retry_split(r, np, victim):
    f = one_root(r, "comm_init_mismatch")
    group = [k for k in range(np) if k % 2 == victim % 2 and k != victim]
    done = [k for k in range(np) if k % 2 != victim % 2]
    expect(f.get("alone") is True and f["waiting"] == [victim] and
           f["missing"] == sorted(group + done), f"{f['summary']}")
    expect(f"rank {victim} made CommSplit (color {victim % 2})" in f["summary"] and
           "its creation #2" in f["summary"] and
           f"{ranks_words(done)} finished without it" in f["summary"] and
           f"{ranks_words(group)} wait" in f["summary"],
           f"the summary does not say who made it and where the others are: {f['summary']}")
    expect("rank_exited" not in [g["kind"] for g in roots(r)], f"{summaries(r)}")
    m = follows(r, "missing_ranks", r["findings"].index(f))
    expect(m[0]["missing"] == [victim] and m[0]["waiting"] == group,
           f"the group's wait for rank {victim}: {summaries(r)}")


def case_retry_split(tmp):
    """Tensor-parallel groups made by a split in retry logic: on one rank the split 'fails' after
    it completed and is made again, a split of the world nobody else makes. Its group waits for it
    in their first collective on the child; the other group trains on and finishes. The rank
    that split again is the root: a creation only it made, which no other member will make (was:
    the ranks that finished, rank_exited, taken for the cause)."""
    np = 2 * rng.randrange(2, 5)
    victim, steps = rng.randrange(np), rng.randrange(1, 3)
    note(f"{np} ranks, victim {victim}, {steps} steps")
    r, _ = post_mortem(tmp, "retry_split", np, {"SCENARIO_STEPS": str(steps),
                                                "SCENARIO_VICTIM": str(victim)})
    check_retry_split(r, np, victim)


def case_retry_split_live(tmp):
    np = 2 * rng.randrange(2, 4)
    victim = rng.randrange(np)
    note(f"{np} ranks, victim {victim}")
    check_retry_split(live(tmp, "retry_split", np, {"SCENARIO_VICTIM": str(victim)})[0], np,
                      victim)


def check_ring_skip_many(r, np, victims):
    # A skipper both of whose neighbours skipped too keeps nobody waiting: no cause of anything.
    waited = [v for v in victims if (v - 1) % np not in victims or (v + 1) % np not in victims]
    expect(not [g for g in r["findings"] if g["kind"] == "deadlock_cycle"],
           f"a deadlock reported: {summaries(r)}")
    rs = [g for g in roots(r) if g["kind"] != "trace_incomplete"]
    named = {}
    for g in rs:
        expect(g["kind"] == "p2p_unmatched", f"a root that is no unmatched exchange: {summaries(r)}")
        v = {g["src"], g["dst"]} & set(victims)
        expect(len(v) == 1, f"a root that names no skipper ({victims}): {g['summary']}")
        named[v.pop()] = r["findings"].index(g)
    expect(sorted(named) == waited,
           f"roots name ranks {sorted(named)}, want each skipper a rank waits for {waited} once: "
           f"{summaries(r)}")
    for i, g in enumerate(r["findings"]):  # each neighbour's wait follows from its own skipper
        if g["kind"] != "p2p_unmatched" or i in named.values():
            continue
        v = ({g["src"], g["dst"]} & set(victims)).pop()
        expect(g["consequence_of"] == named[v],
               f"{g['summary']} follows from {g['consequence_of']}, want {named[v]}")


def case_ring_skip_many(tmp):
    """Ring attention where the ranks whose block a causal mask hides wholly skip the exchange:
    two or three ranks, next to each other or apart. Their neighbours wait in the exchange for
    them, they wait in the all-reduce: every cycle passes through one of them, and no single one.
    Each skipper is a root of its own, its neighbours' waits follow from it (was: deadlock_cycle
    over them all)."""
    np = rng.randrange(6, 10)
    k = 3 if np >= 8 and rng.random() < 0.5 else 2
    victims = sorted(rng.sample(range(np), k))
    note(f"{np} ranks, victims {victims}")
    r, text = post_mortem(tmp, "ring_skip_many", np, {"SCENARIO_STEPS": str(rng.randrange(1, 3)),
                                                      "SCENARIO_VICTIMS":
                                                          ",".join(map(str, victims))})
    check_ring_skip_many(r, np, victims)
    rj.one_line(text, r"every cycle of it passes through one of", "why it is no deadlock")


def case_ring_skip_many_live(tmp):
    np = rng.randrange(6, 8)
    victims = sorted(rng.sample(range(np), 2))
    note(f"{np} ranks, victims {victims}")
    r, _ = live(tmp, "ring_skip_many", np, {"SCENARIO_VICTIMS": ",".join(map(str, victims))})
    check_ring_skip_many(r, np, victims)


def case_ring_skip_live(tmp):
    np = rng.randrange(3, 7)
    victim = rng.randrange(np)
    note(f"{np} ranks, victim {victim}")
    r, text = live(tmp, "ring_skip", np, {"SCENARIO_VICTIM": str(victim)})
    check_ring_skip(r, text, np, victim)


# ---------------------------------------------------------------- teardown (NCCL 2.31)

NCCL_231 = {"LOCKSTEP_EMU_VERSION": "23100"}


def check_teardown(r, np, victim):
    f = one_root(r, "missing_ranks")
    expect(f["missing"] == [victim] and f["waiting"] == sorted(set(range(np)) - {victim}) and
           f.get("seq") is None and "never came to its teardown" in f["summary"] and
           "CommDestroy" in f["summary"], f"{f['summary']}")
    expect("rank_exited" not in [g["kind"] for g in r["findings"]], f"{summaries(r)}")


def case_teardown_waits(tmp):
    """NCCL 2.31 and later: ncclCommDestroy waits for every member. The ranks finish and destroy
    the world while one is still writing its checkpoint: they wait in the destroy for it. A wait
    on the other members like any other, not a call every peer reached (was: no finding)."""
    np, steps = rng.randrange(3, 9), rng.randrange(1, 4)
    victim = rng.randrange(np)
    note(f"{np} ranks, victim {victim}, {steps} steps")
    r, _ = post_mortem(tmp, "teardown_waits", np, dict(NCCL_231, SCENARIO_STEPS=str(steps),
                                                       SCENARIO_VICTIM=str(victim)))
    check_teardown(r, np, victim)


def case_early_stop(tmp):
    """Early stopping decided on each rank's own validation loss: the victim stops and tears the
    world down while the others train one step more. From NCCL 2.31 its destroy waits for them
    and they wait in the step's all-reduce for it: the victim is the root (it went into the
    teardown), the destroy's wait follows; before 2.31 its destroy returns, it exits 0, and that
    exit is the root."""
    np, steps = rng.randrange(3, 9), rng.randrange(1, 3)
    victim, waits = rng.randrange(np), rng.choice([True, False])
    note(f"{np} ranks, victim {victim}, {steps} steps, teardown waits {waits}")
    env = dict(NCCL_231 if waits else {}, SCENARIO_STEPS=str(steps), SCENARIO_VICTIM=str(victim))
    r, _ = post_mortem(tmp, "early_stop", np, env)
    others = sorted(set(range(np)) - {victim})
    if waits:
        f = one_root(r, "missing_ranks")
        expect(f["missing"] == [victim] and f["waiting"] == others and f["seq"] == steps + 1 and
               "CommDestroy" in f["summary"], f"{f['summary']}")
        t = [g for g in follows(r, "missing_ranks", 0) if g.get("seq") is None]
        expect(t and t[0]["waiting"] == [victim] and t[0]["missing"] == others,
               f"the destroy's wait: {summaries(r)}")
    else:
        f = one_root(r, "rank_exited")
        expect(f["dead"] == [victim] and f["status"] == 0 and f["waiting"] == others, f"{f}")
    expect("deadlock_cycle" not in [g["kind"] for g in r["findings"]], f"{summaries(r)}")


def case_teardown_waits_live(tmp):
    np = rng.randrange(3, 7)
    victim = rng.randrange(np)
    note(f"{np} ranks, victim {victim}")
    check_teardown(live(tmp, "teardown_waits", np, dict(NCCL_231, SCENARIO_VICTIM=str(victim)))[0],
                   np, victim)


def case_teardown_after_shrink(tmp):
    """A chain: the victim dies, the survivors shrink the world without it and train on, then at
    the end destroy the shrunk communicator and the world, whose destroy (NCCL 2.31) waits for
    the dead member. The death is no history then: the survivors hang because of it now."""
    np, after = rng.randrange(4, 9), rng.randrange(1, 4)
    victim = rng.randrange(np)
    note(f"{np} ranks, victim {victim}, {after} steps after the shrink")
    r, _ = post_mortem(tmp, "teardown_after_shrink", np,
                       dict(NCCL_231, SCENARIO_VICTIM=str(victim), SCENARIO_AFTER=str(after)))
    f = r["findings"][0]
    expect(f["kind"] == "rank_crashed" and f["dead"] == [victim] and not f.get("history") and
           f["consequence_of"] is None, f"first finding: {summaries(r)}")
    t = [g for g in r["findings"] if g["kind"] == "missing_ranks" and g.get("seq") is None]
    expect(t and t[0]["missing"] == [victim] and t[0]["consequence_of"] == 0 and
           "CommDestroy" in t[0]["summary"], f"the destroy's wait: {summaries(r)}")


def check_nb_split(r, np, victim, steps):
    f = one_root(r, "missing_ranks")
    expect(f["missing"] == [victim] and f["waiting"] == sorted(set(range(np)) - {victim}) and
           f["seq"] == steps + 1, f"{f['summary']}")
    expect("CommSplit" in f["summary"], f"the summary does not say where rank {victim} went: "
                                        f"{f['summary']}")
    expect("deadlock_cycle" not in [g["kind"] for g in r["findings"]], f"{summaries(r)}")


def case_nonblocking_split_cycle(tmp):
    """A chain of two lives: one rank makes a side group of the world nonblocking and polls it
    from outside NCCL, the others go on into the world's next collective. The pending creation
    waits for them, they wait for it: a cycle through a collective and a creation, out of order,
    its root the rank that went into the creation."""
    np, steps = rng.randrange(3, 9), rng.randrange(1, 3)
    victim = rng.randrange(np)
    note(f"{np} ranks, victim {victim}, {steps} steps")
    r, _ = post_mortem(tmp, "nonblocking_split_cycle", np,
                       {"SCENARIO_STEPS": str(steps), "SCENARIO_VICTIM": str(victim)},
                       ("--timeout", str(round(rng.uniform(3, 4.5), 2))))
    check_nb_split(r, np, victim, steps)


def case_nonblocking_split_cycle_live(tmp):
    np = rng.randrange(3, 7)
    victim = rng.randrange(np)
    note(f"{np} ranks, victim {victim}")
    check_nb_split(live(tmp, "nonblocking_split_cycle", np, {"SCENARIO_VICTIM": str(victim)})[0],
                   np, victim, 2)


# ---------------------------------------------------------------- at scale


def case_ring_skip_64(tmp):
    """ring_skip at 64 ranks: the rank that skipped the exchange is still the one root."""
    np, victim = 64, rng.randrange(64)
    note(f"{np} ranks, victim {victim}")
    r, text = post_mortem(tmp, "ring_skip", np, {"SCENARIO_VICTIM": str(victim),
                                                 "SCENARIO_STEP_MS": "1"})
    check_ring_skip(r, text, np, victim)


def case_shrink_recover_hang_64(tmp):
    """shrink_recover_hang at 64 ranks: the hang of now first, the recovered death history."""
    np, victim = 64, rng.randrange(63)
    v2 = second_victim(np, victim)
    note(f"{np} ranks, victim {victim}, then {v2}")
    r, _ = post_mortem(tmp, "shrink_recover_hang", np,
                       {"SCENARIO_VICTIM": str(victim), "SCENARIO_STEP_MS": "1",
                        "SCENARIO_WATCHDOG_MS": "1500"},
                       ("--stop-when-stuck", "3", "--timeout", "150"))
    check_recover_hang(r, np, victim, v2)


if __name__ == "__main__":
    sys.exit(run(globals(), "lockstep-lifetimes-"))
