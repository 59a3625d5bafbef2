#!/usr/bin/env python3
"""test_reach.py -- NCCL users that plain LD_PRELOAD does not see, end to end: programs that
dlopen libnccl and call dlsym'd pointers (C as XLA does, Python ctypes as pynccl does) run as
ranks on the emulator under the real shim and `lockstep run`; dlsym/dlvsym as other code uses
them under the shim; NCCL linked statically (the shim records that it is blind and `lockstep
analyze` says so); the NCCL 2.29+ wrappers compiled.

Usage: test_reach.py CASE   (paths come from the environment meson sets, see meson.build)
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import Failure, expect, need_python_for, run  # noqa: E402
from report_ranks import per_rank  # noqa: E402

SHIM = os.environ["LOCKSTEP_SHIM"]
LAUNCH = os.environ["LAUNCH_RANKS"]
EMU_DIR = os.environ["EMULATOR_DIR"]
QUERY = os.environ["TRACE_QUERY"]
LOCKSTEP = os.environ["LOCKSTEP_BIN"]
REACH = os.environ["REACH_DIR"]
VERSIONED_NCCL = os.environ["VERSIONED_NCCL"]
PROBE2 = os.environ["REACH_PROBE2"]
WRAP_2_29 = os.environ["WRAP_2_29"]
WRAP_2_32 = os.environ["WRAP_2_32"]
OLDER_NCCL = os.environ["OLDER_NCCL"]
PYNCCL = os.environ["PYNCCL"]

LIBNCCL = os.path.join(EMU_DIR, "libnccl.so.2")  # by absolute path, as frameworks load it
LIBCUDA = os.path.join(EMU_DIR, "libcuda.so.1")
CLIENT = os.path.join(REACH, "dlsym_client")
HFLAG_NCCL_UNSEEN, HFLAG_NCCL_LIB_LOADED, HFLAG_NCCL_STATIC = 1 << 8, 1 << 9, 1 << 10


def base_env(extra=None, preload=None, trace_dir=None):
    """The environment of a run: no emulator on the library path (the programs find libnccl by
    path), the shim preloaded when asked."""
    env = dict(os.environ)
    for k in ("LD_PRELOAD", "LOCKSTEP_DIR", "LD_LIBRARY_PATH", "RANK", "WORLD_SIZE"):
        env.pop(k, None)
    if preload:
        env["LD_PRELOAD"] = preload
    if trace_dir:
        env["LOCKSTEP_DIR"] = trace_dir
    env.update(extra or {})
    return env


def run_ranks(np, argv, trace_dir, env=None, timeout_s=None, preload=True):
    cmd = [LAUNCH, "--np", str(np)]
    if timeout_s:
        cmd += ["--timeout", str(timeout_s)]
    return subprocess.run(cmd + ["--"] + argv, capture_output=True, text=True, timeout=90,
                          env=base_env(env, SHIM if preload else None, trace_dir))


def lockstep_run(tmp, argv, np=4, env=None, stall=2):
    """`lockstep run` on argv as np ranks: (process, JSON report, trace dir)."""
    d, js = os.path.join(tmp, "traces"), os.path.join(tmp, "report.json")
    cmd = [LOCKSTEP, "run", "--dir", d, "--stall", str(stall), "--json", js, "--", LAUNCH,
           "--np", str(np), "--"] + argv
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=90, env=base_env(env))
    report = json.load(open(js)) if os.path.exists(js) else None
    return p, report, d


def traces(d):
    p = subprocess.run([QUERY, d], capture_output=True, text=True, timeout=60)
    expect(p.returncode == 0, f"trace_query failed: {p.stderr}")
    return {t["rank"]: t for t in json.loads(p.stdout)}


def analyze(d, want_rc=1, text=False):
    cmd = [LOCKSTEP, "analyze"] + ([] if text else ["--json"]) + [d]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=base_env())
    expect(p.returncode == want_rc or (want_rc is None and p.returncode in (0, 1)),
           f"analyze exited {p.returncode}, want {want_rc}: "
           f"{p.stderr}{p.stdout[:2000]}")
    return p.stdout if text else json.loads(p.stdout)


def lockstep_lines(text):
    return [l for l in text.splitlines() if l.startswith("lockstep:")]


def allreduces(t):
    return [r for r in t["records"] if r["op"] == "AllReduce"]


def cls(f, ranks):
    got = [c for c in f.get("classes") or [] if c["ranks"] == ranks]
    expect(len(got) == 1, f"{f['kind']}: no single class with ranks {ranks}: {f.get('classes')}")
    return got[0]


def expect_diagnosed(p, report, d, kind, victim, victim_fields, other_fields, np=4):
    """`lockstep run` stopped the hang (exit 3) and its first finding is `kind` at #3 of the
    world communicator, the victim in a class of its own; one trace per rank."""
    expect(p.returncode == 3, f"lockstep run exited {p.returncode}, want 3:\n{p.stderr}")
    expect(report and report["findings"], f"no findings: {report}")
    f = report["findings"][0]
    expect(f["kind"] == kind, f"first finding {f['kind']}, want {kind}: {f['summary']}")
    expect(f["seq"] == 3, f"seq {f['seq']}, want 3")
    others = [k for k in range(np) if k != victim]
    for ranks, fields in (([victim], victim_fields), (others, other_fields)):
        c = cls(f, ranks)
        for k, v in fields.items():
            expect(c[k] == v, f"class {ranks}: {k} = {c[k]!r}, want {v!r}")
    ts = traces(d)
    expect(sorted(ts) == list(range(np)), f"traces for ranks {sorted(ts)}, want one per rank")
    for k, t in ts.items():
        expect(len(t["comms"]) == 1, f"rank {k}: {len(t['comms'])} communicators recorded")
        expect(len({t["comms"][0]["id"] for t in ts.values()}) == 1, "ranks disagree on comm id")
    return f


# ---------------------------------------------------------------- lookups by handle


def case_dlsym_records(tmp):
    """An XLA-style program (dlopen by absolute path, RTLD_LOCAL, dlsym'd pointers only) is
    recorded call by call, and computes what it computes without the shim."""
    d = os.path.join(tmp, "t")
    plain = run_ranks(2, [CLIENT, LIBNCCL, "clean"], d, preload=False)
    expect(plain.returncode == 0, f"unpreloaded run failed: {plain.stderr}")
    expect(not os.path.exists(d), "a trace without the shim")
    p = run_ranks(2, [CLIENT, LIBNCCL, "clean"], d)
    expect(p.returncode == 0, f"dlsym_client failed: {p.stderr}")
    expect(p.stdout == plain.stdout and p.stdout.split() == ["sum", "3.0"] * 2,
           f"results {p.stdout!r} vs {plain.stdout!r} without the shim")
    expect(not lockstep_lines(p.stderr), f"warnings: {p.stderr}")
    ts = traces(d)
    expect(sorted(ts) == [0, 1], f"traces of ranks {sorted(ts)}")
    for k, t in ts.items():
        ops = [r["op"] for r in t["records"]]
        expect(ops == ["CommInitRank"] + ["AllReduce"] * 5 + ["CommDestroy"],
               f"rank {k}: records {ops}")
        expect([r["seq"] for r in allreduces(t)] == [1, 2, 3, 4, 5], f"rank {k}: seqs")


def case_dlsym_async_error(tmp):
    """ncclCommGetAsyncError looked up by handle gets the wrapper too: the asynchronous error
    the library reports after step 3 is recorded where the program polled it."""
    d = os.path.join(tmp, "t")
    p = run_ranks(1, [CLIENT, LIBNCCL, "async"], d, env={"LOCKSTEP_EMU_ASYNC_ERROR": "0:3"})
    expect(p.returncode == 1 and p.stdout.split() == ["async", "error", "2"],
           f"dlsym_client async: exit {p.returncode}: {p.stdout} {p.stderr}")
    (t,) = traces(d).values()
    got = [(r["op"], r["seq"], r["result"]) for r in t["records"]]
    expect(got == [("CommInitRank", 0, 0)] + [("AllReduce", k, 0) for k in (1, 2, 3)]
           + [("AsyncError", 0, 2)], f"records {got}")


def case_dlsym_hang(tmp):
    """The same program hung (rank 1 broadcasts where the others all-reduce): `lockstep run`
    stops it and names rank 1's Broadcast against the others' AllReduce #3."""
    p, report, d = lockstep_run(tmp, [CLIENT, LIBNCCL, "hang"])
    f = expect_diagnosed(p, report, d, "op_mismatch", 1, {"op": "Broadcast", "root": 0},
                         {"op": "AllReduce", "count": 16})
    expect("eval_broadcast" in (cls(f, [1])["callsite"] or ""),
           f"rank 1's call site {cls(f, [1])['callsite']!r}")
    expect("train_step" in (cls(f, [0, 2, 3])["callsite"] or ""), "the others' call site")


def case_dlvsym(tmp):
    """dlvsym of an NCCL name (a library with versioned symbols) gets the wrapper too."""
    d = os.path.join(tmp, "t")
    p = run_ranks(2, [CLIENT, VERSIONED_NCCL, "dlvsym"], d)
    expect(p.returncode == 0, f"dlsym_client dlvsym failed: {p.stderr}")
    expect(p.stdout.split() == ["sum", "3.0"] * 2, f"results {p.stdout!r}")
    for k, t in traces(d).items():
        expect([r["seq"] for r in allreduces(t)] == [1, 2, 3, 4, 5],
               f"rank {k}: AllReduce records {allreduces(t)}")


def case_ctypes_records(tmp):
    """Python ctypes (pynccl style) is recorded call by call."""
    need_python_for(SHIM)
    d = os.path.join(tmp, "t")
    p = run_ranks(2, [sys.executable, PYNCCL, LIBNCCL, "clean"], d)
    expect(p.returncode == 0, f"pynccl failed: {p.stderr}")
    expect(p.stdout.count("sum 3.0") == 2, f"results {p.stdout!r}")  # lines may interleave
    ts = traces(d)
    expect(sorted(ts) == [0, 1], f"traces of ranks {sorted(ts)}")
    for k, t in ts.items():
        expect([(r["op"], r["count"]) for r in allreduces(t)] == [("AllReduce", 16)] * 5,
               f"rank {k}: AllReduce records {allreduces(t)}")


def case_ctypes_hang(tmp):
    """pynccl style hung by a count mismatch on rank 2: `lockstep run` says so."""
    need_python_for(SHIM)
    p, report, d = lockstep_run(tmp, [sys.executable, PYNCCL, LIBNCCL, "hang"],
                                env={"REACH_VICTIM": "2"})
    expect_diagnosed(p, report, d, "count_mismatch", 2, {"op": "AllReduce", "count": 8},
                     {"op": "AllReduce", "count": 16})


# ---------------------------------------------------------------- dlsym as others use it


def probe_lines(preload):
    p = subprocess.run([os.path.join(REACH, "reach_probe"), PROBE2], capture_output=True,
                       text=True, timeout=30, env=base_env(preload=preload))
    expect(p.returncode == 0, f"reach_probe (preload {preload}) failed: {p.stderr}")
    return dict(l.split(" ", 1) for l in p.stdout.splitlines())


def case_rtld_next(tmp):
    """dlsym(RTLD_NEXT, ...) and dlvsym(RTLD_NEXT, ...) from a library (and from its
    constructor) still find the definition after that library, for NCCL-like names and others;
    RTLD_DEFAULT, handles and misses behave as without the shim."""
    plain, shimmed = probe_lines(None), probe_lines(SHIM)
    expect(shimmed == plain, f"under the shim {shimmed}\nwithout it {plain}")
    for name in ("reach_probe", "ncclReachProbe", "cuReachProbe", "PyReach_Probe"):
        expect(shimmed[f"next_{name}"] == "2", f"dlsym(RTLD_NEXT, {name}) -> {shimmed}")
        expect(shimmed[f"vnext_{name}"] == "2", f"dlvsym(RTLD_NEXT, {name}) -> {shimmed}")
        expect(shimmed[f"default_{name}"] == "1", f"dlsym(RTLD_DEFAULT, {name}) -> {shimmed}")
    expect(shimmed["early"] == "2", f"RTLD_NEXT in a constructor: {shimmed['early']}")
    expect(shimmed["handle_reach_probe"] == "2" and shimmed["handle_ncclReachProbe"] == "2",
           f"lookups by handle: {shimmed}")
    expect(shimmed["miss"] == "1 1" and shimmed["miss_plain"] == "1 1", f"misses: {shimmed}")


# ---------------------------------------------------------------- saying when blind


def blind_finding(r, reason):
    got = [f for f in r["findings"] if f["kind"] == "trace_incomplete" and f["reason"] == reason]
    expect(len(got) == 4, f"{len(got)} trace_incomplete/{reason} findings, want one per rank: "
           f"{[(f['kind'], f.get('reason'), f['summary']) for f in r['findings']]}")
    expect(sorted(r for f in got for r in f["ranks"]) == [0, 1, 2, 3],
           f"ranks {[f['ranks'] for f in got]}")
    return got


def case_blind_static(tmp):
    """NCCL linked into the executable: no call reaches the shim; the trace says so and
    `lockstep analyze` names the executable and the profiler plugin."""
    d = os.path.join(tmp, "t")
    exe = os.path.join(REACH, "static_nccl")
    p = run_ranks(4, [exe], d, env={"LOCKSTEP_BLIND_SECONDS": "1",
                                    "LD_LIBRARY_PATH": EMU_DIR}, timeout_s=4)
    expect(p.returncode == 124, f"launcher exited {p.returncode}, want 124 (hung): {p.stderr}")
    ts = traces(d)
    expect(sorted(ts) == [0, 1, 2, 3], f"traces for ranks {sorted(ts)}")
    for k, t in ts.items():
        flags = t["header_flags"]
        expect(flags & HFLAG_NCCL_UNSEEN and flags & HFLAG_NCCL_STATIC,
               f"rank {k}: header flags {flags:#x}")
        expect(t["records"] == [], f"rank {k}: records {t['records'][:3]}")
    for f in blind_finding(analyze(d), "nccl_static"):
        expect(f["object"] == os.path.realpath(exe), f"object {f['object']!r}, want {exe}")
        expect(exe in f["summary"] and "statically" in f["summary"], f["summary"])
        expect(any("NCCL_PROFILER_PLUGIN=libnccl-profiler-lockstep.so" in x
                   for x in f["details"]), f"remedy: {f['details']}")
    text = analyze(d, text=True)
    expect("statically" in text and "NCCL_PROFILER_PLUGIN" in text, f"text report: {text}")


def case_blind_unseen(tmp):
    """libnccl loaded, the CUDA driver too, and every call through pnccl names the shim does
    not wrap: recorded, and reported as calls that did not reach the shim."""
    d = os.path.join(tmp, "t")
    p = run_ranks(4, [CLIENT, LIBNCCL, "pnccl"], d, timeout_s=4,
                  env={"LOCKSTEP_BLIND_SECONDS": "1", "REACH_LIBCUDA": LIBCUDA})
    expect(p.returncode == 124, f"launcher exited {p.returncode}, want 124: {p.stderr}")
    for k, t in traces(d).items():
        flags = t["header_flags"]
        expect(flags & HFLAG_NCCL_UNSEEN and flags & HFLAG_NCCL_LIB_LOADED and
               not flags & HFLAG_NCCL_STATIC, f"rank {k}: header flags {flags:#x}")
    for f in blind_finding(analyze(d), "nccl_unseen"):
        expect("libnccl" in f["summary"] and "LD_PRELOAD" in " ".join(f["details"]), f)


def case_launcher_not_blind(tmp):
    """A launcher that imported the framework (libnccl and the CUDA driver loaded, as torchrun's
    agent has libtorch_cuda) and calls no NCCL function, above ranks that hang: its trace is
    flagged blind, yet it is the ranks' parent, not a rank LD_PRELOAD missed. The diagnosis is
    the ranks' alone: no blind finding, no job of the launcher's own (on a real GPU, torchrun's
    agent came first as 'pid N loaded libnccl and the CUDA driver, but none of its NCCL calls
    reached lockstep')."""
    d = os.path.join(tmp, "t")
    cmd = [LAUNCH, "--np", "4", "--timeout", "4", "--dlopen", LIBNCCL, "--dlopen", LIBCUDA,
           "--", CLIENT, LIBNCCL, "hang"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=90,
                       env=base_env({"LOCKSTEP_BLIND_SECONDS": "1"}, SHIM, d))
    expect(p.returncode == 124, f"launcher exited {p.returncode}, want 124 (hung): {p.stderr}")
    q = subprocess.run([QUERY, d], capture_output=True, text=True, timeout=60)
    ts = json.loads(q.stdout)
    launcher = [t for t in ts if t["rank"] < 0]
    expect(len(launcher) == 1 and launcher[0]["header_flags"] & HFLAG_NCCL_UNSEEN and
           not launcher[0]["records"],
           f"the launcher's trace: {[(t['rank'], t['pid'], t['header_flags']) for t in ts]}")
    expect(all(t["ppid"] == launcher[0]["pid"] for t in ts if t["rank"] >= 0),
           "the ranks are not the launcher's children")
    r = analyze(d)
    kinds = [(f["kind"], f.get("reason"), f["summary"]) for f in r["findings"]]
    expect(r["findings"][0]["kind"] == "op_mismatch" and
           not [k for k in kinds if k[1] in ("nccl_unseen", "nccl_static")],
           f"findings {kinds}")
    expect(len(r["jobs"]) == 1 and r["jobs"][0]["traces"] == 4,
           f"jobs {[(j['job'], j['traces']) for j in r['jobs']]}")
    expect(sorted(x["rank"] for x in per_rank(r)) == [0, 1, 2, 3],
           f"ranks {[x['rank'] for x in per_rank(r)]}")
    text = analyze(d, text=True)
    expect("CUDA driver" not in text, f"text report: {text}")


def case_not_blind(tmp):
    """A single-GPU program (the CUDA driver, no NCCL) leaves no trace and says nothing; a
    program whose NCCL calls are seen, with the CUDA driver (async emulator), records no
    blindness and analyzes clean."""
    d = os.path.join(tmp, "cuda")
    env = base_env({"LOCKSTEP_BLIND_SECONDS": "1", "LD_LIBRARY_PATH": EMU_DIR}, SHIM, d)
    p = subprocess.run([os.path.join(REACH, "cuda_only")], capture_output=True, text=True,
                       timeout=30, env=env)
    expect(p.returncode == 0 and p.stdout == "done\n", f"cuda_only: {p.returncode} {p.stderr}")
    expect(not lockstep_lines(p.stderr), f"warnings: {p.stderr}")
    left = os.listdir(d) if os.path.exists(d) else []
    expect(not left, f"traces: {left}")
    d = os.path.join(tmp, "async")
    p = run_ranks(2, [CLIENT, LIBNCCL, "clean"], d,
                  env={"LOCKSTEP_BLIND_SECONDS": "1", "LOCKSTEP_EMU_ASYNC": "1",
                       "LD_LIBRARY_PATH": EMU_DIR})
    expect(p.returncode == 0, f"dlsym_client (async) failed: {p.stderr}")
    for k, t in traces(d).items():
        expect(not t["header_flags"] & HFLAG_NCCL_UNSEEN, f"rank {k}: {t['header_flags']:#x}")
    # (The client does not wait for its GPU work before it exits: other findings may be made.)
    blind = [f for f in analyze(d, want_rc=None)["findings"]
             if f.get("reason") in ("nccl_static", "nccl_unseen")]
    expect(not blind, f"blind findings: {blind}")


def case_wrappers_2_29(tmp):
    """Every NCCL 2.29-2.32 entry point is wrapped whatever headers the build saw: the shim built
    against the machine's 2.28 nccl.h exports them (lockstep/nccl_next.h declares what those
    headers lack), and the wrappers compile as well against headers that declare part of that
    API (2.30) or all of it (2.32)."""
    want = {"ncclPutSignal", "ncclSignal", "ncclWaitSignal", "ncclCommGrow", "ncclCommSuspend",
            "ncclCommResume", "ncclCommWindowRegister", "ncclCommWindowDeregister",
            "ncclAllReduceConfig", "ncclBroadcastConfig", "ncclReduceConfig",
            "ncclAllGatherConfig", "ncclReduceScatterConfig", "ncclAlltoAllConfig",
            "ncclGatherConfig", "ncclScatterConfig"}
    for lib in (WRAP_2_29, WRAP_2_32):
        p = subprocess.run(["nm", "--defined-only", lib], capture_output=True, text=True,
                           timeout=30)
        expect(p.returncode == 0, f"nm failed: {p.stderr}")
        defined = {l.split()[-1] for l in p.stdout.splitlines() if " T " in l}
        expect(want <= defined, f"{lib}: missing wrappers: {sorted(want - defined)}")
    p = subprocess.run(["nm", "-D", "--defined-only", SHIM], capture_output=True, text=True,
                       timeout=30)
    shim = {l.split()[-1] for l in p.stdout.splitlines()}
    expect({"dlsym", "dlvsym"} <= shim, "shim exports dlsym, dlvsym")
    expect(want <= shim, f"the shim built against 2.28 headers lacks {sorted(want - shim)}")


def case_older_nccl(tmp):
    """A program built against newer NCCL headers than the library it runs on calls
    ncclAllReduceConfig (2.31): the name binds to the shim's wrapper, which finds no such
    function in the loaded libnccl, says so once (naming the call and the library) and returns
    ncclSystemError each time, without a crash; the calls the library has are recorded as ever."""
    d = os.path.join(tmp, "t")
    p = run_ranks(1, [CLIENT, OLDER_NCCL, "newer"], d)
    expect(p.returncode == 0, f"dlsym_client newer: exit {p.returncode}: {p.stderr}")
    expect("config 2 2" in p.stdout, f"results {p.stdout!r}, want ncclSystemError (2) twice")
    said = [l for l in lockstep_lines(p.stderr) if "ncclAllReduceConfig" in l]
    expect(len(said) == 1 and "has none" in said[0] and os.path.basename(OLDER_NCCL) in said[0],
           f"want one line naming the call and the library: {p.stderr}")
    (t,) = traces(d).values()
    ops = [r["op"] for r in t["records"]]
    expect(ops == ["CommInitRank"] + ["AllReduce"] * 5 + ["CommDestroy"], f"records {ops}")


if __name__ == "__main__":
    try:
        sys.exit(run(globals(), "lockstep-reach-"))
    except Failure as e:  # raised outside a case
        print(f"FAIL: {e}")
        sys.exit(1)
