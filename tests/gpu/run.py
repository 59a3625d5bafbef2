#!/usr/bin/env python3
"""run.py -- lockstep on a real GPU with real NCCL, PyTorch and Lightning (scripts/test-gpu).

Runs the stories of stories.py and lightning_stories.py with 4 ranks under `lockstep run`,
checks each diagnosis (the rank, the call, the Python line), checks the shim against NCCL's own
log of the calls it received, GPU completion, the profiler plugin, CuPy and ctypes, and
measures the shim's overhead. Raw outputs go to --out. Ends with `N passed, N failed`.

Usage: run.py --build DIR [--out DIR] [--only NAME,...] [--skip-overhead]
DIR is a meson build folder (analyzer/lockstep, shim/liblockstep.so,
shim/libnccl-profiler-lockstep.so, tests/shim/trace_query)."""
import argparse
import collections
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from report_ranks import per_rank  # noqa: E402
PY = sys.executable
RESULTS = []


class Failure(Exception):
    pass


def expect(cond, msg):
    if not cond:
        raise Failure(msg)


def marks(name):
    out = {}
    with open(os.path.join(HERE, name)) as f:
        for n, line in enumerate(f, 1):
            for m in re.findall(r"#.*?@(\w+)", line):
                out[m] = n
    return out


class Env:
    def __init__(self, a):
        b = os.path.abspath(a.build)
        self.lockstep = os.path.join(b, "analyzer", "lockstep")
        self.shim = os.path.join(b, "shim", "liblockstep.so")
        self.plugin = os.path.join(b, "shim", "libnccl-profiler-lockstep.so")
        self.trace_query = os.path.join(b, "tests", "shim", "trace_query")
        for p in (self.lockstep, self.shim, self.plugin, self.trace_query):
            if not os.path.exists(p):
                sys.exit(f"run.py: {p} is missing: build lockstep first (scripts/test-gpu does)")
        self.out = os.path.abspath(a.out)
        os.makedirs(self.out, exist_ok=True)
        self.tmp = tempfile.mkdtemp(prefix="lockstep-gpu-")
        self.stderr = {}

    def base_env(self, **extra):
        e = dict(os.environ)
        e.pop("LD_PRELOAD", None)
        e.update(LOCKSTEP_SHIM=self.shim, PYTHONUNBUFFERED="1", NCCL_SOCKET_IFNAME="lo",
                 NCCL_IB_DISABLE="1", STORY_BUSY_S="600")
        e.update({k: str(v) for k, v in extra.items()})
        return e


def torchrun(script, story, nproc=4):
    return [PY, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
            os.path.join(HERE, script), story]


def save(env, name, text):
    with open(os.path.join(env.out, name), "w") as f:
        f.write(text)


def tagged(name):
    """Pids of the processes of case `name` (their environment holds LOCKSTEP_GPU_CASE=name):
    cases run side by side, so a case kills only its own."""
    want, pids = f"LOCKSTEP_GPU_CASE={name}".encode() + b"\0", []
    for p in os.listdir("/proc"):
        if p.isdigit() and int(p) != os.getpid():
            try:
                with open(f"/proc/{p}/environ", "rb") as f:
                    if want in f.read():
                        pids.append(int(p))
            except OSError:
                pass
    return pids


def kill_tagged(name):
    for pid in tagged(name):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def lockstep_run(env, name, argv, stall, extra=None, timeout=300, while_running=None):
    """`lockstep run` of argv; returns (rc, text, report, trace dir). `while_running(d,
    seconds)` is called about every 2 s while the job runs. A run past `timeout` has the
    ranks' stacks taken (NAME.stacks.txt), is killed and fails the case."""
    d = os.path.join(env.tmp, name)
    out = os.path.join(env.out, name + ".json")
    timeout = min(timeout, float(os.environ.get("LOCKSTEP_GPU_MAX_CASE_S", "0")) or timeout)
    cmd = [env.lockstep, "run", "--stall", str(stall), "--grace", "10", "--dir", d, "--json",
           out, "--"] + argv
    t = time.monotonic()
    # Files, not pipes: processes a killed run leaves behind cannot hold the harness up.
    with open(os.path.join(env.tmp, name + ".out"), "w+") as fo, \
            open(os.path.join(env.tmp, name + ".err"), "w+") as fe:
        p = subprocess.Popen(cmd, env=env.base_env(LOCKSTEP_GPU_CASE=name, **(extra or {})),
                             stdout=fo, stderr=fe, text=True, start_new_session=True)
        late = False
        while True:
            left = t + timeout - time.monotonic()
            try:
                p.wait(timeout=max(0, min(left, 2) if while_running else left))
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() - t < timeout:
                    while_running(d, time.monotonic() - t)
                    continue
            s = subprocess.run([env.lockstep, "stacks", d], capture_output=True, text=True,
                               timeout=120)
            save(env, name + ".stacks.txt", s.stdout + s.stderr)
            kill_job(p, name)
            late = True
            break
        fo.seek(0)
        fe.seek(0)
        stdout, stderr = fo.read(), fe.read()
    took = time.monotonic() - t
    text = f"$ {' '.join(cmd)}\n# exit {p.returncode} after {took:.1f} s\n{stdout}\n" \
           f"--- stderr (last 300 lines)\n" + "\n".join(stderr.splitlines()[-300:])
    save(env, name + ".txt", text)
    env.stderr[name] = stdout + stderr  # NCCL_DEBUG prints to stdout
    expect(not late, f"still running after {timeout} s: stacks in {name}.stacks.txt")
    rep = json.load(open(out)) if os.path.exists(out) else None
    return p.returncode, stdout, rep, d


def kill_job(p, name):
    """Kills `p`'s process group and every process of case `name` left behind."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    kill_tagged(name)
    p.wait()


def analyze(env, d, name):
    p = subprocess.run([env.lockstep, "analyze", d], capture_output=True, text=True,
                       timeout=120)
    q = subprocess.run([env.lockstep, "analyze", "--json", d], capture_output=True, text=True,
                       timeout=120)
    save(env, name + ".analyze.txt", p.stdout + p.stderr)
    save(env, name + ".analyze.json", q.stdout)
    expect(q.stdout.strip(), f"analyze --json printed nothing: {q.stderr[:300]}")
    return json.loads(q.stdout)


def records(env, d):
    p = subprocess.run([env.trace_query] + sorted(glob.glob(os.path.join(d, "*.trace"))),
                       capture_output=True, text=True, timeout=120)
    expect(p.returncode == 0, f"trace_query: {p.stderr[:300]}")
    return json.loads(p.stdout)


def save_streams(env, d, name):
    """Each trace's stream table and communicators as the shim left them (NAME.streams.json):
    which stream's last event GPU completion tracking saw complete, and which it did not."""
    try:
        ts = records(env, d)
    except Exception as e:  # evidence only: never the case's verdict
        save(env, name + ".streams.json", json.dumps({"error": str(e)}) + "\n")
        return []
    keep = [{k: t.get(k) for k in ("rank", "pid", "completion", "header_flags", "streams",
                                   "comms", "next_ticket")} for t in ts]
    save(env, name + ".streams.json", json.dumps(keep, indent=1) + "\n")
    return ts


def rank_of(rep, r):
    for x in per_rank(rep):
        if x.get("rank") == r:
            return x
    raise Failure(f"rank {r} not in the report")


def first_root(rep):
    expect(rep and rep.get("findings"), f"no findings: {json.dumps(rep)[:300]}")
    return rep["findings"][0]


def py_line(obj):
    """`file.py:LINE` of a class/call's callsite, or ''."""
    return (obj.get("callsite") or "").split(" ")[0]


def class_of(f, ranks):
    for c in f.get("classes") or []:
        if sorted(c["ranks"]) == sorted(ranks):
            return c
    raise Failure(f"no class of ranks {ranks} in {f['kind']}: "
                  f"{[(c['ranks'], c.get('callsite')) for c in f.get('classes') or []]}")


# ---- the stories ------------------------------------------------------------------------


def expect_in_prepare_loop(py, script):
    """The innermost of Python frames `py` ("file.py:LINE (func) <- ...") is in prepare_data's
    busy loop of `script`; returns that frame."""
    m = marks(script)
    top = py.split(" <- ")[0]
    base = os.path.basename(script)
    loop = range(m["prep_loop"], m["prep_body"] + 1)
    expect(top.startswith(base + ":") and "prepare_data" in top and
           int(top.split(":")[1].split(" ")[0]) in loop,
           f"rank 0's Python frames {py!r}, want {base}:{loop.start}..{loop.stop - 1} first")
    return top


def story_prepare_data(env):
    rc, text, rep, d = lockstep_run(env, "prepare_data", torchrun("stories.py", "prepare_data"),
                                    stall=15)
    expect(rc == 3, f"lockstep run exited {rc}, want 3 (a stall diagnosed)")
    f = first_root(rep)
    expect(f["kind"] == "missing_ranks" and f.get("missing") == [0],
           f"first finding {f['kind']} missing={f.get('missing')}: {f['summary']}")
    expect(sorted(f.get("waiting") or []) == [1, 2, 3], f"waiting {f.get('waiting')}")
    expect("prepare_data" in f["summary"], f"summary does not name prepare_data: {f['summary']}")
    expect_in_prepare_loop((rank_of(rep, 0).get("live") or {}).get("python") or "", "stories.py")
    for r in (1, 2, 3):
        x = rank_of(rep, r)
        expect(x["state"] == "in_call", f"rank {r} is {x['state']}, want in_call")
    return f["summary"]


def story_lightning_prepare_data(env):
    """Lightning 2.x waits after prepare_data in a Gloo barrier (_InfiniteBarrier), so no rank
    is in NCCL: a wait, not an NCCL stall. `lockstep run --stall 15` must leave the job alone
    through 45 s of prepare_data (it then trains and ends by itself), and `lockstep stacks`,
    while it waits, names rank 0's line in prepare_data and the other ranks' barrier. (On the
    first GPU run, a GPU stream that missed its last completion made `run` stop it with "no
    problems found"; docs/gpu-validation.md.)"""
    name, seen = "lightning_prepare_data", {}

    def look(d, seconds):  # the ranks' Python frames once rank 0 is in prepare_data
        if seen or seconds < 25:
            return
        r = subprocess.run([env.lockstep, "stacks", "--json", d], capture_output=True,
                           text=True, timeout=120)
        try:
            ranks = {x.get("rank"): x for x in json.loads(r.stdout)["ranks"]}
        except (ValueError, KeyError):
            return
        py = {k: " | ".join(t["python"] or "" for t in v.get("threads", []))
              for k, v in ranks.items()}
        if sorted(py) == [0, 1, 2, 3] and "prepare_data" in py[0]:
            seen.update(py)
            save(env, name + ".stacks.json", r.stdout)

    rc, text, rep, d = lockstep_run(env, name, torchrun("lightning_stories.py", "prepare_data"),
                                    stall=15, extra={"STORY_BUSY_S": 45}, timeout=300,
                                    while_running=look)
    save_streams(env, d, name)
    expect(seen, "lockstep stacks never showed rank 0 in prepare_data")
    top = expect_in_prepare_loop(seen[0], "lightning_stories.py")
    expect(all("_InfiniteBarrier" in seen[r] or "barrier" in seen[r] for r in (1, 2, 3)),
           f"ranks 1-3 not in Lightning's barrier: {[seen[r][:200] for r in (1, 2, 3)]}")
    expect(rc == 0, f"lockstep run exited {rc}: want 0, the job left to finish (a wait in a "
           "Gloo barrier is not an NCCL stall)")
    return f"rank 0: {top}; ranks 1-3: {seen[1].split(' <- ')[0]}; the job ended by itself"


def check_mismatch(rep, rc, kinds, lone, lone_line, others_line):
    expect(rc == 3, f"lockstep run exited {rc}, want 3")
    f = first_root(rep)
    expect(f["kind"] in kinds, f"first finding {f['kind']}, want one of {kinds}: {f['summary']}")
    rest = [r for r in range(4) if r != lone]
    c1, c2 = class_of(f, [lone]), class_of(f, rest)
    if lone_line:
        expect(py_line(c1) == lone_line, f"rank {lone}'s class from {c1.get('callsite')!r}, "
               f"want {lone_line}")
    expect(py_line(c2) == others_line, f"ranks {rest} from {c2.get('callsite')!r}, want "
           f"{others_line}")
    return f["summary"]


def story_uneven_val(env):
    m = marks("stories.py")
    rc, text, rep, d = lockstep_run(env, "uneven_val", torchrun("stories.py", "uneven_val"),
                                    stall=15)
    return check_mismatch(rep, rc, ("count_mismatch",), 3, f"stories.py:{m['val_end']}",
                          f"stories.py:{m['val_batch']}")


def story_lightning_uneven_val(env):
    rc, text, rep, d = lockstep_run(env, "lightning_uneven_val",
                                    torchrun("lightning_stories.py", "uneven_val"), stall=15,
                                    timeout=400)
    expect(rc == 3, f"lockstep run exited {rc}, want 3")
    f = first_root(rep)
    m = marks("lightning_stories.py")
    expect(f["kind"].endswith("_mismatch") and 3 in f["ranks"],
           f"first finding {f['kind']}: {f['summary']}")
    c = class_of(f, [0, 1, 2])
    expect(py_line(c) == f"lightning_stories.py:{m['val_log']}",
           f"ranks 0-2 from {c.get('callsite')!r}, want lightning_stories.py:{m['val_log']}")
    return f["summary"]


def story_init_paths(env):
    """Rank 2 skips the broadcast: its AllGather meets the others' Broadcast. NCCL's socket
    transport notices ("message truncated": ncclInvalidUsage on rank 2), and PyTorch's watchdog
    may end rank 2 (SIGABRT) before `run` sees a stall (the second GPU run) or not (the
    first). Either way the mismatch is the one root cause, the error follows from it."""
    m = marks("stories.py")
    rc, text, rep, d = lockstep_run(env, "init_paths", torchrun("stories.py", "init_paths"),
                                    stall=15)
    expect(rc != 0, f"lockstep run exited {rc}: the job should not have ended well")
    f = first_root(rep)
    s = check_mismatch(rep, 3, ("op_mismatch",), 2, f"stories.py:{m['ddp_init']}",
                       f"stories.py:{m['resume_bcast']}")
    expect(class_of(f, [0, 1, 3])["op"] == "Broadcast", "ranks 0,1,3 do not broadcast")
    roots = [x for x in rep["findings"] if x.get("consequence_of") is None]
    expect(len(roots) == 1, f"{len(roots)} root causes: {[x['summary'] for x in roots]}")
    return f"exit {rc}; {s}; then " + "; ".join(x["kind"] for x in rep["findings"][1:])


def story_resume(env):
    m = marks("stories.py")
    rc, text, rep, d = lockstep_run(env, "resume", torchrun("stories.py", "resume"), stall=15)
    return check_mismatch(rep, rc, ("count_mismatch",), 1, None, f"stories.py:{m['epoch_end']}")


def story_sigkill(env):
    rc, text, rep, d = lockstep_run(env, "sigkill", torchrun("stories.py", "sigkill"), stall=60)
    expect(rc not in (0, 3), f"lockstep run exited {rc}: the job should have failed by itself")
    for r in (rep, analyze(env, d, "sigkill")):
        f = first_root(r)
        expect(f["kind"] == "rank_crashed" and f.get("rank") == 2 and f.get("vanished"),
               f"first finding {f['kind']} rank {f.get('rank')}: {f['summary']}")
        for x in (0, 1, 3):
            expect(rank_of(r, x).get("stopped_with_job"), f"rank {x} not stopped_with_job")
    return f["summary"]


def story_watchdog(env):
    """As prepare_data with PyTorch's NCCL timeout at 20 s: its watchdog times the barrier out
    (its log says so); whether it then ends the job or not (on the first GPU run it dumped its
    flight recorder and the job went on hanging, with or without lockstep), the report must
    name rank 0 in prepare_data as the one root cause. `lockstep run --stall 45` stops what the
    watchdog leaves."""
    extra = {"STORY_TIMEOUT_S": 20, "TORCH_CPP_LOG_LEVEL": "INFO", "NCCL_DEBUG": "WARN"}
    rc, text, rep, d = lockstep_run(env, "watchdog", torchrun("stories.py", "watchdog"),
                                    stall=45, extra=extra, timeout=150)
    expect(rc != 0, f"lockstep run exited {rc}: the job should not have ended well")
    timed_out = "Watchdog caught collective operation timeout" in env.stderr["watchdog"]
    r = analyze(env, d, "watchdog")
    f = first_root(r)
    expect(f["kind"] == "missing_ranks" and f.get("missing") == [0],
           f"first finding {f['kind']} missing={f.get('missing')}: {f['summary']}")
    expect("prepare_data" in f["summary"], f"summary does not name prepare_data: {f['summary']}")
    roots = [x for x in r["findings"] if x.get("consequence_of") is None]
    expect(len(roots) == 1, f"{len(roots)} root causes: {[x['summary'] for x in roots]}")
    return (f"PyTorch's watchdog {'timed out' if timed_out else 'did not time out'}; "
            f"{'lockstep stopped the job' if rc == 3 else f'the job ended with {rc}'}; "
            f"{f['summary']}; then {[x['kind'] for x in r['findings'][1:]]}")


def stuck_seq(traces, rank, line):
    """The sequence number and comm of rank `rank`'s last AllReduce, the stuck one; where the
    trace has Python frames (the shim's, not the plugin's alone), it must be stories.py:`line`."""
    for t in traces:
        if t["rank"] != rank:
            continue
        ar = sorted((r for r in t["records"] if r["op"] == "AllReduce"), key=lambda r: r["seq"])
        expect(ar, f"rank {rank} recorded no AllReduce")
        r, py = ar[-1], ar[-1].get("python") or []
        expect(not py or any(f[0].endswith("/stories.py") and f[1] == line for f in py),
               f"rank {rank}'s last AllReduce is from {py}, want stories.py:{line}")
        return r["seq"], r["comm"]
    raise Failure(f"no trace of rank {rank}")


def check_gpu_stuck(env, rep, d, name):
    """A collective stuck on the GPU: stuck_in_flight at the all_reduce behind rank 1's spin,
    with the GPU-side evidence (rank 1's kernel for it never started where the plugin says)."""
    m = marks("stories.py")
    f = first_root(rep)
    ts = save_streams(env, d, name)
    seq, comm = stuck_seq(ts, 0, m["stuck_call"])
    expect(f["kind"] == "stuck_in_flight", f"first finding {f['kind']}: {f['summary']}")
    expect(f["seq"] == seq and f["comm"] == comm,
           f"stuck at {f['comm']} #{f['seq']}, want {comm} #{seq} (stories.py:{m['stuck_call']})")
    expect(sorted(f["ranks"]) == [0, 1, 2, 3], f"ranks {f['ranks']}")
    g = {x["rank"]: x for x in f.get("gpu_progress") or []}
    evidence = "; ".join(f"rank {r}: started {x.get('channels_started')} unfinished "
                         f"{x.get('channels_unfinished')} transfer {x.get('transfer')}"
                         for r, x in sorted(g.items()))
    expect(g, f"no gpu_progress (the profiler plugin's view): {f['summary']}")
    expect(not (g.get(1) or {}).get("channels_started"),
           f"rank 1's kernel for #{seq} started on its GPU, behind a spinning kernel: {evidence}")
    return f"{f['summary']} | {evidence}"


def story_gpu_stuck(env):
    rc, text, rep, d = lockstep_run(env, "gpu_stuck", torchrun("stories.py", "gpu_stuck"),
                                    stall=15)
    expect(rc == 3, f"lockstep run exited {rc}, want 3 (a stall diagnosed)")
    return check_gpu_stuck(env, rep, d, "gpu_stuck")


def plugin_alone(env, story, stall=15, timeout=180):
    """`story` with lockstep's NCCL profiler plugin alone (no LD_PRELOAD), watched by `lockstep
    watch --kill`: returns (watch's exit, its JSON report, the trace folder)."""
    name = "plugin_" + story
    d = os.path.join(env.tmp, name)
    os.makedirs(d)
    out = os.path.join(env.out, name + ".json")
    e = env.base_env(NCCL_PROFILER_PLUGIN=env.plugin, LOCKSTEP_DIR=d, LOCKSTEP_GPU_CASE=name)
    t = time.monotonic()
    with open(os.path.join(env.tmp, name + ".job"), "w+") as fj, \
            open(os.path.join(env.tmp, name + ".watch"), "w+") as fw:
        w = subprocess.Popen([env.lockstep, "watch", "--stall", str(stall), "--kill", "--grace",
                              "10", "--json", out, d], stdout=fw, stderr=subprocess.STDOUT,
                             text=True, env=env.base_env())
        j = subprocess.Popen(torchrun("stories.py", story), env=e, stdout=fj,
                             stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            w.wait(timeout=30)
        except subprocess.TimeoutExpired:  # still watching after 30 s: what the traces say now
            save_streams(env, d, name + ".at30s")
            a = subprocess.run([env.lockstep, "analyze", d], capture_output=True, text=True,
                               timeout=120)
            save(env, name + ".at30s.analyze.txt", a.stdout + a.stderr)
            try:
                w.wait(timeout=max(1, timeout - 30))
            except subprocess.TimeoutExpired:
                w.kill()
                w.wait()
        try:
            j.wait(timeout=60)
        except subprocess.TimeoutExpired:
            kill_job(j, name)
        kill_tagged(name)
        fj.seek(0)
        fw.seek(0)
        save(env, name + ".txt", f"# watch exit {w.returncode}, job exit {j.returncode} after "
             f"{time.monotonic() - t:.1f} s\n{fw.read()}\n--- the job (last 200 lines)\n" +
             "\n".join(fj.read().splitlines()[-200:]))
    rep = json.load(open(out)) if os.path.exists(out) and os.path.getsize(out) else None
    expect(w.returncode == 3, f"lockstep watch exited {w.returncode}, want 3 ({name}.txt)")
    return rep, d


def story_plugin_prepare_data(env):
    rep, d = plugin_alone(env, "prepare_data")
    f = first_root(rep)
    expect(f["kind"] == "missing_ranks" and f.get("missing") == [0],
           f"first finding {f['kind']} missing={f.get('missing')}: {f['summary']}")
    return f["summary"]


def story_plugin_uneven_val(env):
    rep, d = plugin_alone(env, "uneven_val")
    f = first_root(rep)
    expect(f["kind"] == "count_mismatch" and 3 in f["ranks"],
           f"first finding {f['kind']}: {f['summary']}")
    return f["summary"]


def story_plugin_gpu_stuck(env):
    rep, d = plugin_alone(env, "gpu_stuck")
    return check_gpu_stuck(env, rep, d, "plugin_gpu_stuck")


# ---- the shim against real NCCL -----------------------------------------------------------

NCCL_COLL = re.compile(r"NCCL INFO (AllReduce|Broadcast|Reduce|AllGather|ReduceScatter"
                       r"|AlltoAll|Gather|Scatter): opCount \w+ sendbuff \w+ recvbuff \w+ "
                       r"count (\d+)")


def story_recorded_once(env):
    """Every collective NCCL logs (NCCL_DEBUG_SUBSYS=COLL) is recorded once, with its op and
    count; the one send and receive of the script (NCCL logs no p2p there) once each; every
    call completed on the GPU."""
    rc, text, rep, d = lockstep_run(env, "clean", torchrun("stories.py", "clean"), stall=60,
                                    extra={"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "COLL"})
    expect(rc == 0, f"lockstep run exited {rc}")
    save(env, "clean.nccl.txt", env.stderr["clean"])
    traces = [t for t in records(env, d) if t["rank"] >= 0]
    expect(len(traces) == 4, f"{len(traces)} traces, want 4")
    # NCCL's lines carry the pid: "host:PID:TID [dev] NCCL INFO ..."
    nccl = collections.defaultdict(collections.Counter)
    for line in env.stderr["clean"].splitlines():
        mm = NCCL_COLL.search(line)
        if mm:
            pid = int(line.split(":")[1])
            nccl[pid][(mm.group(1), int(mm.group(2)))] += 1
    expect(nccl, "NCCL logged no collective (NCCL_DEBUG_SUBSYS=COLL)")
    lines = []
    for t in traces:
        ours = collections.Counter()
        incomplete = 0
        for rec in t["records"]:
            if rec["op"] in ("AllReduce", "Broadcast", "Bcast", "Reduce", "AllGather",
                             "ReduceScatter", "Send", "Recv", "AlltoAll", "Gather", "Scatter"):
                op = "Broadcast" if rec["op"] == "Bcast" else rec["op"]
                ours[(op, rec["count"])] += 1
                if t.get("completion") and not rec["complete_ns"]:
                    incomplete += 1
        theirs = collections.Counter(nccl.get(t["pid"]) or {})
        expect(theirs, f"NCCL logged nothing for pid {t['pid']}")
        p2p = {0: {("Send", 4): 1}, 1: {("Recv", 4): 1}}.get(t["rank"], {})
        theirs.update(p2p)
        expect(ours == theirs, f"rank {t['rank']}: recorded {dict(ours)}, NCCL logged "
               f"{dict(theirs)}")
        expect(t.get("completion"), f"rank {t['rank']}: GPU completion not tracked")
        expect(incomplete == 0, f"rank {t['rank']}: {incomplete} calls never completed on the GPU")
        lines.append(f"rank {t['rank']}: {sum(ours.values())} calls, "
                     + ", ".join(f"{k[0]}x{v}" for k, v in sorted(ours.items())))
    return "; ".join(lines)


def story_plugin(env):
    """The profiler plugin alone (no LD_PRELOAD) on real NCCL: the trace has the job's calls."""
    d = os.path.join(env.tmp, "plugin")
    os.makedirs(d)
    e = env.base_env(NCCL_PROFILER_PLUGIN=env.plugin, LOCKSTEP_DIR=d, NCCL_DEBUG="INFO",
                     NCCL_DEBUG_SUBSYS="INIT,ENV")
    p = subprocess.run(torchrun("stories.py", "clean"), env=e, capture_output=True, text=True,
                       timeout=300)
    save(env, "plugin.txt", p.stdout + "\n--- stderr\n" + p.stderr[-20000:])
    expect(p.returncode == 0, f"the job exited {p.returncode}")
    traces = [t for t in records(env, d) if t["rank"] >= 0]
    expect(len(traces) == 4, f"{len(traces)} traces from the plugin, want 4")
    n = [sum(1 for r in t["records"] if r["op"] == "AllReduce") for t in traces]
    expect(all(x > 0 for x in n), f"AllReduce records per trace: {n}")
    return f"AllReduce records per rank: {n}"


def story_reach(env, mode):
    d = os.path.join(env.tmp, "reach-" + mode)
    os.makedirs(d)
    e = env.base_env(LD_PRELOAD=env.shim, LOCKSTEP_DIR=d)
    p = subprocess.run([PY, os.path.join(HERE, "reach_gpu.py"), mode, "7", "1024"], env=e,
                       capture_output=True, text=True, timeout=300)
    save(env, f"reach_{mode}.txt", p.stdout + "\n--- stderr\n" + p.stderr[-20000:])
    expect(p.returncode == 0, f"reach_gpu.py {mode} exited {p.returncode}: {p.stderr[-400:]}")
    traces = records(env, d)
    ar = [r for t in traces for r in t["records"] if r["op"] == "AllReduce"]
    expect(len(ar) == 7 and all(r["count"] == 1024 for r in ar),
           f"{len(ar)} AllReduce records (want 7 of count 1024)")
    return p.stdout.strip()


def story_links(env):
    import torch
    tl = os.path.join(os.path.dirname(torch.__file__), "lib")
    out = []
    for lib in sorted(glob.glob(os.path.join(tl, "*.so*"))):
        p = subprocess.run(["readelf", "-d", lib], capture_output=True, text=True)
        need = re.findall(r"\[(libnccl[^\]]*)\]", p.stdout)
        rpath = re.findall(r"R(?:UN)?PATH\).*\[(.*)\]", p.stdout)
        if need:
            out.append(f"{os.path.basename(lib)} NEEDED {need} RPATH {rpath}")
    for pat in ("jax_plugins/*/*.so", "jaxlib/*.so", "cupy_backends/cuda/libs/*nccl*.so",
                "cupy/cuda/*nccl*.so"):
        for lib in glob.glob(os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), pat)):
            p = subprocess.run(["readelf", "-dW", lib], capture_output=True, text=True)
            s = subprocess.run(["sh", "-c", f"strings -a {lib} | grep -m3 -i 'libnccl'"],
                               capture_output=True, text=True)
            need = re.findall(r"\[(libnccl[^\]]*)\]", p.stdout)
            out.append(f"{lib.split('site-packages/')[-1]} NEEDED {need or 'none'} "
                       f"strings {s.stdout.split()[:3]}")
    save(env, "links.txt", "\n".join(out) + "\n")
    expect(any("libtorch_cuda" in x for x in out), "libtorch_cuda.so does not name libnccl")
    return f"{len(out)} libraries looked at (links.txt)"


def overhead_variants(env):
    """off: no shim; on: the shim as LD_PRELOAD users run it; then where its cost goes, one
    thing off at a time: GPU completion tracking, call sites (native and Python), everything
    (LOCKSTEP_DISABLE: the library loaded, each call forwarded); and on_plugin: the shim with
    the profiler plugin, as `lockstep run` runs a job; plugin_alone: the plugin alone."""
    return {"off": (None, {}), "on": (env.shim, {}),
            "on_no_completion": (env.shim, {"LOCKSTEP_COMPLETION": "0"}),
            "on_no_sites": (env.shim, {"LOCKSTEP_STACK_DEPTH": "0", "LOCKSTEP_PYTHON_DEPTH": "0"}),
            "on_disabled": (env.shim, {"LOCKSTEP_DISABLE": "1"}),
            "on_plugin": (env.shim, {"NCCL_PROFILER_PLUGIN": env.plugin}),
            "plugin_alone": (None, {"NCCL_PROFILER_PLUGIN": env.plugin})}


def overhead_run(env, argv, tag, preload, knobs, extra=None):
    d = os.path.join(env.tmp, "ovh-" + tag)
    os.makedirs(d)
    e = env.base_env(LOCKSTEP_DIR=d, **knobs, **(extra or {}))
    if preload:
        e["LD_PRELOAD"] = preload
    p = subprocess.run(argv, env=e, capture_output=True, text=True, timeout=300)
    shutil.rmtree(d)
    expect(p.returncode == 0, f"overhead {tag}: {p.stderr[-400:]}")
    return [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]


def story_overhead(env):
    """small and large (one process, one rank) in every variant, off and on 3 times and the
    others twice, alternating; torch.profiler's view of the large call off and on; the DDP step
    (torchrun, 2 ranks) off and on twice. Medians (the lower one of two) in overhead.json."""
    variants = overhead_variants(env)
    pick = os.environ.get("LOCKSTEP_GPU_OVERHEAD_VARIANTS")
    if pick:
        variants = {k: v for k, v in variants.items() if k in pick.split(",")}
    full = os.environ.get("LOCKSTEP_GPU_OVERHEAD_FULL", "1") == "1"
    one = [PY, os.path.join(HERE, "overhead.py"), "one"]
    got = collections.defaultdict(lambda: collections.defaultdict(list))
    profiles = {}
    for rep in range(3):
        for which, (pre, knobs) in variants.items():
            if rep == 2 and which not in ("off", "on") and full:
                continue
            if env.past_deadline():
                break
            prof = {"OVH_PROFILE": "1"} if full and rep == 0 and \
                which in ("off", "on", "on_plugin") else {}
            for j in overhead_run(env, one, f"{which}-{rep}", pre, knobs, prof):
                if j["mode"] == "profile":
                    profiles[which] = j
                else:
                    got[j["mode"]][which].append(j)
    step = [PY, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
            os.path.join(HERE, "overhead.py"), "step"]
    for rep in range(2 if full else 0):
        for which in ("off", "on"):
            if not env.past_deadline():
                pre, knobs = variants[which]
                for j in overhead_run(env, step, f"step-{which}-{rep}", pre, knobs):
                    got["step"][which].append(j)
    rows = {}
    for mode, by in got.items():
        med = {}
        for which, runs in by.items():
            runs = sorted(runs, key=lambda j: j["per_call_us"])
            med[which] = runs[(len(runs) - 1) // 2]
        off = med.get("off", {}).get("per_call_us")
        rows[mode] = {"runs": by, "median": med,
                      "ratio": {k: round(v["per_call_us"] / off, 4) for k, v in med.items()
                                if off and k != "off"}}
    save(env, "overhead.json", json.dumps({"rows": rows, "profiles": profiles}, indent=1) + "\n")
    expect("large" in rows and "on" in rows["large"]["median"], "no large-call figure")
    return "; ".join(f"{k}: off {v['median'].get('off', {}).get('per_call_us')} us, " +
                     ", ".join(f"{w} {r}x" for w, r in v["ratio"].items())
                     for k, v in rows.items())


# Cases run side by side (--jobs), each with its own processes (LOCKSTEP_GPU_CASE); the
# overhead runs last and alone, since its figures are timings.
CASES = [
    ("links", story_links),
    ("lightning_prepare_data", story_lightning_prepare_data),
    ("watchdog", story_watchdog),
    ("lightning_uneven_val", story_lightning_uneven_val),
    ("gpu_stuck", story_gpu_stuck),
    ("recorded_once", story_recorded_once),
    ("plugin_gpu_stuck", story_plugin_gpu_stuck),
    ("prepare_data", story_prepare_data),
    ("uneven_val", story_uneven_val),
    ("plugin_prepare_data", story_plugin_prepare_data),
    ("plugin_uneven_val", story_plugin_uneven_val),
    ("plugin", story_plugin),
    ("init_paths", story_init_paths),
    ("resume", story_resume),
    ("sigkill", story_sigkill),
    ("reach_cupy", lambda e: story_reach(e, "cupy")),
    ("reach_ctypes", lambda e: story_reach(e, "ctypes")),
    ("overhead", story_overhead),
]


def versions():
    import torch
    out = [f"python {sys.version.split()[0]}", f"torch {torch.__version__} (CUDA "
           f"{torch.version.cuda}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))})"]
    try:
        import lightning
        out.append(f"lightning {lightning.__version__}")
    except ImportError:
        out.append("lightning: not installed")
    import ctypes
    for lib in sorted(set(glob.glob("/usr/lib*/**/libnccl.so*", recursive=True) +
                          glob.glob(os.path.join(os.path.dirname(os.path.dirname(
                              torch.__file__)), "nvidia/nccl*/lib/libnccl.so*")))):
        try:
            n = ctypes.c_int()
            ctypes.CDLL(lib, mode=os.RTLD_LOCAL).ncclGetVersion(ctypes.byref(n))
            out.append(f"libnccl {lib}: {n.value}")
        except (OSError, AttributeError) as e:
            out.append(f"libnccl {lib}: {e}")
    p = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                        "--format=csv,noheader"], capture_output=True, text=True)
    out.append("gpu " + p.stdout.strip())
    return out


def run_case(env, name, fn):
    t = time.monotonic()
    try:
        ok, msg = True, fn(env)
    except Failure as e:
        ok, msg = False, str(e)
    except Exception as e:  # a broken case is a failed case, with its reason
        ok, msg = False, f"{type(e).__name__}: {e}"
    line = f"{'PASS' if ok else 'FAIL'} gpu-{name} ({time.monotonic() - t:.0f} s): {msg}"
    print(line, flush=True)
    return ok, line


def main():
    import concurrent.futures
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", default="gpu-results")
    ap.add_argument("--only", default="")
    ap.add_argument("--skip-overhead", action="store_true")
    ap.add_argument("--jobs", type=int, default=1, help="cases run side by side")
    ap.add_argument("--deadline", type=float, default=0,
                    help="seconds: cases not started by then are not run (counted as failed)")
    a = ap.parse_args()
    env = Env(a)
    t0 = time.monotonic()
    env.past_deadline = lambda: bool(a.deadline) and time.monotonic() - t0 > a.deadline
    v = versions()
    print("\n".join(v), flush=True)
    save(env, "versions.txt", "\n".join(v) + "\n")
    only = set(filter(None, a.only.split(",")))
    todo = [(n, f) for n, f in CASES if (not only or n in only) and
            not (a.skip_overhead and n == "overhead")]
    results = {}

    def one(nf):
        if env.past_deadline():
            line = f"FAIL gpu-{nf[0]} (0 s): not run: past the --deadline of {a.deadline:.0f} s"
            print(line, flush=True)
            return nf[0], (False, line)
        return nf[0], run_case(env, *nf)

    side = [c for c in todo if c[0] != "overhead"]
    with concurrent.futures.ThreadPoolExecutor(max(1, a.jobs)) as pool:
        for name, r in pool.map(one, side):
            results[name] = r
    for c in todo:
        if c[0] == "overhead":
            results["overhead"] = one(c)[1]
    lines = [results[n][1] for n, _ in todo]
    passed = sum(1 for n, _ in todo if results[n][0])
    failed = len(todo) - passed
    save(env, "summary.txt", "\n".join(v + lines) + f"\n{passed} passed, {failed} failed\n")
    shutil.rmtree(env.tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    sys.exit(main())
