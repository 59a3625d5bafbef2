#!/usr/bin/env python3
"""test_plugin.py -- lockstep's NCCL profiler plugin (libnccl-profiler-lockstep.so) end to end:
scenario programs as ranks on the CPU emulator, which loads NCCL_PROFILER_PLUGIN the way libnccl
does, with the plugin alone (no LD_PRELOAD: NCCL the shim cannot see), with the shim beside it,
with a stuck channel, at every plugin API version, chained to a user's plugin, and under
`lockstep run`. The real plugin, real trace files, the real CLI.

Usage: test_plugin.py CASE   (paths come from the environment meson sets, see meson.build)
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "scenarios"))
from harness import Failure, expect  # noqa: E402
import test_scenarios as sc  # noqa: E402

PLUGIN = os.environ["LOCKSTEP_PLUGIN"]
COUNTING = os.environ["COUNTING_PLUGIN"]
COUNTING7 = os.environ["COUNTING7_PLUGIN"]
# The stuck channel: rank 1's collective #3 stalls on channel 1 at step 2, receiving from rank 3.
STALL = {"LOCKSTEP_EMU_STALL": "1:3:1:2:3", "LOCKSTEP_EMU_CHANNELS": "2"}
STUCK_WORDS = "channel 1, step 2, waiting to receive from rank 3"


def job_env(d, shim, plugin, extra=None):
    env = sc.rank_env(d, extra)
    if not shim:
        env.pop("LD_PRELOAD", None)
    if plugin:
        env["NCCL_PROFILER_PLUGIN"] = plugin
    else:
        env.pop("NCCL_PROFILER_PLUGIN", None)
    for k in ("LOCKSTEP_EMU_STALL", "LOCKSTEP_EMU_PROFILER_VERSION", "LOCKSTEP_PROFILER_CHAIN",
              "LOCKSTEP_EMU_ASYNC"):
        env.pop(k, None)
    env.update(extra or {})
    return env


def run_job(tmp, name, mode, shim, plugin, extra=None, np=4, want_rc=sc.HUNG):
    d = os.path.join(tmp, name)
    os.makedirs(d)
    stuck = sc.STUCK_S if want_rc == sc.HUNG else None
    p = subprocess.run(sc.launch_cmd(mode, np, 3, stuck=stuck),
                       env=job_env(d, shim, plugin, extra),
                       capture_output=True, text=True, timeout=120)
    expect(p.returncode == want_rc,
           f"{name}: launcher exited {p.returncode}, want {want_rc}: {p.stdout} {p.stderr}")
    expect(len(sc.trace_files(d)) == np, f"{name}: {len(sc.trace_files(d))} traces for {np} ranks")
    return d


def top(report):
    f = report["findings"]
    expect(f, "no finding")
    return f[0]


def same_diagnosis(a, b, what):
    """Same top finding kind, ranks, sequence number and call (op, count, dtype)."""
    fa, fb = top(a), top(b)
    for k in ("kind", "ranks", "seq", "missing", "waiting", "src", "dst"):
        expect(fa.get(k) == fb.get(k),
               f"{what}: {k} differs: shim {fa.get(k)!r}, plugin {fb.get(k)!r}\n"
               f"shim: {fa['summary']}\nplugin: {fb['summary']}")

    def calls(f):
        return sorted((c.get("call") or {}).get("op", "") + ":" +
                      str((c.get("call") or {}).get("count")) + ":" +
                      str((c.get("call") or {}).get("dtype")) for c in f.get("classes", []))
    expect(calls(fa) == calls(fb), f"{what}: calls differ: {calls(fa)} vs {calls(fb)}")


def case_alone(tmp, mode):
    shim = sc.analyze(run_job(tmp, "shim", mode, True, None))
    alone_dir = run_job(tmp, "plugin", mode, False, PLUGIN)
    ts = sc.traces(alone_dir)
    expect(all(t["records"] for t in ts.values()), "a rank of the plugin's job recorded nothing")
    same_diagnosis(shim, sc.analyze(alone_dir), mode)


def record_counts(d):
    return {r: len(t["records"]) for r, t in sc.traces(d).items()}


def case_with_shim(tmp):
    shim = run_job(tmp, "shim", "clean", True, None, want_rc=0)
    both = run_job(tmp, "both", "clean", True, PLUGIN, want_rc=0)
    a, b = record_counts(shim), record_counts(both)
    expect(a == b, f"records per rank: shim alone {a}, shim + plugin {b}")
    expect(sum(a.values()) > 8, f"too few records: {a}")


def check_stuck(d, plugin_seq_only=False):
    r = sc.analyze(d)
    f = top(r)
    expect(f["kind"] == "stuck_in_flight", f"top finding {f['kind']}: {f['summary']}")
    expect(f["seq"] == 3, f"stuck at #{f['seq']}")
    g = {x["rank"]: x for x in f.get("gpu_progress", [])}
    expect(sorted(g) == [0, 1, 2, 3], f"gpu_progress for ranks {sorted(g)}")
    one = g[1]
    expect(one["channels_unfinished"] == [1] and one["channels_stopped"] == [0],
           f"rank 1 channels: {one}")
    t = one["transfer"]
    expect(t and t["channel"] == 1 and t["step"] == 2 and t["peer"] == 3 and
           t["direction"] == "recv" and t["waiting_for"] == "recv_data", f"rank 1 transfer: {t}")
    for rk in (0, 2, 3):
        expect(g[rk]["channels_unfinished"] == [0, 1], f"rank {rk}: {g[rk]}")
        expect(g[rk]["transfer"]["step"] == 0, f"rank {rk}: {g[rk]}")
    text = sc.analyze_text(d)
    expect(f"rank 1's GPU: channel 1 of #3 never ended; {STUCK_WORDS}" in text,
           f"text report lacks the stuck channel:\n{text}")


def case_stuck_channel(tmp):
    check_stuck(run_job(tmp, "stuck", "clean", False, PLUGIN, STALL))


def case_stuck_channel_with_shim(tmp):
    # GPU-style: the shim tracks completion with CUDA events, the plugin adds where it is stuck.
    d = run_job(tmp, "stuck", "clean", True, PLUGIN, dict(STALL, LOCKSTEP_EMU_ASYNC="1"))
    check_stuck(d)
    counts = {r: sum(1 for x in t["records"] if x["op"] == "AllReduce")
              for r, t in sc.traces(d).items()}
    expect(set(counts.values()) == {3}, f"AllReduce records per rank: {counts}")


def case_stuck_channel_no_steps(tmp):
    # LOCKSTEP_PLUGIN_STEPS=0: NCCL is not asked for proxy-step events (the frequent ones); the
    # channel that never ended and the transfer's channel and peer are still known, its step not.
    d = run_job(tmp, "nosteps", "clean", False, PLUGIN, dict(STALL, LOCKSTEP_PLUGIN_STEPS="0"))
    f = top(sc.analyze(d))
    expect(f["kind"] == "stuck_in_flight" and f["seq"] == 3, f"top finding: {f['summary']}")
    one = {x["rank"]: x for x in f.get("gpu_progress", [])}[1]
    t = one["transfer"]
    expect(one["channels_unfinished"] == [1] and t and t["channel"] == 1 and t["peer"] == 3 and
           t["step"] == -1, f"rank 1 without proxy steps: {one}")
    text = sc.analyze_text(d)
    expect("rank 1's GPU: channel 1 of #3 never ended" in text and "step " not in text,
           f"text report without proxy steps:\n{text}")


def case_bad_knob(tmp):
    # The plugin's knobs are parsed by the shim's config.c too: a value LOCKSTEP_PLUGIN_STEPS
    # cannot take is one line per process naming it and the default, and the default (proxy
    # steps asked for) is used: the stuck transfer's step is known.
    d = os.path.join(tmp, "badsteps")
    os.makedirs(d)
    p = subprocess.run(sc.launch_cmd("clean", 4, 3),
                       env=job_env(d, False, PLUGIN, dict(STALL, LOCKSTEP_PLUGIN_STEPS="some")),
                       capture_output=True, text=True, timeout=120)
    expect(p.returncode == sc.HUNG, f"launcher exited {p.returncode}: {p.stderr}")
    lines = [l for l in p.stderr.splitlines() if l.startswith("lockstep:")]
    expect(len(lines) == 4 and all("LOCKSTEP_PLUGIN_STEPS=some refused" in l and
                                   l.endswith("using the default, 1") for l in lines),
           f"want one line per rank naming the value and the default: {lines}")
    one = {x["rank"]: x for x in top(sc.analyze(d)).get("gpu_progress", [])}[1]
    expect(one["transfer"] and one["transfer"]["step"] >= 0, f"no proxy steps: {one}")


def case_versions(tmp):
    for v in range(1, 8):
        d = run_job(tmp, f"v{v}", "clean", False, PLUGIN,
                    {"LOCKSTEP_EMU_PROFILER_VERSION": str(v)}, want_rc=0)
        ts = sc.traces(d)
        ids = set()
        for rk, t in ts.items():
            inits = [r for r in t["records"] if r["op"] == "CommInitRank"]
            # Every collective the version can name (v1 numbers no AlltoAll: not recorded).
            colls = [r for r in t["records"] if r["seq"] > 0 and r["op"] not in ("Send", "Recv")]
            expect(len(inits) == 1, f"v{v} rank {rk}: {len(inits)} CommInitRank records")
            expect(len(colls) >= 3 and [r["seq"] for r in colls] == list(range(1, len(colls) + 1)),
                   f"v{v} rank {rk}: AllReduce seqs {[r['seq'] for r in colls]}")
            expect(all(r["count"] > 0 and r["dtype"] != "-" for r in colls),
                   f"v{v} rank {rk}: fields {colls[0]}")
            expect(len(t["comms"]) == 1, f"v{v} rank {rk}: {len(t['comms'])} comms")
            c = t["comms"][0]
            ids.add(c["id"])
            expect("DESTROYED" in str(c["flags"]) or (c["flags"] & 8 if isinstance(c["flags"], int)
                                                       else False),
                   f"v{v} rank {rk}: finalize not seen, comm flags {c['flags']}")
            if v >= 4:  # completion known from kernel channels
                expect(all(r["complete_ns"] > 0 for r in colls), f"v{v}: a collective incomplete")
        expect(len(ids) == 1, f"v{v}: ranks disagree on the comm id: {ids}")
        r = sc.analyze(d, want_rc=0)
        expect(r["findings"] == [], f"v{v}: findings in a clean job: {r['findings']}")


def check_chain(tmp, name, counting, extra=None):
    """A clean job with lockstep's plugin chained to `counting`: both get every event. Returns
    the chained plugin's counts per process and the launcher's stderr."""
    out = os.path.join(tmp, name + "-counts")
    env = {"LOCKSTEP_PROFILER_CHAIN": counting, "COUNTING_PLUGIN_OUT": out}
    env.update(extra or {})
    d = os.path.join(tmp, name)
    os.makedirs(d)
    p = subprocess.run(sc.launch_cmd("clean", 4, 3), env=job_env(d, False, PLUGIN, env),
                       capture_output=True, text=True, timeout=120)
    expect(p.returncode == 0, f"{name}: launcher exited {p.returncode}: {p.stderr}")
    expect("is not chained" not in p.stderr, f"{name}: the plugin was not chained: {p.stderr}")
    files = glob.glob(out + ".*")
    expect(len(files) == 4, f"{name}: {len(files)} count files from the chained plugin")
    ts = sc.traces(d)
    counts = []
    for path in files:
        c = dict(line.split() for line in open(path))
        c = {k: int(v) for k, v in c.items()}
        expect(c["inits"] == 1 and c["finalizes"] == 1, f"{path}: {c}")
        expect(c["foreign_parents"] == 0, f"{path}: parents not translated: {c}")
        ncoll = sum(1 for r in ts[0]["records"] if r["seq"] > 0 and r["op"] not in ("Send", "Recv"))
        expect(c["type2"] == ncoll, f"{path}: {c['type2']} collective events, {ncoll} records")
        expect(c["type1"] >= 1 and c["type64"] == 2 * ncoll and c["type8"] > 0 and
               c["type16"] > 0, f"{path}: {c}")
        counts.append(c)
    # Our records are all there as well.
    expect(all(len([r for r in t["records"] if r["op"] == "AllReduce"]) >= 3
               for t in ts.values()), "records missing while chained")
    return counts


def case_chain(tmp):
    """NCCL speaks version 7 to lockstep's plugin (the emulator's newest, as NCCL 2.31's), the
    user's plugin speaks only version 6: it is chained at 6 and gets every event, each
    descriptor cut to version 6's (was: not chained at all once NCCL spoke a newer version)."""
    for c in check_chain(tmp, "chain", COUNTING):
        expect(c["variants"] == 0, f"a version 6 plugin counted v7 members: {c}")


def case_chain_v7(tmp):
    """Both speak version 7: the user's plugin gets each descriptor whole, v7's members too."""
    for c in check_chain(tmp, "chain7", COUNTING7):
        expect(c["variants"] == c["type2"] > 0,
               f"{c['variants']} of {c['type2']} collective descriptors held v7's members")


def case_chain_v5(tmp):
    """NCCL speaks version 5 (LOCKSTEP_EMU_PROFILER_VERSION=5, an NCCL 2.27): a user's plugin of
    version 6 only is not chained (its version is newer than the one NCCL speaks), and says so
    in one line per process; the job and lockstep's records go on."""
    d = os.path.join(tmp, "chain5")
    os.makedirs(d)
    p = subprocess.run(sc.launch_cmd("clean", 4, 3),
                       env=job_env(d, False, PLUGIN, {"LOCKSTEP_PROFILER_CHAIN": COUNTING,
                                                      "LOCKSTEP_EMU_PROFILER_VERSION": "5"}),
                       capture_output=True, text=True, timeout=120)
    expect(p.returncode == 0, f"launcher exited {p.returncode}: {p.stderr}")
    said = [l for l in p.stderr.splitlines() if "is not chained" in l]
    expect(len(said) == 4 and all("has no ncclProfiler_v5" in l for l in said),
           f"want one line per process naming ncclProfiler_v5: {said}")
    ts = sc.traces(d)
    expect(all(len([r for r in t["records"] if r["op"] == "AllReduce"]) >= 3
               for t in ts.values()), "lockstep's records missing")


def case_config_tag(tmp):
    """The plugin alone (no shim) on a training loop that issues its collectives through NCCL
    2.31's config calls: version 7 passes each call's user tag, and the records say the config
    call and its tag as the shim's do."""
    d = os.path.join(tmp, "tag")
    os.makedirs(d)
    cmd = [sc.LAUNCH, "--np", "3", "--stop-when-stuck", str(sc.STUCK_S), "--timeout", "60",
           "--", os.environ["NEXTAPI"], "config_train"]
    p = subprocess.run(cmd, env=job_env(d, False, PLUGIN, {"SCENARIO_STEPS": "2",
                                                          "SCENARIO_VICTIM": "1"}),
                       capture_output=True, text=True, timeout=120)
    expect(p.returncode == sc.HUNG, f"launcher exited {p.returncode}: {p.stderr}")
    ts = sc.traces(d)
    for rk, t in ts.items():
        colls = [r for r in t["records"] if r["op"] in ("AllReduce", "AllGather")]
        expect(colls and all(r["flags"] & 64 and r["aux"] >= 1000 for r in colls),
               f"rank {rk}: config calls without their tag: "
               f"{[(r['op'], r['flags'], r['aux']) for r in colls]}")
        tags = sorted({r["aux"] for r in colls})
        expect(tags[0] == 1000, f"rank {rk}: tags {tags}")
    r = sc.analyze(d)
    f = top(r)
    expect(f["kind"] == "missing_ranks" and "via ncclAllReduceConfig, tag" in f["summary"],
           f"{f['kind']}: {f['summary']}")


def case_run_plugin_only(tmp):
    d = os.path.join(tmp, "run")
    env = job_env(d, False, None, {"LOCKSTEP_PRELOAD": "0"})
    env["LOCKSTEP_SHIM"] = sc.SHIM
    env["NO_COLOR"] = "1"
    p = subprocess.run([sc.LOCKSTEP, "run", "--dir", d, "--stall", "2", "--json",
                        os.path.join(tmp, "r.json"), "--"] + sc.launch_cmd("prepare_data", 4, 0),
                       env=env, capture_output=True, text=True, timeout=120)
    expect(p.returncode == 3, f"lockstep run exited {p.returncode}: {p.stdout}{p.stderr}")
    f = top(json.load(open(os.path.join(tmp, "r.json"))))
    expect(f["kind"] == "missing_ranks" and f["missing"] == [3] and f["seq"] == 3,
           f"diagnosis: {f['summary']}")
    traces = glob.glob(os.path.join(d, "**", "*.trace"), recursive=True)
    expect(len(traces) == 4, f"{len(traces)} traces")
    # No shim was loaded: the records came from the plugin.
    for t in traces:
        q = subprocess.run([sc.QUERY, t], capture_output=True, text=True, timeout=60)
        recs = json.loads(q.stdout)[0]["records"]
        expect(all(r["callsite"] == 0 if "callsite" in r else True for r in recs),
               "call sites recorded: the shim was loaded")


def case_bad_plugin(tmp):
    # A plugin that cannot be chained, and lockstep's plugin with recording disabled: NCCL (the
    # emulator) goes on without them, the job runs clean.
    d = run_job(tmp, "bad", "clean", False, PLUGIN,
                {"LOCKSTEP_PROFILER_CHAIN": "/nonexistent/libnccl-profiler-x.so"}, want_rc=0)
    expect(all(t["records"] for t in sc.traces(d).values()), "no records with a bad chain")
    d2 = os.path.join(tmp, "off")
    os.makedirs(d2)
    p = subprocess.run(sc.launch_cmd("clean", 2, 10),
                       env=job_env(d2, False, PLUGIN, {"LOCKSTEP_DISABLE": "1"}),
                       capture_output=True, text=True, timeout=120)
    expect(p.returncode == 0, f"disabled plugin: job exited {p.returncode}: {p.stderr}")
    expect(sc.trace_files(d2) == [], "a disabled plugin wrote traces")


CASES = {
    "alone_prepare_data": lambda t: case_alone(t, "prepare_data"),
    "alone_uneven_shards": lambda t: case_alone(t, "uneven_shards"),
    "alone_code_path": lambda t: case_alone(t, "code_path"),
    "alone_shape_mismatch": lambda t: case_alone(t, "shape_mismatch"),
    "alone_unmatched_send": lambda t: case_alone(t, "unmatched_send"),
    "with_shim": case_with_shim,
    "stuck_channel": case_stuck_channel,
    "stuck_channel_with_shim": case_stuck_channel_with_shim,
    "stuck_channel_no_steps": case_stuck_channel_no_steps,
    "versions": case_versions,
    "chain_v7": case_chain_v7,
    "chain_v5": case_chain_v5,
    "config_tag": case_config_tag,
    "chain": case_chain,
    "run_plugin_only": case_run_plugin_only,
    "bad_plugin": case_bad_plugin,
    "bad_knob": case_bad_knob,
}

if __name__ == "__main__":
    case = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="lsplugin-") as tmp:
        try:
            CASES[case](tmp)
        except Failure as e:
            print(f"FAIL {case}: {e}")
            sys.exit(1)
    print(f"ok {case}")
