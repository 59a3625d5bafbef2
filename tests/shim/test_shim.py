#!/usr/bin/env python3
"""test_shim.py -- end-to-end tests of liblockstep.so: real NCCL programs run as ranks on the
CPU emulator under the real shim, then their real trace files are checked field by field.

Usage: test_shim.py CASE   (paths come from the environment meson sets, see meson.build)
"""
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import elf_machine, expect, run  # noqa: E402

SHIM = os.environ["LOCKSTEP_SHIM"]
LAUNCH = os.environ["LAUNCH_RANKS"]
EMU_DIR = os.environ["EMULATOR_DIR"]
FAST_PATH = os.environ["FAST_PATH"]  # the build's fast path: "assembly" or "C"
QUERY = os.environ["TRACE_QUERY"]
LOCKSTEP = os.environ["LOCKSTEP_BIN"]
PROGS = os.environ["SHIM_PROGS"]
COLL_CHECK = os.environ["COLL_CHECK"]
DL_CALLER = os.environ["DL_CALLER"]
PLUGIN = os.environ["LOCKSTEP_PLUGIN"]
TEST_SHIM = os.environ["LOCKSTEP_TEST_SHIM"]

# Op, dtype and redop numbers as in nccl.h.
INT8, UINT8, INT32, INT64, FLOAT32, FLOAT64 = 0, 1, 2, 4, 7, 8
SUM, PROD, MAX, MIN = 0, 1, 2, 3
REC_IN_GROUP, COMM_NONBLOCKING = 1, 1
END_RUNNING, END_EXITED, END_SIGNALED, END_UNDERSCORE = 0, 1, 2, 3


def prog(name):
    return os.path.join(PROGS, name)


def run_ranks(np, argv, trace_dir, preload=True, env_extra=None, timeout_s=None, wall=90,
              stuck_s=None):
    """Runs argv as `np` ranks under the launcher; returns the CompletedProcess. stuck_s: the
    launcher stops the ranks once they waited that long in NCCL without progress."""
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = EMU_DIR + ":" + env.get("LD_LIBRARY_PATH", "")
    env["LOCKSTEP_DIR"] = trace_dir
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = SHIM
    env.update(env_extra or {})
    cmd = [LAUNCH, "--np", str(np)]
    if timeout_s:
        cmd += ["--timeout", str(timeout_s)]
    if stuck_s:
        cmd += ["--stop-when-stuck", str(stuck_s)]
    cmd += ["--"] + argv
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=wall)


def traces(trace_dir):
    """All traces of a folder, loaded by the analyzer's reader, as dicts."""
    p = subprocess.run([QUERY, trace_dir], capture_output=True, text=True, timeout=60)
    expect(p.returncode == 0, f"trace_query failed: {p.stderr}")
    return json.loads(p.stdout)


def by_rank(ts):
    return {t["rank"]: t for t in ts}


def lockstep_lines(text):
    return [l for l in text.splitlines() if l.startswith("lockstep:")]


def ops(trace, comm=None):
    return [r for r in trace["records"] if comm is None or r["comm"] == comm]


# ---------------------------------------------------------------- cases


def case_results(tmp):
    """The same NCCL program gives identical results with and without the shim."""
    plain = run_ranks(4, [COLL_CHECK], os.path.join(tmp, "plain"), preload=False)
    expect(plain.returncode == 0, f"coll_check without the shim failed: {plain.stderr}")
    traced = run_ranks(4, [COLL_CHECK], os.path.join(tmp, "t"))
    expect(traced.returncode == 0, f"coll_check under the shim failed: {traced.stderr}")
    expect(plain.stdout.strip() != "", "coll_check printed no checksum")
    expect(plain.stdout == traced.stdout,
           f"results differ: {plain.stdout!r} vs {traced.stdout!r}")
    expect(not lockstep_lines(traced.stderr), f"shim complained: {traced.stderr}")
    ts = traces(os.path.join(tmp, "t"))
    expect(sorted(t["rank"] for t in ts) == [0, 1, 2, 3], "one trace per rank expected")
    for t in ts:
        expect(t["end_kind"] == END_EXITED and t["end_status"] == 0,
               f"rank {t['rank']}: clean exit not recorded")
        expect(len(t["records"]) > 20, f"rank {t['rank']}: too few records")


def case_api_tour(tmp):
    """Every intercepted API leaves a record with the right fields; ids agree across ranks."""
    d = os.path.join(tmp, "t")
    p = run_ranks(4, [prog("api_tour")], d)
    expect(p.returncode == 0, f"api_tour failed: {p.stdout} {p.stderr}")
    ranks = by_rank(traces(d))
    expect(sorted(ranks) == [0, 1, 2, 3], f"traces for ranks {sorted(ranks)}")

    world_ids = set()
    for rank, t in ranks.items():
        recs = t["records"]
        init = [r for r in recs if r["op"] == "CommInitRank"]
        expect(len(init) == 1, f"rank {rank}: {len(init)} CommInitRank records")
        world = init[0]["comm"]
        world_ids.add(world)
        expect(init[0]["count"] == 4 and init[0]["comm_rank"] == rank, "init record fields")
        coll = [r for r in recs if r["comm"] == world and r["seq"] > 0
                and r["op"] not in ("Send", "Recv")]
        want = [("AllReduce", 11, FLOAT32, SUM, -1), ("Broadcast", 12, INT32, -1, 1),
                ("Bcast", 13, INT8, -1, 2), ("Reduce", 14, FLOAT64, MAX, 3),
                ("AllGather", 15, UINT8, -1, -1), ("ReduceScatter", 16, INT64, PROD, -1),
                ("AlltoAll", 17, FLOAT32, -1, -1), ("Gather", 18, INT32, -1, 0),
                ("Scatter", 19, INT32, -1, 1)]
        got = [(r["op"], r["count"], r["dtype"], r["redop"], r["peer"]) for r in coll]
        expect(got == want, f"rank {rank}: collectives {got}")
        expect([r["seq"] for r in coll] == list(range(1, 10)), f"rank {rank}: seqs")
        expect(all(r["comm_rank"] == rank and not r["in_flight"] and r["result"] == 0
                   for r in coll), f"rank {rank}: rank/result fields")
        # ncclBcast calls ncclBroadcast inside the library: still one record.
        expect(sum(1 for r in recs if r["op"] in ("Broadcast", "Bcast")) == 2,
               f"rank {rank}: Bcast recorded more than once")

        gs = [r for r in recs if r["op"] == "GroupStart"]
        expect(len(gs) >= 2, f"rank {rank}: GroupStart records")
        gid = gs[0]["group"]
        grp = [r for r in recs if r["group"] == gid]
        expect([r["op"] for r in grp] == ["GroupStart", "Send", "Recv", "GroupEnd"],
               f"rank {rank}: group {[r['op'] for r in grp]}")
        send, recv, gend = grp[1], grp[2], grp[3]
        expect(send["peer"] == (rank + 1) % 4 and recv["peer"] == (rank + 3) % 4, "p2p peers")
        expect(send["seq"] == 1 and recv["seq"] == 1 and send["count"] == 20, "p2p seq/count")
        expect(send["flags"] & REC_IN_GROUP and send["depth"] == 1, "p2p group flags")
        expect(gend["depth"] == 0 and gend["aux"] == 2, f"GroupEnd depth/aux {gend}")

        comms = {c["id"]: c for c in t["comms"]}
        splits = [r for r in recs if r["op"] == "CommSplit"]
        expect(len(splits) == 2, f"rank {rank}: {len(splits)} CommSplit records")
        expect(all(s["comm"] == world for s in splits), "split record names the parent")
        sub_id = "%016x" % splits[0]["count"]
        sub = comms.get(sub_id)
        expect(sub is not None and sub["parent"] == world, f"rank {rank}: split comm entry")
        # color rank%2, key -rank: the higher parent rank comes first.
        expect(sub["nranks"] == 2 and sub["rank"] == (0 if rank >= 2 else 1),
               f"rank {rank}: split rank {sub['rank']}/{sub['nranks']}")
        expect(splits[0]["aux"] >> 32 == rank % 2, "split color in aux")
        ar21 = [r for r in recs if r["count"] == 21]
        expect(len(ar21) == 1 and ar21[0]["comm"] == sub_id and ar21[0]["seq"] == 1
               and ar21[0]["redop"] == MIN and ar21[0]["comm_rank"] == sub["rank"],
               f"rank {rank}: AllReduce on the split comm {ar21}")
        if rank == 3:
            expect(splits[1]["count"] == 0, "NOCOLOR split has no child id")
        else:
            three = comms.get("%016x" % splits[1]["count"])
            expect(three and three["nranks"] == 3 and three["rank"] == rank,
                   f"rank {rank}: split in a group not bound: {three}")
            ar22 = [r for r in recs if r["count"] == 22]
            expect(ar22 and ar22[0]["comm"] == three["id"], "AllReduce on group split comm")
            shr = [r for r in recs if r["op"] == "CommShrink"]
            expect(len(shr) == 1 and shr[0]["aux"] == 1, f"rank {rank}: shrink record")
            shrunk = comms.get("%016x" % shr[0]["count"])
            expect(shrunk and shrunk["nranks"] == 3 and shrunk["rank"] == rank
                   and shrunk["parent"] == world, f"rank {rank}: shrunk comm {shrunk}")
            ar24 = [r for r in recs if r["count"] == 24]
            expect(ar24 and ar24[0]["comm"] == shrunk["id"], "AllReduce on shrunk comm")

        nb_init = [r for r in recs if r["op"] == "CommInitRankConfig"]
        expect(len(nb_init) == 1 and nb_init[0]["result"] in (0, 7), "nonblocking init record")
        nb = comms.get(nb_init[0]["comm"])
        expect(nb and nb["flags"] & COMM_NONBLOCKING and nb["name"] == "tour-nb",
               f"rank {rank}: nonblocking comm entry {nb}")
        ar23 = [r for r in recs if r["count"] == 23]
        expect(ar23 and ar23[0]["comm"] == nb["id"] and ar23[0]["seq"] == 1,
               f"rank {rank}: AllReduce on the nonblocking comm {ar23}")

        sc_init = [r for r in recs if r["op"] == "CommInitRankScalable"]
        expect(len(sc_init) == 1 and sc_init[0]["count"] == 4, "InitRankScalable record")
        sc = sc_init[0]["comm"]
        sc_ops = [r["op"] for r in recs if r["comm"] == sc]
        expect(sc_ops == ["CommInitRankScalable", "AllReduce", "CommRevoke", "CommAbort"],
               f"rank {rank}: ops on the scalable comm {sc_ops}")
        expect(comms[sc]["flags"] & 32 and comms[sc]["flags"] & 16, "revoked and aborted flags")
        sim = [r for r in recs if r["op"] == "GroupSimulateEnd"]
        expect(len(sim) == 1 and sim[0]["depth"] == 0, "GroupSimulateEnd record")
        expect([r["op"] for r in recs[-2:]] == ["CommFinalize", "CommDestroy"]
               and all(r["comm"] == world for r in recs[-2:]), f"rank {rank}: teardown")
        expect(comms[world]["flags"] & 8, "world comm marked destroyed")
        expect(comms[world]["coll_issued"] == 9, "comm counter of collectives")
        expect(t["end_kind"] == END_EXITED and t["end_status"] == 0, "exit recorded")
        expect(t["nccl_version"] > 0, "NCCL version recorded")

        initall = [r for r in recs if r["op"] == "CommInitAll"]
        if rank == 0:
            expect(len(initall) == 1 and initall[0]["count"] == 2, "one CommInitAll record")
            ia = [c for c in t["comms"] if c["create_op"] == "CommInitAll"]
            expect(sorted(c["rank"] for c in ia) == [0, 1] and len({c["id"] for c in ia}) == 1,
                   f"CommInitAll comm entries {ia}")
        else:
            expect(not initall, "CommInitAll only on rank 0")
        expect(sum(1 for r in recs if r["op"] == "CommInitRank") == 1,
               "CommInitAll's internal CommInitRank calls must not be recorded")

    expect(len(world_ids) == 1, f"ranks disagree on the world comm id: {world_ids}")
    for key in (21, 22, 24, 25):
        ids = {}
        for rank, t in ranks.items():
            for r in t["records"]:
                if r["count"] == key and r["op"] == "AllReduce":
                    ids.setdefault(r["comm"], []).append(rank)
        groups = sorted(sorted(v) for v in ids.values())
        if key == 21:
            expect(groups == [[0, 2], [1, 3]], f"split ids by color: {ids}")
        elif key == 25:
            expect(groups == [[0, 1, 2, 3]], f"ids of the scalable comm: {ids}")
        else:
            expect(groups == [[0, 1, 2]], f"ids of comm {key}: {ids}")


REMOTE_ERROR, COMM_INIT_FAILED, COMM_ASYNC_ERROR = 6, 64, 128


def case_async_error(tmp):
    """ncclCommGetAsyncError polled 100 times a round, on two communicators: nothing is recorded
    while NCCL reports no error; the first error a communicator reports is one AsyncError record
    (its result, communicator and the poll's call site), however often it is polled again; NCCL
    polling inside a call (a split) is part of that call, not a record."""
    d = os.path.join(tmp, "t")
    p = run_ranks(1, [prog("async_poll"), str(REMOTE_ERROR)], d,
                  env_extra={"LOCKSTEP_EMU_ASYNC_ERROR": "0:1:%d" % REMOTE_ERROR})
    expect(p.returncode == 0, f"async_poll failed: {p.stdout} {p.stderr}")
    (t,) = traces(d)
    recs = t["records"]
    world = recs[0]["comm"]
    sub = "%016x" % recs[1]["count"]
    got = [(r["op"], r["comm"], r["result"]) for r in recs]
    want = [("CommInitRank", world, 0), ("CommSplit", world, 0), ("AllReduce", world, 0),
            ("CommSplit", world, REMOTE_ERROR), ("AsyncError", world, REMOTE_ERROR),
            ("AllReduce", sub, 0), ("AsyncError", sub, REMOTE_ERROR), ("CommAbort", sub, 0),
            ("CommAbort", world, 0)]
    expect(got == want, f"records {got},\nwant {want}")
    split, on_world, on_sub = recs[3], recs[4], recs[6]
    for r, poll in ((on_world, "poll_world"), (on_sub, "poll_sub")):
        expect(r["site"][:2] == [poll, "main"], f"{r['op']} on {r['comm']}: site {r['site']}")
        expect(r["seq"] == 0 and r["comm_rank"] == 0 and r["flags"] == 0 and not r["in_flight"]
               and 0 < r["enter_ns"] <= r["exit_ns"], f"fields {r}")
    # The poll that saw the error first is the one recorded: after the split that failed on it.
    expect(on_world["enter_ns"] >= split["exit_ns"], f"recorded inside the split: {on_world}")
    comms = {c["id"]: c for c in t["comms"]}
    for c in (world, sub):
        expect(comms[c]["flags"] & COMM_ASYNC_ERROR, f"comm {c} not marked: {comms[c]}")
    failed = [c for c in t["comms"] if c["flags"] & COMM_INIT_FAILED]
    expect(len(failed) == 1 and not failed[0]["flags"] & COMM_ASYNC_ERROR
           and failed[0]["init_result"] == REMOTE_ERROR, f"the failed split's entry {failed}")
    expect(t["nunwritten"] == 0 and t["nbusy"] == 0, "every reserved ticket published")


def by_thread(records):
    """The records of each thread id."""
    out = {}
    for r in records:
        out.setdefault(r["tid"], []).append(r)
    return out


def case_threads(tmp):
    """16 threads calling at once: no record lost, none torn, seqs dense per thread."""
    d = os.path.join(tmp, "t")
    p = run_ranks(1, [prog("threads"), "2000"], d, env_extra={"LOCKSTEP_RING": "65536"})
    expect(p.returncode == 0, f"threads failed: {p.stderr}")
    (t,) = traces(d)
    expect(t["nbusy"] == 0 and not t["wrapped"], "no half-written records, no wrap")
    ar = [r for r in t["records"] if r["op"] == "AllReduce"]
    expect(len(ar) == 16 * 2000, f"{len(ar)} AllReduce records, expected 32000")
    per_tid = by_thread(ar)
    expect(len(per_tid) == 16, f"{len(per_tid)} threads seen")
    comms = set()
    for tid, rs in per_tid.items():
        expect(len({r["comm"] for r in rs}) == 1, f"tid {tid}: one comm per thread")
        comms.add(rs[0]["comm"])
        expect(sorted(r["seq"] for r in rs) == list(range(1, 2001)), f"tid {tid}: seqs")
        expect(all(r["count"] == 4 and not r["in_flight"] for r in rs), f"tid {tid}: fields")
    expect(len(comms) == 16, "16 distinct communicators")
    # Threads reserve tickets in blocks: each ticket is a record, given back unused at thread
    # exit (void), or still in the block of a thread that holds one (the main thread's).
    expect(t["nunwritten"] == 0 and t["nbusy"] == 0 and t["nvoid"] > 0 and
           len(t["records"]) + t["nvoid"] + t["nreserved"] == t["next_ticket"],
           f"every reserved ticket published or given back: {len(t['records'])} records, "
           f"{t['nvoid']} void, {t['nreserved']} reserved, next ticket {t['next_ticket']}")


def case_fast_path(tmp):
    """The wrappers' fast path across what it leaves to the rest of the shim: 16 threads, call
    sites on, 3,000 calls each with a pause halfway (the calls before it are timed by the
    kernel's clock: the first TSC conversion comes 20 ms after the trace starts), ticket blocks
    reserved after the call that used the last one, call-site hits counted in batches of 64.
    Every record is whole, timed within the run, its return not before its entry and in order
    per thread, on its call site; the site counts add up to the calls."""
    d = os.path.join(tmp, "t")
    t0 = time.time_ns()
    p = run_ranks(1, [prog("threads"), "3000", "pause", "60"], d,
                  env_extra={"LOCKSTEP_RING": "65536"})
    t1 = time.time_ns()
    expect(p.returncode == 0, f"threads failed: {p.stderr}")
    (t,) = traces(d)
    expect(t["nbusy"] == 0 and t["nunwritten"] == 0 and not t["wrapped"],
           f"{t['nbusy']} busy, {t['nunwritten']} unwritten")
    ar = [r for r in t["records"] if r["op"] == "AllReduce"]
    expect(len(ar) == 16 * 3000, f"{len(ar)} AllReduce records, expected 48000")
    slack = 50_000_000  # the TSC conversion is within microseconds of the kernel's clock
    bad = [r for r in ar if not (t0 - slack <= r["enter_ns"] <= r["exit_ns"] <= t1 + slack)]
    expect(not bad, f"{len(bad)} records timed outside the run or returning before entry: "
                    f"{bad[:2]} (run {t0}..{t1})")
    per_tid = by_thread(ar)
    expect(len(per_tid) == 16, f"{len(per_tid)} threads seen")
    sites = set()
    for tid, rs in per_tid.items():
        rs.sort(key=lambda r: r["seq"])
        expect([r["seq"] for r in rs] == list(range(1, 3001)), f"tid {tid}: seqs")
        expect(all(a["exit_ns"] <= b["enter_ns"] for a, b in zip(rs, rs[1:])),
               f"tid {tid}: a call entered before the previous one returned")
        gap = max(b["enter_ns"] - a["exit_ns"] for a, b in zip(rs, rs[1:]))
        expect(gap >= 50_000_000, f"tid {tid}: the 60 ms pause is {gap} ns in the records")
        expect(all(r["count"] == 4 and r["result"] == 0 and r["callsite"] for r in rs),
               f"tid {tid}: fields or site")
        sites.update(r["callsite"] for r in rs)
    counted = sum(t["site_counts"][s - 1] for s in sites)
    expect(counted == 16 * 3000, f"the call sites of the 48,000 calls count {counted}")


def machine_counter():
    """The counter this machine lets the shim read (the header's clock_source), worked out
    apart from the shim: 1 where the kernel clocks on the TSC (and always on aarch64), 2 where
    the TSC is invariant (/proc/cpuinfo's constant_tsc and nonstop_tsc) and listed as available
    while the kernel clocks on another source (kvm-clock), 0 elsewhere."""
    if elf_machine(TEST_SHIM) == "aarch64":  # the build's, under qemu-user too
        return 1
    cs = "/sys/devices/system/clocksource/clocksource0/"
    try:
        current = open(cs + "current_clocksource").read().split()
        available = open(cs + "available_clocksource").read().split()
        flags = next((line.split(":", 1)[1].split() for line in open("/proc/cpuinfo")
                      if line.startswith("flags")), [])
    except OSError:
        return 0
    if current == ["tsc"]:
        return 1
    return 2 if "tsc" in available and {"constant_tsc", "nonstop_tsc"} <= set(flags) else 0


def case_fast_tour(tmp):
    """Every collective's wrapper on its fast path (fast_wrap.S on x86-64) writes the record its
    general path writes: 2 ranks call the nine collectives from one call site each, 12 rounds
    with distinct counts, types, reductions, roots and streams; the program checks each result
    (arguments forwarded wrongly fail there), the test checks each record's fields, numbers,
    times and call site, with call sites off and on. The test build of the shim says how many
    calls its assembly path recorded, so the check is known to cover it; it waits at the first
    call for the heartbeat's first clock conversion (LOCKSTEP_TEST_WAIT_CLOCK), without which
    the fast path cannot run (was: on a loaded machine one rank's whole tour ran before it)."""
    rounds = 12
    # (op, base count, dtype, redop, root); the stream is 0x5000 + 0x100 * its index
    tour = [("AllReduce", 4, INT32, SUM, -1), ("Broadcast", 8, FLOAT32, -1, 1),
            ("Bcast", 12, INT8, -1, 0), ("Reduce", 16, FLOAT64, MAX, 1),
            ("AllGather", 20, UINT8, -1, -1), ("ReduceScatter", 24, INT64, PROD, -1),
            ("AlltoAll", 28, FLOAT32, -1, -1), ("Gather", 32, 3, -1, 0),
            ("Scatter", 36, INT32, -1, 1)]
    # call sites off; on (the frames checked through fast_wrap.S's table of 16); deeper (its
    # loop); no TSC conversion (the kernel's clock: the assembly path never applies, the general
    # path's own fast branch records)
    for depth, frames, clock in (("0", "0", "tsc"), ("16", "0", "tsc"), ("16", "20", "tsc"),
                                 ("32", "24", "tsc"), ("16", "0", "realtime")):
        d = os.path.join(tmp, f"t{depth}-{frames}-{clock}")
        env = dict(os.environ, LD_LIBRARY_PATH=EMU_DIR + ":" + os.environ.get("LD_LIBRARY_PATH", ""),
                   LOCKSTEP_DIR=d, LOCKSTEP_STACK_DEPTH=depth, LOCKSTEP_TEST_FAST_COUNT="1",
                   LOCKSTEP_CLOCK=clock, LOCKSTEP_TEST_WAIT_CLOCK="1")
        env.pop("LD_PRELOAD", None)
        p = subprocess.run([LAUNCH, "--np", "2", "--", "env", "LD_PRELOAD=" + TEST_SHIM,
                            prog("fast_tour"), str(rounds), frames], env=env, capture_output=True,
                           text=True, timeout=90)
        expect(p.returncode == 0, f"fast_tour (depth {depth}) failed: {p.stdout} {p.stderr}")
        said = [re.search(r"test: (\d+) calls took the (\S+) fast path", line)
                for line in p.stderr.splitlines()]
        said = [m for m in said if m]
        fast = [int(m.group(1)) for m in said]
        # The shim says which path it was built with: the one meson configured (FAST_PATH).
        expect(len(said) == 2 and all(m.group(2) == FAST_PATH for m in said),
               f"the shim's fast path is {[m.group(2) for m in said]}, the build's {FAST_PATH}")
        ranks = by_rank(traces(d))
        sources = sorted(t["clock_source"] for t in ranks.values())
        if clock == "realtime":
            expect(sources == [0, 0], f"LOCKSTEP_CLOCK=realtime: clock sources {sources}")
        else:
            want = machine_counter()
            expect(sources == [want, want], f"clock sources in the headers {sources}, this "
                   f"machine offers {want} (1: the kernel clocks on the TSC, 2: an invariant TSC "
                   f"beside another clocksource)")
        if clock == "realtime" or want == 0:
            expect(fast == [0, 0], f"the {FAST_PATH} fast path ran without a clock conversion: "
                   f"{fast}")
        else:
            least = 60 if depth == "0" else 5
            expect(len(fast) == 2 and min(fast) >= least,
                   f"depth {depth}: calls on the {FAST_PATH} fast path per rank {fast}, expected "
                   f"at least {least} of {9 * rounds}")
        bufs = {int(w[1]): (int(w[2], 16), int(w[3], 16))
                for w in (line.split() for line in p.stdout.splitlines())
                if len(w) == 4 and w[0] == "bufs"}
        expect(sorted(bufs) == [0, 1], f"buffer addresses printed: {p.stdout}")
        expect(sorted(ranks) == [0, 1], f"traces for ranks {sorted(ranks)}")
        for rank, t in ranks.items():
            send, recv = bufs[rank]
            coll = [r for r in t["records"] if r["seq"] > 0]
            coll.sort(key=lambda r: r["seq"])
            # Last, via_a and via_b in turn: one call instruction, one stack slot, two callers.
            vias, coll = coll[9 * rounds:], coll[:9 * rounds]
            expect([r["count"] for r in vias] == [3, 2] * rounds,
                   f"depth {depth} rank {rank}: via_a/via_b counts {[r['count'] for r in vias]}")
            if depth != "0":
                for count, via, other in ((3, "via_a", "via_b"), (2, "via_b", "via_a")):
                    got = {tuple(r["site"]) for r in vias if r["count"] == count}
                    expect(len(got) == 1 and via in next(iter(got)) and
                           other not in next(iter(got)),
                           f"depth {depth} rank {rank}: the calls through {via} have call sites "
                           f"{got}")
            expect(len(coll) == 9 * rounds and len({r["comm"] for r in coll}) == 1 and
                   [r["seq"] for r in coll] == list(range(1, 9 * rounds + 1)),
                   f"depth {depth} rank {rank}: {len(coll)} collectives, seqs "
                   f"{[r['seq'] for r in coll][:20]}")
            sites = {}
            for i, r in enumerate(coll):
                rnd, k = divmod(i, 9)
                op, base, dtype, redop, root = tour[k]
                want = {"op": op, "count": base + rnd % 8, "dtype": dtype, "redop": redop,
                        "peer": root, "sendbuff": send,
                        "recvbuff": send if op == "Bcast" else recv,
                        "stream": 0x5000 + 0x100 * k, "comm_rank": rank, "result": 0,
                        "in_flight": False, "flags": 0, "group": 0, "depth": 0,
                        "tid": coll[0]["tid"]}
                got = {key: r[key] for key in want}
                expect(got == want, f"depth {depth} rank {rank} round {rnd}: record {got}, "
                                    f"expected {want}")
                expect(0 < r["enter_ns"] <= r["exit_ns"], f"rank {rank} round {rnd} {op}: times")
                if i:
                    expect(coll[i - 1]["exit_ns"] <= r["enter_ns"],
                           f"rank {rank} round {rnd} {op}: entered before the previous return")
                if depth == "0":
                    expect(r["callsite"] == 0, f"rank {rank} {op}: a call site with depth 0")
                else:
                    expect(r["callsite"] != 0 and sites.setdefault(op, r["callsite"]) ==
                           r["callsite"], f"rank {rank} round {rnd} {op}: call site "
                           f"{r['callsite']}, earlier {sites.get(op)}")
            if depth != "0":
                expect(len(set(sites.values())) == 9, f"rank {rank}: call sites {sites}")


def case_threads_slow(tmp):
    """Ticket blocks: a thread that calls once, waits while 15 others make 3,000 calls, and calls
    again keeps writing its old block. Its newest call must still be in the analysis window (the
    newest 1,024 tickets plus the blocks threads hold), and the tickets it reserved but did not
    use are not reported as lost; threads that ended gave theirs back as void records."""
    d = os.path.join(tmp, "t")
    env = dict(os.environ, LD_LIBRARY_PATH=EMU_DIR + ":" + os.environ.get("LD_LIBRARY_PATH", ""),
               LD_PRELOAD=SHIM, LOCKSTEP_DIR=d, LOCKSTEP_RING="8192")
    proc = subprocess.Popen([prog("threads"), "200", "slow"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        expect(line.strip() == "slow thread done", f"threads slow: {line!r} {proc.poll()}")
    finally:
        proc.kill()  # the slow thread never gives its block back: as a killed rank leaves it
        proc.communicate(timeout=30)
    (t,) = traces(d)
    ar = [r for r in t["records"] if r["op"] == "AllReduce"]
    per_tid = by_thread(ar)
    slow = [tid for tid, rs in per_tid.items() if len(rs) == 2]
    expect(len(per_tid) == 16 and len(slow) == 1, f"threads and their calls: "
           f"{ {tid: len(rs) for tid, rs in per_tid.items()} }")
    newest = max(per_tid[slow[0]], key=lambda r: r["ticket"])
    expect(newest["seq"] == 2 and newest["enter_ns"] > max(r["enter_ns"] for r in ar
                                                            if r["tid"] != slow[0]),
           "the slow thread's second call is the newest call of the process")
    expect(newest["ticket"] < t["next_ticket"] - 1024,
           f"the slow thread's block is not older than the window: ticket {newest['ticket']}, "
           f"next {t['next_ticket']}")
    expect(t["nunwritten"] == 0 and t["nbusy"] == 0 and t["nvoid"] > 0 and t["nreserved"] > 0,
           f"{t['nunwritten']} unwritten, {t['nbusy']} busy, {t['nvoid']} void, "
           f"{t['nreserved']} reserved")
    p = subprocess.run([QUERY, "--window", "1024", d], capture_output=True, text=True, timeout=60)
    expect(p.returncode == 0, f"trace_query --window failed: {p.stderr}")
    (w,) = json.loads(p.stdout)
    wt = [r["ticket"] for r in w["records"]]
    expect(newest["ticket"] in wt, "the slow thread's newest record was left out of the window")
    expect(wt == sorted(wt) and w["unread"] > 0 and w["nunwritten"] == 0,
           f"window: sorted {wt == sorted(wt)}, unread {w['unread']}, "
           f"unwritten {w['nunwritten']}")
    aenv = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    p = subprocess.run([LOCKSTEP, "analyze", "--json", d], capture_output=True, text=True,
                       timeout=60, env=aenv)
    expect(p.returncode in (0, 1), f"analyze exited {p.returncode}: {p.stderr}")
    r = json.loads(p.stdout)
    kinds = [f["kind"] for f in r["findings"]]
    expect("trace_incomplete" not in kinds, f"reserved tickets reported as lost: {kinds}")


def case_fork(tmp):
    """A forked child that calls NCCL gets a trace of its own; the parent's stays whole."""
    d = os.path.join(tmp, "t")
    p = run_ranks(1, [prog("forker")], d)
    expect(p.returncode == 0, f"forker failed: {p.stderr}")
    ts = traces(d)
    expect(len(ts) == 2, f"{len(ts)} traces, expected parent + child")
    pids = {t["pid"] for t in ts}
    child = [t for t in ts if t["ppid"] in pids]
    expect(len(child) == 1, "the child's trace names the parent as ppid")
    child = child[0]
    parent = [t for t in ts if t is not child][0]
    counts = lambda t: sorted(r["count"] for r in t["records"] if r["op"] == "AllReduce")
    expect(counts(parent) == [31, 31, 31, 32], f"parent records {counts(parent)}")
    expect(counts(child) == [57] * 5, f"child records {counts(child)}")
    expect(child["end_kind"] == END_EXITED and parent["end_kind"] == END_EXITED, "ends")


def case_sigkill(tmp):
    """A rank SIGKILLed inside a collective leaves that call as its last record, open."""
    d = os.path.join(tmp, "t")
    p = run_ranks(2, [prog("blocker")], d, timeout_s=3, stuck_s=0.5)
    expect(p.returncode == 124, f"launcher status {p.returncode}, expected 124 (timed out)")
    ranks = by_rank(traces(d))
    last0 = ranks[0]["records"][-1]
    expect(last0["op"] == "AllReduce" and last0["seq"] == 2 and last0["in_flight"]
           and last0["exit_ns"] == 0 and last0["result"] == -1,
           f"rank 0's last record: {last0}")
    expect(ranks[0]["end_kind"] == END_RUNNING, "SIGKILL leaves no end record")
    last1 = ranks[1]["records"][-1]
    expect(last1["op"] == "AllReduce" and last1["seq"] == 1 and not last1["in_flight"],
           f"rank 1's last record: {last1}")


def case_unwritable_dir(tmp):
    """An unusable trace folder: the program still runs, correct, with one line per rank."""
    plain = run_ranks(2, [COLL_CHECK], os.path.join(tmp, "plain"), preload=False)
    bad = run_ranks(2, [COLL_CHECK], "/dev/null/traces")
    expect(bad.returncode == 0 and bad.stdout == plain.stdout,
           f"results changed with an unwritable folder: {bad.stdout!r} {bad.stderr}")
    lines = lockstep_lines(bad.stderr)
    expect(len(lines) == 2 and all("/dev/null/traces" in l for l in lines),
           f"expected one warning per rank naming the folder, got {lines}")
    # A symlink where the folder should be is refused, not followed.
    real = os.path.join(tmp, "real")
    os.mkdir(real, 0o700)
    link = os.path.join(tmp, "link")
    os.symlink(real, link)
    p = run_ranks(1, [COLL_CHECK], link)
    expect(p.returncode == 0, "program failed with a symlinked folder")
    expect(os.listdir(real) == [], "trace written through a symlink")
    expect(len(lockstep_lines(p.stderr)) == 1, f"warnings: {p.stderr}")


def case_dlopen_local(tmp):
    """libnccl loaded RTLD_LOCAL behind a dlopened library (as Python does) is still traced."""
    d = os.path.join(tmp, "t")
    p = run_ranks(2, [prog("dl_host"), DL_CALLER], d)
    expect(p.returncode == 0, f"dl_host failed: {p.stderr}")
    expect(p.stdout.split() == ["sum", "3.0", "sum", "3.0"], f"results {p.stdout!r}")
    ts = traces(d)
    expect(len(ts) == 2, f"{len(ts)} traces")
    for t in ts:
        ar = [r for r in t["records"] if r["op"] == "AllReduce"]
        expect(len(ar) == 5 and [r["seq"] for r in ar] == [1, 2, 3, 4, 5],
               f"rank {t['rank']}: AllReduce records {len(ar)}")


def case_no_nccl(tmp):
    """No NCCL in the process: ncclSystemError and one line, never a crash."""
    env = dict(os.environ, LD_PRELOAD=SHIM, LOCKSTEP_DIR=os.path.join(tmp, "t"))
    p = subprocess.run([prog("no_nccl")], env=env, capture_output=True, text=True, timeout=30)
    expect(p.returncode == 0, f"no_nccl exited {p.returncode}: {p.stderr}")
    expect(p.stdout.strip() == "results 2 2", f"expected ncclSystemError twice: {p.stdout!r}")
    lines = lockstep_lines(p.stderr)
    expect(len(lines) == 1 and "no NCCL library" in lines[0], f"warnings {lines}")


def case_fatal_signals(tmp):
    """A fatal signal is recorded and the program's own handler still runs."""
    for how, sig in (("segv", 11), ("abort", 6)):
        d = os.path.join(tmp, how)
        p = run_ranks(1, [prog("crasher"), how], d)
        expect(p.returncode == 128 + sig, f"{how}: launcher status {p.returncode}")
        (t,) = traces(d)
        expect(t["end_kind"] == END_SIGNALED and t["end_signal"] == sig,
               f"{how}: end {t['end_kind']}/{t['end_signal']}")
        expect(t["records"][-1]["op"] == "AllReduce", f"{how}: last record")
    d = os.path.join(tmp, "handled")
    p = run_ranks(1, [prog("crasher"), "handled"], d)
    expect(p.returncode == 7 and "own handler ran" in p.stderr,
           f"the program's own SIGSEGV handler must run: {p.returncode} {p.stderr}")
    (t,) = traces(d)
    expect(t["end_kind"] == END_SIGNALED and t["end_signal"] == 11, "handled segv recorded")


def case_disable_and_knobs(tmp):
    """LOCKSTEP_DISABLE, LOCKSTEP_RING and LOCKSTEP_STACK_DEPTH do what they say."""
    d = os.path.join(tmp, "off")
    p = run_ranks(2, [COLL_CHECK], d, env_extra={"LOCKSTEP_DISABLE": "1"})
    expect(p.returncode == 0, "program failed with LOCKSTEP_DISABLE")
    expect(not os.path.exists(d) or os.listdir(d) == [], "LOCKSTEP_DISABLE wrote a trace")

    d = os.path.join(tmp, "huge")
    p = run_ranks(1, [COLL_CHECK], d, env_extra={"LOCKSTEP_RING": "1000000000000"})
    expect(p.returncode == 0, "program failed with a huge ring request")
    expect(any("LOCKSTEP_RING=1000000000000 refused" in l for l in lockstep_lines(p.stderr)),
           f"no refusal message: {p.stderr}")
    (t,) = traces(d)
    expect(t["ring_cap"] == 32768, f"ring {t['ring_cap']} instead of the default")

    d = os.path.join(tmp, "small")
    p = run_ranks(1, [COLL_CHECK], d, env_extra={"LOCKSTEP_RING": "100"})
    (t,) = traces(d)
    expect(t["ring_cap"] == 128 and t["wrapped"], f"ring {t['ring_cap']}, wrapped {t['wrapped']}")
    expect(len(t["records"]) + t["nreserved"] == 128 and t["nunwritten"] == 0 and
           t["records"][-1]["ticket"] == t["next_ticket"] - 1 - t["nreserved"],
           "a wrapped ring keeps the newest records")

    d = os.path.join(tmp, "nostack")
    p = run_ranks(1, [COLL_CHECK], d, env_extra={"LOCKSTEP_STACK_DEPTH": "0"})
    (t,) = traces(d)
    expect(t["stack_depth"] == 0 and all(r["site"] == [] for r in t["records"]),
           "call sites recorded with LOCKSTEP_STACK_DEPTH=0")


def case_callsites(tmp):
    """Call sites name the calling function, are deduplicated, and dump prints them."""
    d = os.path.join(tmp, "t")
    p = run_ranks(4, [prog("api_tour")], d)
    expect(p.returncode == 0, f"api_tour failed: {p.stderr}")
    for t in traces(d):
        recs = t["records"]
        ar11 = [r for r in recs if r["op"] == "AllReduce" and r["count"] == 11][0]
        ar21 = [r for r in recs if r["op"] == "AllReduce" and r["count"] == 21][0]
        expect(ar11["site"] and ar11["site"][0] == "tour_collectives",
               f"AllReduce #1 site {ar11['site']}")
        expect(ar21["site"] and ar21["site"][0] == "tour_splits", f"site {ar21['site']}")
        expect("main" in ar11["site"], f"outer frames missing: {ar11['site']}")
    path = os.path.join(d, sorted(os.listdir(d))[0])
    p = subprocess.run([LOCKSTEP, "dump", path], capture_output=True, text=True, timeout=30)
    expect(p.returncode == 0, f"lockstep dump failed: {p.stderr}")
    expect("AllReduce" in p.stdout and "tour_collectives" in p.stdout,
           "dump shows records and call sites")


def case_idle_cpu(tmp):
    """A traced rank that waits costs no CPU: the heartbeat thread sleeps between beats."""
    d = os.path.join(tmp, "t")
    env = dict(os.environ, LD_LIBRARY_PATH=EMU_DIR, LD_PRELOAD=SHIM, LOCKSTEP_DIR=d)
    proc = subprocess.Popen([LAUNCH, "--np", "2", "--timeout", "4", "--", prog("blocker")],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import time
        time.sleep(1.0)
        pids = [t["pid"] for t in traces(d) if t["rank"] == 1]
        expect(len(pids) == 1, "rank 1's trace")
        def cpu_ticks():
            with open(f"/proc/{pids[0]}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return int(fields[11]) + int(fields[12])
        before = cpu_ticks()
        time.sleep(2.0)
        used = cpu_ticks() - before
        hz = os.sysconf("SC_CLK_TCK")
        expect(used / hz < 0.1, f"an idle traced rank used {used / hz:.2f} s of CPU in 2 s")
    finally:
        proc.wait(timeout=30)


def case_completion(tmp):
    """GPU-style (async) NCCL: the shim tracks completion with CUDA events; every issued op of
    a job that synchronized is marked complete. Without a CUDA driver tracking stays off."""
    d = os.path.join(tmp, "async")
    p = run_ranks(4, [COLL_CHECK], d, env_extra={"LOCKSTEP_EMU_ASYNC": "1"})
    expect(p.returncode == 0, f"coll_check (async) failed: {p.stderr}")
    for t in traces(d):
        expect(t["completion"] == 1, f"rank {t['rank']}: completion tracking is off")
        work = [r for r in t["records"] if r["op"] in ("AllReduce", "Broadcast", "Bcast",
                "Reduce", "AllGather", "ReduceScatter", "AlltoAll", "Gather", "Scatter", "Send",
                "Recv")]
        expect(len(work) > 50, f"rank {t['rank']}: only {len(work)} ops")
        late = [r for r in work if r["complete_ns"] == 0]
        expect(not late, f"rank {t['rank']}: {len(late)} ops never marked complete: {late[:2]}")
        expect(all(r["complete_ns"] >= r["enter_ns"] for r in work), "completion before issue")
        for c in t["comms"]:
            expect(c["coll_completed"] == c["coll_issued"],
                   f"rank {t['rank']}: comm {c['id']} completed {c['coll_completed']} of "
                   f"{c['coll_issued']}")
    d = os.path.join(tmp, "blocking")
    p = run_ranks(2, [COLL_CHECK], d)
    expect(p.returncode == 0, "coll_check (blocking) failed")
    expect(all(t["completion"] == 0 for t in traces(d)), "tracking on without a CUDA driver")
    d = os.path.join(tmp, "off")
    p = run_ranks(2, [COLL_CHECK], d, env_extra={"LOCKSTEP_EMU_ASYNC": "1",
                                                  "LOCKSTEP_COMPLETION": "0"})
    expect(all(t["completion"] == 0 for t in traces(d)), "LOCKSTEP_COMPLETION=0 ignored")


def case_graph_capture(tmp):
    """A call issued into a stream being captured into a graph is marked, not tracked."""
    d = os.path.join(tmp, "t")
    p = run_ranks(2, [prog("capture")], d, env_extra={"LOCKSTEP_EMU_ASYNC": "1"})
    expect(p.returncode == 0, f"capture failed: {p.stderr}")
    for t in traces(d):
        ar = [r for r in t["records"] if r["op"] == "AllReduce"]
        expect(len(ar) == 2, f"{len(ar)} AllReduce records")
        expect(ar[0]["flags"] & 8 and ar[0]["complete_ns"] == 0,
               f"the captured call: flags {ar[0]['flags']}, complete {ar[0]['complete_ns']}")
        expect(not ar[1]["flags"] & 8 and ar[1]["complete_ns"] > 0,
               f"the call after the capture: {ar[1]}")


def header_live_signal(d):
    """live_signal (offset 1200) of the one trace in d."""
    (name,) = [f for f in os.listdir(d) if f.endswith(".trace")]
    with open(os.path.join(d, name), "rb") as f:
        return struct.unpack_from("<i", f.read(1204), 1200)[0]


def case_strict_knobs(tmp):
    """Every LOCKSTEP_* knob is parsed strictly (shim/config.c): a value it cannot take is said
    in exactly one line naming the variable, the value and the default, and the default is
    used; the words it takes are taken in silence."""
    sig_default = signal.SIGRTMAX - 3
    bad = [("LOCKSTEP_STACK_SIGNAL", "abc", str(sig_default)),
           ("LOCKSTEP_STACK_SIGNAL", "5", str(sig_default)),
           ("LOCKSTEP_COMPLETION", "maybe", "1"),
           ("LOCKSTEP_CLOCK", "fast", "tsc"),
           ("LOCKSTEP_DISABLE", "please", "0"),
           ("LOCKSTEP_BLIND_SECONDS", "soon", "5"),
           ("LOCKSTEP_HEARTBEAT_MS", "1e3", "10"),
           ("LOCKSTEP_PYTHON_DEPTH", "-1", "16"),
           ("LOCKSTEP_RING", "0x100", "32768")]
    for i, (name, value, default) in enumerate(bad):
        d = os.path.join(tmp, f"bad{i}")
        p = run_ranks(1, [COLL_CHECK], d, env_extra={name: value})
        expect(p.returncode == 0, f"{name}={value}: program failed: {p.stderr}")
        lines = lockstep_lines(p.stderr)
        expect(len(lines) == 1 and f"{name}={value} refused" in lines[0]
               and lines[0].endswith(f"using the default, {default}"),
               f"{name}={value}: want one line naming it and the default {default}: {lines}")
        expect(len(traces(d)) == 1, f"{name}={value}: no trace")  # DISABLE: the default records
        if name == "LOCKSTEP_STACK_SIGNAL":
            live_signal = header_live_signal(d)
            expect(live_signal == sig_default,
                   f"{name}={value}: live stacks on signal {live_signal}, want {sig_default}")
    good = {"LOCKSTEP_COMPLETION": "off", "LOCKSTEP_CLOCK": "realtime", "LOCKSTEP_DISABLE": "no",
            "LOCKSTEP_STACK_SIGNAL": "0", "LOCKSTEP_BLIND_SECONDS": "0"}
    d = os.path.join(tmp, "good")
    p = run_ranks(1, [COLL_CHECK], d, env_extra=good)
    expect(p.returncode == 0 and not lockstep_lines(p.stderr),
           f"accepted words complained about: {lockstep_lines(p.stderr)}")
    expect(header_live_signal(d) == 0, "LOCKSTEP_STACK_SIGNAL=0 did not turn live stacks off")


def case_no_test_knobs(tmp):
    """The knobs only tests use (LOCKSTEP_TEST_*) are in the test build of the shim alone: the
    shipped shim and plugin hold no such name."""
    for lib in (SHIM, PLUGIN):
        with open(lib, "rb") as f:
            data = f.read()
        expect(b"LOCKSTEP_" in data, f"{lib}: no knob names at all (not the shim?)")
        expect(b"LOCKSTEP_TEST_" not in data, f"{lib} holds a LOCKSTEP_TEST_ knob")
    with open(TEST_SHIM, "rb") as f:
        expect(b"LOCKSTEP_TEST_PY_SKEW" in f.read(), "the test shim lacks its test knobs")


def case_no_link_deps(tmp):
    """The shim resolves NCCL and CUDA at run time: it needs neither at link time."""
    p = subprocess.run(["readelf", "-d", SHIM], capture_output=True, text=True, timeout=30)
    expect(p.returncode == 0, f"readelf failed: {p.stderr}")
    needed = [l.split("[")[1].rstrip("]") for l in p.stdout.splitlines() if "(NEEDED)" in l]
    expect(needed, "no NEEDED entries read")
    bad = [n for n in needed if n.startswith(("libnccl", "libcuda", "libcudart"))]
    expect(not bad, f"the shim links against {bad}")


def case_retention(tmp):
    """Traces of processes gone longer than LOCKSTEP_RETAIN_HOURS are deleted when a new
    process starts recording; recent ones and live ones are kept."""
    d = os.path.join(tmp, "t")
    p = run_ranks(1, [COLL_CHECK], d)
    expect(p.returncode == 0, "coll_check failed")
    (old,) = [os.path.join(d, n) for n in os.listdir(d) if n.endswith(".trace")]
    recent = os.path.join(d, "lockstep-elsewhere-1-r9.trace")
    shutil.copy(old, recent)
    # Age the first trace by three days: start, heartbeat and end (header offsets 152, 840,
    # 888), as a process gone that long would have left them.
    with open(old, "r+b") as f:
        for off in (152, 840, 888):
            f.seek(off)
            ns = int.from_bytes(f.read(8), "little")
            if ns:
                f.seek(off)
                f.write((ns - 3 * 24 * 3600 * 10**9).to_bytes(8, "little"))
    p = run_ranks(1, [COLL_CHECK], d, env_extra={"LOCKSTEP_RETAIN_HOURS": "48"})
    expect(p.returncode == 0, "coll_check failed")
    names = os.listdir(d)
    expect(os.path.basename(old) not in names, f"a 3-day-old trace survived: {names}")
    expect(os.path.basename(recent) in names, "a recent trace was deleted")
    expect(len([n for n in names if n.endswith(".trace")]) == 2, f"traces now: {names}")
    p = run_ranks(1, [COLL_CHECK], d, env_extra={"LOCKSTEP_RETAIN_HOURS": "0"})
    expect(len([n for n in os.listdir(d) if n.endswith(".trace")]) == 3, "0 keeps everything")
    # A rank's mark from before NCCL (a process killed before its first call): by its age.
    marks = [os.path.join(d, f"lockstep-elsewhere-{k}-r3.trace.pending") for k in (7, 8)]
    for m in marks:
        with open(m, "w") as f:
            f.write("pid=7 start=1 rank=3 world=4 attempt=0 job=\n")
    os.utime(marks[0], (time.time() - 3 * 24 * 3600,) * 2)
    p = run_ranks(1, [COLL_CHECK], d, env_extra={"LOCKSTEP_RETAIN_HOURS": "48"})
    names = os.listdir(d)
    expect(os.path.basename(marks[0]) not in names and os.path.basename(marks[1]) in names,
           f"a 3-day-old mark kept, or a recent one deleted: {names}")


def pending_marks(d):
    return sorted(n for n in os.listdir(d) if n.endswith(".trace.pending")) if os.path.isdir(
        d) else []


def case_pending_mark(tmp):
    """A rank process marks itself in the trace folder from its start until its trace exists
    (include/lockstep/room.h): the mark names it; it goes when the trace is made and at an exit
    with status 0, and keeps the status of any other exit; a SIGKILL leaves it as it was. No
    mark without a launcher's rank, in a folder that does not exist, or with LOCKSTEP_DISABLE."""
    d = os.path.join(tmp, "t")
    os.makedirs(d, mode=0o700)
    base = dict(os.environ, LD_PRELOAD=SHIM, LOCKSTEP_DIR=d, LD_LIBRARY_PATH=EMU_DIR + ":" +
                os.environ.get("LD_LIBRARY_PATH", ""))
    for k in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
              "PMIX_RANK", "LOCKSTEP_DISABLE", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"):
        base.pop(k, None)
    rank = dict(base, RANK="5", WORLD_SIZE="8")

    def probe(env, *how):
        return subprocess.run([prog("pending_probe"), *how], env=env, capture_output=True,
                              text=True, timeout=30)

    # while it runs: its own mark, naming it
    p = probe(rank, "exit", "3")
    m = re.match(r"pid=(\d+) start=(\d+) rank=5 world=8 attempt=0 job=$", p.stdout.strip())
    expect(p.returncode == 3 and m, f"the mark while it runs: {p.stdout!r} {p.stderr!r}")
    pid = m.group(1)
    got = pending_marks(d)
    expect(len(got) == 1 and got[0].endswith(f"-{pid}-r5.trace.pending"), f"marks {got}")
    with open(os.path.join(d, got[0])) as f:
        kept = f.read()
    expect(kept.endswith("\nexited=3\n"), f"the mark after exit 3: {kept!r}")
    os.unlink(os.path.join(d, got[0]))
    p = probe(rank, "exit", "0")
    expect(p.returncode == 0 and "rank=5" in p.stdout and pending_marks(d) == [],
           f"a mark after exit 0, or none while it ran: {p.stdout!r} {pending_marks(d)}")
    p = probe(rank, "kill")
    got = pending_marks(d)
    expect(p.returncode == -9 and len(got) == 1, f"after SIGKILL: {p.returncode} {got}")
    with open(os.path.join(d, got[0])) as f:
        expect("exited=" not in f.read(), "a status for a process that had none")
    os.unlink(os.path.join(d, got[0]))
    for what, env in (("no rank", base), ("LOCKSTEP_DISABLE=1", dict(rank, LOCKSTEP_DISABLE="1"))):
        p = probe(env, "exit", "4")
        expect(p.stdout == "" and pending_marks(d) == [], f"{what}: a mark {pending_marks(d)}")
    missing = os.path.join(tmp, "never")
    p = probe(dict(rank, LOCKSTEP_DIR=missing), "exit", "4")
    expect(p.returncode == 4 and not os.path.exists(missing), "the folder was made for a mark")
    # ranks that reach NCCL, then crash (no exit of their own): their traces, no mark left
    p = run_ranks(2, [prog("crasher"), "segv"], d)
    expect(p.returncode == 128 + 11, f"crasher: launcher status {p.returncode}")
    expect(pending_marks(d) == [] and len(traces(d)) == 2,
           f"marks beside the traces: {os.listdir(d)}")


if __name__ == "__main__":
    sys.exit(run(globals(), "lockstep-test-"))
