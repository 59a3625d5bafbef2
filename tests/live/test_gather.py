#!/usr/bin/env python3
"""test_gather.py -- many nodes, one diagnosis: simulated nodes (one `lockstep run`, one trace
folder and one launcher with --rank-offset each) share a gather folder, and no runner may stop
its ranks before rank 0's runner has every node's live snapshot, whichever runner notices the
stall first. Also the failure orders (a node whose ranks all ended, rank 0's node gone) and
scripts/lockstep-gather with stand-in `ssh` and `srun`.

Usage: test_gather.py CASE   (paths from the environment meson sets, see meson.build)
"""
import json
import os
import re
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import expect, run  # noqa: E402
from report_ranks import per_rank  # noqa: E402
from test_live import (GATHER, LAUNCH, LOCKSTEP, SCENARIOS, SHIM, alive, base_env,  # noqa: E402
                       first, trace_pids)


def start_node(tmp, gather, tag, offset, np, world, stall, mode, wait=10, wrap=None):
    """Starts one simulated node: `lockstep run` over a launcher of global ranks
    offset..offset+np-1. `wrap` puts a command (a shell) between the runner and the launcher."""
    d = os.path.join(tmp, f"{tag}-traces")
    js = os.path.join(tmp, f"{tag}.json")
    launch = [LAUNCH, "--np", str(np), "--rank-offset", str(offset), "--world-size", str(world),
              "--idfile", os.path.join(tmp, f"{tag.split('-')[0]}-id"), "--", SCENARIOS, mode]
    cmd = [LOCKSTEP, "run", "--dir", d, "--stall", str(stall), "--json", js, "--ranks", "all", "--",
           *(wrap or []), *launch]
    env = base_env({"LOCKSTEP_GATHER_DIR": gather, "LOCKSTEP_GATHER_WAIT": str(wait)})
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.trace_dir, p.json = d, js
    return p


def finish(procs, timeout=120):
    """Waits for the runners; returns [(status, stdout, stderr)]."""
    outs = []
    for p in procs:
        try:
            o, e = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            kill_job(job_pids(p.trace_dir))  # they hold the runner's pipes
            o, e = p.communicate()
            e += "\n(killed by the test: it did not end)"
        outs.append((p.returncode, o, e))
    return outs


def trace_ends(d):
    """(end_kind, end_ns) of each trace of a folder (header offsets 868 and 888)."""
    ends = []
    for name in sorted(os.listdir(d)):
        if name.endswith(".trace"):
            with open(os.path.join(d, name), "rb") as f:
                h = f.read(896)
            ends.append((struct.unpack_from("<I", h, 868)[0], struct.unpack_from("<Q", h, 888)[0]))
    return ends


def signature(report):
    """What must be the same in every run of one hang: each finding's kind, sequence number,
    ranks and summary (communicator ids differ from run to run)."""
    return [(f["kind"], f.get("seq"), tuple(f["ranks"]),
             re.sub(r"\b[0-9a-f]{8,16}\b", "COMM", f["summary"]))
            for f in report["findings"]]


def stall_writer(gather):
    """The runner (host-pid) that marked the stall first, from GATHER/STALL."""
    with open(os.path.join(gather, "STALL")) as f:
        return dict(l.split(" ", 1) for l in f.read().splitlines()[1:] if " " in l)["node"]


# (stall of node 0, stall of node 1, delay before starting node 0, before node 1): either runner
# notices first, by half a second, or both alike; or the one started 0.1 s later notices first
# (the one started first has the longer stall: its ranks wait for the others' in comm init).
# (stall of node 0, of node 1, start delay of node 0, of node 1): either runner first, or both
# at once. A stall under 1 s was seen to catch ranks still returning from CommInitRank on a
# machine loaded 4 deep (2 CPUs): a true "no progress for 0.5 s", not the race this case is about.
VARIANTS = [(1.0, 2.0, 0, 0), (2.0, 1.0, 0, 0), (1.0, 1.0, 0, 0), (2.0, 1.0, 0, 0.2),
            (1.0, 2.0, 0.2, 0)]


def two_node_hangs(tmp, runs):
    """The two-node hang `runs` times in a row in ONE gather folder (the markers of each run
    must not count in the next): every run exits 3 on both nodes with the same diagnosis, of
    all four ranks, each seen alive by its node's probe."""
    gather = os.path.join(tmp, "gather")
    first_sig, who, released, took = None, {0: 0, 1: 0}, [], []
    for i in range(runs):
        s0, s1, d0, d1 = VARIANTS[i % len(VARIANTS)]
        t0 = time.time()
        procs = [None, None]
        for node, delay in sorted(((0, d0), (1, d1)), key=lambda x: x[1]):
            time.sleep(max(0, t0 + delay - time.time()))
            procs[node] = start_node(tmp, gather, f"r{i}-node{node}", 2 * node, 2, 4,
                                     (s0, s1)[node], "uneven_shards")
        outs = finish(procs)
        took.append(time.time() - t0)
        label = f"run {i + 1} (stalls {s0}/{s1}, delays {d0}/{d1})"
        for n, (rc, _, err) in enumerate(outs):
            expect(rc == 3, f"{label}: node {n} exited {rc}, expected 3\n{err}")
        expect(os.path.exists(procs[0].json), f"{label}: rank 0's runner wrote no report\n"
               f"{outs[0][2]}")
        report = json.load(open(procs[0].json))
        ranks = sorted(r["rank"] for r in per_rank(report))
        expect(ranks == [0, 1, 2, 3], f"{label}: the report covers ranks {ranks} (an earlier "
               f"run's snapshot, or a node missing)\n{outs[0][2]}")
        f = first(report, label)
        expect(f["kind"] == "op_mismatch" and f["ranks"] == [0, 1, 2, 3] and f["seq"] == 5,
               f"{label}: first finding {f}")
        expect("died without an exit record" not in outs[0][1] + json.dumps(report),
               f"{label}: a bystander stopped before the diagnosis:\n{outs[0][1]}")
        for r in per_rank(report):
            act = (r.get("live") or {}).get("activity")
            expect(act in ("sleeping", "busy"),
                   f"{label}: rank {r['rank']} was not alive in its node's snapshot ({act})")
        sig = signature(report)
        first_sig = first_sig or sig
        expect(sig == first_sig, f"{label}: the diagnosis differs from run 1's:\n{sig}\n"
               f"{first_sig}")
        # The protocol's point: node 1's ranks end (by its runner's SIGTERM) only after rank 0's
        # runner has read node 1's snapshot, which it marks with DIAGNOSED in node 1's folder
        # (its JSON report is rewritten later, after its own node's stop).
        node1 = max((os.path.join(gather, n) for n in os.listdir(gather)
                     if n.endswith(f"-{procs[1].pid}")), key=os.path.getmtime)
        # What travels is each node's summary, never its traces (docs/live.md, "Many nodes").
        for nd in (os.path.join(gather, n) for n in os.listdir(gather)
                   if n.endswith((f"-{procs[0].pid}", f"-{procs[1].pid}"))
                   and not n.startswith("run-")):
            names = os.listdir(nd)
            expect([x for x in names if x.endswith(".summary")] and
                   not [x for x in names if x.endswith(".trace")],
                   f"{label}: {nd} holds {names}, not one node summary and no trace")
        expect(all(".summary/" in r["trace"] for r in per_rank(report)),
               f"{label}: ranks not read from node summaries: {[r['trace'] for r in per_rank(report)]}")
        read_at = os.stat(os.path.join(node1, "DIAGNOSED")).st_mtime
        for end_kind, end_ns in trace_ends(procs[1].trace_dir):
            expect(end_kind == 2 and end_ns / 1e9 >= read_at,
                   f"{label}: a rank of node 1 ended {read_at - end_ns / 1e9:.3f} s before rank "
                   f"0's runner had read its snapshot (end kind {end_kind})\n{outs[1][2]}")
        m = re.search(r"has read this node's snapshot \(([0-9.]+) s\)", outs[1][2])
        expect(m, f"{label}: node 1 stopped without rank 0's word:\n{outs[1][2]}")
        released.append(float(m.group(1)))
        writer = stall_writer(gather)
        who[0 if writer.endswith(f"-{procs[0].pid}") else 1] += 1
        for p in procs:
            expect(not [x for x in trace_pids(p.trace_dir) if alive(x)],
                   f"{label}: ranks left running")
    expect(who[0] and who[1], f"one runner noticed first every time: {who}")
    print(f"{runs} runs, {runs} identical diagnoses ({first_sig[0][0]}); first to notice: "
          f"node 0 {who[0]}x, node 1 {who[1]}x; node 1 waited {min(released):.1f}-"
          f"{max(released):.1f} s for rank 0's runner; {min(took):.1f}-{max(took):.1f} s per run")


def case_race(tmp):
    """20 runs of the two-node hang with either runner first."""
    two_node_hangs(tmp, 20)


def case_ended_node(tmp):
    """Node 1's only rank exits early, while its launcher lives on for a moment (a shell after
    it): when node 0 marks the stall, node 1 gives its traces but is not taken for a stall, and
    exits with its job's own status; rank 0's runner diagnoses with node 1's traces."""
    gather = os.path.join(tmp, "gather")
    wrap = ["sh", "-c", '"$@"; s=$?; sleep 2; exit $s', "sh"]
    p1 = start_node(tmp, gather, "e-node1", 3, 1, 4, 5, "early_exit", wrap=wrap)
    p0 = start_node(tmp, gather, "e-node0", 0, 3, 4, 0.5, "early_exit")
    (rc0, out0, err0), (rc1, _, err1) = finish([p0, p1])
    expect(rc0 == 3, f"node 0 exited {rc0}, expected 3\n{err0}")
    expect(rc1 == 0, f"node 1's job ended by itself with status 0, its runner exited {rc1}\n"
           f"{err1}")
    expect("every rank here has ended" in err1, f"node 1 did not answer the stall:\n{err1}")
    report = json.load(open(p0.json))
    expect(sorted(r["rank"] for r in per_rank(report)) == [0, 1, 2, 3],
           f"report covers {[r['rank'] for r in per_rank(report)]}")
    f = first(report)
    expect(f["kind"] == "rank_exited" and f["rank"] == 3 and f["waiting"] == [0, 1, 2],
           f"first finding {f}")


def job_pids(d):
    """The ranks of a trace folder and their parents (the launcher)."""
    ranks = [x for x in trace_pids(d) if x > 0] if os.path.isdir(d) else []
    return ranks + [x for x in map(parent_of, ranks) if x and x > 1]


def parent_of(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (FileNotFoundError, IndexError, ValueError):
        return None


def kill_job(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def case_rank0_gone(tmp):
    """Rank 0's runner is killed: node 1 snapshots the stall, waits LOCKSTEP_GATHER_WAIT for a
    runner of rank 0 to collect, says so, stops its ranks and exits 3."""
    gather = os.path.join(tmp, "gather")
    p0 = start_node(tmp, gather, "g-node0", 0, 2, 4, 60, "uneven_shards")
    orphans = []
    try:
        deadline = time.time() + 30
        while time.time() < deadline and len(orphans) < 4:
            time.sleep(0.05)
            orphans = job_pids(p0.trace_dir)
        p0.kill()
        p0.wait()  # its launcher and ranks live on, holding its pipes: no communicate()
        p1 = start_node(tmp, gather, "g-node1", 2, 2, 4, 0.5, "uneven_shards", wait=2)
        (rc1, _, err1), = finish([p1])
    finally:
        kill_job(orphans)
        p0.stdout.close()
        p0.stderr.close()
    expect(rc1 == 3, f"node 1 exited {rc1}, expected 3\n{err1}")
    expect("no runner of rank 0 is collecting" in err1, f"no word on rank 0's runner:\n{err1}")
    expect(not [x for x in trace_pids(p1.trace_dir) if alive(x)], "node 1's ranks left running")


def case_bad_input(tmp):
    """A wrong LOCKSTEP_GATHER_WAIT or gather folder is named, with exit status 2."""
    notdir = os.path.join(tmp, "file")
    open(notdir, "w").close()
    for env, word in (({"LOCKSTEP_GATHER_DIR": os.path.join(tmp, "g"),
                        "LOCKSTEP_GATHER_WAIT": "soon"}, "LOCKSTEP_GATHER_WAIT"),
                      ({"LOCKSTEP_GATHER_DIR": os.path.join(tmp, "g"),
                        "LOCKSTEP_GATHER_WAIT": "-1"}, "LOCKSTEP_GATHER_WAIT"),
                      ({"LOCKSTEP_GATHER_DIR": notdir}, "LOCKSTEP_GATHER_DIR")):
        p = subprocess.run([LOCKSTEP, "run", "--dir", os.path.join(tmp, "t"), "--", "true"],
                           env=base_env(env), capture_output=True, text=True, timeout=60)
        expect(p.returncode == 2 and word in p.stderr, f"{env}: exit {p.returncode}, {p.stderr}")


# ---- scripts/lockstep-gather ----------------------------------------------------------------

def job_of(path):
    """The job id in a trace header (offset 224, 64 bytes)."""
    with open(path, "rb") as f:
        return f.read(288)[224:].split(b"\0")[0].decode()


def traces_by_job(d):
    jobs = {}
    for name in os.listdir(d):
        if name.endswith(".trace"):
            jobs.setdefault(job_of(os.path.join(d, name)), []).append(name)
    return jobs


def make_jobs(tmp, envs):
    """One folder holding the traces of a clean 2-rank job per environment, oldest first, as
    a node's default trace folder holds every job that ran there (the shim preloaded by hand:
    `lockstep run --dir` would move an earlier run's traces aside)."""
    src = os.path.join(tmp, "src")
    os.makedirs(src, mode=0o700)
    for env in envs:
        p = subprocess.run([LAUNCH, "--np", "2", "--", SCENARIOS, "clean"],
                           env=base_env(dict(env, LD_PRELOAD=SHIM, LOCKSTEP_DIR=src)),
                           capture_output=True, text=True, timeout=60)
        expect(p.returncode == 0, f"job {env}: {p.stderr}")
    return src


def stand_in(tmp, name, body):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write("#!/bin/bash\n" + body)
    os.chmod(path, 0o755)
    return path


def case_script_hosts(tmp):
    """--hosts copies one job's traces: the newest job's by default, --job's when given; bad
    --job and --src values are refused. The stand-in ssh runs its command through a shell, as
    ssh does, and logs it."""
    src = make_jobs(tmp, [{"LOCKSTEP_JOB": "train-1"}, {"LOCKSTEP_JOB": "train-2"}])
    log = os.path.join(tmp, "ssh.log")
    ssh = stand_in(tmp, "fake-ssh", f'echo "$*" >> {log}\nshift\nexec sh -c "$*"\n')
    env = base_env({"LOCKSTEP_GATHER_SSH": ssh})
    for args, want in (([], "train-2"), (["--job", "train-1"], "train-1")):
        dest = os.path.join(tmp, "dest-" + want)
        g = subprocess.run([GATHER, "--src", src, *args, "--hosts", "nodeA,nodeB", dest],
                           env=env, capture_output=True, text=True, timeout=60)
        expect(g.returncode == 0, f"{args}: exit {g.returncode}: {g.stderr}")
        expect(args or "taking job train-2" in g.stderr, f"no word on the job taken: {g.stderr}")
        for h in ("nodeA", "nodeB"):
            jobs = traces_by_job(os.path.join(dest, h))
            expect(list(jobs) == [want] and len(jobs[want]) == 2,
                   f"{args}: {h} got {jobs}, expected the 2 traces of {want}")
        a = subprocess.run([LOCKSTEP, "analyze", os.path.join(dest, "nodeA")],
                           capture_output=True, text=True, timeout=60)
        expect(a.returncode == 0, f"analyze on the gathered job: {a.returncode} {a.stdout}")
    # Where lockstep is on the node's PATH, each node gives its node summary, not its traces.
    dest = os.path.join(tmp, "dest-summary")
    senv = dict(env, PATH=os.path.dirname(os.path.abspath(LOCKSTEP)) + ":" + env["PATH"])
    g = subprocess.run([GATHER, "--src", src, "--job", "train-1", "--hosts", "nodeA,nodeB", dest],
                       env=senv, capture_output=True, text=True, timeout=60)
    expect(g.returncode == 0, f"summaries: exit {g.returncode}: {g.stderr}")
    for h in ("nodeA", "nodeB"):
        names = sorted(os.listdir(os.path.join(dest, h)))
        expect(names == [h + ".summary"], f"summaries: {h} got {names}, expected {h}.summary")
    a = subprocess.run([LOCKSTEP, "analyze", "--json", os.path.join(dest, "nodeA")],
                       capture_output=True, text=True, timeout=60)
    expect(a.returncode == 0 and len(per_rank(json.loads(a.stdout))) == 2,
           f"analyze of a gathered summary: {a.returncode} {a.stderr}")
    for args, word in ((["--job", "a;rm -rf /"], "refusing --job"),
                       (["--src", "/tmp/x y"], "refusing --src"),
                       (["--hosts", "a b"], "refusing host name")):
        if "--hosts" not in args:
            args = args + ["--hosts", "nodeA"]
        bad = subprocess.run([GATHER, *args, os.path.join(tmp, "bad")], env=env,
                             capture_output=True, text=True, timeout=60)
        expect(bad.returncode == 2 and word in bad.stderr, f"{args}: {bad.returncode} {bad.stderr}")


def case_script_slurm(tmp):
    """--slurm inside an allocation of 2 nodes and 4 tasks runs one copy per node (--ntasks,
    --ntasks-per-node=1, --overlap where srun has it) and takes this allocation's job only;
    outside an allocation it says so and exits 2. The stand-in srun runs as many tasks as it is
    told (by default SLURM_NTASKS, as srun does), spread over nodes node0 and node1."""
    src = make_jobs(tmp, [{"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0"},
                          {"SLURM_JOB_ID": "4243", "SLURM_STEP_ID": "0"}])
    log = os.path.join(tmp, "srun.log")
    srun = stand_in(tmp, "srun", f"""log={log}
if [ "$1" = --help ]; then
    echo "Usage: srun [OPTIONS(0)... [executable(0) [args(0)...]]]"
    [ -n "$FAKE_SRUN_OVERLAP" ] && echo "      --overlap         share resources with other steps"
    exit 0
fi
echo "args $*" >> $log
n=${{SLURM_NTASKS:-1}}
while [ $# -gt 0 ]; do
    case "$1" in
    --ntasks=*) n=${{1#--ntasks=}}; shift ;;
    -*) shift ;;
    *) break ;;
    esac
done
echo "tasks $n" >> $log
for ((i = 0; i < n; i++)); do
    SLURMD_NODENAME=node$((i % 2)) SLURM_PROCID=$i "$@" &
done
wait
""")
    path = os.path.dirname(srun) + ":" + os.environ["PATH"]
    alloc = {"PATH": path, "SLURM_JOB_ID": "4242", "SLURM_NTASKS": "4",
             "SLURM_JOB_NUM_NODES": "2"}
    for overlap in ("1", ""):
        open(log, "w").close()
        dest = os.path.join(tmp, f"dest{overlap}")
        g = subprocess.run([GATHER, "--src", src, "--slurm", dest],
                           env=base_env(dict(alloc, FAKE_SRUN_OVERLAP=overlap)),
                           capture_output=True, text=True, timeout=60)
        expect(g.returncode == 0, f"exit {g.returncode}: {g.stderr}")
        lines = open(log).read().splitlines()
        args = [l for l in lines if l.startswith("args ")]
        expect(len(args) == 1, f"srun called {len(args)} times: {lines}")
        words = args[0].split()
        for w in ("--nodes=2", "--ntasks=2", "--ntasks-per-node=1"):
            expect(w in words, f"srun got {words}, without {w}")
        expect(("--overlap" in words) == bool(overlap),
               f"--overlap {'missing' if overlap else 'given to an srun without it'}: {words}")
        expect("tasks 2" in lines, f"the stand-in srun ran {lines[-1]}, expected 2 tasks")
        for node in ("node0", "node1"):
            jobs = traces_by_job(os.path.join(dest, node))
            expect(list(jobs) == ["4242.0"] and len(jobs["4242.0"]) == 2,
                   f"{node} got {jobs}, expected the 2 traces of job 4242.0")
    # With lockstep on the nodes' PATH: one node summary per node, no trace.
    dest = os.path.join(tmp, "dest-summary")
    senv = base_env(dict(alloc, PATH=os.path.dirname(os.path.abspath(LOCKSTEP)) + ":" + path))
    g = subprocess.run([GATHER, "--src", src, "--slurm", dest], env=senv, capture_output=True,
                       text=True, timeout=60)
    expect(g.returncode == 0, f"summaries: exit {g.returncode}: {g.stderr}")
    for node in ("node0", "node1"):
        names = sorted(os.listdir(os.path.join(dest, node)))
        expect(names == [node + ".summary"], f"summaries: {node} got {names}")
    a = subprocess.run([LOCKSTEP, "analyze", "--json", os.path.join(dest, "node0")],
                       capture_output=True, text=True, timeout=60)
    expect(a.returncode == 0 and len(per_rank(json.loads(a.stdout))) == 2,
           f"analyze of a gathered summary: {a.returncode} {a.stderr}")
    outside = dict(alloc)
    del outside["SLURM_JOB_ID"]
    env = base_env(outside)
    env.pop("SLURM_JOB_ID", None)
    open(log, "w").close()
    g = subprocess.run([GATHER, "--src", src, "--slurm", os.path.join(tmp, "d")], env=env,
                       capture_output=True, text=True, timeout=60)
    expect(g.returncode == 2 and "SLURM_JOB_ID is not set" in g.stderr,
           f"outside an allocation: exit {g.returncode}, {g.stderr}")
    expect("args" not in open(log).read(), "srun was called outside an allocation")


if __name__ == "__main__":
    sys.exit(run(globals(), "lockstep-gather-"))
