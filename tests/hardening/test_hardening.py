#!/usr/bin/env python3
"""test_hardening.py -- lockstep against bad input, faults and hostile files: damaged traces
through the reader and the CLI, and real NCCL programs on the CPU emulator under the real shim
with a full /dev/shm, a file-size limit, planted symlinks and foreign files, 64 threads on a
wrapping ring, SIGKILL storms, fork/exec/posix_spawn, their own SIGSEGV handler, no NCCL call
at all, and ncclCommAbort from another thread. Every case prints its figures in one line
("figures: ...") that docs/reliability.md quotes.

Usage: test_hardening.py CASE   (paths come from the environment meson sets, see meson.build)
Knobs: HARDENING_KILLS (SIGKILLs in sigkill_storm, default 100), HARDENING_SEED.
"""
import json
import os
import random
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import Skip, expect, run  # noqa: E402

SHIM = os.environ["LOCKSTEP_SHIM"]
LAUNCH = os.environ["LAUNCH_RANKS"]
EMU_DIR = os.environ["EMULATOR_DIR"]
QUERY = os.environ["TRACE_QUERY"]
LOCKSTEP = os.environ["LOCKSTEP_BIN"]
SCENARIOS = os.environ["SCENARIOS"]
COLL_CHECK = os.environ["COLL_CHECK"]
EMU_BLOCK = os.environ["EMU_BLOCK"]
FAULTS = os.environ["FAULT_PROGRAMS"]
SWEEP = os.environ["CORRUPT_SWEEP"]

END_RUNNING, END_EXITED, END_SIGNALED = 0, 1, 2
COMM_ABORTED = 16
OTHER_UID = 12345  # a user that is not us, for foreign-owned files (needs root to chown)


def figures(text):
    print("figures: " + text)


def shim_env(trace_dir, extra=None):
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = EMU_DIR + ":" + env.get("LD_LIBRARY_PATH", "")
    env["LD_PRELOAD"] = SHIM
    if trace_dir is None:
        env.pop("LOCKSTEP_DIR", None)
    else:
        env["LOCKSTEP_DIR"] = trace_dir
    for k in ("LOCKSTEP_RING", "LOCKSTEP_DISABLE", "LOCKSTEP_STACK_DEPTH", "RANK", "WORLD_SIZE"):
        env.pop(k, None)
    env.update(extra or {})
    return env


def plain_env():
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = EMU_DIR + ":" + env.get("LD_LIBRARY_PATH", "")
    env.pop("LD_PRELOAD", None)
    return env


def launch(np, argv, env, timeout_s=None, wall=120, prefix=(), preexec=None, stuck_s=None):
    """The launcher's run of argv as np ranks; stuck_s: it stops them once they waited that
    long in NCCL without progress (else at timeout_s)."""
    cmd = list(prefix) + [LAUNCH, "--np", str(np)]
    if timeout_s:
        cmd += ["--timeout", str(timeout_s)]
    if stuck_s:
        cmd += ["--stop-when-stuck", str(stuck_s)]
    return subprocess.run(cmd + ["--"] + argv, env=env, capture_output=True, text=True,
                          timeout=wall, preexec_fn=preexec)


def lockstep_lines(text):
    return [l for l in text.splitlines() if l.startswith("lockstep:")]


def traces(path):
    p = subprocess.run([QUERY, path], capture_output=True, text=True, timeout=120)
    expect(p.returncode == 0, f"trace_query {path} failed: {p.stderr.strip()}")
    return json.loads(p.stdout)


def trace_files(d):
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".trace")) \
        if os.path.isdir(d) else []


def results_plain(tmp, np=2):
    p = launch(np, [COLL_CHECK], plain_env())
    expect(p.returncode == 0 and p.stdout.strip(), f"coll_check without the shim: {p.stderr}")
    return p.stdout


def can_unshare():
    d = tempfile.mkdtemp(prefix="lockstep-ns-")
    try:
        p = subprocess.run(["unshare", "-m", "sh", "-c",
                            f"mount -t tmpfs -o size=1m lockstep-probe {d}"],
                           capture_output=True, timeout=20)
        return p.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        os.rmdir(d)


def in_tmpfs(mount_point, size, *argv):
    """A command line running argv in a private mount namespace with a fresh tmpfs of `size`
    mounted on mount_point (nothing outside the namespace sees it)."""
    script = 'mount -t tmpfs -o size="$1",mode=1777 lockstep-test "$2" && shift 2 && exec "$@"'
    return ["unshare", "-m", "sh", "-c", script, "sh", size, mount_point] + list(argv)


# ---------------------------------------------------------------- the analyzer against bad files


def scenario_traces(tmp, ring="64"):
    d = os.path.join(tmp, "scenario")
    p = launch(4, [SCENARIOS, "uneven_shards"], shim_env(d, {"LOCKSTEP_RING": ring}), timeout_s=2,
               stuck_s=0.5)
    expect(p.returncode == 124, f"scenario exited {p.returncode}: {p.stderr}")
    files = trace_files(d)
    expect(len(files) == 4, f"{len(files)} traces")
    return d, files


def case_corrupt_sweep(tmp):
    """Every trace of a scenario truncated at every section and record edge and 255 more
    points, each used byte of header, tables and records flipped, bad fields: never a crash or
    a hang; refused with a message naming the file, or loaded (truncated: trace_incomplete)."""
    _, files = scenario_traces(tmp)
    # the bounds that stop a hung variant still stop one: a loop by its CPU time, a sleep by the
    # wall-clock backstop (twelve times the bound)
    for hang, bound in (("busy", "CPU time bound"), ("sleep", "wall-clock backstop")):
        env = dict(os.environ, CORRUPT_SWEEP_SECONDS="1", CORRUPT_SWEEP_HANG=hang)
        p = subprocess.run([SWEEP] + files, capture_output=True, text=True, timeout=120, env=env)
        expect(p.returncode == 3 and f"HANG ({bound}) on variant made to hang ({hang})" in p.stderr,
               f"a {hang} variant was not stopped by the {bound}: exit {p.returncode}, {p.stderr[-500:]}")
    t0 = time.time()
    p = subprocess.run([SWEEP] + files, capture_output=True, text=True, timeout=900)
    expect(p.returncode == 0, f"corrupt_sweep exited {p.returncode}: {p.stderr[-3000:]}")
    figures(p.stdout.strip().replace("corrupt_sweep: ", "") + f" in {time.time() - t0:.1f} s")


def analyze_one(path, *args):
    p = subprocess.run([LOCKSTEP, "analyze", "--json", *args, path], capture_output=True,
                       text=True, timeout=30)
    return p


def dump_one(path):
    return subprocess.run([LOCKSTEP, "dump", path], capture_output=True, text=True, timeout=30)


def case_corrupt_cli(tmp):
    """The CLI on damaged files: exit 2 with a message naming the file and the problem (or a
    trace_incomplete finding where the rest is usable), within a timeout: never a hang."""
    d, files = scenario_traces(tmp)
    good = open(files[0], "rb").read()
    hdr = lambda fmt, off: struct.unpack_from(fmt, good, off)[0]
    ring_off = hdr("<Q", 96)
    bad_dir = os.path.join(tmp, "bad")
    os.mkdir(bad_dir)
    tried = 0

    def variant(name, data, want):
        nonlocal tried
        path = os.path.join(bad_dir, name)
        with open(path, "wb") as f:
            f.write(data)
        for p in (analyze_one(path), dump_one(path)):
            tried += 1
            expect(p.returncode == 2, f"{name}: exit {p.returncode}, want 2: {p.stderr}")
            expect(path in p.stderr and want in p.stderr,
                   f"{name}: message lacks the file or '{want}': {p.stderr!r}")
        os.unlink(path)

    def patched(off, fmt, value):
        b = bytearray(good)
        struct.pack_into(fmt, b, off, value)
        return bytes(b)

    variant("empty.trace", b"", "truncated")
    variant("magic.trace", b"LOCKSTOP" + good[8:], "bad magic")
    variant("newer.trace", patched(8, "<I", 2), "newer lockstep (format 2")
    variant("header-cut.trace", good[:4000], "truncated")
    variant("tables-cut.trace", good[:ring_off - 100], "tables before the ring are cut")
    variant("ring-off.trace", patched(96, "<Q", len(good) * 2), "section offsets")
    variant("comm-count.trace", patched(856, "<I", hdr("<I", 40) + 1), "counts exceed")
    variant("str-used.trace", patched(872, "<Q", 2**63), "counts exceed")
    variant("world.trace", patched(140, "<i", 2**31 - 1), "world size")

    # Truncated inside the ring: the rest is usable -> a trace_incomplete finding, exit 1.
    cut = os.path.join(bad_dir, "ring-cut.trace")
    with open(cut, "wb") as f:
        f.write(good[:ring_off + 128 * 5 + 17])
    p = analyze_one(cut)
    tried += 1
    expect(p.returncode == 1, f"ring-cut: exit {p.returncode}: {p.stderr}")
    fs = json.loads(p.stdout)["findings"]
    expect(any(f["kind"] == "trace_incomplete" and f.get("reason") == "truncated" for f in fs),
           f"ring-cut: no trace_incomplete finding: {[f['kind'] for f in fs]}")
    os.unlink(cut)

    # A folder, a FIFO where a trace should be: named, exit 2, no hang.
    for kind, make in (("folder", os.mkdir), ("FIFO", os.mkfifo)):
        path = os.path.join(bad_dir, f"{kind.lower()}.trace")
        make(path)
        p = dump_one(path)
        tried += 1
        expect(p.returncode == 2 and path in p.stderr and kind in p.stderr,
               f"{kind}: exit {p.returncode} {p.stderr!r}")
        if kind == "FIFO":
            p = analyze_one(path)
            tried += 1
            expect(p.returncode == 2 and path in p.stderr, f"FIFO analyze: {p.stderr!r}")
        # Among good traces, it is skipped and the good ones are analyzed.
        shutil.copy(files[1], os.path.join(bad_dir, "good.trace"))
        p = analyze_one(bad_dir)
        tried += 1
        expect(p.returncode in (0, 1) and json.loads(p.stdout)["ranks"],
               f"{kind} among good traces: exit {p.returncode} {p.stderr!r}")
        os.unlink(os.path.join(bad_dir, "good.trace"))
        (os.rmdir if kind == "folder" else os.unlink)(path)

    # An unreadable file. root reads through mode 000, so read it as another user then.
    unreadable = os.path.join(tmp, "open", "unreadable.trace")
    os.makedirs(os.path.dirname(unreadable))
    os.chmod(os.path.dirname(unreadable), 0o755)
    shutil.copy(files[0], unreadable)
    os.chmod(unreadable, 0)
    prefix = []
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            raise Skip("root without setpriv: cannot make a file unreadable")
        prefix = ["setpriv", f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}", "--clear-groups"]
    for sub in ("analyze", "dump"):
        p = subprocess.run(prefix + [LOCKSTEP, sub, unreadable], capture_output=True, text=True,
                           timeout=30)
        tried += 1
        expect(p.returncode == 2 and unreadable in p.stderr and "Permission denied" in p.stderr,
               f"unreadable ({sub}): exit {p.returncode} {p.stderr!r}")
    figures(f"{tried} damaged-file runs of the CLI, each exit 2 (or 1 with trace_incomplete) "
            f"with the file and the problem named")


def case_corrupt_live(tmp):
    """The live paths read a trace header through the reader too: a copy of a running rank's
    trace whose header is damaged (header_size 0, the rest intact: pid, host and start time
    name a live process) is refused with the reader's message naming the file by `watch` (no
    stall of a process it cannot trust), by `stacks` (never probed: no .live sidecar) and by
    the gather of `lockstep run` (its copy is named, it adds no rank to the node's READY mark)."""
    d = os.path.join(tmp, "job")
    job = subprocess.Popen([LAUNCH, "--np", "2", "--timeout", "60", "--", SCENARIOS,
                            "uneven_shards"], env=shim_env(d), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
    runs = 0
    try:
        t0 = time.time()
        while len(trace_files(d)) < 2 and time.time() - t0 < 30:
            time.sleep(0.05)
        expect(len(trace_files(d)) == 2, f"traces {trace_files(d)}")
        time.sleep(0.5)  # into the hang
        good = bytearray(open(trace_files(d)[0], "rb").read())
        expect(struct.unpack_from("<I", good, 868)[0] == END_RUNNING, "the rank is not running")
        bad = bytearray(good)
        struct.pack_into("<I", bad, 12, 0)  # header_size
        want = "corrupt header: header_size 0, expected 4096"
        name = "lockstep-" + socket.gethostname() + "-1-r1.trace"

        def bad_folder(sub):
            f = os.path.join(tmp, sub)
            os.mkdir(f, 0o700)
            with open(os.path.join(f, name), "wb") as out:
                out.write(bad)
            return f, os.path.join(f, name)

        # watch: the damaged trace is said once and is not a running rank inside a call.
        w, wpath = bad_folder("watch")
        p = subprocess.run([LOCKSTEP, "watch", "--stall", "1", w], capture_output=True,
                           text=True, timeout=60)
        runs += 1
        said = [l for l in lockstep_lines(p.stderr) if wpath in l and want in l]
        expect(said, f"watch: no reader message naming {wpath}: {p.stderr!r}")
        expect("inside an NCCL call" not in p.stderr and p.returncode == 2,
               f"watch trusted the damaged header: exit {p.returncode} {p.stderr!r}")

        # stacks: never probed.
        s, spath = bad_folder("stacks")
        p = subprocess.run([LOCKSTEP, "stacks", s], capture_output=True, text=True, timeout=60)
        runs += 1
        expect(p.returncode == 2 and spath in p.stderr and want in p.stderr,
               f"stacks: exit {p.returncode} {p.stderr!r}")
        expect(not os.path.exists(spath + ".live"),
               "stacks probed the process a damaged header names (a .live sidecar was written)")

        # gather: the damaged trace is named, goes into the node summary as unreadable (the
        # analysis of the gather folder names it there) and adds no rank.
        g = os.path.join(tmp, "gather")
        src = os.path.join(tmp, "bad.trace")
        with open(src, "wb") as out:
            out.write(bad)
        env = dict(os.environ, LOCKSTEP_GATHER_DIR=g, LOCKSTEP_GATHER_WAIT="1")
        p = subprocess.run([LOCKSTEP, "run", "--dir", os.path.join(tmp, "run"), "--", "sh", "-c",
                            f'cp {src} "$LOCKSTEP_DIR/{name}"'], env=env, capture_output=True,
                           text=True, timeout=60)
        runs += 1
        said = [l for l in lockstep_lines(p.stderr) if name in l and want in l]
        expect(said, f"gather: no reader message naming {name}: {p.stderr!r}")
        a = subprocess.run([LOCKSTEP, "analyze", g], capture_output=True, text=True, timeout=60)
        runs += 1
        copied = [l for l in lockstep_lines(a.stderr)
                  if l.startswith("lockstep: " + g) and ".summary/" + name in l and want in l]
        expect(copied and a.returncode == 2,
               f"gather: the node summary in {g} does not name {name} as unreadable: exit "
               f"{a.returncode} {a.stderr!r}")
        marks = [os.path.join(r, "READY") for r, _, fs in os.walk(g) if "READY" in fs]
        expect(marks, f"gather: no READY mark in {g}: {p.stderr!r}")
        for m in marks:
            text = open(m).read()
            expect("ranks " not in text, f"gather: the damaged header added ranks: {text!r}")
    finally:
        # The launcher ends its ranks on SIGTERM (they run in a process group of their own,
        # which a SIGKILL of the launcher's group would leave behind, hung, for good).
        job.send_signal(signal.SIGTERM)
        try:
            job.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    figures(f"{runs} live paths (watch, stacks, gather) refused a damaged header by the reader")


# ---------------------------------------------------------------- the shim against faults


def case_shm_full(tmp):
    """A full trace filesystem: the program runs to the end, correct, one warning line per
    process that found no room; a process that found room records normally."""
    if not can_unshare():
        raise Skip("no private mount namespace (unshare -m) for a small tmpfs; "
                   "file_size_limit covers the same path")
    want = results_plain(tmp)
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    d = os.path.join(mnt, "traces")
    p = launch(2, [COLL_CHECK], shim_env(d), prefix=in_tmpfs(mnt, "1m"))
    expect(p.returncode == 0 and p.stdout == want, f"full tmpfs changed the results: {p.stderr}")
    lines = lockstep_lines(p.stderr)
    expect(len(lines) == 2 and all("too little for a trace" in l and "marked in" in l
                                   for l in lines),
           f"want one 'too little for a trace' line per rank: {lines}")
    # Room for two of the smallest traces: each rank takes a smaller ring and says so. Rank 1
    # starts half a second later, once rank 0 holds its reservation: two reservations racing
    # for the same space could each take part of it and both fail.
    staggered = ["sh", "-c", 'if [ "$RANK" = 1 ]; then sleep 0.5; fi; exec "$0"', COLL_CHECK]
    p = launch(2, staggered, shim_env(d), prefix=in_tmpfs(mnt, "8m"))
    expect(p.returncode == 0 and p.stdout == want, f"half-full tmpfs: {p.stderr}")
    lines = lockstep_lines(p.stderr)
    expect(len(lines) == 2 and all("this trace keeps the last" in l for l in lines),
           f"want one line per rank on its smaller ring: {lines}")
    figures("tmpfs of 1 MiB: 2 of 2 ranks ran correct with 1 warning line each and a marker; "
            "8 MiB: 2 ranks traced with smaller rings; results identical to the untraced run")


def case_file_size_limit(tmp):
    """ulimit -f below a trace's size: the kernel would kill the program with SIGXFSZ; the shim
    stays under the limit: correct results, one warning line per process."""
    want = results_plain(tmp)
    d = os.path.join(tmp, "t")
    import resource
    limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
    p = launch(2, [COLL_CHECK], shim_env(d), preexec=limit)
    expect(p.returncode == 0, f"launcher exited {p.returncode} (SIGXFSZ?): {p.stderr}")
    expect(p.stdout == want, "results changed under a file size limit")
    lines = lockstep_lines(p.stderr)
    expect(len(lines) == 2 and all("file size limit" in l for l in lines), f"warnings {lines}")
    expect(trace_files(d) == [], "a partial trace was left behind")
    figures("RLIMIT_FSIZE 1 MiB: 2 of 2 ranks ran correct, 1 warning line each, no file left")


def host_name():
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in socket.gethostname())[:63]


def case_hostile_paths(tmp):
    """A folder of another user or writable by others, and a symlink or another user's file
    at the trace's own name: never followed, never written, one warning line each."""
    want = results_plain(tmp)
    root = os.geteuid() == 0
    checked = []

    def refused(d, why):
        p = launch(2, [COLL_CHECK], shim_env(d))
        expect(p.returncode == 0 and p.stdout == want, f"{why}: program harmed: {p.stderr}")
        lines = lockstep_lines(p.stderr)
        expect(len(lines) == 2 and all(d in l and "recording is off" in l for l in lines),
               f"{why}: want one warning per rank naming {d}: {lines}")
        expect(trace_files(d) == [], f"{why}: a trace was written")
        checked.append(why)

    open_dir = os.path.join(tmp, "others-can-write")
    os.mkdir(open_dir)
    os.chmod(open_dir, 0o777)
    refused(open_dir, "folder writable by others")
    if root:
        foreign = os.path.join(tmp, "foreign")
        os.mkdir(foreign, 0o700)
        os.chown(foreign, OTHER_UID, OTHER_UID)
        refused(foreign, "folder of another user")

    # The default folder, /dev/shm/lockstep-UID, planted by someone else (a private tmpfs on
    # /dev/shm, so the real one is not touched).
    if root and can_unshare():
        uid = os.getuid()
        own = "/dev/shm/lockstep-%d" % uid
        for how in ("mkdir -m 700 %s && chown %d %s && T=%s" % (own, OTHER_UID, own, own),
                    "mkdir -m 700 /dev/shm/elsewhere && ln -s /dev/shm/elsewhere %s"
                    " && T=/dev/shm/elsewhere" % own):
            script = ('mount -t tmpfs lockstep-test /dev/shm && %s && "$@"; ls -A "$T" | wc -l'
                      % how)
            cmd = ["unshare", "-m", "sh", "-c", script, "sh", LAUNCH, "--np", "1", "--",
                   COLL_CHECK]
            p = subprocess.run(cmd, env=shim_env(None), capture_output=True, text=True,
                               timeout=60)
            lines = lockstep_lines(p.stderr)
            expect(p.returncode == 0 and len(lines) == 1 and "recording is off" in lines[0],
                   f"default folder ({how}): {p.returncode} {lines}")
            expect(p.stdout.strip().splitlines()[-1] == "0", "a trace went into it")
            checked.append("default folder " + ("of another user" if "chown" in how else
                                                "a symlink"))

    # Planted at the trace's own name (the child knows its pid before exec).
    d = os.path.join(tmp, "t")
    os.mkdir(d, 0o700)
    victim = os.path.join(tmp, "victim")
    with open(victim, "w") as f:
        f.write("keep me\n")

    def plant():
        base = os.path.join(d, f"lockstep-{host_name()}-{os.getpid()}-rx")
        os.symlink(victim, base + ".trace")
        if root:
            with open(base + ".1.trace", "w") as f:
                f.write("theirs\n")
            os.chown(base + ".1.trace", OTHER_UID, OTHER_UID)

    env = shim_env(d)
    p = subprocess.run([COLL_CHECK], env=env, capture_output=True, text=True, timeout=60,
                       preexec_fn=plant)
    expect(p.returncode == 0, f"planted names: program failed {p.stderr}")
    expect(open(victim).read() == "keep me\n", "the symlink was followed")
    lines = lockstep_lines(p.stderr)
    expect(len(lines) == (2 if root else 1) and "symlink" in lines[0], f"warnings {lines}")
    names = sorted(os.listdir(d))
    real = [n for n in names if os.path.isfile(os.path.join(d, n)) and
            not os.path.islink(os.path.join(d, n)) and os.stat(os.path.join(d, n)).st_uid == os.getuid()]
    expect(len(real) == 1 and real[0].endswith((".2.trace" if root else ".1.trace")),
           f"trace not at the next free name: {names}")
    if root:
        theirs = [n for n in names if n.endswith(".1.trace")][0]
        expect(open(os.path.join(d, theirs)).read() == "theirs\n", "another user's file written")
        checked.append("symlink and foreign file at the trace name")
    else:
        checked.append("symlink at the trace name")
    st = os.stat(os.path.join(d, real[0]))
    expect(stat.S_IMODE(st.st_mode) == 0o600, f"trace mode {oct(st.st_mode)}")
    made = os.path.join(tmp, "made")
    p = launch(1, [COLL_CHECK], shim_env(made))
    expect(stat.S_IMODE(os.stat(made).st_mode) == 0o700, "trace folder not created 0700")
    figures(f"{len(checked)} hostile layouts refused or avoided ({'; '.join(checked)}); "
            "files 0600, folder 0700")


def check_stress_records(t, nthreads, calls, final):
    """Checks that every record of a stress trace is whole and appears once; in the final trace
    also that each communicator's seqs run without a gap (a live read of a ring that wraps every
    millisecond loses the slots lapped while it reads: fewer records, never wrong ones).
    Returns how many records were checked."""
    by_comm = {}
    count_of_tid = {}
    last_ticket = -1
    n = 0
    for r in t["records"]:
        if r["op"] != "AllReduce":
            continue
        n += 1
        expect(r["ticket"] > last_ticket, f"tickets out of order at {r['ticket']}")
        last_ticket = r["ticket"]
        expect(1 <= r["count"] <= nthreads and 1 <= r["seq"] <= calls,
               f"torn record (count/seq): {r}")
        expect(r["redop"] == (r["seq"] - 1) % 4 and r["dtype"] == 7 and r["comm_rank"] == 0,
               f"torn record (redop/dtype/rank for its seq): {r}")
        expect(count_of_tid.setdefault(r["tid"], r["count"]) == r["count"],
               f"torn record (thread {r['tid']} with two counts): {r}")
        by_comm.setdefault(r["comm"], []).append(r["seq"])
    where = "final trace" if final else "live read"
    for comm, seqs in by_comm.items():
        expect(len(set(seqs)) == len(seqs), f"{where}: comm {comm}: a seq twice: {seqs[:8]}...")
        expect(not final or seqs == list(range(seqs[0], seqs[0] + len(seqs))),
               f"{where}: comm {comm}: seqs with a gap: {seqs[:8]}...")
    return n


def case_threads64(tmp):
    """64 threads on 64 communicators at once, the ring wrapping hundreds of times, read live
    while written and after: every record whole, none torn, none duplicated."""
    nthreads, calls, ring = 64, 40000, 1024
    d = os.path.join(tmp, "t")
    env = shim_env(d, {"LOCKSTEP_RING": str(ring)})
    proc = subprocess.Popen([FAULTS, "stress", str(nthreads), str(calls)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    live_reads = live_records = 0
    while proc.poll() is None:
        if trace_files(d):
            p = subprocess.run([QUERY, d], capture_output=True, text=True, timeout=60)
            if p.returncode == 0:
                for t in json.loads(p.stdout):
                    live_records += check_stress_records(t, nthreads, calls, False)
                live_reads += 1
    out, err = proc.communicate()
    expect(proc.returncode == 0, f"stress exited {proc.returncode}: {err}")
    (t,) = traces(d)
    expect(t["ring_cap"] == ring and t["wrapped"] and t["nbusy"] == 0, "ring state")
    # The 16 threads with a header slot reserve tickets in blocks (ring / 32): the ones they did
    # not use were given back as void records when they ended, or when the ring lapped a block
    # (a thread that waited for a CPU while the others wrote a whole ring).
    expect(t["next_ticket"] >= nthreads * (calls + 2), f"tickets {t['next_ticket']}")
    # A writer whose slot is still held by a call from one lap earlier skips its record rather
    # than tear that one: the reader counts such tickets as reserved and never written. Every
    # slot of the last lap is one or the other (or void), and at most one per thread can be held.
    expect(len(t["records"]) + t["nunwritten"] + t["nvoid"] + t["nreserved"] == ring and
           t["nunwritten"] <= nthreads and t["nreserved"] == 0,
           f"{len(t['records'])} records, {t['nunwritten']} unwritten, {t['nvoid']} void, "
           f"{t['nreserved']} reserved in a ring of {ring}")
    tickets = [r["ticket"] for r in t["records"]]
    expect(tickets == sorted(set(tickets)) and tickets[0] >= t["next_ticket"] - ring,
           "the ring does not hold only the newest tickets, once each")
    final = check_stress_records(t, nthreads, calls, True)
    comms = [c for c in t["comms"] if c["create_op"] == "CommInitRank"]
    expect(len(comms) == nthreads and all(c["coll_issued"] == calls for c in comms),
           "per-communicator counters lost calls")
    figures(f"{nthreads} threads x {calls} calls on {nthreads} communicators = "
            f"{nthreads * calls} AllReduces through a ring of {ring} (wrapped "
            f"{t['next_ticket'] // ring} times); {live_reads} live reads checked "
            f"{live_records} records, the final trace {final}; 0 torn, 0 duplicated, "
            f"counters {nthreads}x{calls}")


def case_sigkill_storm(tmp):
    """SIGKILL at random moments of running programs: every trace loads, and every call that
    returned before the kill is in it, whole and completed."""
    kills = int(os.environ.get("HARDENING_KILLS", "100"))
    rnd = random.Random(int(os.environ.get("HARDENING_SEED", "7")))
    loaded = no_file = before_header = calls_verified = records_seen = in_flight = 0
    t0 = time.time()
    for k in range(kills):
        d = os.path.join(tmp, f"k{k}")
        counter = os.path.join(tmp, f"counter{k}")
        proc = subprocess.Popen([FAULTS, "kill_target", counter],
                                env=shim_env(d, {"LOCKSTEP_RING": "4096"}),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rnd.uniform(0, 0.025))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        done = 0
        if os.path.exists(counter):
            with open(counter, "rb") as f:
                raw = f.read(8)
            done = struct.unpack("<Q", raw)[0] if len(raw) == 8 else 0
        files = trace_files(d)
        if not files:
            expect(done == 0, f"kill {k}: {done} calls returned but no trace")
            no_file += 1
        else:
            (path,) = files
            p = subprocess.run([QUERY, path], capture_output=True, text=True, timeout=60)
            if p.returncode != 0:
                # Killed while the header was being made: nothing was recorded yet.
                expect(done == 0 and "bad magic" in p.stderr,
                       f"kill {k}: trace unreadable after {done} calls: {p.stderr}")
                before_header += 1
            else:
                (t,) = json.loads(p.stdout)
                loaded += 1
                ar = [r for r in t["records"] if r["op"] == "AllReduce"]
                records_seen += len(ar)
                by_seq = {r["seq"]: r for r in ar}
                # The ring holds the tickets [next - cap, next): a returned call whose ticket
                # lies there must be in it. One thread, one ticket a call, so the calls' tickets
                # are their numbers plus one offset; what the thread reserved ahead of its calls
                # (its block, or a block taken when SIGKILL came between next_ticket's add and
                # the slot's note of it) lies past the newest call and moves the window on.
                lo = max(0, t["next_ticket"] - t["ring_cap"])
                state = (f"next_ticket {t['next_ticket']}, ring {t['ring_cap']}, "
                         f"block {t['ticket_block']}, "
                         f"reserved {t['nreserved']}, unwritten {t['nunwritten']}, "
                         f"void {t['nvoid']}, busy {t['nbusy']}")
                expect(done == 0 or ar, f"kill {k}: {done} calls returned, none in trace ({state})")
                offsets = {r["ticket"] - r["seq"] for r in ar}
                expect(len(offsets) <= 1, f"kill {k}: calls skip tickets: offsets {offsets} ({state})")
                off = offsets.pop() if offsets else 0
                if ar:
                    ahead = t["next_ticket"] - (ar[-1]["ticket"] + 1)
                    expect(ahead <= 2 * max(1, t["ticket_block"]),
                           f"kill {k}: {ahead} tickets taken past the newest call ({state})")
                for s in range(max(1, lo - off), done + 1):
                    r = by_seq.get(s)
                    expect(r is not None, f"kill {k}: call {s} of {done} returned, not in trace "
                                          f"({state})")
                    expect(not r["in_flight"] and r["result"] == 0 and
                           r["count"] == (s - 1) % 64 + 1, f"kill {k}: call {s} is {r}")
                    calls_verified += 1
                comm = [c for c in t["comms"] if c["create_op"] == "CommInitRank"]
                expect(not comm or comm[0]["coll_issued"] >= done,
                       f"kill {k}: counter {comm and comm[0]['coll_issued']} < {done}")
                in_flight += sum(1 for r in ar if r["in_flight"]) + t["nbusy"]
        shutil.rmtree(d, ignore_errors=True)
        if os.path.exists(counter):
            os.unlink(counter)
    figures(f"{kills} SIGKILLs at random moments (0-25 ms into the run) in {time.time() - t0:.0f} s: "
            f"{loaded} traces loaded, {no_file} killed before the first NCCL call (no file), "
            f"{before_header} while the header was being made (0 calls returned in each); "
            f"{calls_verified} returned calls checked present and complete in the ring window, "
            f"0 missing; {records_seen} records read; {in_flight} calls caught in flight or "
            f"half-written")


def case_fork_exec_spawn(tmp):
    """fork without exec, posix_spawn and exec: each process image gets a trace of its own with
    exactly its calls; none is lost or mixed."""
    d = os.path.join(tmp, "t")
    p = subprocess.run([FAULTS, "spawn"], env=shim_env(d), capture_output=True, text=True,
                       timeout=60)
    expect(p.returncode == 0, f"spawn exited {p.returncode}: {p.stderr}")
    expect(not lockstep_lines(p.stderr), f"warnings: {p.stderr}")
    ts = traces(d)
    got = sorted(tuple(r["count"] for r in t["records"] if r["op"] == "AllReduce") for t in ts)
    expect(got == [(11,) * 2, (12,) * 3, (13,) * 5, (14,) * 4], f"traces hold {got}")
    by_count = {t["records"][1]["count"]: t for t in ts}
    expect(by_count[14]["pid"] == by_count[11]["pid"], "exec keeps the pid")
    expect(by_count[12]["ppid"] == by_count[11]["pid"] and by_count[13]["ppid"] == by_count[11]["pid"],
           "children name the parent")
    expect(all(by_count[c]["end_kind"] == END_EXITED for c in (12, 13, 14)), "ends recorded")
    figures("fork without exec, posix_spawn, exec: 4 traces, 14 calls, each in its own trace")


def case_segv_recover(tmp):
    """A program that handles SIGSEGV itself and carries on: it still runs, and is still traced."""
    d = os.path.join(tmp, "t")
    p = subprocess.run([FAULTS, "segv_recover"], env=shim_env(d), capture_output=True,
                       text=True, timeout=60)
    expect(p.returncode == 0 and "recovered from 2 faults" in p.stdout,
           f"segv_recover: {p.returncode} {p.stdout} {p.stderr}")
    (t,) = traces(d)
    counts = [r["count"] for r in t["records"] if r["op"] == "AllReduce"]
    expect(counts == [21, 21, 22, 22, 23, 23], f"records {counts}")
    # The process called NCCL again after each fault: the shim knows it survived, and records
    # the exit(0) that follows.
    end = (t["end_kind"], t["end_status"], t["end_signal"])
    expect(end == (END_EXITED, 0, 0), f"end recorded as {end}, expected a clean exit")
    figures("2 SIGSEGVs handled by the program itself: it ran on, 6 of 6 calls recorded")


def case_never_calls(tmp):
    """LD_PRELOADed into a program that links libnccl but never calls it: no thread, no file."""
    d = os.path.join(tmp, "t")
    # The same program without the shim: its own threads (1; under qemu-user, the emulator's
    # own thread shows in /proc/self/task too).
    plain = dict(shim_env(None))
    plain.pop("LD_PRELOAD")
    p0 = subprocess.run([FAULTS, "quiet"], env=plain, capture_output=True, text=True, timeout=60)
    own = p0.stdout.split()[1] if p0.returncode == 0 and p0.stdout.startswith("threads ") else "?"
    expect(own.isdigit(), f"quiet without the shim: {p0.stdout} {p0.stderr}")
    p = subprocess.run([FAULTS, "quiet"], env=shim_env(d), capture_output=True, text=True,
                       timeout=60)
    expect(p.returncode == 0 and p.stdout.startswith(f"threads {own} "),
           f"quiet: {p.stdout} (without the shim: threads {own})")
    expect(not lockstep_lines(p.stderr), f"warnings: {p.stderr}")
    expect(not os.path.exists(d), "a trace folder was made")
    figures(f"no NCCL call: {own} thread(s), as without the shim; no folder, no file, no output")


def case_abort_blocked(tmp):
    """ncclCommAbort from another thread while a collective blocks: the call returns with an
    error, and the trace records both."""
    d = os.path.join(tmp, "t")
    p = launch(1, [EMU_BLOCK, "abort"], shim_env(d), timeout_s=20)
    expect(p.returncode == 0, f"emu_block abort: {p.returncode} {p.stderr}")
    (t,) = traces(d)
    ar = [r for r in t["records"] if r["op"] == "AllReduce"]
    ab = [r for r in t["records"] if r["op"] == "CommAbort"]
    expect(len(ar) == 1 and not ar[0]["in_flight"] and ar[0]["result"] not in (0, -1),
           f"blocked AllReduce record {ar}")
    expect(len(ab) == 1 and ab[0]["result"] == 0 and ab[0]["comm"] == ar[0]["comm"],
           f"abort record {ab}")
    expect(ab[0]["tid"] != ar[0]["tid"], "abort came from another thread")
    comm = [c for c in t["comms"] if c["id"] == ar[0]["comm"] and c["rank"] == 0]
    expect(comm and comm[0]["flags"] & COMM_ABORTED, "comm not marked aborted")
    figures("abort from a second thread: the blocked AllReduce returned error "
            f"{ar[0]['result']}, both calls recorded, communicator marked aborted")


def case_knob_bounds(tmp):
    """Environment knobs out of bounds are refused with one line each and the default used."""
    cases = [("LOCKSTEP_RING", "1000000000000", "ring_cap", 32768),
             ("LOCKSTEP_RING", "12abc", "ring_cap", 32768),
             ("LOCKSTEP_RING", "-64", "ring_cap", 32768),
             ("LOCKSTEP_STACK_DEPTH", "100000", "stack_depth", 16),
             ("LOCKSTEP_RETAIN_HOURS", "99999999999999999999999", None, None)]
    for i, (name, value, field, default) in enumerate(cases):
        d = os.path.join(tmp, f"k{i}")
        p = launch(1, [COLL_CHECK], shim_env(d, {name: value}))
        expect(p.returncode == 0, f"{name}={value}: program failed")
        lines = lockstep_lines(p.stderr)
        expect(len(lines) == 1 and f"{name}={value} refused" in lines[0],
               f"{name}={value}: warnings {lines}")
        (t,) = traces(d)
        if field:
            expect(t[field] == default, f"{name}={value}: {field} {t[field]}")
    figures(f"{len(cases)} out-of-bounds knob values refused with one line each, defaults used")


if __name__ == "__main__":
    sys.exit(run(globals(), "lockstep-hardening-"))
