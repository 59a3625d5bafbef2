#!/usr/bin/env python3
"""run_bench.py -- measures lockstep (shim cost per call, memory, analyzer time and memory, live
detection latency) and writes the figures as Markdown with a PNG plot. Run by scripts/bench.

Usage: run_bench.py --build DIR --out FILE.md [--quick] [--plot-dir DIR] [--work DIR]
"""
import argparse
import concurrent.futures
import datetime
import glob
import json
import math
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

A = None  # parsed arguments
LINES = []  # the Markdown being written


def say(msg):
    print("==> " + msg, flush=True)


def out(line=""):
    LINES.append(line)


def path(*parts):
    return os.path.join(A.build, *parts)


def env_with(extra=None, shim=False):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env["LD_LIBRARY_PATH"] = path("tests", "emulator") + ":" + env.get("LD_LIBRARY_PATH", "")
    if shim:
        env["LD_PRELOAD"] = path("shim", "liblockstep.so")
        env["LOCKSTEP_DIR"] = A.trace_dir
    env.update(extra or {})
    return env


# ---- shim cost per call -------------------------------------------------------------------

# The clocks the shim's runs had, as their trace headers say (clock_source at offset 2760).
SHIM_CLOCKS = set()
CLOCK_WORDS = {0: "clock_gettime (no counter trusted)", 1: "the CPU's counter (the kernel clocks "
               "on the TSC; aarch64's generic timer)", 2: "an invariant TSC beside the kernel's "
               "own clocksource"}


def note_clock(folder):
    for f in glob.glob(os.path.join(folder, "*.trace")):
        with open(f, "rb") as t:
            t.seek(2760)
            b = t.read(4)
        if len(b) == 4:
            SHIM_CLOCKS.add(int.from_bytes(b, "little"))


def clock_words():
    return "; ".join(CLOCK_WORDS.get(c, f"clock source {c}") for c in sorted(SHIM_CLOCKS)) or \
        "not seen"


def bench_run(args, shim, extra=None):
    """Runs shim_bench once; returns its key/value output as floats."""
    p = subprocess.run([path("bench", "shim_bench"), *map(str, args)], env=env_with(extra, shim),
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"shim_bench {args} failed: {p.stderr}")
    if shim:
        note_clock(A.trace_dir)
    shutil.rmtree(A.trace_dir, ignore_errors=True)
    return {k: float(v) for k, v in (l.split() for l in p.stdout.splitlines())}


# name, LOCKSTEP_STACK_DEPTH (None: no shim), frames between the thread and the calls, threads,
# extra environment
CASES = [
    ("call sites off (depth 0), shallow stack", "0", 0, 1, {}),
    ("call sites off (depth 0), deep stack", "0", 20, 1, {}),
    ("default (depth 16), shallow stack", "16", 0, 1, {}),
    ("default (depth 16), deep stack", "16", 20, 1, {}),
    ("depth 32, shallow stack", "32", 0, 1, {}),
    ("depth 32, deep stack", "32", 20, 1, {}),
    ("default, deep stack, 16 threads at once", "16", 20, 16, {}),
    ("default, deep stack, async mode + completion tracking", "16", 20, 1,
     {"LOCKSTEP_EMU_ASYNC": "1"}),
]


FLOOR = "the floor: 2 rdtsc, 1 lock xadd, 1 record into a MAP_SHARED ring (no shim)"
# What the shim and Python sections say in place of their instruction counts when they have none
# (bench/test_modes.py accepts these lines, word for word, for a missing table).
NO_VALGRIND = "Instructions per call: not counted (valgrind is not installed)."
NO_CALLGRIND_QUICK = ("Instructions per call: not counted with `--quick` (a Python process under "
                      "callgrind is slow).")


def shim_ns():
    """Median ns and TSC cycles per call, shim minus no shim, with the floor (shim_bench --floor
    1, no shim) measured beside them. Rounds run every case once each, in turn, so a change in
    the machine's load reaches every case alike (the ratios to the floor stay honest); a case's
    cost is the median over rounds of (with - without) measured back to back."""
    calls = 20000 if A.quick else 1000000
    reps = 3 if A.quick else 5
    rounds = 1 if A.quick else 5
    cases = [(FLOOR, None, 0, 1, {})] + CASES
    got = {c[0]: [] for c in cases}
    for _ in range(rounds):
        for name, depth, frames, threads, extra in cases:
            per_thread = calls if threads == 1 else max(calls // threads, 1000)
            args = ["--calls", per_thread, "--reps", reps, "--frames", frames, "--threads",
                    threads]
            base = bench_run(args, False, extra)
            if depth is None:
                with_ = bench_run(args + ["--floor", 1], False, extra)
            else:
                with_ = bench_run(args, True, dict(extra, LOCKSTEP_STACK_DEPTH=depth))
            got[name].append((base, with_))
    rows = []
    for name, depth, frames, threads, extra in cases:
        per_thread = calls if threads == 1 else max(calls // threads, 1000)
        pairs = got[name]
        b = statistics.median(x["cpu_ns_per_call"] for x, _ in pairs)
        s = statistics.median(y["cpu_ns_per_call"] for _, y in pairs)
        d = statistics.median(y["cpu_ns_per_call"] - x["cpu_ns_per_call"] for x, y in pairs)
        bc = statistics.median(x["tsc_per_call"] for x, _ in pairs)
        sc = statistics.median(y["tsc_per_call"] for _, y in pairs)
        dc = statistics.median(y["tsc_per_call"] - x["tsc_per_call"] for x, y in pairs)
        rows.append((name, per_thread * reps * rounds * threads, b, s, d, bc, sc, dc))
        say(f"{name}: {b:.0f} -> {s:.0f} ns/call (+{d:.0f}), +{dc:.0f} TSC cycles")
    return rows


def workers():
    """How many measurements run at once: --quick (the smoke run, alone on the machine as a
    test) runs two where that changes no figure it checks; the real figures one at a time."""
    return 2 if A.quick else 1


def callgrind_ir(args, shim, extra=None):
    # Only what the calling thread runs inside the timed loop: not start-up, not the shim's
    # heartbeat thread (whose share per call would grow with how slow valgrind runs).
    cmd = ["valgrind", "--tool=callgrind", "--toggle-collect=call_loop",
           "--callgrind-out-file=/dev/null",
           path("bench", "shim_bench"), *map(str, args)]
    d = tempfile.mkdtemp(prefix="lockstep-bench-ir-", dir=A.work)  # its own: runs overlap
    try:
        p = subprocess.run(cmd, env=env_with(dict(extra or {}, LOCKSTEP_DIR=d), shim),
                           capture_output=True, text=True, timeout=1200)
        if shim:
            note_clock(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    m = re.search(r"Collected : (\d+)", p.stderr)
    if not m:
        raise SystemExit(f"callgrind failed: {p.stderr[-2000:]}")
    return int(m.group(1))


def shim_instructions():
    """Instructions per call from callgrind: (Ir(2N) - Ir(N)) per added call, shim minus none.
    The difference of two run lengths removes start-up (trace creation, first unwinds)."""
    if not shutil.which("valgrind"):
        return None
    n = 2000 if A.quick else 20000
    # Instruction counts do not depend on what else runs: every run at once (workers()).
    cases = [(FLOOR, None, 0, 1, {})] + CASES[:6]
    runs = [(["--calls", k, "--reps", 1, "--frames", frames] +
             (["--floor", 1] if depth is None and shim else []), shim and depth is not None,
             dict(LOCKSTEP_STACK_DEPTH=depth) if shim and depth is not None else {})
            for _, depth, frames, _, _ in cases for shim in (False, True) for k in (n, 2 * n)]
    with concurrent.futures.ThreadPoolExecutor(workers()) as pool:
        irs = iter(list(pool.map(lambda r: callgrind_ir(*r), runs)))
    rows = []
    for name, depth, frames, threads, extra in cases:
        per = []
        for shim in (False, True):
            ir_n, ir_2n = next(irs), next(irs)
            # shim_bench makes calls/10 + 1 warm-up calls before the measured ones
            added = (2 * n + 2 * n // 10) - (n + n // 10)
            per.append((ir_2n - ir_n) / added)
        rows.append((name, per[0], per[1], per[1] - per[0]))
        say(f"{name}: {per[1] - per[0]:.0f} instructions/call")
    return rows


# ---- memory -------------------------------------------------------------------------------

def memory():
    """VmHWM of a fresh benchmark process without the shim, with call sites off and with the
    default depth, each with a ring that wrapped (more calls than LS_DEFAULT_RING)."""
    calls = 50000 if A.quick else 1000000
    args = ["--calls", calls, "--reps", 1, "--frames", 20]
    base = bench_run(args, False)["vmhwm_kib"]
    got = {}
    for depth in ("0", "16"):
        os.makedirs(A.trace_dir, exist_ok=True)
        p = subprocess.run([path("bench", "shim_bench"), *map(str, args)],
                           env=env_with({"LOCKSTEP_STACK_DEPTH": depth}, True),
                           capture_output=True, text=True, timeout=600)
        got[depth] = float(re.search(r"vmhwm_kib (\S+)", p.stdout).group(1))
        sizes = [os.path.getsize(f) for f in glob.glob(os.path.join(A.trace_dir, "*.trace"))]
        shutil.rmtree(A.trace_dir, ignore_errors=True)
    return base, got["0"], got["16"], max(sizes) if sizes else 0


# ---- analyzer -----------------------------------------------------------------------------

TRACEGEN_HELP = None


def tracegen_has(option):
    """True when this build's lockstep-tracegen knows `option` (from its --help): the scale
    rows write per-node summaries where it can, trace files otherwise."""
    global TRACEGEN_HELP
    if TRACEGEN_HELP is None:
        p = subprocess.run([path("tests", "tracegen", "lockstep-tracegen"), "--help"],
                           capture_output=True, text=True)
        TRACEGEN_HELP = p.stdout + p.stderr
    return re.search(r"(^|\s)" + re.escape(option) + r"\b", TRACEGEN_HELP) is not None


def gen_traces(d, ranks, records, scale=False, summary=False):
    """scale=False: a job of `ranks` ranks whose rings each hold `records` records (wrapped
    once): world collectives, a p2p ring exchange in a group and a split communicator every
    iteration, rank 1 with a different count in the last collective.
    scale=True: the scale scenario, `ranks` ranks x `records` all-reduces (rings large enough
    to hold them), rank ranks/2 stops calling NCCL before the last one; one trace file per
    rank, or with summary=True one node summary per 8 ranks (lockstep-tracegen --summary:
    what each node's runner would send; docs/summary-format.md)."""
    tg = path("tests", "tracegen", "lockstep-tracegen")
    if scale:
        cmd = [tg, "--out", d, "--ranks", str(ranks), "--colls", str(records),
               "--ring", str(1 << (records + 16).bit_length()), "--missing", str(ranks // 2)]
        if summary:
            cmd.append("--summary")
    else:
        per_iter = 6
        colls = records // per_iter + 64
        cmd = [tg, "--out", d, "--ranks", str(ranks), "--colls", str(colls), "--ring",
               str(records), "--p2p", "--split", "4", "--mismatch", "count:1"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=3600)


def analyze_measured(d, expect):
    """Runs the analyzer under bench/peak_rss, which measures the analyzer's own peak RSS: from
    this Python driver, wait4 would report at least the driver's (Linux carries a parent's peak
    over fork and exec). Returns wall seconds, MiB, whether the report holds `expect`, the
    records each trace contributed (the window) and the JSON report's size in bytes."""
    rss_file = os.path.join(d, ".peak_rss")
    t0 = time.monotonic()
    p = subprocess.run([path("bench", "peak_rss"), rss_file, path("analyzer", "lockstep"),
                        "analyze", "--json", d], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    ok = p.returncode == 1 and expect.encode() in p.stdout
    m = re.search(rb'"records": \[?(\d+)', p.stdout)
    with open(rss_file) as f:
        kib = int(f.read())
    os.unlink(rss_file)
    return wall, kib / 1024.0, ok, int(m.group(1)) if m else 0, len(p.stdout)


# The scale scenario (ranks x 2,000 all-reduces, one rank missing): the ranks it is run at
# from trace files, and from per-node summaries (up to 131,072 ranks: as trace files they
# would be 34 GB).
SCALE_RANKS = [1024, 4096, 16384, 32768]
SCALE_RANKS_SUMMARY = [16384, 32768, 65536, 131072, 262144]
SCALE_RECORDS = 2000


def analyzer_grid():
    """Rows (kind, ranks, records, wall s, peak MiB, found, window, load average before the
    runs): kind "records" for the
    mixed-call jobs whose records per rank vary, "scale" for the scale scenario from trace
    files, "summary" for it from per-node summaries."""
    summaries = tracegen_has("--summary")
    if A.quick:
        grid = [("records", 16, 4096), ("records", 64, 1024), ("records", 16, 16384),
                ("scale", 256, SCALE_RECORDS), ("scale", 1024, SCALE_RECORDS)]
        grid += [("summary", 1024, SCALE_RECORDS)] if summaries else []
    else:
        grid = [("records", r, n) for r, n in
                [(64, 65536), (256, 65536), (1024, 65536), (1024, 4096), (1024, 16384),
                 (256, 4096), (4096, 4096), (4096, 1024)]]
        grid += [("scale", r, SCALE_RECORDS) for r in SCALE_RANKS]
        grid += [("summary", r, SCALE_RECORDS) for r in (SCALE_RANKS_SUMMARY if summaries else [])]
    rows = []
    for kind, ranks, records in grid:
        d = tempfile.mkdtemp(prefix="lockstep-bench-traces-", dir=A.work)
        try:
            say(f"generating {kind} {ranks} ranks x {records} records in {d}")
            gen_traces(d, ranks, records, scale=kind != "records", summary=kind == "summary")
            subprocess.run(["sync"])
            # One run for the 8 GiB mixed-call jobs (the records they hold, not the ranks,
            # are large); three for the scale rows, whose single runs swing with this shared
            # machine's load.
            repeats = 1 if A.quick or (kind == "records" and ranks * records > (1 << 24)) else 3
            expect = "count_mismatch" if kind == "records" else "missing_ranks"
            load = float(open("/proc/loadavg").read().split()[0])
            runs = [analyze_measured(d, expect) for _ in range(repeats)]
            wall = statistics.median(r[0] for r in runs)
            rss = max(r[1] for r in runs)
            ok = all(r[2] for r in runs)
            rows.append((kind, ranks, records, wall, rss, ok, runs[0][3], load, runs[0][4]))
            say(f"analyze {kind} {ranks} x {records}: {two(wall)} s, {rss:.0f} MiB, window "
                f"{runs[0][3]}, {'found' if ok else 'DID NOT find'} the {expect}")
        finally:
            shutil.rmtree(d, ignore_errors=True)
    return rows


# ---- live detection latency ---------------------------------------------------------------

LIVE = [("prepare_data", 4), ("uneven_shards", 4), ("code_path", 4), ("shape_mismatch", 4),
        ("root_mismatch_split", 4), ("unmatched_send", 2), ("sendrecv_deadlock", 2),
        ("cross_comm_deadlock", 4), ("segfault", 4), ("early_exit", 4)]


def last_progress_ns(d, before_ns):
    """Newest enter/exit (or end) time in the traces of `d` before `before_ns` (the stall
    announcement: ends after it are the job being stopped): the header's and its thread slots'
    times as the shim writes them, read by bench/last_progress through the analyzer's reader."""
    p = subprocess.run([path("bench", "last_progress"), d, str(before_ns)], capture_output=True,
                       text=True, timeout=60)
    return int(p.stdout) if p.returncode == 0 and p.stdout.strip() else 0


def stamp_lines(p, stamps, keys):
    """Threads that timestamp (CLOCK_REALTIME ns) the first line of p's stdout ("report"), of its
    stderr that says it saw a stall ("stall"), and of its stderr that holds each key of `keys`
    (the line kept too). Returns the threads, started."""
    def watch(stream, first_key):
        for line in stream:
            now = time.time_ns()
            if first_key not in stamps and line.strip() and (
                    first_key != "stall" or "no progress for" in line):
                stamps[first_key] = now
            for k in keys:
                if k in line and k not in stamps:
                    stamps[k] = (now, line)

    ts = [threading.Thread(target=watch, args=(p.stdout, "report")),
          threading.Thread(target=watch, args=(p.stderr, "stall"))]
    for t in ts:
        t.start()
    return ts


def live_one(mode, np, stall, tmp):
    d = os.path.join(tmp, "traces-" + mode)
    cmd = [path("analyzer", "lockstep"), "run", "--dir", d, "--stall", str(stall), "--",
           path("tests", "launcher", "launch-ranks"), "--np", str(np), "--",
           path("tests", "scenarios", "scenarios"), mode]
    env = env_with()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stamps = {}
    ts = stamp_lines(p, stamps, ())
    p.wait(timeout=300)
    ended = time.time_ns()
    for t in ts:
        t.join()
    rep, stall_seen = stamps.get("report"), stamps.get("stall")
    if rep is None or stall_seen is None or p.returncode != 3:
        return None
    last = last_progress_ns(d, stall_seen)
    return ((rep - last) / 1e9, (ended - last) / 1e9) if last else None


def partial_one(stall, tmp, k):
    """`lockstep run --stall S` of tests/live/partial replicas (8 ranks: rank 5 stops calling,
    replica 0 trains on). Returns (seconds from the moment rank 5 stopped calling to the first
    line of the diagnosis, to the exit of `lockstep run`), or None when it did not exit 3."""
    d = os.path.join(tmp, f"traces-partial-{k}")
    cmd = [path("analyzer", "lockstep"), "run", "--dir", d, "--stall", str(stall), "--",
           path("tests", "launcher", "launch-ranks"), "--np", "8", "--timeout", "120", "--",
           path("tests", "live", "partial"), "replicas"]
    p = subprocess.Popen(cmd, env=env_with({"PARTIAL_STEP_MS": "0"}), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    stamps = {}
    ts = stamp_lines(p, stamps, ("stopped calling at",))
    p.wait(timeout=300)
    ended = time.time_ns()
    for t in ts:
        t.join()
    stop = stamps.get("stopped calling at")
    if p.returncode != 3 or "report" not in stamps or not stop:
        return None
    stopped = int(stop[1].split()[-1])
    return (stamps["report"] - stopped) / 1e9, (ended - stopped) / 1e9


def monitor_poll_cost(tmp):
    """One poll of the live monitor (as `lockstep run` makes every 50 ms, with its search for a
    stall) on 1,024 traces that it takes for ranks running here (bench/monitor_poll --adopt),
    50 polls 3 times (--quick: once). Returns (median, 90th percentile) in ms: the medians over the
    runs."""
    d = os.path.join(tmp, "poll-1024")
    subprocess.run([path("tests", "tracegen", "lockstep-tracegen"), "--out", d, "--ranks",
                    "1024", "--colls", "64", "--ring", "128", "--missing", "512"], check=True,
                   capture_output=True, timeout=600)
    runs = []
    for _ in range(1 if A.quick else 3):
        p = subprocess.run([path("bench", "monitor_poll"), "--adopt", d, "50"],
                           capture_output=True, text=True, timeout=600, check=True)
        f = p.stdout.split()
        runs.append((float(f[f.index("median_us") + 1]) / 1e3, float(f[f.index("p90_us") + 1]) / 1e3))
    shutil.rmtree(d, ignore_errors=True)
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def stack_holds(tmp):
    """How long reading live stacks holds a rank's threads: 4 ranks of tests/live/sleepers
    (the last in nanosleep, the others in AllReduce), their stacks read 20 times (--quick: 5) with `lockstep stacks`. Returns (held us
    per thread read, wall seconds per `lockstep stacks` of the 4 ranks), both sorted."""
    d = os.path.join(tmp, "stacks")
    os.makedirs(d)
    env = env_with({"LD_PRELOAD": path("shim", "liblockstep.so"), "LOCKSTEP_DIR": d,
                    "SLEEPER_MS": "30000"})
    p = subprocess.Popen([path("tests", "launcher", "launch-ranks"), "--np", "4", "--",
                          path("tests", "live", "sleepers"), "nanosleep"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    held, walls = [], []
    try:
        time.sleep(1)
        for _ in range(5 if A.quick else 20):
            t0 = time.monotonic()
            r = subprocess.run([path("analyzer", "lockstep"), "stacks", "--json", d],
                               env=env_with(), capture_output=True, text=True, timeout=60)
            walls.append(time.monotonic() - t0)
            for rank in json.loads(r.stdout)["ranks"]:
                held += [t["held_us"] for t in rank["threads"] if t["read"] == "held"]
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    return sorted(held), sorted(walls)


def live_latency():
    stall = 1 if A.quick else 2
    modes = LIVE[2:3] if A.quick else LIVE
    rows = []
    with tempfile.TemporaryDirectory(prefix="lockstep-bench-live-", dir=A.work) as tmp:
        for mode, np in modes:
            lat = live_one(mode, np, stall, tmp)
            rows.append((mode, lat))
            say(f"live {mode}: " + (f"report {lat[0]:.2f} s, exit {lat[1]:.2f} s"
                                    if lat is not None else "no diagnosis"))
        partial = [partial_one(stall, tmp, k) for k in range(1 if A.quick else 8)]
        say("live partial hang: " + ", ".join("-" if x is None else f"{x[0]:.2f} s"
                                              for x in partial))
        poll = monitor_poll_cost(tmp)
        say(f"monitor poll at 1,024 traces: median {poll[0]:.1f} ms, p90 {poll[1]:.1f} ms")
        holds = stack_holds(tmp)
    return stall, rows, holds, partial, poll


def pct(v, q):
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")


def live_section(stall, live, holds, partial, poll):
    out("## Live detection latency")
    out()
    out(f"`lockstep run --stall {stall}` over the hang scenarios (`tests/scenarios`): the time from "
        "the last progress recorded in any trace (the newest call entered or left, of the header "
        "and its thread slots, or the end of a rank that died, before the stall was announced; "
        "`bench/last_progress`) to the first line of the printed "
        "diagnosis (lines timestamped as they arrive), and to the exit of `lockstep run` (the "
        "job stopped).")
    out()
    out("| scenario | to the report, s | to the exit, s |")
    out("|---|---:|---:|")
    for mode, lat in live:
        out(f"| {mode} | " + ("- | - |" if lat is None else f"{lat[0]:.2f} | {lat[1]:.2f} |"))
    out()
    got = sorted(x for x in partial if x is not None)
    out(f"A partial hang, `lockstep run --stall {stall}` of `tests/live/partial replicas` (8 ranks "
        "on the emulator, two replicas of 4; rank 5 stops calling while replica 0 trains on), "
        f"{len(partial)} runs: from the moment rank 5 stopped calling (the time it prints) to the "
        "first line of the diagnosis " + (f"{got[0][0]:.2f}–{got[-1][0]:.2f} s (median "
                                           f"{statistics.median(x[0] for x in got):.2f} s), to "
                                           f"the exit {min(x[1] for x in got):.2f}–"
                                           f"{max(x[1] for x in got):.2f} s" if got else "-") +
        (f"; {len(partial) - len(got)} runs did not exit 3" if len(got) < len(partial) else "") +
        ".")
    out()
    out("One poll of the live monitor (`bench/monitor_poll --adopt`: the folder rescanned, each "
        "trace's header and communicator table read, its process's liveness from /proc, the "
        "communicator index, waits and jobs worked out, the search for a stall) on 1,024 traces "
        f"of ranks it takes for running here: median {poll[0]:.1f} ms, 90th percentile "
        f"{poll[1]:.1f} ms (the median over runs of 50 polls). `lockstep run` polls every 50 ms.")
    out()
    held, walls = holds
    out("Live stacks (docs/live.md): 4 ranks of `tests/live/sleepers` (the last in `nanosleep`, "
        "the others in an AllReduce), their "
        f"stacks read {len(walls)} times with `lockstep stacks`. A thread is held from `PTRACE_INTERRUPT` "
        "to `PTRACE_DETACH` (its registers and stack are copied, and unwound after it goes on): "
        f"median {pct(held, 0.5):.0f} µs, 90th percentile {pct(held, 0.9):.0f} µs, most "
        f"{held[-1] if held else float('nan'):.0f} µs over {len(held)} thread reads. One "
        f"`lockstep stacks` of the 4 ranks (the 100 ms CPU sample included) takes "
        f"{pct(walls, 0.5) * 1000:.0f} ms (median).")
    out()


def live_only():
    """--live-only: replaces the live section of an existing report."""
    stall, live, holds, partial, poll = live_latency()
    replace_section("## Live detection latency",
                    lambda: live_section(stall, live, holds, partial, poll))


# ---- detection with the default bounds ----------------------------------------------------

# Hang shapes run under `lockstep run` with no option: (label, program and its mode, ranks,
# environment, launcher options, the root cause the diagnosis must name). The program is a path
# under the build folder. Every hang of the scenario, real-job and chain suites (tests/scenarios)
# is here, each as those suites set it up, except:
# - shapes that are no hang: the scenario prepare_data (its rank computes for 30 s, then goes
#   on: it is among the clean jobs), straggler and clean;
# - shapes whose late rank computes for a minute as the suites' stand-in for "stuck": under the
#   default bounds a computing rank is slow, not hung (docs/live.md), so here that rank sleeps
#   instead (SCENARIO_BUSY=sleep: a data loader or a lock that never returns); the computing
#   form is among the clean jobs (a 90 s compile);
# - what needs a second launch or the machine's hostname (restarts over several runs, node
#   failures on simulated hosts, a PID reused, a trace folder written by hand): post-mortem
#   shapes whose live twin (restart_live) is here.
def _scn(mode, np=4, env=None, launcher=(), root=None, label=None):
    return (label or f"scenario {mode}", ("tests", "scenarios", "scenarios", mode), np,
            env or {}, launcher, root)


def _rj(label, mode, root, np=4, env=None, launcher=()):
    return (f"real job: {label}", ("tests", "scenarios", "realjobs", mode), np, env or {},
            launcher, root)


def _ch(label, mode, root, np=4, env=None, launcher=()):
    return (f"chain: {label}", ("tests", "scenarios", "chains", mode), np, env or {}, launcher,
            root)


ASLEEP = {"SCENARIO_BUSY": "sleep", "SCENARIO_DELAY_MS": "3600000"}
ASYNC_EMU = {"LOCKSTEP_EMU_ASYNC": "1"}
DETECT_HANGS = [
    _scn("uneven_shards", env={"SCENARIO_STEPS": "7"}, root="op_mismatch"),
    _scn("code_path", env={"SCENARIO_VICTIM": "1"}, root="op_mismatch"),
    _scn("shape_mismatch", root="count_mismatch"),
    _scn("dtype_mismatch", root="dtype_mismatch"),
    _scn("redop_mismatch", root="redop_mismatch"),
    _scn("root_mismatch_split", root="root_mismatch"),
    _scn("unmatched_send", 2, root="p2p_unmatched"),
    _scn("p2p_size_mismatch", 2, root="p2p_size_mismatch"),
    _scn("sendrecv_deadlock", 2, root="deadlock_cycle"),
    _scn("cross_comm_deadlock", root="missing_ranks"),  # rank 3 alone took the other order
    _scn("segfault", env={"SCENARIO_VICTIM": "1"}, root="rank_crashed"),
    _scn("sigkill", root="rank_crashed"),
    _scn("early_exit", root="rank_exited"),
    _scn("uneven_shards", 32, label="scenario uneven_shards, 32 ranks", root="op_mismatch"),
    _scn("uneven_shards", env=ASYNC_EMU, label="scenario uneven_shards, GPU-like (async)",
         root="op_mismatch"),
    _scn("sendrecv_deadlock", 2, env=ASYNC_EMU, label="scenario sendrecv_deadlock, GPU-like",
         root="deadlock_cycle"),
    _scn("cross_comm_deadlock", env=ASYNC_EMU, label="scenario cross_comm_deadlock, GPU-like",
         root="missing_ranks"),
    _scn("segfault", env=dict(ASYNC_EMU, SCENARIO_VICTIM="1"),
         label="scenario segfault, GPU-like", root="rank_crashed"),
    _rj("a late rank asleep, no watchdog", "watchdog", "missing_ranks", env=ASLEEP),
    _rj("a late rank asleep, a 60 s watchdog that aborts", "watchdog", "missing_ranks",
        env=dict(ASLEEP, SCENARIO_WATCHDOG_MS="60000")),
    _rj("a rank OOM-killed, no fail-fast", "oom_kill", "rank_crashed",
        env={"SCENARIO_STEPS": "3", "SCENARIO_STEP_MS": "20"}),
    _rj("a restart whose second attempt hangs", "restart", "missing_ranks",
        env=dict(ASLEEP, SCENARIO_PLAN="oom,hang"), launcher=("--max-restarts", "1")),
    _rj("two processes with rank 1", "dup_rank", "duplicate_rank",
        launcher=("--ranks", "0,1,1,3")),
    _rj("one process, four GPUs, ncclCommInitAll", "initall", "missing_ranks", np=1),
    _rj("one process per two GPUs", "multigpu", "missing_ranks", np=2),
    _rj("an exception inside a group", "open_group", "missing_ranks", env=ASLEEP),
    _rj("a child communicator", "child_comm", "missing_ranks",
        env=dict(ASLEEP, SCENARIO_CHILD="nocolor")),
    _rj("GPU queues far ahead of the stuck call", "far_apart", "missing_ranks",
        env=dict(ASYNC_EMU, **ASLEEP, SCENARIO_STEPS="2")),
    _rj("a collective stuck on the GPU, queues far ahead", "far_apart", "stuck_in_flight",
        env=dict(ASYNC_EMU, SCENARIO_STEPS="2", LOCKSTEP_EMU_HANG_COLL="3")),
    _rj("an aborted communicator (its rank computes on)", "comm_abort", "comm_aborted",
        env={"SCENARIO_ABORT": "abort", "SCENARIO_DELAY_MS": "3600000"}),
    _rj("a stopped rank (SIGSTOP)", "sigstop", "missing_ranks"),
    _rj("ranks given too small a world size", "wrong_world", "nccl_error", np=8,
        launcher=("--world-sizes", "8,8,8,8,4,4,4,4")),
    _ch("a stage mismatch the world waits behind", "cross_mismatch", "op_mismatch"),
    _ch("a stage collective stuck on the GPU", "cross_gpu_stuck", "stuck_in_flight",
        env=dict(ASYNC_EMU, LOCKSTEP_EMU_HANG_COLL="1:2")),
    _ch("TP 2 x PP 2 x DP 4, a rank asleep in its forward pass", "pp_chain", "missing_ranks",
        np=16, env=dict(ASLEEP, SCENARIO_TP="2", SCENARIO_PP="2", SCENARIO_VICTIM="6",
                        SCENARIO_STEP_MS="2")),
    _ch("a rank that exits before NCCL", "late_init", "comm_init_mismatch",
        env={"SCENARIO_VICTIM": "2", "SCENARIO_INIT": "exit"}),
    _ch("a rank OOM-killed before NCCL (SIGKILL while it loads data)", "late_init",
        "comm_init_mismatch", env={"SCENARIO_VICTIM": "1", "SCENARIO_INIT": "kill"}),
    _ch("a rank asleep before NCCL (a lock it never gets)", "late_init", "comm_init_mismatch",
        env=dict(ASLEEP, SCENARIO_VICTIM="3")),
    _ch("a refused call, then exit", "refused_exit", "nccl_error"),
    _ch("a cycle the world waits behind", "cycle_behind", "deadlock_cycle"),
    _ch("a late rank asleep and a count mismatch", "two_causes",
        ("count_mismatch", "missing_ranks"), np=6,
        env=dict(ASLEEP, SCENARIO_VICTIM="1", SCENARIO_VICTIM2="2")),
    _ch("an abort in a child communicator", "abort_in_child", "comm_aborted"),
    ("bounds asleep (a rank sleeps for good)", ("tests", "live", "bounds", "asleep"), 4, {}, (),
     "missing_ranks"),
    ("bounds locked (a rank on a lock)", ("tests", "live", "bounds", "locked"), 4, {}, (),
     "missing_ranks"),
    ("bounds busy_asleep (8 s of CPU, then asleep)", ("tests", "live", "bounds", "busy_asleep"),
     4, {"BOUNDS_WORK_MS": "8000"}, (), "missing_ranks"),
    ("partial replicas (rank 5 stops, replica 0 trains on)", ("tests", "live", "partial",
                                                              "replicas"), 8,
     {"PARTIAL_STEP_MS": "0"}, (), "missing_ranks"),
]

# Clean jobs with slow phases: (label, program and arguments, ranks, environment). None of them
# hangs; a stop is a false stall.
DETECT_CLEAN = [
    ("a rank that prepares data for 30 s (CPU) before a barrier (scenario prepare_data)",
     ("tests", "scenarios", "scenarios", "prepare_data"), 4, {}, (), None),
    ("a 10 s checkpoint (CPU) while the others wait in an AllReduce",
     ("tests", "live", "bounds", "busy"), 4, {"BOUNDS_WORK_MS": "10000"}, (), None),
    ("a 10 s checkpoint written to disk while the others wait in a socket barrier",
     ("tests", "live", "outside", "checkpoint"), 4, {"OUTSIDE_WORK_MS": "10000"}, (), None),
    ("a 90 s CPU-busy compile on one rank", ("tests", "live", "bounds", "busy"), 4,
     {"BOUNDS_WORK_MS": "90000"}, (), None),
    ("an evaluation loop (20 s of CPU) on rank 0 only", ("tests", "live", "bounds", "busy"), 4,
     {"BOUNDS_WORK_MS": "20000", "BOUNDS_CULPRIT": "0"}, (), None),
    ("a data loader that sleeps 5 s every 10 steps", ("tests", "live", "bounds", "loader"), 4,
     {"BOUNDS_WORK_MS": "5000", "BOUNDS_STEPS": "45"}, (), None),
    ("first-step initialization of 64 ranks (rank r computes 40 s x (r+1)/64 before NCCL's "
     "creation; the first wait in it for the last)", ("tests", "live", "bounds", "busy"), 64,
     {"BOUNDS_STEPS": "3", "BOUNDS_WORK_MS": "0", "BOUNDS_START_MS": "40000"}, (), None),
    ("a 60 s I/O-bound save (1 MiB writes, synced every 16 MiB)",
     ("tests", "live", "bounds", "save_io"), 4, {"BOUNDS_WORK_MS": "60000"}, (), None),
    ("a 3 s CPU pause (a Python GC pause)", ("tests", "live", "bounds", "busy"), 4,
     {"BOUNDS_WORK_MS": "3000"}, (), None),
    ("a rank that downloads its dataset for 40 s (CPU) before its first NCCL call (chain "
     "late_init)", ("tests", "scenarios", "chains", "late_init"), 4,
     {"SCENARIO_VICTIM": "2", "SCENARIO_INIT": "busy", "SCENARIO_DELAY_MS": "40000"}, (), None),
    ("TP 2 x PP 2 x DP 4, one rank computes 40 s before its forward pass (the chain suite's "
     "late rank)", ("tests", "scenarios", "chains", "pp_chain"), 16,
     {"SCENARIO_TP": "2", "SCENARIO_PP": "2", "SCENARIO_VICTIM": "6", "SCENARIO_STEP_MS": "2",
      "SCENARIO_DELAY_MS": "40000"}, (), None),
]


def root_kinds(report):
    """The kinds of a JSON report's root causes (findings that follow from none)."""
    return [f["kind"] for f in (report or {}).get("findings", [])
            if f.get("consequence_of") is None and f["kind"] != "trace_incomplete"]


def detect_one(prog, np, extra, launcher, tmp, k):
    """`lockstep run --json FILE -- launch-ranks --np N [LAUNCHER...] -- PROG MODE` with no stall
    option. Returns (exit status, seconds from the hang to the first line of the report or None,
    the JSON report or None, wall seconds)."""
    d = os.path.join(tmp, f"traces-{k}")
    js = os.path.join(tmp, f"report-{k}.json")
    env = env_with(dict({"OUTSIDE_SOCK": os.path.join(tmp, f"sock-{k}"),
                         "OUTSIDE_CKPT": os.path.join(tmp, f"ckpt-{k}"),
                         "BOUNDS_FILE": os.path.join(tmp, f"shard-{k}")}, **extra))
    cmd = [path("analyzer", "lockstep"), "run", "--dir", d, "--json", js, "--",
           path("tests", "launcher", "launch-ranks"), "--np", str(np), "--timeout", "900",
           *launcher, "--", path(*prog[:-1]), prog[-1]]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         cwd=tmp)
    stamps = {}
    ts = stamp_lines(p, stamps, ("hangs at", "stopped calling at"))
    p.wait(timeout=1200)
    wall = time.monotonic() - t0
    for t in ts:
        t.join()
    report = None
    if os.path.exists(js):
        try:
            report = json.load(open(js))
        except ValueError:
            pass
    hang = stamps.get("hangs at") or stamps.get("stopped calling at")
    if p.returncode != 3 or "report" not in stamps:
        return p.returncode, None, report, wall
    if hang:
        at = int(hang[1].split()[-1])
    else:
        at = last_progress_ns(d, stamps.get("stall", stamps["report"]))
    took = (stamps["report"] - at) / 1e9 if at else None
    shutil.rmtree(d, ignore_errors=True)
    return p.returncode, took, report, wall


def detect_latency():
    """Every hang shape and every clean job of DETECT_* under `lockstep run` with no option,
    beside A.hogs busy loops (--quick: one of each; --detect-match: those whose label holds the
    text). Returns (hang rows, clean rows, hogs)."""
    # --quick: the shape diagnosed soonest (3 s: a rank that ended), so that the test of the
    # modes stays short
    hangs = [h for h in DETECT_HANGS if h[0] == "scenario segfault"] if A.quick else DETECT_HANGS
    clean = [c for c in DETECT_CLEAN if c[0].startswith("a 3 s CPU pause")] if A.quick else \
        DETECT_CLEAN
    if A.detect_match:
        hangs = [h for h in hangs if A.detect_match in h[0]]
        clean = [c for c in clean if A.detect_match in c[0]]
    # The busy loops end with this process, however it ends (a SIGTERM runs the finally below;
    # a SIGKILL is seen by each loop as its parent gone).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    hog = ("import os, time\nparent = os.getppid()\nwhile os.getppid() == parent:\n"
           "    t = time.monotonic() + 0.5\n    while time.monotonic() < t: pass\n")
    hogs = [subprocess.Popen([sys.executable, "-c", hog]) for _ in range(A.hogs)]
    rows, crows = [], []
    try:
        with tempfile.TemporaryDirectory(prefix="lockstep-bench-detect-", dir=A.work) as tmp:
            for k, (label, prog, np, extra, launcher, want) in enumerate(hangs):
                rc, took, report, wall = detect_one(prog, np, extra, launcher, tmp, k)
                got = root_kinds(report)
                want = (want,) if isinstance(want, str) else want or ()
                right = all(w in got for w in want) and bool(got)
                stall = (report or {}).get("stall")
                rows.append((label, np, rc, took, stall, got, right))
                say(f"detect {label}: exit {rc}, " +
                    (f"diagnosed {took:.1f} s after it hung ({stall and stall.get('bound')} "
                     "bound)" if took is not None else "not diagnosed") +
                    f", root {', '.join(got) or '-'}" + ("" if right else
                                                         f" (WRONG: want {', '.join(want)})"))
            for k, (label, prog, np, extra, launcher, _) in enumerate(clean):
                rc, took, report, wall = detect_one(prog, np, extra, launcher, tmp, 100 + k)
                crows.append((label, np, rc, wall))
                say(f"clean {label}: exit {rc} after {wall:.1f} s" +
                    (" (STOPPED)" if rc == 3 else ""))
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    return rows, crows, A.hogs


def detect_section(rows, crows, hogs):
    out("## Detection with the default bounds")
    out()
    out("`lockstep run` with no stall option (docs/live.md, \"Two bounds\": 25 s when the ranks "
        "waited for make no progress, 10 s once the job has a fast rhythm, 300 s while one of "
        f"them works), beside {hogs} busy loops on this machine's cores (`scripts/bench "
        "--detect-only`). A hang: the time from the moment it hung (the time the program prints "
        "as it stops for good, else the last progress recorded in any trace before the stall was "
        "announced, `bench/last_progress`) to the first line of the printed diagnosis.")
    out()
    out("| hang shape | ranks | hung → diagnosis, s | bound | exit | root cause named |")
    out("|---|---:|---:|---|---:|---|")
    for label, np, rc, took, stall, got, right in rows:
        out(f"| {label} | {np} | " + ("-" if took is None else f"{took:.1f}") +
            f" | {(stall or {}).get('bound', '-')} | {rc} | {', '.join(got) or '-'}" +
            ("" if right else " (**wrong**)") + " |")
    got = sorted(r[3] for r in rows if r[3] is not None)
    out()
    out(f"{len(got)} of {len(rows)} diagnosed" +
        (f": median {statistics.median(got):.1f} s, worst {got[-1]:.1f} s" if got else "") +
        f"; the root cause the suite's test wants named in {sum(1 for r in rows if r[6])} of "
        f"{len(rows)}.")
    out()
    out("Clean jobs with slow phases (none hangs: a stop is a false stall):")
    out()
    out("| clean job | ranks | run's exit | seconds | stopped |")
    out("|---|---:|---:|---:|---|")
    for label, np, rc, wall in crows:
        out(f"| {label} | {np} | {rc} | {wall:.1f} | {'yes' if rc == 3 else 'no'} |")
    stopped = sum(1 for r in crows if r[2] == 3)
    out()
    out(f"{stopped} of {len(crows)} clean jobs stopped.")
    out()


def detect_only():
    """--detect-only: replaces the detection section of an existing report."""
    rows, crows, hogs = detect_latency()
    if A.detect_match:
        return
    replace_section("## Detection with the default bounds", lambda: detect_section(rows, crows, hogs))


# ---- the heartbeat ------------------------------------------------------------------------

def task_totals(pid):
    """(ns on CPU, voluntary context switches) of every thread of pid so far, from
    /proc/PID/task/*/schedstat (exact run time, not tick samples) and .../status."""
    ns = csw = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                ns += int(f.read().split()[0])
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                csw += int(next(l for l in f if l.startswith("voluntary_ctxt_switches")).split()[1])
        except (OSError, StopIteration):
            pass
    return ns, csw


def idle_rank(extra, shim, seconds):
    """One rank that initializes, runs a step and then sleeps (a rank waiting for data);
    returns (CPU seconds, voluntary context switches) of its threads over `seconds` of that
    sleep."""
    startup = 0.5 if A.quick else 1.5  # past start-up and the first step
    d = tempfile.mkdtemp(prefix="lockstep-bench-idle-", dir=A.work)  # its own: ranks overlap
    sleep_ms = int((startup + seconds) * 1000) + (1000 if A.quick else 1500)
    env = env_with(dict(extra, RANK="0", WORLD_SIZE="1", SCENARIO_STEPS="1",
                        SCENARIO_BUSY="sleep", SCENARIO_DELAY_MS=str(sleep_ms)), shim)
    if shim:
        env["LOCKSTEP_DIR"] = d
    try:
        p = subprocess.Popen([path("tests", "scenarios", "realjobs"), "watchdog"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(startup)
        ns0, csw0 = task_totals(p.pid)
        time.sleep(seconds)
        ns1, csw1 = task_totals(p.pid)
        if p.wait(timeout=seconds + 60) != 0:
            raise SystemExit(f"idle rank failed ({p.returncode})")
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return (ns1 - ns0) / 1e9, csw1 - csw0


def heartbeat_cost():
    """What the heartbeat thread costs an idle rank, by period. Returns Markdown lines."""
    seconds = 1 if A.quick else 20
    say(f"heartbeat: an idle rank for {seconds} s, by heartbeat period")
    rows = [("no shim", {}, False)] + [(f"shim, heartbeat {ms} ms", {"LOCKSTEP_HEARTBEAT_MS":
                                                                        str(ms)}, True)
                                       for ms in (1000, 100, 10)]
    lines = ["| | CPU s per hour idle | wakeups per s |", "|---|---:|---:|"]
    # Idle ranks barely run: --quick measures them side by side, the real figures one by one.
    with concurrent.futures.ThreadPoolExecutor(len(rows) if A.quick else 1) as pool:
        got = list(pool.map(lambda r: idle_rank(r[1], r[2], seconds), rows))
    for (name, extra, shim), (cpu, csw) in zip(rows, got):
        lines.append(f"| {name} | {cpu / seconds * 3600:.2f} | {csw / seconds:.0f} |")
        say(f"{name}: {cpu:.3f} s CPU, {csw} context switches in {seconds} s")
    return lines


# ---- CUDA-graph launches ------------------------------------------------------------------

GRAPH_CALLS = (0, 1, 8, 64)  # NCCL calls captured into the graph each launch replays
NO_VALGRIND_GRAPH = "Instructions per launch: not counted (valgrind is not installed)."


def graph_ir(calls, launches, shim):
    cmd = ["valgrind", "--tool=callgrind", "--toggle-collect=launch_batch",
           "--callgrind-out-file=/dev/null", path("bench", "graph_bench"), "--calls", str(calls),
           "--launches", str(launches)]
    d = tempfile.mkdtemp(prefix="lockstep-bench-graph-", dir=A.work)  # its own: runs overlap
    try:
        p = subprocess.run(cmd, env=env_with({"LOCKSTEP_EMU_ASYNC": "1", "LOCKSTEP_DIR": d}, shim),
                           capture_output=True, text=True, timeout=1200)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    m = re.search(r"Collected : (\d+)", p.stderr)
    if p.returncode != 0 or not m:
        raise SystemExit(f"graph_bench under callgrind failed: {p.stderr[-2000:]}")
    return int(m.group(1))


def graph_cost():
    """What a CUDA-graph launch costs the shim, by the NCCL calls the graph replays: callgrind's
    instructions in the launching thread's launches (bench/graph_bench.c), (Ir(2N) - Ir(N)) / N,
    shim minus none. Returns Markdown lines."""
    if not shutil.which("valgrind"):
        return [NO_VALGRIND_GRAPH]
    n = 64 if A.quick else 512
    say(f"CUDA-graph launches: {n} and {2 * n} launches of graphs of {GRAPH_CALLS} calls")
    runs = [(k, m, shim) for k in GRAPH_CALLS for shim in (False, True) for m in (n, 2 * n)]
    with concurrent.futures.ThreadPoolExecutor(workers()) as pool:
        irs = iter(list(pool.map(lambda r: graph_ir(*r), runs)))
    lines = ["| NCCL calls the graph replays | instructions per launch, no shim | with the shim "
             "| the shim's | the shim's per replayed call |", "|---:|---:|---:|---:|---:|"]
    for k in GRAPH_CALLS:
        per = []
        for _ in (False, True):
            ir_n, ir_2n = next(irs), next(irs)
            per.append((ir_2n - ir_n) / n)
        add = per[1] - per[0]
        lines.append(f"| {k} | {per[0]:,.0f} | {per[1]:,.0f} | {add:,.0f} | "
                     f"{add / k:,.0f} |" if k else
                     f"| {k} | {per[0]:,.0f} | {per[1]:,.0f} | {add:,.0f} | - |")
        say(f"graph of {k} calls: the shim adds {add:.0f} instructions per launch")
    return lines


def graph_section(lines):
    out("## CUDA-graph launches")
    out()
    out("A launch of a CUDA graph that holds captured NCCL calls is recorded as one record per "
        "call it replays (docs/shim.md, *CUDA graphs*). What that costs the launching thread: "
        "`bench/graph_bench` captures K count-1 all-reduces of a single-rank communicator into "
        "one graph and launches it N and 2N times on the emulator (`LOCKSTEP_EMU_ASYNC=1`); "
        "callgrind counts the instructions inside the launches only (not the device thread's "
        "work, nor the synchronizations between batches of 64), the difference of the two "
        "lengths per launch, with the shim minus without. A graph with no NCCL call (K = 0) "
        "costs the forwarding alone. The emulator's own launch (a copy of each captured op) is "
        "in both columns.")
    out()
    for line in lines:
        out(line)
    out()


def heartbeat_section(lines):
    out("## The heartbeat")
    out()
    out("The shim's heartbeat thread refreshes the trace's heartbeat every "
        "`LOCKSTEP_HEARTBEAT_MS` (default 10 ms): the last heartbeat of a rank killed by SIGKILL "
        "says when it died, which is how the analyzer tells the OOM killer's victim from the "
        "ranks a launcher stopped 50 ms later (docs/analyzer.md). What that costs a rank that "
        "waits (one rank of `realjobs`, asleep after one step; every thread of the process, "
        "run time from `/proc/PID/task/*/schedstat`):")
    out()
    for line in lines:
        out(line)
    out()


def replace_section(title, fill):
    """Runs `fill` (which writes one section with out()) and puts it in place of the section
    `title` of --out (before "## Targets" when it has none)."""
    started = machine()
    fill()
    LINES.insert(2, f"(Measured on: {started}.)")
    LINES.insert(3, "")
    old = open(A.out).read().split("\n") if os.path.exists(A.out) else []
    start = next((i for i, l in enumerate(old) if l == title), None)
    if start is None:
        start = next((i for i, l in enumerate(old) if l == "## Targets"), len(old))
        end = start
    else:
        end = next((i for i in range(start + 1, len(old)) if old[i].startswith("## ")), len(old))
    with open(A.out, "w") as f:
        f.write("\n".join(old[:start] + LINES + old[end:]).rstrip("\n") + "\n")
    say(f"updated the section {title!r} of {A.out}")


# ---- report -------------------------------------------------------------------------------

def python_cost():
    """Python call sites (tests/python/bench_python.py): ns per call, and instructions per
    call where valgrind is there. Returns the Markdown lines of its report."""
    say("python call sites")
    n = 20000 if A.quick else 1000000
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python",
                          "bench_python.py")
    cmd = [sys.executable, script, str(n),
           "--build", A.build, "--reps", "3" if A.quick else "5"]
    why = NO_VALGRIND if not shutil.which("valgrind") else NO_CALLGRIND_QUICK if A.quick else None
    if why is None:
        cmd.append("--callgrind")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        raise SystemExit(f"bench_python failed: {p.stderr[-2000:]}")
    return p.stdout.rstrip().splitlines() + (["", why] if why else [])


def python_section(lines):
    out("## Python call sites")
    out()
    out("What recording the calling thread's Python frames (docs/python.md) adds to each NCCL "
        "call: one rank calls `ncclAllReduce` in a C loop (`libpyranks.so`, through `ctypes`, "
        "as libtorch would) from 10 Python frames; 'vs depth 0' is the cost of the Python "
        "frames alone (native call sites are on in every shim row).")
    out()
    for line in lines:
        out(line)
    out()
    row = [l for l in lines if l.startswith("| shim, default depth")]
    if row:
        cost = float(row[0].split("|")[4])
        out(f"Target: Python frames on cost at most 1 µs per call. Measured: {cost:+.0f} ns "
            f"per call over depth 0 — {met(cost <= 1000)}.")
        out()


# The paragraph at the top of the report: what checks that every mode reports its figures.
TEST_MODES = (
    "`bench/test_modes.py` (`meson test --suite bench`) runs every mode of `scripts/bench` (the "
    "full run, `--shim-only`, `--analyzer-only`, `--live-only`, `--detect-only`, "
    "`--python-only`, `--heartbeat-only`) with `--quick` and reads each section back: it fails when a mode "
    "reports no figure where one belongs (0, `n/a`, `-`, nan or an empty table; an analyzer row "
    "that did not find its finding, a live row without a detection time; no instruction counts "
    "where valgrind is installed) or does not replace its own section. It checks that every mode "
    "reports its figures, not what they are.")


def machine():
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    load = open("/proc/loadavg").read().split()[:3]
    src = open("/sys/devices/system/clocksource/clocksource0/current_clocksource").read().strip()
    return (f"{os.cpu_count()} CPUs (`nproc`), {cpu}, Linux {platform.release()}, "
            f"clocksource {src}, load average {' '.join(load)} at the start, "
            f"{datetime.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')}")


def met(ok):
    return "**met**" if ok else "**not met**"


def two(v):
    """v with two decimals, or two significant digits below 0.1 (a quick run's 0.004 s or
    0.008 GiB is not 0.00: bench/test_modes.py takes a printed 0 for a figure not measured)."""
    return f"{v:.2f}" if abs(v) >= 0.1 or v == 0 else f"{v:.2g}"


def plot(rows):
    """Time and memory against ranks, in all and per rank (PNG through gnuplot); returns the
    file name."""
    if not shutil.which("gnuplot") or not rows:
        return None
    os.makedirs(A.plot_dir, exist_ok=True)
    dats = {}
    for kind in ("scale", "records", "summary"):
        dats[kind] = os.path.join(A.work, f"lockstep-analyzer-bench-{kind}.dat")
        with open(dats[kind], "w") as f:
            for k, ranks, records, wall, rss, _, window, _, _ in sorted(rows,
                                                                         key=lambda r: r[1:3]):
                if k == kind:
                    f.write(f"{ranks} {wall:.3f} {rss:.1f} {wall / ranks * 1e6:.1f} "
                            f"{rss * 1024 / ranks:.1f} \"{window}/trace\"\n")
    png = os.path.join(A.plot_dir, "analyzer-scaling.png")
    lo, top = min(r[1] for r in rows) // 2, max(r[1] for r in rows) * 2
    sc, rc, su = dats["scale"], dats["records"], dats["summary"]
    # The analysis reads a window of each ring whose size depends on the number of traces
    # (docs/analyzer.md), so its cost follows the ranks: ranks on the x axis, the window as
    # the label of each scale point.
    script = f"""
set terminal pngcairo size 1100,520 font ",10" noenhanced
set output "{png}"
set multiplot layout 1,2 title "lockstep analyze --json (scale: ranks x 2,000 all-reduces, one rank missing; labels: records read per trace)\\n{growth_words(rows)}"
set logscale x 2
set xrange [{lo}:{top}]
set xlabel "ranks (log scale)"
set key right bottom
set grid
set ytics nomirror
set y2tics
set title "in all"
set logscale y 10
set logscale y2 10
set ylabel "wall time (s)"
set y2label "peak RSS (MiB)"
plot "{sc}" using 1:2 with linespoints pt 7 ps 1.2 title "time, scale (traces)", \\
     "{sc}" using 1:3 axes x1y2 with linespoints pt 5 ps 1.2 title "RSS, scale (traces)", \\
     "{su}" using 1:2 with linespoints pt 9 ps 1.2 title "time, scale (node summaries)", \\
     "{su}" using 1:3 axes x1y2 with linespoints pt 11 ps 1.2 title "RSS, scale (node summaries)", \\
     "{rc}" using 1:2 with points pt 6 ps 1.2 title "time, mixed calls (records vary)", \\
     "{rc}" using 1:3 axes x1y2 with points pt 4 ps 1.2 title "RSS, mixed calls", \\
     "{sc}" using 1:2:6 with labels offset 0,1 font ",8" notitle
set title "per rank"
set key right bottom
unset logscale y
unset logscale y2
set yrange [0:*]
set y2range [0:*]
set ylabel "µs per rank"
set y2label "KiB per rank"
plot "{sc}" using 1:4 with linespoints pt 7 ps 1.2 title "time per rank, traces", \\
     "{sc}" using 1:5 axes x1y2 with linespoints pt 5 ps 1.2 title "RSS per rank, traces", \\
     "{su}" using 1:4 with linespoints pt 9 ps 1.2 title "time per rank, summaries", \\
     "{su}" using 1:5 axes x1y2 with linespoints pt 11 ps 1.2 title "RSS per rank, summaries", \\
     "{sc}" using 1:4:6 with labels offset 0,1 font ",8" notitle
unset multiplot
"""
    p = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
    if p.returncode != 0:
        say("gnuplot failed: " + p.stderr.strip())
        return None
    return png


def shim_section(ns, ir):
    """Writes the section on the shim's cost per call (ns, cycles, instructions, the floor)."""
    out("## Shim cost per intercepted call")
    out()
    out("A plain NCCL program (`bench/shim_bench.c`) calls `ncclAllReduce` (count 1) on a "
        "single-rank communicator against the CPU NCCL emulator, with and without the shim "
        "(`LD_PRELOAD`), runs alternating. *Deep* = the calls are made 20 frames below the "
        "thread's entry (about 24 frames in all), *shallow* = from the thread's entry (4). "
        "Time is the thread's CPU time per call (this shared 2-CPU machine is noisy; CPU time "
        "leaves out time spent waiting for a CPU), the median over repetitions of "
        f"{'20,000' if A.quick else '10^6'} calls; the cost is the median over rounds (each "
        "round runs every case in turn, without and with back to back) of the difference.")
    out()
    out("The first row is the floor, measured in the same run: the same program without the "
        "shim doing around each call what recording it must cost at least (`shim_bench --floor "
        "1`: two `rdtsc`, one `lock xadd` on a shared counter, one 128-byte record written into "
        "a `MAP_SHARED` ring). TSC cycles are the thread's CPU time per call in TSC cycles (the "
        "TSC's rate read with `rdtsc` over the timed loop: this VM has no hardware counters). "
        f"The shim's timestamps in these runs came from {clock_words()} (the traces' "
        "`clock_source`).")
    out()
    out("| case | calls timed | no shim ns/call | with ns/call | cost ns/call | cost TSC cycles/call "
        "| cycles / floor's |")
    out("|---|---:|---:|---:|---:|---:|---:|")
    floor_c = ns[0][7]
    for name, calls, b, s, d, bc, sc, dc in ns:
        out(f"| {name} | {calls:,} | {b:.0f} | {s:.0f} | **{d:.0f}** | **{dc:.0f}** | "
            f"{dc / floor_c if floor_c > 0 else float('nan'):.2f} |")
    out()
    one = [r for r in ns if r[0] == CASES[3][0]]
    many = [r for r in ns if r[0] == CASES[6][0]]
    if one and many and one[0][4] > 0:
        out(f"16 threads at once against one thread (default, deep stack): shim cost "
            f"{many[0][4]:.0f} ns vs {one[0][4]:.0f} ns per call, "
            f"ratio {many[0][4] / one[0][4]:.2f}.")
        out()
    if ir:
        out("Instructions per call from `valgrind --tool=callgrind --toggle-collect=call_loop` "
            "(only the calling thread inside the timed loop: not the shim's heartbeat thread; Ir "
            "of a run with 2N calls minus one with N, per added call; the timestamps from the "
            "TSC, as in steady state: the program waits 200 ms for the shim's clock conversion "
            "before calling):")
        out()
        out("| case | no shim instr/call | shim instr/call | shim cost instr/call |")
        out("|---|---:|---:|---:|")
        for name, b, s, d in ir:
            out(f"| {name} | {b:.0f} | {s:.0f} | **{d:.0f}** |")
        out()
    else:
        out(NO_VALGRIND)
        out()


def shim_only():
    """--shim-only: measures the shim's cost per call, the floor and its memory, and replaces the
    shim section of --out with them (targets and memory line included)."""
    def fill():
        ns, ir = shim_ns(), shim_instructions()
        rss_base, rss_off, rss_shim, trace_bytes = memory()
        shim_section(ns, ir)
        out(f"Memory (this run): peak RSS (VmHWM of the benchmark process), ring wrapped: "
            f"{rss_base / 1024:.1f} MiB without the shim, {rss_off / 1024:.1f} MiB call sites off "
            f"(+{(rss_off - rss_base) / 1024:.1f} MiB), {rss_shim / 1024:.1f} MiB default depth "
            f"(+{(rss_shim - rss_base) / 1024:.1f} MiB); trace file {trace_bytes / 2**20:.2f} MiB.")
        out()
        targets(ns, ir, rss_base, rss_shim, trace_bytes, [], 0, [], title="### Shim targets (this run)")
    replace_section("## Shim cost per intercepted call", fill)


def targets(ns, ir, rss_base, rss_shim, trace_bytes, ana, stall, live, title="## Targets"):
    cost = {name: d for name, _, _, _, d, _, _, _ in ns}
    cycles = {name: dc for name, _, _, _, _, _, _, dc in ns}
    icost = {name: d for name, _, _, d in ir} if ir else {}
    def worst(prefix, table):
        v = [d for name, d in table.items() if name.startswith(prefix)]
        return max(v) if v else None
    rows = []
    off_c, off_ir = worst("call sites off", cycles), worst("call sites off", icost)
    floor_c = cycles.get(FLOOR)
    rows.append(("call sites off: <= 1.5x the floor's TSC cycles per call",
                 f"{off_c:.0f} vs {floor_c:.0f} cycles ({off_c / floor_c:.2f}x)"
                 if floor_c and floor_c > 0 else f"{off_c:.0f} cycles",
                 bool(floor_c and floor_c > 0 and off_c <= 1.5 * floor_c)))
    if off_ir is not None:
        rows.append(("call sites off: <= 100 instructions per call", f"{off_ir:.0f}",
                     off_ir <= 100))
        d_ir = worst("default (depth 16)", icost)
        rows.append(("default depth, call-site cache hit: <= 200 instructions per call",
                     f"{d_ir:.0f}", d_ir <= 200))
    one, many = cost.get(CASES[3][0]), cost.get(CASES[6][0])
    if one and one > 0:
        rows.append(("16 threads at once: <= 1.2x the single-thread cost per call",
                     f"{many:.0f} vs {one:.0f} ns ({many / one:.2f}x)", many <= 1.2 * one))
    dflt = worst("default (depth 16)", cost)
    rows.append(("default setting: <= 300 ns per call (shallow and deep)", f"{dflt:.0f} ns",
                 dflt <= 300))
    d32 = worst("depth 32", cost)
    rows.append(("depth 32 (no target; shown for scale)", f"{d32:.0f} ns", None))
    asy = cost.get(CASES[7][0])
    rows.append(("async mode, completion tracking on: <= 300 ns per call", f"{asy:.0f} ns",
                 asy <= 300))
    rows.append(("trace file per process <= 8 MiB", f"{trace_bytes / 2**20:.2f} MiB",
                 trace_bytes <= 8 * 2**20))
    grow = (rss_shim - rss_base) * 1024
    rows.append(("resident memory grows by no more than the trace file",
                 f"+{grow / 2**20:.1f} MiB", grow <= max(trace_bytes, 1)))
    rows += analyzer_targets(ana)
    lats = [l for _, l in live if l is not None]
    if lats:
        rows.append((f"live: exit <= stall + 0.5 s ({stall + 0.5} s)",
                     f"worst {max(e for _, e in lats):.2f} s",
                     max(e for _, e in lats) <= stall + 0.5 and len(lats) == len(live)))
    out(title)
    out()
    out("| target | measured | |")
    out("|---|---:|---|")
    for what, val, ok in rows:
        out(f"| {what} | {val} | {'' if ok is None else met(ok)} |")
    out()


def analyzer_targets(ana):
    """The analyzer's rows of the Targets table: (what, measured, met)."""
    rows = []
    for kind, ranks, records, limit_s, limit_mib in (("records", 1024, 65536, 3, 1024),
                                                     ("records", 4096, 4096, 2, None),
                                                     ("summary", 131072, SCALE_RECORDS, 10, 4096),
                                                     ("summary", 262144, SCALE_RECORDS, 10, 4096)):
        r = [a for a in ana if a[0] == kind and a[1] == ranks and a[2] == records]
        if kind == "summary":
            what = (f"analyze {ranks:,} ranks x {records:,} all-reduces (node summaries): "
                    f"<= {limit_s} s, <= 4 GiB")
        else:
            what = (f"analyze {ranks} ranks x {records} records: <= {limit_s} s" +
                    (", <= 1 GiB" if limit_mib else ""))
        if r:
            _, _, _, wall, rss, ok, _, load, json_bytes = r[0]
            good = wall <= limit_s and (limit_mib is None or rss <= limit_mib) and ok
            rows.append((what, f"{two(wall)} s, {rss:.0f} MiB (load {load:.1f})", good))
            if kind == "summary" and ranks == 131072:
                rows.append((f"JSON report of {ranks:,} ranks, one culprit: <= 10 MB",
                             f"{two(json_bytes / 1e6)} MB", json_bytes <= 10e6))
        elif kind == "summary":
            big = [a for a in ana if a[0] in ("scale", "summary")]
            if big:
                _, n, _, wall, rss, _, _, _, _ = max(big, key=lambda a: a[1])
                rows.append((what, f"not run; {n:,} ranks: "
                             f"{two(wall)} s, {rss:.0f} MiB", None))
    return rows


def growth(ana, kind):
    """How time and memory grow with the ranks in the rows of `kind`: the exponents of the
    least-squares line through (log ranks, log value), and the ranks they span; None with
    fewer than two rows."""
    pts = sorted((a[1], a[3], a[4]) for a in ana if a[0] == kind and a[3] > 0 and a[4] > 0)
    if len(set(p[0] for p in pts)) < 2:
        return None

    def slope(i):
        xs = [math.log(p[0]) for p in pts]
        ys = [math.log(p[i]) for p in pts]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        return (sum((x - mx) * (y - my) for x, y in zip(xs, ys)) /
                sum((x - mx) ** 2 for x in xs))
    return slope(1), slope(2), pts[0][0], pts[-1][0]


def growth_words(ana):
    """"time grows as ranks^0.40, memory as ranks^0.38 (node summaries, 16,384 to 262,144
    ranks; 131,072 to 262,144: ^1.05 and ^1.00)" for each scale kind that has rows: over all
    its rows, and between its two largest (where the window no longer shrinks)."""
    words = []
    for kind, name in (("summary", "node summaries"), ("scale", "trace files")):
        g = growth(ana, kind)
        if not g:
            continue
        top = sorted(a for a in ana if a[0] == kind)[-2:]
        last = growth(top, kind) if len(top) == 2 else None
        tail = (f"; {top[0][1]:,} to {top[1][1]:,}, the same window: ^{last[0]:.2f} and "
                f"^{last[1]:.2f}" if last and top[0][1] != g[2] and top[0][6] == top[1][6]
                else "")
        words.append(f"time grows as ranks^{g[0]:.2f}, memory as ranks^{g[1]:.2f} "
                     f"({name}, {g[2]:,} to {g[3]:,} ranks{tail})")
    return "; ".join(words)


def analyzer_table(ana):
    out("| scenario | ranks | records per rank | records read per trace | trace data | wall s | "
        "peak RSS MiB | µs per rank | KiB per rank | JSON report MB | found it | load |")
    out("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for kind, ranks, records, wall, rss, ok, window, load, json_bytes in ana:
        what = {"scale": "scale: all-reduces, one rank missing (trace files)",
                "summary": "scale: all-reduces, one rank missing (node summaries)"}.get(
                    kind, "mixed calls, rank 1's count differs")
        out(f"| {what} | {ranks:,} | {records:,} | {window:,} | "
            f"{two(ranks * records * 128 / 2**30)} GiB | {two(wall)} | {rss:.0f} | "
            f"{wall / ranks * 1e6:.0f} | {rss * 1024 / ranks:.1f} | {two(json_bytes / 1e6)} | "
            f"{'yes' if ok else 'NO'} | {load:.1f} |")
    out()


def analyzer_section(ana, started):
    out("## Analyzer")
    out()
    out("Two kinds of `lockstep-tracegen` jobs fed to `lockstep analyze --json` (page cache "
        "warm; generation not timed). *Mixed calls*: world collectives, a grouped send/recv "
        "ring exchange and a split communicator every iteration, rank 1's last collective "
        "with another count, each ring full and wrapped: the rows vary the records per rank "
        "at fixed ranks. *Scale*: ranks × 2,000 all-reduces, the middle rank stops calling "
        "NCCL before the last one, from one trace file per rank (*trace files*) or from one "
        "node summary per 8 ranks as each node's `lockstep run` would send them "
        "(`lockstep-tracegen --summary`, *node summaries*; docs/summary-format.md): the rows "
        "vary the ranks. The analysis reads of each trace "
        "the newest 1,024 records up to 8,192 traces, then 8 Mi records in all, at least 64 "
        "per trace (docs/analyzer.md, *A window that shrinks for huge jobs*): the column "
        "*records read per trace*. Wall time is the median of 3 runs (1 run for the mixed "
        "calls above 16M records), memory the analyzer's peak RSS (`wait4` from the small `bench/peak_rss`, "
        "so the driver's own size is not carried over); per rank = the total divided by "
        "the ranks, everything included; *load* = the 1-minute load average just before the "
        "row's runs (this 2-CPU machine is shared: at a load of 4 a run gets about half the "
        f"CPU time it would alone). Machine: {started}.")
    out()
    analyzer_table(ana)
    g = growth_words(ana)
    if g:
        out(f"Growth (least squares over log-log): {g}. An exponent of 1 is linear in the "
            "ranks; under 1 over all rows because the window shrinks as the ranks grow (the "
            "column *records read per trace*); between the two largest rows, where it no "
            "longer shrinks, the cost per rank shows.")
        out()
    png = plot(ana)
    if png:
        out(f"![analyzer time and memory]"
            f"({os.path.relpath(png, os.path.dirname(os.path.abspath(A.out)))})")
        out()


def analyzer_only():
    """Runs the analyzer grid and replaces the Analyzer section of --out and the analyzer
    rows of its Targets table."""
    started = machine()
    ana = analyzer_grid()
    LINES.clear()
    analyzer_section(ana, started)
    print("\n".join(LINES))
    section = list(LINES)
    old = open(A.out).read().split("\n") if os.path.exists(A.out) else []
    start = next((i for i, l in enumerate(old) if l == "## Analyzer"), None)
    if start is None:
        start = next((i for i, l in enumerate(old) if l == "## Targets"), len(old))
        end = start
    else:
        # Up to the next section, or to the first subsection written by hand (they stay).
        end = next((i for i in range(start + 1, len(old))
                    if old[i].startswith("## ") or old[i].startswith("### ")), len(old))
    new = old[:start] + section + old[end:]
    # The Targets table: the analyzer's rows replaced, in place of the old ones.
    tstart = next((i for i, l in enumerate(new) if l == "## Targets"), None)
    if tstart is not None:
        rows = [f"| {w} | {v} | {'' if ok is None else met(ok)} |"
                for w, v, ok in analyzer_targets(ana)]
        idx = [i for i in range(tstart, len(new))
               if new[i].startswith("| analyze ") or new[i].startswith("| JSON report of ")]
        if idx:
            new = new[:idx[0]] + rows + [l for i, l in enumerate(new[idx[0]:], idx[0])
                                         if i not in idx]
    with open(A.out, "w") as f:
        f.write("\n".join(new).rstrip("\n") + "\n")
    say(f"updated the Analyzer section and the analyzer targets of {A.out}")


def main():
    global A
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--plot-dir", default=None)
    ap.add_argument("--work", default="/var/tmp")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--analyzer-only", action="store_true",
                    help="run only the analyzer grid and replace its section of --out, the "
                         "analyzer rows of its Targets table and the plot")
    ap.add_argument("--heartbeat-only", action="store_true",
                    help="measure only what the heartbeat costs an idle rank and replace its "
                         "section of --out")
    ap.add_argument("--live-only", action="store_true",
                    help="measure only the live detection latency and live stacks and replace "
                         "their section of --out")
    ap.add_argument("--detect-only", action="store_true",
                    help="run every hang shape and a corpus of clean jobs with slow phases under "
                         "`lockstep run` with no option, beside --hogs busy loops, and replace "
                         "their section of --out")
    ap.add_argument("--detect-match", default=None,
                    help="--detect-only: only the shapes and clean jobs whose label holds this "
                    "text (a trial; the report is not written)")
    ap.add_argument("--hogs", type=int, default=2,
                    help="busy loops beside --detect-only's runs (default 2)")
    ap.add_argument("--shim-only", action="store_true",
                    help="measure only the shim's cost per call (with the floor) and memory and "
                         "replace the shim section of --out")
    ap.add_argument("--graph-only", action="store_true",
                    help="measure only what a CUDA-graph launch costs the shim and replace its "
                         "section of --out")
    ap.add_argument("--python-only", action="store_true",
                    help="run only the Python call-site benchmark and replace its section of "
                         "--out (an existing report)")
    A = ap.parse_args()
    A.build = os.path.abspath(A.build)
    A.plot_dir = A.plot_dir or os.path.dirname(os.path.abspath(A.out))
    if A.analyzer_only:
        analyzer_only()
        return
    if A.python_only:
        replace_section("## Python call sites", lambda: python_section(python_cost()))
        return
    if A.live_only:
        live_only()
        return
    if A.detect_only:
        detect_only()
        return
    A.trace_dir = tempfile.mkdtemp(prefix="lockstep-bench-shim-", dir=A.work)
    if A.shim_only:
        shim_only()
        return
    if A.heartbeat_only:
        replace_section("## The heartbeat", lambda: heartbeat_section(heartbeat_cost()))
        return
    if A.graph_only:
        replace_section("## CUDA-graph launches", lambda: graph_section(graph_cost()))
        return
    started = machine()

    ns = shim_ns()
    ir = shim_instructions()
    rss_base, rss_off, rss_shim, trace_bytes = memory()
    ana = analyzer_grid()
    stall, live, holds, partial, poll = live_latency()
    det = detect_latency()
    py_lines = python_cost()
    hb_lines = heartbeat_cost()
    gr_lines = graph_cost()

    out("# Performance")
    out()
    out("Figures written by `scripts/bench`" + (" --quick (small runs: not the figures)"
                                                  if A.quick else "") + ". Machine: " + started + ".")
    out()
    out(TEST_MODES)
    out()
    shim_section(ns, ir)
    out("## Memory")
    out()
    out(f"- trace file per process (default ring): {trace_bytes / 2**20:.2f} MiB")
    out(f"- peak RSS (VmHWM of the benchmark process itself, read from /proc/self/status, so "
        f"the driver's size is not carried over), ring wrapped: {rss_base / 1024:.1f} MiB "
        f"without the shim, {rss_off / 1024:.1f} MiB with call sites off "
        f"(+{(rss_off - rss_base) / 1024:.1f} MiB), {rss_shim / 1024:.1f} MiB at the default "
        f"depth (+{(rss_shim - rss_base) / 1024:.1f} MiB); the mapped trace pages the program "
        "touched included")
    out()
    analyzer_section(ana, started)
    live_section(stall, live, holds, partial, poll)
    detect_section(*det)
    python_section(py_lines)
    heartbeat_section(hb_lines)
    graph_section(gr_lines)
    targets(ns, ir, rss_base, rss_shim, trace_bytes, ana, stall, live)
    notes = os.path.join(os.path.dirname(os.path.abspath(__file__)), "performance-notes.md")
    if os.path.exists(notes):
        out(open(notes).read().rstrip())
        out()
    with open(A.out, "w") as f:
        f.write("\n".join(LINES) + "\n")
    raw = os.path.dirname(os.path.abspath(A.out)) if A.quick else A.work
    with open(os.path.join(raw, "lockstep-bench.json"), "w") as f:
        json.dump({"shim_ns": ns, "shim_ir": ir,
                   "memory": [rss_base, rss_off, rss_shim, trace_bytes],
                   "analyzer": ana, "live": live, "stall": stall, "machine": started}, f,
                  indent=1)
    shutil.rmtree(A.trace_dir, ignore_errors=True)
    say(f"wrote {A.out}")


if __name__ == "__main__":
    main()
