#!/usr/bin/env python3
"""test_nextapi.py -- hangs through the API NCCL added in 2.29-2.32, end to end: NCCL programs
(nextapi.c) that train with the per-collective config calls only (ncclAllReduceConfig and kin)
or hand work on with one-sided puts and signals (ncclPutSignal, ncclSignal, ncclWaitSignal), run
as ranks on the CPU emulator under the real shim, stopped by their launcher (or by `lockstep
run`), then judged post-mortem and live. The shim is built against NCCL 2.28's headers, which
declare none of these calls: it records them all the same (lockstep/nccl_next.h). Sizes and
timings are drawn at random (the seed is printed; LOCKSTEP_TEST_SEED repeats).

Usage: test_nextapi.py CASE   (paths come from the environment meson sets)
"""
import glob
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import expect, run  # noqa: E402
import test_lifetimes as lt  # noqa: E402
import test_realjobs as rj  # noqa: E402
from test_realjobs import follows, one_root, roots  # noqa: E402

NEXTAPI = os.environ["NEXTAPI"]
rng = rj.rng
note = rj.note
CTA = {0: "default", 1: "efficiency", 2: "zero"}


def post_mortem(tmp, mode, np, env=None):
    """Runs `nextapi MODE` as np ranks until the launcher stops the hung job; returns the report
    and its text."""
    lt.LIFETIMES = NEXTAPI
    return lt.post_mortem(tmp, mode, np, env)


def live(tmp, mode, np, env=None):
    """`lockstep run --stall 2` on `nextapi MODE`: the report and its text."""
    lt.LIFETIMES = NEXTAPI
    return lt.live(tmp, mode, np, env)


def not_silent(r):
    """The report saw the job's NCCL calls: nothing says it made none."""
    for f in r["findings"]:
        expect("never called NCCL" not in f["summary"] and "no NCCL call" not in f["summary"],
               f"the calls were not seen: {f['summary']}")


# ---------------------------------------------------------------- the config calls


def check_config_train(r, text, np, victim, steps, cta):
    not_silent(r)
    f = one_root(r, "missing_ranks")
    expect(f["missing"] == [victim], f"missing {f['missing']}, want [{victim}]: {f['summary']}")
    ops = {c.get("op") for c in f["classes"]}
    expect("AllReduce" in ops and f["seq"] == 2 * steps + 1,
           f"ops {ops} #{f['seq']}, want AllReduce #{2 * steps + 1}: {f['summary']}")
    expect("via ncclAllReduceConfig" in f["summary"] and f"tag {1000 + steps}" in f["summary"],
           f"the summary does not say the config call and its tag: {f['summary']}")
    if cta in CTA:
        expect(f"CTA policy {CTA[cta]}" in f["summary"], f"no CTA policy {CTA[cta]}: "
                                                          f"{f['summary']}")
    waiting = [c for c in f["classes"] if c.get("op") == "AllReduce"]
    expect(waiting and waiting[0].get("config", {}).get("user_tag") == 1000 + steps,
           f"the JSON class has no config with the tag: {waiting}")
    if cta in CTA:
        expect(waiting[0]["config"]["cta_policy"] == CTA[cta],
               f"cta_policy {waiting[0]['config']}")
    rj.one_line(text, r"via ncclAllReduceConfig", "the config call")


def case_config_train(tmp):
    """A training loop that issues its collectives only through NCCL 2.31's config calls, with
    the step as profiler tag; the victim loads its next shard while the others wait in the next
    all-reduce. The report names the victim and the call as the program made it (was: the shim
    did not export ncclAllReduceConfig, nothing was recorded, and the job looked as if it had
    made no NCCL call)."""
    np, steps = rng.randrange(2, 9), rng.randrange(1, 4)
    victim, cta = rng.randrange(np), rng.choice([-1, 0, 1, 2])
    note(f"{np} ranks, victim {victim}, {steps} steps, CTA policy {cta}")
    env = {"SCENARIO_STEPS": str(steps), "SCENARIO_VICTIM": str(victim), "SCENARIO_CTA": str(cta)}
    check_config_train(*post_mortem(tmp, "config_train", np, env), np, victim, steps, cta)
    want = f"config tag {1000 + steps}" + (f" cta {CTA[cta]}" if cta in CTA else "")
    expect(want in dump_rank(tmp, (victim + 1) % np), f"lockstep dump shows no '{want}'")


def dump_rank(tmp, rank):
    """`lockstep dump` of rank's trace in tmp/traces."""
    d = os.path.join(tmp, "traces")
    (path,) = [os.path.join(d, f) for f in os.listdir(d) if f.endswith(f"-r{rank}.trace")]
    p = subprocess.run([rj.LOCKSTEP, "dump", path], capture_output=True, text=True, timeout=60)
    expect(p.returncode == 0, f"lockstep dump exited {p.returncode}: {p.stderr}")
    return p.stdout


def case_config_train_live(tmp):
    """The same under `lockstep run`."""
    np, steps, cta = rng.randrange(2, 7), rng.randrange(1, 3), rng.choice([-1, 2])
    note(f"{np} ranks, victim 0, {steps} steps, CTA policy {cta}")
    env = {"SCENARIO_STEPS": str(steps), "SCENARIO_CTA": str(cta)}
    check_config_train(*live(tmp, "config_train", np, env), np, 0, steps, cta)


def case_config_plain_twin(tmp):
    """The victim issues the plain twins (ncclAllReduce) where the others issue the config calls:
    to NCCL they are the same collectives, numbered alike, so the diagnosis is the victim's
    absence, not a mismatch of operations."""
    np, steps = rng.randrange(2, 7), rng.randrange(1, 3)
    victim = rng.randrange(np)
    note(f"{np} ranks, victim {victim}, {steps} steps")
    r, text = post_mortem(tmp, "config_train", np, {"SCENARIO_STEPS": str(steps),
                                                     "SCENARIO_VICTIM": str(victim),
                                                     "SCENARIO_PLAIN": "1"})
    f = one_root(r, "missing_ranks")
    expect(f["missing"] == [victim] and f["seq"] == 2 * steps + 1,
           f"missing {f['missing']} #{f['seq']}: {f['summary']}")
    expect(not [g for g in r["findings"] if g["kind"].endswith("_mismatch")],
           f"plain and config twins called a mismatch: {[g['summary'] for g in r['findings']]}")


def case_config_mismatch(tmp):
    """The victim's last config all-reduce carries another count: count_mismatch, its classes
    naming the config call."""
    np, steps = rng.randrange(2, 7), rng.randrange(1, 3)
    victim = rng.randrange(np)
    note(f"{np} ranks, victim {victim}, {steps} steps")
    r, text = post_mortem(tmp, "config_mismatch", np, {"SCENARIO_STEPS": str(steps),
                                                        "SCENARIO_VICTIM": str(victim)})
    f = one_root(r, "count_mismatch")
    odd = [c for c in f["classes"] if c["count"] == 1000]
    expect(odd and odd[0]["ranks"] == [victim], f"classes {f['classes']}")
    expect(all(c.get("config", {}).get("user_tag") == 1000 + steps for c in f["classes"]),
           f"the classes do not carry the config: {f['classes']}")


# ---------------------------------------------------------------- one-sided signals


def check_signal_missing(r, text, np, victim, opcnt=1):
    not_silent(r)
    nxt = (victim + 1) % np
    rs = [g for g in roots(r) if g["kind"] != "trace_incomplete"]
    expect(len(rs) == 1, f"roots {[(g['kind'], g['summary']) for g in rs]}")
    f = rs[0]
    expect(f["kind"] == "p2p_unmatched" and f["src"] == victim and f["dst"] == nxt,
           f"root {f['kind']} src {f.get('src')} dst {f.get('dst')}, want p2p_unmatched "
           f"{victim} -> {nxt}: {f['summary']}")
    expect("waits in WaitSignal" in f["summary"] and f"rank {victim} never sent the" in
           f["summary"], f"the summary does not say the signal never came: {f['summary']}")
    cl = f["classes"][0]
    expect(cl["op"] == "WaitSignal" and cl["root"] == victim, f"the waiting class {cl}")
    expect(cl.get("signals", {}).get("count") == opcnt, f"the wait's signals {cl}")
    if np > 2:
        m = follows(r, "missing_ranks", r["findings"].index(f))
        expect(victim in m[0]["missing"], f"the all-reduce's missing {m[0]['missing']}")
    rj.one_line(text, r"WaitSignal", "the wait for the signal")


def case_signal_missing(tmp):
    """A pipeline hands activations on with ncclPutSignal and takes them with ncclWaitSignal;
    the victim goes to load its next shard before it hands its own on. The next rank waits for a
    signal that never came, the others in the all-reduce: the victim is the root (was: the
    one-sided calls were not recorded by a shim built against 2.28's headers, and the waiting
    rank looked idle)."""
    np, steps, opcnt = rng.randrange(2, 8), rng.randrange(1, 4), rng.randrange(1, 4)
    victim = rng.randrange(np)
    note(f"{np} ranks, victim {victim}, {steps} steps, {opcnt} signals a step")
    env = {"SCENARIO_STEPS": str(steps), "SCENARIO_VICTIM": str(victim),
           "SCENARIO_OPCNT": str(opcnt)}
    check_signal_missing(*post_mortem(tmp, "signal_missing", np, env), np, victim, opcnt)


def case_signal_missing_async(tmp):
    """The same with NCCL's calls returning at once (LOCKSTEP_EMU_ASYNC=1): the wait never
    completes on the next rank's GPU while its host waits in a stream synchronize."""
    np, steps = rng.randrange(2, 7), rng.randrange(1, 3)
    victim = rng.randrange(np)
    note(f"{np} ranks, victim {victim}, {steps} steps")
    env = {"SCENARIO_STEPS": str(steps), "SCENARIO_VICTIM": str(victim),
           "LOCKSTEP_EMU_ASYNC": "1"}
    check_signal_missing(*post_mortem(tmp, "signal_missing", np, env), np, victim)


def case_signal_missing_live(tmp):
    """The same under `lockstep run`."""
    np = rng.randrange(2, 6)
    note(f"{np} ranks, victim 0")
    check_signal_missing(*live(tmp, "signal_missing", np), np, 0)


def check_signal_order(r, np):
    not_silent(r)
    f = one_root(r, "deadlock_cycle")
    expect(sorted(f["ranks"]) == list(range(np)), f"cycle ranks {f['ranks']}: {f['summary']}")
    expect("WaitSignal" in f["summary"], f"the cycle's waits are not named: {f['summary']}")


def case_signal_order(tmp):
    """Every rank waits for its predecessor's signal before it sends its own: a cycle of waits
    for signals nobody sent, a deadlock over every rank."""
    np, steps = rng.randrange(2, 8), rng.randrange(0, 3)
    note(f"{np} ranks, {steps} steps")
    check_signal_order(post_mortem(tmp, "signal_order", np, {"SCENARIO_STEPS": str(steps)})[0], np)


def case_signal_order_live(tmp):
    np = rng.randrange(2, 6)
    note(f"{np} ranks")
    check_signal_order(live(tmp, "signal_order", np)[0], np)


def case_signal_short(tmp):
    """The victim signals once fewer than the next rank waits for (its last micro-batch was
    empty): the wait's count is what is short, and the report says how many came."""
    np, steps, opcnt = rng.randrange(2, 7), rng.randrange(1, 3), rng.randrange(2, 5)
    victim = rng.randrange(np)
    note(f"{np} ranks, victim {victim}, {steps} steps, {opcnt} signals a step")
    r, text = post_mortem(tmp, "signal_short", np, {"SCENARIO_STEPS": str(steps),
                                                     "SCENARIO_VICTIM": str(victim),
                                                     "SCENARIO_OPCNT": str(opcnt)})
    if np == 2:  # nobody else shows the order: the two wait on each other
        f = one_root(r, "deadlock_cycle")
        expect(sorted(f["ranks"]) == [0, 1], f"{f['summary']}")
        return
    nxt = (victim + 1) % np
    waits = [l for l in dump_rank(tmp, nxt).splitlines() if " WaitSignal " in l]
    expect(waits and f"peer {victim} {opcnt}x0/0" in waits[-1],
           f"lockstep dump's last WaitSignal is not 'peer {victim} {opcnt}x0/0': {waits[-1:]}")
    f = one_root(r, "p2p_unmatched")
    sent, wanted = opcnt * (steps + 1) - 1, opcnt * (steps + 1)
    expect(f["src"] == victim and f["dst"] == (victim + 1) % np, f"{f['summary']}")
    expect(f"rank {victim} sent {opcnt - 1} of the {opcnt} signals it waits for" in f["summary"]
           and f"{sent} sent in all, {wanted} waited for" in f["summary"],
           f"want 'sent {opcnt - 1} of the {opcnt} signals': {f['summary']}")


# ---------------------------------------------------------------- CUDA graphs


def check_graph_decode(r, text, np, victim, steps):
    """The victim is missing from the next step's first replayed all-reduce, named as a replay of
    its capture; nothing says the captures hide anything."""
    not_silent(r)
    f = one_root(r, "missing_ranks")
    want = 2 + 2 * steps + 1  # two captured, two replays per step, then the next step's first
    expect(f["missing"] == [victim] and f["seq"] == want,
           f"missing {f['missing']} #{f['seq']}, want [{victim}] #{want}: {f['summary']}")
    expect(f"replayed by CUDA-graph launch {steps + 1} of its capture at nextapi.c:" in
           f["summary"] and "(capture_decode_graphs)" in f["summary"],
           f"the replay and its capture are not named: {f['summary']}")
    waiting = [c for c in f["classes"] if c.get("op") == "AllReduce" and c["role"] == "waiting"]
    expect(waiting and waiting[0].get("graph", {}).get("launch") == steps + 1 and
           "capture_decode_graphs" in (waiting[0]["graph"].get("captured_at") or ""),
           f"the JSON class has no graph launch: {waiting}")
    g = [x for x in r["findings"] if x.get("reason") == "graph_captured"]
    expect(not g, f"graph_captured although every launch was recorded: {g}")
    rj.one_line(text, r"replayed by CUDA-graph launch", "the replay")


def graph_env(steps, victim, extra=None):
    env = {"SCENARIO_STEPS": str(steps), "SCENARIO_VICTIM": str(victim),
           "LOCKSTEP_EMU_ASYNC": "1", "SCENARIO_GETPROC": str(rng.randrange(2))}
    note(f"driver functions through {'cuGetProcAddress' if env['SCENARIO_GETPROC'] == '1' else 'dlsym'}")
    env.update(extra or {})
    return env


def case_graph_decode(tmp):
    """An inference server captured each layer's tensor-parallel all-reduce into a CUDA graph and
    serves decode steps by launching the graphs; one rank stops serving. Each launch is recorded
    as the all-reduces it replays, found whether the program reaches the driver by dlsym or, as
    the CUDA runtime does, through cuGetProcAddress: the report names the victim and the replay
    the others wait in (was: the replays were not recorded, and the job looked stuck outside
    NCCL after its captures)."""
    np, steps = rng.randrange(2, 7), rng.randrange(1, 4)
    victim = rng.randrange(np)
    note(f"{np} ranks, victim {victim}, {steps} steps")
    r, text = post_mortem(tmp, "graph_decode", np, graph_env(steps, victim))
    check_graph_decode(r, text, np, victim, steps)
    # lockstep dump tells the captures from the replays.
    tr = sorted(glob.glob(os.path.join(tmp, "traces", "*.trace")))[0]
    out = subprocess.run([rj.LOCKSTEP, "dump", tr], capture_output=True, text=True).stdout
    expect(out.count(" captured (launches recorded)") == 2 and " replay launch 1 capture site "
           in out, f"dump does not show the captures and replays:\n{out[-1500:]}")


def case_graph_decode_1000(tmp):
    """The same after 1,000 replays and more: each launch costs one record per all-reduce it
    replays, numbered like any call, and the 1,001st is where the others wait."""
    np, steps = rng.randrange(2, 5), rng.randrange(500, 560)
    victim = rng.randrange(np)
    note(f"{np} ranks, victim {victim}, {steps} steps ({2 * steps} replays)")
    r, text = post_mortem(tmp, "graph_decode", np,
                          graph_env(steps, victim, {"SCENARIO_STEP_MS": "0"}))
    check_graph_decode(r, text, np, victim, steps)


def case_graph_decode_live(tmp):
    """`lockstep run` on the decode server: the stall is in a replayed all-reduce, said so."""
    np, steps = rng.randrange(2, 5), rng.randrange(1, 4)
    victim = rng.randrange(np)
    note(f"{np} ranks, victim {victim}, {steps} steps")
    r, text = live(tmp, "graph_decode", np, graph_env(steps, victim))
    check_graph_decode(r, text, np, victim, steps)


def check_graph_stuck(r, np, steps, k):
    f = one_root(r, "stuck_in_flight")
    expect(f["seq"] == 2 + k, f"#{f['seq']}, want #{2 + k} (the {k}th replay): {f['summary']}")
    expect("replayed by CUDA-graph launch" in f["summary"],
           f"the replay is not named: {f['summary']}")


def case_graph_stuck(tmp):
    """A replayed all-reduce never completes on the GPUs (a dead link) while the hosts go on
    launching decode steps asynchronously, then wait for their tokens: the collective stuck is
    the replay itself, named by its number (was: the launches were not recorded, and the job
    looked stuck outside NCCL)."""
    np, steps = rng.randrange(2, 6), rng.randrange(1, 4)
    # The first replay of step j never completes; the steps before it were waited for, from it
    # on the hosts queue. (Which replay of a burst launched back to back is stuck is beyond the
    # GPU events' grain: the shim covers a burst with one event, so the replay before it may not
    # be known complete; that shape is not asked here.)
    j = rng.randrange(steps)
    k = 2 * j + 1  # the k-th replay run on the device
    note(f"{np} ranks, replay {k} stuck, {steps} steps")
    r, text = post_mortem(tmp, "graph_stuck", np,
                          graph_env(steps, 0, {"LOCKSTEP_EMU_HANG_COLL": str(k),
                                               "SCENARIO_SYNC_STEPS": str(j),
                                               "SCENARIO_AHEAD": str(rng.randrange(1, 4))}))
    check_graph_stuck(r, np, steps, k)


def case_graph_hidden(tmp):
    """A driver that cannot say which graph a capture builds (no cuStreamGetCaptureInfo): the
    launches cannot be recorded, and the report says what the captures hide."""
    np, steps = rng.randrange(2, 5), rng.randrange(1, 3)
    victim = rng.randrange(np)
    r, text = post_mortem(tmp, "graph_decode", np,
                          graph_env(steps, victim, {"LOCKSTEP_EMU_NO_CAPTURE_INFO": "1"}))
    g = [x for x in r["findings"] if x["kind"] == "trace_incomplete"
         and x.get("reason") == "graph_captured"]
    expect(len(g) == 1, f"no graph_captured finding: {[x['summary'] for x in r['findings']]}")
    expect(g[0]["ranks"] == list(range(np)) and f"issued {2 * np} NCCL calls into CUDA-graph "
           f"captures" in g[0]["summary"] and "AllReduce #1 " in g[0]["summary"],
           f"graph_captured: {g[0]['ranks']} {g[0]['summary']}")
    rj.one_line(text, r"CUDA-graph captures", "what the captures hide")


if __name__ == "__main__":
    sys.exit(run(globals(), "lockstep-nextapi-"))
