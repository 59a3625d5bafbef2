#!/usr/bin/env python3
"""test_python.py -- Python call sites end to end: Python scripts call NCCL through ctypes
(libpyranks.so plays libtorch) as ranks on the CPU emulator under the real shim; the traces
(trace_query), `lockstep analyze --json` and `lockstep dump` must name the scripts' lines.

Expected lines are found in the scripts by their marker comments (`# @name`), never written
here as numbers. Usage: test_python.py CASE   (paths from the environment, see meson.build)
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import Failure, Skip, expect, run  # noqa: E402
from report_ranks import per_rank  # noqa: E402

SHIM = os.environ["LOCKSTEP_SHIM"]
TEST_SHIM = os.environ["LOCKSTEP_TEST_SHIM"]  # the shim built with the LOCKSTEP_TEST_* knobs
LAUNCH = os.environ["LAUNCH_RANKS"]
EMU_DIR = os.environ["EMULATOR_DIR"]
QUERY = os.environ["TRACE_QUERY"]
LOCKSTEP = os.environ["LOCKSTEP_BIN"]
PYRANKS = os.environ["PYRANKS_LIB"]
PY_EMBED = os.environ["PY_EMBED"]
HERE = os.path.dirname(os.path.abspath(__file__))

# The interpreter running this driver (meson's python3; pyenv's shim resolves to the real
# binary, so the ranks are that binary, not a wrapper script).
PYTHON = sys.executable
PY_VERSION = sys.version_info.major << 8 | sys.version_info.minor
PY_NONE, PY_ACTIVE, PY_DISABLED = 0, 1, 2  # header field `python`
END_EXITED = 1


# ---------------------------------------------------------------- helpers


def script(name):
    return os.path.join(HERE, name)


def marks(name):
    """{marker: line number} for the `# @marker` comments of a script."""
    out = {}
    with open(script(name)) as f:
        for n, line in enumerate(f, 1):
            for m in re.findall(r"#.*?@(\w+)", line):
                expect(m not in out, f"{name}: marker @{m} twice")
                out[m] = n
    return out


def need_python():
    """Skips unless this interpreter is CPython 3.9+ with ctypes."""
    if sys.implementation.name != "cpython" or sys.version_info < (3, 9):
        raise Skip(f"{sys.implementation.name} {sys.version.split()[0]}: not CPython 3.9+")
    p = subprocess.run([PYTHON, "-c", "import ctypes, threading"], capture_output=True,
                       text=True, timeout=60)
    if p.returncode != 0:
        raise Skip(f"{PYTHON} has no ctypes: {p.stderr.strip()}")


def rank_env(trace_dir, extra=None):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("LOCKSTEP_") and k not in ("LOCKSTEP_SHIM", "LOCKSTEP_BIN",
                                                   "LOCKSTEP_TEST_SHIM"):
            del env[k]
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP"):
        env.pop(k, None)
    env["LD_LIBRARY_PATH"] = EMU_DIR + ":" + env.get("LD_LIBRARY_PATH", "")
    env["LD_PRELOAD"] = SHIM
    env["LOCKSTEP_DIR"] = trace_dir
    env["PYRANKS_LIB"] = PYRANKS
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra or {})
    return env


def launch_cmd(np, argv, timeout):
    return [LAUNCH, "--np", str(np), "--timeout", str(timeout), "--"] + argv


def rank_status(stderr):
    """The launcher's last words per rank: {rank: 'exited 0' | 'killed by signal 11' | ...}."""
    return {int(m.group(1)): m.group(2)
            for m in re.finditer(r"^rank (\d+): (exited -?\d+|killed by signal \d+|timed out|"
                                 r"lost)$", stderr, re.M)}


def run_ranks(tmp, np, argv, env=None, timeout=30, sub="t"):
    """Runs argv as np ranks under the shim; returns (CompletedProcess, trace dir)."""
    d = os.path.join(tmp, sub)
    os.makedirs(d, exist_ok=True)
    p = subprocess.run(launch_cmd(np, argv, timeout), env=rank_env(d, env),
                       capture_output=True, text=True, timeout=timeout + 60)
    return p, d


def no_crash(p):
    """No rank died of a signal, no interpreter abort."""
    st = rank_status(p.stderr)
    expect(not any(v.startswith("killed") for v in st.values()), f"a rank crashed: {p.stderr}")
    for bad in ("Fatal Python error", "Segmentation fault", "Traceback", "AddressSanitizer"):
        expect(bad not in p.stderr, f"{bad!r} on stderr: {p.stderr}")


def expect_ok(p, np):
    no_crash(p)
    expect(p.returncode == 0, f"launcher exited {p.returncode}: {p.stdout} {p.stderr}")
    # Ranks share the pipe: one rank's "ok" and another's newline may interleave.
    expect(p.stdout.count("ok") == np, f"not every rank printed ok: {p.stdout!r}")


def lockstep_lines(text):
    return [l for l in text.splitlines() if l.startswith("lockstep:")]


def traces(d):
    p = subprocess.run([QUERY, d], capture_output=True, text=True, timeout=60)
    expect(p.returncode == 0, f"trace_query failed: {p.stderr}")
    ts = json.loads(p.stdout)
    for t in ts:
        expect("python" in t and "py_depth" in t, "trace_query prints no python header fields")
        for r in t["records"]:
            expect("python" in r, "trace_query prints no python key per record")
    return {t["rank"]: t for t in ts}


def analyzer_env():
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env["NO_COLOR"] = "1"
    return env


def analyze(d, want_rc=None):
    p = subprocess.run([LOCKSTEP, "analyze", "--json", d], capture_output=True, text=True,
                       timeout=60, env=analyzer_env())
    expect(p.returncode in ((0, 1) if want_rc is None else (want_rc,)),
           f"analyze --json exited {p.returncode}: {p.stderr}{p.stdout[:400]}")
    try:
        r = json.loads(p.stdout)
    except ValueError as e:
        raise Failure(f"analyze --json printed no JSON ({e}): {p.stdout[:400]!r}")
    expect(r["unreadable"] == [], f"unreadable traces: {r['unreadable']}")
    return r


def analyze_text(d):
    p = subprocess.run([LOCKSTEP, "analyze", d], capture_output=True, text=True, timeout=60,
                       env=analyzer_env())
    expect(p.returncode in (0, 1), f"analyze exited {p.returncode}: {p.stderr}")
    return p.stdout


def frames(rec_or_obj):
    """Python frames of a trace_query record ([[file, line, func]...]) or of a report object
    ([{file, line, func}...]) as a list of (file, line, func); None when there are none."""
    py = rec_or_obj.get("python")
    if py is None:
        return None
    return [tuple(f) if isinstance(f, list) else (f["file"], f["line"], f["func"]) for f in py]


def is_stdlib(path):
    std = sysconfig.get_paths()["stdlib"]
    return path.startswith(std + os.sep)


def hang(tmp, np, argv, seq, env=None):
    """Runs argv as np ranks until every rank is inside call #seq of some communicator, then
    analyzes the live job (JSON and text) and stops it. Returns (trace dir, report, text)."""
    d = os.path.join(tmp, "t")
    os.makedirs(d)
    launcher = subprocess.Popen(launch_cmd(np, argv, 40), env=rank_env(d, env),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 15
        while True:
            if len([f for f in os.listdir(d) if f.endswith(".trace")]) == np:
                stuck = [r for r, t in traces(d).items()
                         if any(x["in_flight"] and x["seq"] == seq for x in t["records"])]
                if len(stuck) == np:
                    break
            if launcher.poll() is not None:
                raise Failure(f"the job ended: {launcher.communicate()}")
            expect(time.time() < deadline, f"the ranks did not all reach call #{seq}")
            time.sleep(0.1)
        time.sleep(0.2)
        live = analyze(d, want_rc=1)
        text = analyze_text(d)
    finally:
        launcher.send_signal(signal.SIGTERM)  # forwarded to the ranks
        out, err = launcher.communicate(timeout=30)
    for bad in ("Fatal Python error", "Traceback", "Segmentation fault"):
        expect(bad not in err, f"{bad!r} on stderr: {err}")
    return d, live, text


# ---------------------------------------------------------------- cases


def case_two_lines(tmp):
    """An op mismatch between two lines of one script: the finding's classes name the lines,
    with the whole Python stack innermost first; live ranks' `current` carries it too."""
    need_python()
    m, path = marks("two_lines.py"), script("two_lines.py")
    k = 4
    d, live, text = hang(tmp, 3, [PYTHON, path], k + 1, {"TWO_LINES_K": str(k)})

    stack = [(path, m["step"], "step"), (path, m["train"], "train"), (path, m["main"], "main"),
             (path, m["module"], "<module>")]
    want = {"AllReduce": ([0, 2], [(path, m["allreduce"], "do_collective")] + stack),
            "Broadcast": ([1], [(path, m["bcast"], "do_collective")] + stack)}

    def callsite(line):
        return f"two_lines.py:{line} (do_collective)"

    for label, rep in (("live", live), ("after", analyze(d, want_rc=1))):
        mism = [f for f in rep["findings"] if f["kind"] == "op_mismatch"]
        expect(mism, f"{label}: no op_mismatch finding: {[f['kind'] for f in rep['findings']]}")
        f = mism[0]
        expect(f["seq"] == k + 1, f"{label}: mismatch at #{f['seq']}, want #{k + 1}")
        classes = {c["op"]: c for c in f["classes"]}
        expect(sorted(classes) == ["AllReduce", "Broadcast"],
               f"{label}: classes {[c['op'] for c in f['classes']]}")
        for op, (ranks, py) in want.items():
            c = classes[op]
            expect(c["ranks"] == ranks, f"{label}: {op} class ranks {c['ranks']}")
            expect("python" in c, f"{label}: {op} class has no `python` key")
            expect(c["callsite"] == callsite(py[0][1]),
                   f"{label}: {op} class callsite {c['callsite']!r}, want "
                   f"{callsite(py[0][1])!r}")
            expect(frames(c) == py, f"{label}: {op} class python {frames(c)}, want {py}")
        expect(callsite(m["allreduce"]) in f["summary"] and callsite(m["bcast"]) in f["summary"],
               f"{label}: summary does not name both lines: {f['summary']}")
        for r in per_rank(rep):
            op = "Broadcast" if r["rank"] == 1 else "AllReduce"
            calls = [("last_call", r["last_call"])]
            if label == "live":
                expect(r["state"] == "in_call" and r["current"] is not None,
                       f"live: rank {r['rank']} state {r['state']}")
                calls.append(("current", r["current"]))
            for key, call in calls:
                expect(call["op"] == op and "python" in call, f"{label}: rank {r['rank']} {key}")
                expect(call["callsite"] == callsite(want[op][1][0][1]),
                       f"{label}: rank {r['rank']} {key} callsite {call['callsite']!r}")
                expect(frames(call) == want[op][1],
                       f"{label}: rank {r['rank']} {key} python {frames(call)}")
    expect(callsite(m["allreduce"]) in text and callsite(m["bcast"]) in text,
           f"the text report does not name both lines:\n{text}")

    # The records before the mismatch carry the same stack; the init its own line.
    for rank, t in traces(d).items():
        expect(t["python"] == PY_ACTIVE and t["python_version"] == PY_VERSION,
               f"rank {rank}: header python {t['python']} version {t['python_version']:#x}")
        ar = [r for r in t["records"] if r["op"] == "AllReduce"]
        expect(len(ar) >= k, f"rank {rank}: {len(ar)} AllReduce records")
        for r in ar:
            expect(frames(r) == want["AllReduce"][1], f"rank {rank}: AllReduce #{r['seq']} "
                   f"python {frames(r)}")
        init = [r for r in t["records"] if r["op"] == "CommInitRank"]
        expect(len(init) == 1 and frames(init[0]) == [(path, m["init"], "main"),
                                                      (path, m["module"], "<module>")],
               f"rank {rank}: CommInitRank python {init and frames(init[0])}")


def case_user_frame(tmp):
    """`callsite` names the innermost *user* frame: past a function of an installed package
    (site-packages) and past the standard library (contextlib), while `python` keeps them."""
    need_python()
    m, path = marks("wrapped.py"), script("wrapped.py")
    v = sys.version_info
    site = os.path.join(tmp, "venv", "lib", f"python{v.major}.{v.minor}", "site-packages")
    os.makedirs(site)
    fake = os.path.join(site, "fakecomm.py")
    with open(fake, "w") as f:
        f.write("def all_reduce(lib, n):\n    return lib.pr_all_reduce(n)\n")
    d, live, text = hang(tmp, 2, [PYTHON, path, site], 2)
    for label, rep in (("live", live), ("after", analyze(d, want_rc=1))):
        mism = [f for f in rep["findings"] if f["kind"] == "op_mismatch"]
        expect(mism, f"{label}: no op_mismatch: {[f['kind'] for f in rep['findings']]}")
        classes = {c["op"]: c for c in mism[0]["classes"]}
        expect(sorted(classes) == ["AllReduce", "Broadcast"], f"{label}: classes {classes}")
        ar, bc = frames(classes["AllReduce"]), frames(classes["Broadcast"])
        expect(ar and ar[0] == (fake, 2, "all_reduce") and ar[1] == (path, m["via_package"],
                                                                      "via_package"),
               f"{label}: AllReduce python {ar}")
        expect(classes["AllReduce"]["callsite"] == f"wrapped.py:{m['via_package']} (via_package)",
               f"{label}: AllReduce callsite {classes['AllReduce']['callsite']!r}")
        expect(bc and is_stdlib(bc[0][0]) and bc[0][0].endswith("contextlib.py"),
               f"{label}: Broadcast python {bc}")
        user = [f for f in bc if f[0] == path]
        expect(user and user[0][2] == "via_stdlib"
               and m["via_stdlib"] <= user[0][1] <= m["via_stdlib"] + 1,
               f"{label}: Broadcast python has no via_stdlib frame: {bc}")
        want = f"wrapped.py:{user[0][1]} (via_stdlib)"
        expect(classes["Broadcast"]["callsite"] == want,
               f"{label}: Broadcast callsite {classes['Broadcast']['callsite']!r}, want {want!r}")


def case_threads(tmp):
    """Busy Python threads (loops, allocations, GC) next to one thread calling NCCL thousands
    of times: every record of that thread names its exact line; no crash; results right."""
    need_python()
    m, path = marks("busy_threads.py"), script("busy_threads.py")
    np, calls = 3, 1200
    p, d = run_ranks(tmp, np, [PYTHON, path, str(calls)], timeout=60,
                     env={"LOCKSTEP_RING": "8192"})
    expect_ok(p, np)
    expect(not lockstep_lines(p.stderr), f"the shim complained: {p.stderr}")
    ts = traces(d)
    expect(sorted(ts) == list(range(np)), f"traces of ranks {sorted(ts)}")
    for rank, t in ts.items():
        expect(t["python"] == PY_ACTIVE, f"rank {rank}: header python {t['python']}")
        expect(not t["wrapped"] and t["nbusy"] == 0, f"rank {rank}: ring wrapped or torn")
        recs = t["records"]
        work = [r for r in recs if (r["op"], r["count"]) in (("AllReduce", 4), ("Broadcast", 3))]
        expect(len(work) == calls, f"rank {rank}: {len(work)} worker records, want {calls}")
        tids = {r["tid"] for r in work}
        expect(len(tids) == 1, f"rank {rank}: worker records from {len(tids)} threads")
        for r in work:
            py = frames(r)
            line = m["w_bcast"] if r["op"] == "Broadcast" else m["w_allreduce"]
            expect(py and py[0] == (path, line, "nccl_worker"),
                   f"rank {rank}: {r['op']} #{r['seq']} python {py and py[:2]}, want "
                   f"line {line}")
            expect(len(py) >= 2 and all(is_stdlib(f[0]) and f[0].endswith("threading.py")
                                        for f in py[1:]) and py[1][2] == "Thread.run",
                   f"rank {rank}: outer frames of the worker {py}")
        # Every record of the worker's thread is one of its calls, with its line.
        expect(all(r in work for r in recs if r["tid"] in tids), f"rank {rank}: stray records")
        barriers = [r for r in recs if r["op"] == "AllReduce" and r["count"] == 1]
        expect([frames(r)[0][1] if frames(r) else None for r in barriers]
               == [m["main_barrier"], m["main_barrier_end"]],
               f"rank {rank}: barrier lines {[frames(r) for r in barriers]}")
        expect(all(r["tid"] not in tids for r in barriers), "barriers on the main thread")


def exit_case(tmp, mode, want_status):
    m, path = marks("exit_in_call.py"), script("exit_in_call.py")
    p, d = run_ranks(tmp, 2, [PYTHON, path, mode], timeout=20, sub=mode)
    no_crash(p)
    st = rank_status(p.stderr)
    expect(st.get(0) == f"exited {want_status}" and st.get(1) == "exited 0",
           f"{mode}: rank statuses {st}, want rank 0 'exited {want_status}': {p.stderr}")
    expect("main thread leaving" in p.stdout, f"{mode}: rank 0 never left: {p.stdout}")
    expect("returned" not in p.stderr, f"{mode}: the blocked call returned: {p.stderr}")
    t = traces(d)[0]
    expect(t["end_kind"] == END_EXITED and t["end_status"] == want_status,
           f"{mode}: rank 0 end {t['end_kind']}/{t['end_status']}, want exited {want_status}")
    blocked = [r for r in t["records"] if r["op"] == "AllReduce" and r["count"] == 4]
    expect(len(blocked) == 1 and blocked[0]["in_flight"],
           f"{mode}: the daemon's AllReduce {blocked}")
    py = frames(blocked[0])
    expect(py and py[:2] == [(path, m["daemon_call"], "hold"), (path, m["blocker"], "blocker")]
           and py[2][2] == "Thread.run", f"{mode}: python of the blocked call {py}")
    rep = analyze(d)
    r0 = [r for r in per_rank(rep) if r["rank"] == 0][0]
    expect(r0["state"] == "exited" and r0["exit_status"] == want_status,
           f"{mode}: report says rank 0 {r0['state']} {r0['exit_status']}")
    lc = r0["last_call"]
    expect(lc and lc["in_flight"] and lc["callsite"] == f"exit_in_call.py:{m['daemon_call']} "
           "(hold)", f"{mode}: rank 0 last_call {lc}")


def case_exit_in_call(tmp):
    """The main thread exits (sys.exit(7), then falling off the end) while a daemon thread is
    blocked in an AllReduce: the process exits with the script's status, the trace records
    the exit and the blocked call with its Python frames."""
    need_python()
    exit_case(tmp, "exit", 7)
    exit_case(tmp, "fall_off", 0)


def case_atexit(tmp):
    """NCCL in an atexit handler carries the handler's frame; NCCL in a __del__ run by module
    teardown (finalization started) carries none; status 5 kept; results right."""
    need_python()
    m, path = marks("exit_in_call.py"), script("exit_in_call.py")
    p, d = run_ranks(tmp, 2, [PYTHON, path, "atexit"], timeout=20)
    no_crash(p)
    st = rank_status(p.stderr)
    expect(st == {0: "exited 5", 1: "exited 5"}, f"rank statuses {st}: {p.stderr}")
    expect(p.stdout.count("atexit allreduce 0") == 2, f"atexit results: {p.stdout!r}")
    expect(p.stdout.count("teardown 0 0") == 2, f"teardown results: {p.stdout!r}")
    expect(not lockstep_lines(p.stderr), f"the shim complained: {p.stderr}")
    for rank, t in traces(d).items():
        expect(t["end_kind"] == END_EXITED and t["end_status"] == 5,
               f"rank {rank}: end {t['end_kind']}/{t['end_status']}")
        ar = [r for r in t["records"] if r["op"] == "AllReduce" and r["count"] == 4]
        expect(len(ar) == 1 and not ar[0]["in_flight"] and ar[0]["result"] == 0,
               f"rank {rank}: atexit AllReduce {ar}")
        py = frames(ar[0])
        expect(py and py[0] == (path, m["atexit_call"], "on_exit"),
               f"rank {rank}: python of the atexit call {py}")
        bar = [r for r in t["records"] if r["op"] == "AllReduce" and r["count"] == 1]
        expect(len(bar) == 2, f"rank {rank}: {len(bar)} barriers")
        expect(frames(bar[1]) is None, f"rank {rank}: a call during finalization has python "
               f"{frames(bar[1])}")
        des = [r for r in t["records"] if r["op"] == "CommDestroy"]
        expect(len(des) == 1 and frames(des[0]) is None and des[0]["site"],
               f"rank {rank}: CommDestroy during finalization {des}")


def case_layout_check(tmp):
    """A layout table that is off is refused, and the program runs to the end with right
    results, one 'lockstep:' line naming Python, header python = 2, no Python frames in the
    trace or the report, native call sites kept. LOCKSTEP_TEST_PY_SKEW=8 moves the frame's
    code pointer (the safe walk refuses it); =units:-16 moves where code units start, which
    every pointer check accepts and only the comparison with the interpreter's own traceback
    dump can tell (on 3.9-3.12, which export it). The knob is in the test build of the shim
    (liblockstep-test.so) only."""
    need_python()
    for skew in ("8", "units:-16"):
        if skew.startswith("units") and sys.version_info >= (3, 13):
            continue  # no _Py_DumpTraceback to compare with
        p, d = run_ranks(tmp, 1, [PYTHON, script("deep.py"), "3", "50"],
                         env={"LOCKSTEP_TEST_PY_SKEW": skew, "LD_PRELOAD": TEST_SHIM},
                         sub=skew.replace(":", "_"))
        expect_ok(p, 1)
        lines = lockstep_lines(p.stderr)
        expect(len(lines) == 1 and "Python" in lines[0],
               f"skew {skew}: want one 'lockstep:' line naming Python, got {lines}")
        t = traces(d)[0]
        expect(t["python"] == PY_DISABLED,
               f"skew {skew}: header python {t['python']}, want 2 (disabled)")
        expect(t["python_version"] in (PY_VERSION, 0), f"python_version {t['python_version']:#x}")
        ar = [r for r in t["records"] if r["op"] == "AllReduce"]
        expect(len(ar) == 50, f"skew {skew}: {len(ar)} AllReduce records")
        expect(all(frames(r) is None for r in t["records"]),
               f"skew {skew}: python frames recorded: "
               f"{[frames(r) for r in t['records'] if frames(r)][:1]}")
        expect(all("pr_all_reduce" in r["site"] for r in ar), f"native site {ar[0]['site']}")
        rep = analyze(d, want_rc=0)
        lc = per_rank(rep)[0]["last_call"]
        expect(lc["python"] is None and ".py:" not in lc["callsite"],
               f"skew {skew}: report last_call {lc}")


def case_live_storm(tmp):
    """The live-stack handler reads Python frames wherever the signal lands, halfway through a
    frame push included: 2,000 signals into a process churning frames never crash it, and
    every text it leaves names only this script's functions, well formed. The script churns
    until the storm is over, and every fourth signal waits (10 s at most) for its capture to be
    whole before it is read, so the count does not depend on how fast the machine is."""
    need_python()
    import struct
    d = os.path.join(tmp, "t")
    os.makedirs(d)
    path = script("live_storm.py")
    stop = os.path.join(tmp, "stop")
    # The in-process sampler is an opt-in (lockstep run --signal-stacks sets this).
    env = rank_env(d, {"RANK": "0", "WORLD_SIZE": "1",
                       "LOCKSTEP_STACK_SIGNAL": str(signal.SIGRTMAX - 3)})
    # stderr to a file: nobody reads a pipe during the storm, and a crash report may be long
    errf = open(os.path.join(tmp, "stderr"), "w+")
    p = subprocess.Popen([PYTHON, path, "600", stop], env=env, stdout=subprocess.PIPE,
                         stderr=errf, text=True)
    signals = 2000
    try:
        expect(p.stdout.readline().strip() == "ready", "the script did not start")
        (trace,) = [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".trace")]
        fd = os.open(trace, os.O_RDONLY)

        def live():
            hdr = os.pread(fd, 4096, 0)
            return (struct.unpack_from("<Q", hdr, 920)[0],
                    hdr[2800:3056].split(b"\0", 1)[0].decode("ascii", "replace"))

        sig = struct.unpack_from("<i", os.pread(fd, 4096, 0), 1200)[0]
        expect(sig > 0, "no live-stack signal in the header")
        seen, texts, waited = 0, set(), 0
        ok_frame = re.compile(r"^live_storm\.py:\d+ \((gen|recurse|churn|main|<module>|"
                              r"recurse\.<locals>\.<listcomp>)\)$")
        for i in range(signals):
            if p.poll() is not None:
                errf.seek(0)
                expect(False, f"the script ended ({p.returncode}) after {i} signals: "
                       f"{errf.read()[-3000:]}")
            before = live()[0]
            os.kill(p.pid, sig)
            if i % 4:
                continue  # a burst: the next signal may land inside this one's handler
            # Signals of one real-time number queue: this one's capture follows the earlier ones.
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                seq, text = live()
                if seq != before and seq % 2 == 0:
                    break
                time.sleep(0.0002)
            else:
                waited += 1
                continue
            if text:
                seen += 1
                texts.add(text)
        os.close(fd)
        with open(stop, "w"):
            pass
        out, _ = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
        errf.seek(0)
        err = errf.read()
        errf.close()
    expect(p.returncode == 0 and "ok" in out, f"exited {p.returncode}: {out} {err[-2000:]}")
    expect(waited == 0, f"{waited} of {signals // 4} captures never became whole in 10 s")
    expect(seen > 100, f"only {seen} live texts read of {signals // 4} captures waited for")
    bad = [t for t in texts
           if not all(ok_frame.match(f) or (f == "..." and k > 0)
                      for k, f in enumerate(t.split(" <- ")))]
    expect(not bad, f"{len(bad)} malformed live texts, e.g. {bad[:3]}")
    expect(any("(recurse) <- live_storm.py:" in t for t in texts), f"texts {list(texts)[:5]}")
    print(f"{seen} live Python stacks read under a storm of {signals} signals, {len(texts)} "
          "distinct, all well formed")


def case_stacks_storm(tmp):
    """The same churning program read from outside (`lockstep stacks`: ptrace for a moment,
    process_vm_readv for its Python frames) over and over: reads race the interpreter's frame
    pushes, and still every text names only this script's functions with their lines, the
    program never notices, and the Python frames are seen."""
    need_python()
    d = os.path.join(tmp, "t")
    os.makedirs(d)
    path = script("live_storm.py")
    env = rank_env(d, {"RANK": "0", "WORLD_SIZE": "1"})
    p = subprocess.Popen([PYTHON, path, "8"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    # A frame at an instruction without a location has no line ("live_storm.py (gen)").
    ok_frame = re.compile(r"^live_storm\.py(:\d+)? \((gen|recurse|churn|main|<module>|"
                          r"recurse\.<locals>\.<listcomp>)\)$")
    texts, reads = set(), 0
    try:
        expect(p.stdout.readline().strip() == "ready", "the script did not start")
        # At least 4 s of reads, and at least 4 reads: on a loaded machine one read can take
        # over a second (the script churns for 8 s, so it is still there to be read).
        deadline = time.time() + 4
        while (time.time() < deadline or reads < 4) and p.poll() is None:
            r = subprocess.run([LOCKSTEP, "stacks", "--json", d], env=analyzer_env(),
                               capture_output=True, text=True, timeout=30)
            expect(r.returncode == 0, f"lockstep stacks exited {r.returncode}: {r.stderr}")
            for rank in json.loads(r.stdout)["ranks"]:
                for t in rank["threads"]:
                    if t["python"]:
                        texts.add(t["python"])
            reads += 1
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    expect(p.returncode == 0 and "ok" in out, f"exited {p.returncode}: {out} {err[-2000:]}")
    expect(reads >= 4 and texts, f"{reads} reads, {len(texts)} Python texts")
    bad = [t for t in texts
           if not all(ok_frame.match(f) or (f == "..." and k > 0)
                      for k, f in enumerate(t.split(" <- ")))]
    expect(not bad, f"{len(bad)} malformed texts of {len(texts)}, e.g. {bad[:3]}")
    # A read that races a call sees the frames it catches mid-call at an instruction without a
    # location (no line); how many reads race depends on how busy the machine is (87 of 97
    # frames had a line in one sanitized run, where 0.9 was asked). Lines that do not
    # work give none at all: most frames of the whole and of each text must have one.
    frames = [f for t in texts for f in t.split(" <- ") if f != "..."]
    lined = [f for f in frames if re.match(r"^live_storm\.py:\d+ ", f)]
    expect(len(lined) >= 0.75 * len(frames), f"only {len(lined)} of {len(frames)} frames have a "
           f"line: {texts}")
    unlined = [t for t in texts if 2 * sum(1 for f in t.split(" <- ") if f != "..." and
                                          not re.match(r"^live_storm\.py:\d+ ", f)) >
               len([f for f in t.split(" <- ") if f != "..."])]
    expect(not unlined, f"{len(unlined)} texts with more frames without a line than with one: "
           f"{unlined[:3]}")
    print(f"{reads} reads from outside, {len(texts)} distinct Python stacks, all well formed")


def case_fork(tmp):
    """os.fork() of a traced Python process: the child gets a trace of its own, with Python
    frames of its own lines; the parent's trace keeps its lines; neither sees the other's."""
    need_python()
    m, path = marks("fork_child.py"), script("fork_child.py")
    p, d = run_ranks(tmp, 1, [PYTHON, path])
    expect_ok(p, 1)
    expect(not lockstep_lines(p.stderr), f"the shim complained: {p.stderr}")
    q = subprocess.run([QUERY, d], capture_output=True, text=True, timeout=60)
    ts = json.loads(q.stdout)
    expect(len(ts) == 2, f"{len(ts)} traces, want the parent's and the child's")
    by_pid = {t["pid"]: t for t in ts}
    child = [t for t in ts if t["ppid"] in by_pid]
    expect(len(child) == 1, "no trace names the other as its parent")
    child = child[0]
    parent = by_pid[child["ppid"]]
    for t, want in ((parent, [(5, m["shared"]), (5, m["shared"]), (7, m["parent_after"])]),
                    (child, [(5, m["shared"]), (6, m["child_call"])])):
        expect(t["python"] == PY_ACTIVE, f"pid {t['pid']}: header python {t['python']}")
        got = [(r["count"], frames(r)[0][1]) for r in t["records"]
               if r["op"] == "AllReduce" and frames(r)]
        expect(got == want, f"pid {t['pid']}: AllReduce (count, line) {got}, want {want}")


def case_knobs(tmp):
    """LOCKSTEP_PYTHON_DEPTH: default 16 frames, 2, 64 (the whole stack), 0 (none, native
    sites kept); LOCKSTEP_STACK_DEPTH=0 turns Python frames off too."""
    need_python()
    m, path = marks("deep.py"), script("deep.py")
    depth = 20  # descend() frames below main: 1 + 20 + 1 + 1 + 1 = 24 Python frames in all
    full = ([(path, m["loop"], "work"), (path, m["work"], "descend")]
            + [(path, m["descend"], "descend")] * depth
            + [(path, m["main"], "main"), (path, m["module"], "<module>")])

    def one(label, env):
        p, d = run_ranks(tmp, 1, [PYTHON, path, str(depth), "20"], env=env, sub=label)
        expect_ok(p, 1)
        expect(not lockstep_lines(p.stderr), f"{label}: the shim complained: {p.stderr}")
        t = traces(d)[0]
        ar = [r for r in t["records"] if r["op"] == "AllReduce"]
        expect(len(ar) == 20, f"{label}: {len(ar)} AllReduce records")
        return t, ar

    t, ar = one("default", {})
    expect(t["python"] == PY_ACTIVE and t["py_depth"] == 16, f"default: header python "
           f"{t['python']} depth {t['py_depth']}")
    expect(all(frames(r) == full[:16] for r in ar), f"default: python {frames(ar[0])}")

    t, ar = one("depth2", {"LOCKSTEP_PYTHON_DEPTH": "2"})
    expect(t["py_depth"] == 2, f"depth 2: header py_depth {t['py_depth']}")
    expect(all(frames(r) == full[:2] for r in ar), f"depth 2: python {frames(ar[0])}")
    expect(all(frames(r) is None or len(frames(r)) <= 2 for r in t["records"]),
           "depth 2: a stack of more than 2 frames")

    t, ar = one("depth64", {"LOCKSTEP_PYTHON_DEPTH": "64"})
    expect(all(frames(r) == full for r in ar), f"depth 64: python {frames(ar[0])}")

    t, ar = one("depth0", {"LOCKSTEP_PYTHON_DEPTH": "0"})
    expect(t["python"] != PY_ACTIVE and t["py_depth"] == 0 and t["pysite_count"] == 0,
           f"depth 0: header python {t['python']} depth {t['py_depth']}")
    expect(all(frames(r) is None for r in t["records"]), "depth 0: python frames recorded")
    expect(all("pr_all_reduce" in r["site"] for r in ar), f"depth 0: native site {ar[0]['site']}")
    rep = analyze(os.path.join(tmp, "depth0"), want_rc=0)
    lc = per_rank(rep)[0]["last_call"]
    expect(lc["python"] is None and "deep.py" not in lc["callsite"]
           and "pr_destroy" in lc["callsite"], f"depth 0: report last_call {lc}")

    t, ar = one("stack0", {"LOCKSTEP_STACK_DEPTH": "0"})
    expect(all(frames(r) is None and not r["site"] for r in t["records"]),
           f"LOCKSTEP_STACK_DEPTH=0: sites {ar[0]['site']} python {frames(ar[0])}")


def libpython():
    """The shared libpython of this interpreter, or Skip."""
    name, libdir = sysconfig.get_config_var("LDLIBRARY"), sysconfig.get_config_var("LIBDIR")
    path = os.path.join(libdir or "", name or "")
    if not name or not name.endswith(".so") and ".so." not in name or not os.path.exists(path):
        raise Skip(f"no shared libpython ({path})")
    return path


def case_not_initialized(tmp):
    """A program that loads libpython (RTLD_GLOBAL) but never initializes it: no crash, no
    warning, no Python frames; native call sites as usual."""
    need_python()
    p, d = run_ranks(tmp, 2, [PY_EMBED, libpython(), "noinit"])
    expect_ok(p, 2)
    expect(not lockstep_lines(p.stderr), f"the shim complained: {p.stderr}")
    for rank, t in traces(d).items():
        expect(t["python"] != PY_DISABLED, f"rank {rank}: header python {t['python']}")
        expect(all(frames(r) is None for r in t["records"]), f"rank {rank}: python frames")
        ar = [r for r in t["records"] if r["op"] == "AllReduce"]
        expect(len(ar) == 2 and all("py_embed_allreduce" in r["site"] for r in ar),
               f"rank {rank}: AllReduce sites {[r['site'][:2] for r in ar]}")


def case_finalized(tmp):
    """NCCL before Py_Initialize (no frames), from Python code run by PyRun_SimpleString
    (its frames), after Py_FinalizeEx (no frames): no crash, no warning."""
    need_python()
    p, d = run_ranks(tmp, 2, [PY_EMBED, libpython(), "finalized"])
    expect_ok(p, 2)
    expect(not lockstep_lines(p.stderr), f"the shim complained: {p.stderr}")
    for rank, t in traces(d).items():
        ar = {r["count"]: r for r in t["records"] if r["op"] == "AllReduce"}
        expect(sorted(ar) == [4, 5, 6], f"rank {rank}: AllReduce counts {sorted(ar)}")
        expect(frames(ar[4]) is None, f"rank {rank}: before Py_Initialize: {frames(ar[4])}")
        expect(frames(ar[5]) == [("<string>", 3, "f"), ("<string>", 4, "<module>")],
               f"rank {rank}: from embedded Python: {frames(ar[5])}")
        expect(frames(ar[6]) is None, f"rank {rank}: after Py_FinalizeEx: {frames(ar[6])}")


def case_live_prepare_data(tmp):
    """`lockstep run` on a stalled Python job: rank 0 is busy in a Python loop, not in NCCL.
    Its live stack (taken from a signal handler, frames read with checked reads) names the
    loop's line in prepare_data, then main's call of it; the finding says so."""
    need_python()
    m, path = marks("prepare_data.py"), script("prepare_data.py")
    d = os.path.join(tmp, "t")
    out = os.path.join(tmp, "report.json")
    env = rank_env(d)
    env.pop("LD_PRELOAD")  # lockstep run preloads the shim itself
    env.pop("LOCKSTEP_DIR")
    p = subprocess.run([LOCKSTEP, "run", "--stall", "2", "--dir", d, "--json", out, "--"] +
                       launch_cmd(2, [PYTHON, path], 60), env=env, capture_output=True,
                       text=True, timeout=120)
    expect(p.returncode == 3, f"lockstep run exited {p.returncode}: {p.stdout} {p.stderr}")
    rep = json.load(open(out))
    r0 = [r for r in per_rank(rep) if r["rank"] == 0][0]
    live = r0.get("live") or {}
    # Busy or not depends on getting a CPU during the 300 ms sample on a loaded machine: the
    # frames are what this test is about.
    expect(live.get("activity") in ("busy", "sleeping"), f"rank 0 live {live}")
    py = live.get("python") or ""
    got = [f.rsplit(" (", 1) for f in py.split(" <- ")]
    base = os.path.basename(path)
    loop = range(m["loop_first"], m["loop_last"] + 1)
    expect(len(got) >= 3 and got[0][1] == "prepare_data)" and got[0][0].startswith(base + ":")
           and int(got[0][0].split(":")[1]) in loop,
           f"rank 0's live Python frames {py!r}, want {base}:{loop.start}..{loop.stop - 1} "
           "(prepare_data) first")
    expect(got[1] == [f"{base}:{m['call_prepare']}", "main)"] and
           got[2] == [f"{base}:{m['module']}", "<module>)"], f"outer frames {py!r}")
    expect(live.get("where") == py, f"where {live.get('where')!r} is not the Python stack")
    r1 = [r for r in per_rank(rep) if r["rank"] == 1][0]
    expect((r1.get("live") or {}).get("python", "").startswith(f"{base}:{m['second']} (main)"),
           f"rank 1's live Python frames {r1.get('live')}")
    f0 = rep["findings"][0]
    expect(f0["kind"] == "missing_ranks" and "prepare_data" in f0["summary"],
           f"first finding {f0['kind']}: {f0['summary']}")


def html_class_rows(path):
    """The cells of the rows of the HTML report's finding class tables: [[ranks, role, call,
    from, state], ...]."""
    import html as html_mod
    page = open(path).read()
    rows = []
    for table in re.findall(r"<table><tr><th>ranks</th><th>role</th>.*?</table>", page, re.S):
        for row in re.findall(r"<tr><td.*?</tr>", table, re.S):
            rows.append([html_mod.unescape(re.sub(r"<[^>]+>", "", c))
                         for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)])
    return rows


def case_live_user_frame_first(tmp):
    """A Python rank blocked outside NCCL inside the standard library (threading.Event.wait)
    is named by the user's own frame first, the library frames after it, in every finding that
    says where a rank is (stuck_outside_nccl when all wait; missing_ranks when one does), in
    the text, the JSON and the HTML (whose 'from' and 'state' cells are filled); the raw Python
    frames (live.python) stay innermost first, unmarked. Live stacks read by the analyzer
    (process_vm_readv) and, where ptrace is refused, by the shim's signal handler."""
    need_python()
    m, path = marks("event_wait.py"), script("event_wait.py")
    user = f"event_wait.py:{m['wait']} (wait_for_peer) [in threading.py:"
    setpriv = shutil.which("setpriv")
    ways = [("ptrace", ())]
    if setpriv and os.geteuid() == 0:
        ways.append(("signal", (setpriv, "--bounding-set", "-sys_ptrace", "--inh-caps",
                                "-sys_ptrace")))
    for way, wrap in ways:
        for mode, kind in (("all", "stuck_outside_nccl"), ("one", "missing_ranks")):
            label = f"{way}-{mode}"
            d = os.path.join(tmp, "t-" + label)
            out, page = os.path.join(tmp, label + ".json"), os.path.join(tmp, label + ".html")
            env = rank_env(d)
            env.pop("LD_PRELOAD")
            env.pop("LOCKSTEP_DIR")
            args = ["--signal-stacks"] if way == "signal" else []
            p = subprocess.run([*wrap, LOCKSTEP, "run", *args, "--stall", "2", "--stall-long", "4",
                                "--dir", d, "--json", out, "--format", f"html={page}", "--"] +
                               launch_cmd(2, [PYTHON, path, mode], 60), env=env,
                               capture_output=True, text=True, timeout=120)
            expect(p.returncode == 3, f"{label}: lockstep run exited {p.returncode}: "
                                      f"{p.stdout} {p.stderr}")
            rep = json.load(open(out))
            f0 = rep["findings"][0]
            expect(f0["kind"] == kind, f"{label}: first finding {f0['kind']}: {f0['summary']}")
            expect(user in f0["summary"], f"{label}: the finding does not name {user!r} "
                                          f"first:\n{f0['summary']}")
            expect(user in p.stdout, f"{label}: the text report lacks {user!r}:\n{p.stdout}")
            r0 = [r for r in per_rank(rep) if r["rank"] == 0][0]
            live = r0.get("live") or {}
            # The shim's own reading of the frames (signalled for them, or at the job's stop:
            # the header's live-stack slot, as case_live_storm reads it): library ones marked.
            headers = [open(os.path.join(d, n), "rb").read(3056)[2800:].split(b"\0", 1)[0]
                       for n in os.listdir(d) if n.endswith(".trace")]
            expect(headers and all(b"*threading.py:" in h
                                   for h in headers if b"wait_for_peer" in h) and
                   any(b"wait_for_peer" in h for h in headers),
                   f"{label}: the shim's own Python frames in the headers: {headers}")
            # Post mortem, from what the run kept: the same words.
            again = analyze(d)["findings"][0]
            expect(again["kind"] == kind and user in again["summary"],
                   f"{label}: lockstep analyze afterwards: {again['kind']}: {again['summary']}")
            expect(live.get("where", "").startswith(user),
                   f"{label}: rank 0's live where {live.get('where')!r}")
            py = live.get("python", "")
            expect(py.startswith("threading.py:") and "*" not in py and
                   f"event_wait.py:{m['wait']} (wait_for_peer)" in py,
                   f"{label}: rank 0's raw Python frames {py!r}")
            if kind == "stuck_outside_nccl":
                cls = f0["classes"][0]
                expect(cls["where"].startswith(user), f"{label}: class where {cls['where']!r}")
                rows = html_class_rows(page)
                expect(rows and rows[0][3].startswith(user) and
                       rows[0][4].startswith("blocked in "),
                       f"{label}: the HTML class row's from and state cells: {rows}")


def case_dedup(tmp):
    """10,000 calls from one line are one Python stack, named once, not 10,000."""
    need_python()
    m, path = marks("deep.py"), script("deep.py")
    n = 10000
    p, d = run_ranks(tmp, 1, [PYTHON, path, "5", str(n)])
    expect_ok(p, 1)
    t = traces(d)[0]
    ar = [r for r in t["records"] if r["op"] == "AllReduce"]
    expect(len(ar) == n, f"{len(ar)} AllReduce records")
    stacks = {tuple(frames(r) or ()) for r in ar}
    expect(len(stacks) == 1, f"{len(stacks)} different Python stacks for one line")
    (stack,) = stacks
    expect(stack[:2] == ((path, m["loop"], "work"), (path, m["work"], "descend")),
           f"python {stack[:2]}")
    expect(len({r["callsite"] for r in ar}) == 1, "one call site id for the loop's calls")
    everyone = {tuple(frames(r)) for r in t["records"] if frames(r)}
    expect(t["pysite_count"] == len(everyone) and len(everyone) <= 4,
           f"{t['pysite_count']} python stacks recorded for {len(everyone)} distinct ones")
    expect(t["site_count"] <= 8, f"{t['site_count']} call sites")
    trace = os.path.join(d, [f for f in os.listdir(d) if f.endswith(".trace")][0])
    p = subprocess.run([LOCKSTEP, "dump", trace], capture_output=True, text=True, timeout=60,
                       env=analyzer_env())
    expect(p.returncode == 0, f"lockstep dump failed: {p.stderr}")
    site = f"deep.py:{m['loop']} (work)"
    heads = [l for l in p.stdout.splitlines() if re.match(r"\s*#\d+ ", l) and site in l]
    expect(len(heads) == 1 and f"({n} calls)" in heads[0],
           f"dump: call sites naming {site}: {heads}")
    expect(p.stdout.count(site) < 10, f"dump names {site} {p.stdout.count(site)} times")


if __name__ == "__main__":
    sys.exit(run(globals(), "lockstep-python-"))
