#!/usr/bin/env python3
"""test_run_lifecycle.py -- `lockstep run` must not change the job it watches, nor leave
anything behind: it keeps watching ranks that outlive their launcher (backgrounded, setsid,
double fork); it stops a job through its launcher first (a launcher of our own, real torchrun,
mpirun and srun), then the ranks, then their left-over processes, and reports who ended what;
no process of the job outlives `run`; its trace folder is its own, pruned, and small.

Usage: test_run_lifecycle.py CASE   (paths from the environment meson sets, see meson.build)
"""
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

from test_live import (LAUNCH, LOCKSTEP, SCENARIOS, SHIM, remove_tagged_segments,  # noqa: E402
                       tagged_env)
from harness import Skip, expect, needs, run  # noqa: E402
from report_ranks import per_rank  # noqa: E402
TAG = "rl%d" % os.getpid()  # names this case's emulator segments (LOCKSTEP_EMU_TAG)
FOLDERS = []  # trace folders of this case's runs: what is left of their jobs is killed at exit


def base_env(tmp, extra=None):
    return tagged_env(tmp, TAG, extra)


def remove_segments():
    remove_tagged_segments(TAG)


def lockstep_run(tmp, name, cmd, stall=1, run_args=(), env=None, timeout=120):
    """Runs `lockstep run` over CMD; returns (process, report dict or None, trace folder)."""
    d = os.path.join(tmp, "traces-" + name)
    FOLDERS.append(d)
    js = os.path.join(tmp, name + ".json")
    # Output into files, not pipes: a process left behind would hold a pipe open.
    out, err = os.path.join(tmp, name + ".out"), os.path.join(tmp, name + ".err")
    with open(out, "w") as o, open(err, "w") as e:
        p = subprocess.run([LOCKSTEP, "run", "--dir", d, "--stall", str(stall), "--json", js,
                            *run_args, "--", *cmd], env=env or base_env(tmp), stdout=o, stderr=e,
                           timeout=timeout)
    p.stdout, p.stderr = open(out).read(), open(err).read()
    remove_segments()
    report = json.load(open(js)) if os.path.exists(js) else None
    return p, report, d


def job_processes(d):
    """Live processes whose environment names trace folder `d` (every process `run` started,
    and whatever those started): must be none once `run` has exited."""
    want = b"LOCKSTEP_DIR=" + os.fsencode(d) + b"\0"
    left = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read()
        except OSError:
            continue
        if want in environ and stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
            left.append(f"{pid} {stat.split(')')[0].split('(', 1)[1]}")
    return left


def kill_left(d):
    """Kills what is left of the job of folder `d` (not to leave it to the next case)."""
    left = job_processes(d)
    for entry in left:
        try:
            os.kill(int(entry.split()[0]), signal.SIGKILL)
        except OSError:
            pass
    return left


def expect_nothing_left(d, p):
    left = kill_left(d)
    expect(not left, f"processes of the job outlived lockstep run: {left}\n{p.stdout}\n{p.stderr}")


def expect_stall(p, report, kind):
    expect(p.returncode == 3, f"lockstep run exited {p.returncode}, expected 3\n{p.stdout}\n"
                              f"{p.stderr}")
    expect(report is not None and report["findings"], f"no findings\n{p.stderr}")
    f = report["findings"][0]
    expect(f["kind"] == kind, f"first finding {f['kind']}, expected {kind}: {f['summary']}")
    expect(f"[{kind}]" in p.stdout, "the text report was not printed")


def stopped(report, p):
    expect("stopped" in report, f"the JSON report has no 'stopped' list\n{p.stdout}")
    return report["stopped"]


def stop_line(p):
    lines = [l for l in p.stdout.splitlines() if l.startswith("stopped the job in ")]
    expect(len(lines) == 1, f"one line 'stopped the job in ...' on stdout:\n{p.stdout}")
    return lines[0]


def ranks_of(entries):
    return sorted(e["rank"] for e in entries if e["role"].startswith("rank "))


def rank_cmd(mode, extra=""):
    """A shell line that starts one rank of SCENARIOS with the shim's environment as given."""
    return f"{extra}exec {SCENARIOS} {mode}"


# ---------------------------------------------------------------- 4. no process left behind


@needs("subreaper")
def case_orphans(tmp):
    """A launcher script that backgrounds its ranks and exits without waiting: two with
    setsid, two by a double fork. run keeps watching them, diagnoses their hang, stops them
    and lists them."""
    script = ("for r in 0 1; do RANK=$r WORLD_SIZE=4 setsid -f sh -c '%s'; done; "
              "for r in 2 3; do ( RANK=$r WORLD_SIZE=4 sh -c '%s' & ); done"
              % (rank_cmd("uneven_shards"), rank_cmd("uneven_shards")))
    p, report, d = lockstep_run(tmp, "orphans", ["sh", "-c", script])
    expect_stall(p, report, "op_mismatch")
    expect("sh exited (status 0) but" in p.stderr and "watching them" in p.stderr,
           f"run did not say that CMD exited while its ranks run on:\n{p.stderr}")
    s = stopped(report, p)
    expect(ranks_of(s) == [0, 1, 2, 3], f"stopped ranks {ranks_of(s)}: {s}")
    expect(all(e["by"] == "lockstep" and e["signal"] == "SIGTERM" and not e["alive"]
               for e in s if e["role"].startswith("rank")), f"how the ranks were stopped: {s}")
    line = stop_line(p)
    expect("the launcher sh had exited before" in line and "lockstep ended 4 ranks with SIGTERM"
           in line, f"stop line: {line}")
    expect_nothing_left(d, p)


@needs("subreaper")
def case_orphans_finish(tmp):
    """Ranks that outlive their launcher and end by themselves: run waits for them and exits
    with the job's status: 0 when they end well, the crash's status when one crashes (the rank
    starts only after the launcher is gone, so at first nothing is traced)."""
    script = ("for r in 0 1; do ( RANK=$r WORLD_SIZE=2 sh -c '%s' & ); done"
              % rank_cmd("pauses"))
    env = base_env(tmp, {"SCENARIO_DELAY_MS": "400", "SCENARIO_STEPS": "2"})
    p, report, d = lockstep_run(tmp, "clean", ["sh", "-c", script], stall=30, env=env)
    expect(p.returncode == 0, f"exit {p.returncode}, expected 0\n{p.stderr}")
    # (Traced or not yet, as the ranks start: the line is written once, when sh exits.)
    expect("sh exited (status 0) but 2 " in p.stderr and "watching them" in p.stderr,
           f"run did not say it watches the 2 ranks:\n{p.stderr}")
    expect(report is not None and report["findings"] == [] and len(per_rank(report)) == 2,
           f"clean report of 2 ranks: {report and report['findings']}")
    expect(all(r["state"] == "exited" for r in per_rank(report)),
           f"run wrote its report before the ranks ended: {[r['state'] for r in per_rank(report)]}")
    expect_nothing_left(d, p)

    script = "( sleep 1; RANK=0 WORLD_SIZE=1 sh -c '%s' ) &" % rank_cmd("segfault")
    p, report, d = lockstep_run(tmp, "crash", ["sh", "-c", script], stall=30)
    expect(p.returncode == 128 + 11, f"exit {p.returncode}, expected 139 (the rank's crash)\n"
                                     f"{p.stderr}")
    expect("0 traced): watching them" in p.stderr,
           f"run did not say it waits for untraced processes:\n{p.stderr}")
    expect(report and report["findings"] and report["findings"][0]["kind"] == "rank_crashed",
           "the crash is the post-mortem's finding")
    expect_nothing_left(d, p)


# ---------------------------------------------------------------- the calling shell's own


def bash_line(tmp, name, line, env, timeout=60):
    """Runs `line` in real bash (process substitution and pipes are bash's); returns the
    process, with the failure said when run did not end by itself."""
    try:
        return subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as e:
        expect(False, f"{name}: lockstep run never exited ({timeout} s): {e.stderr}")


def case_shell(tmp):
    """What the calling shell gave `run` is not the job: a `tee` of bash's process
    substitution (a child of run, forked before bash exec'd it) is neither waited for nor
    stopped; a reader that goes away (`| head -1`) never costs the stop, the --json report or
    the exit status 3."""
    env = base_env(tmp)
    run = f"{LOCKSTEP} run --stall 1"
    # 1. The job fails before any NCCL call while the tee runs on: run exits with its status.
    log = os.path.join(tmp, "early.log")
    d = os.path.join(tmp, "traces-early")
    FOLDERS.append(d)
    p = bash_line(tmp, "early failure", f"{run} --dir {d} -- sh -c 'exit 7' "
                  f"2> >(tee {log} >&2)", env)
    expect(p.returncode == 7, f"early failure: exit {p.returncode}, want 7\n{p.stderr}")
    expect("still runs" not in p.stderr and "tee" not in p.stderr,
           f"run took the shell's tee for a process of the job:\n{p.stderr}")
    # 2. A hang, with the tee beside it: exit 3, the whole report, the tee left alone.
    log = os.path.join(tmp, "hang.log")
    d = os.path.join(tmp, "traces-hang")
    js = os.path.join(tmp, "hang.json")
    FOLDERS.append(d)
    p = bash_line(tmp, "hang", f"{run} --dir {d} --json {js} -- {LAUNCH} --np 2 -- "
                  f"{SCENARIOS} uneven_shards 2> >(tee {log} >&2); echo run-exit=$?", env)
    expect("run-exit=3" in p.stdout, f"hang: {p.stdout}\n{p.stderr}")
    line = stop_line(p)
    expect("tee" not in line and "left-over" not in line, f"run stopped the shell's tee: {line}")
    expect("[op_mismatch]" in p.stdout, f"the report is incomplete:\n{p.stdout}")
    report = json.load(open(js))
    expect(ranks_of(stopped(report, p)) == [0, 1], f"stopped: {report.get('stopped')}")
    time.sleep(0.5)  # the tee ends once run's stderr closes
    expect("diagnosing the live job" in open(log).read(), f"the tee's copy: {open(log).read()}")
    expect_nothing_left(d, p)
    # 3. `| head -1`: head reads one line and exits; run stops the job all the same, writes its
    # report file and exits 3 (pipefail's status), never 141 (SIGPIPE).
    d = os.path.join(tmp, "traces-head")
    js = os.path.join(tmp, "head.json")
    FOLDERS.append(d)
    log = os.path.join(tmp, "head.log")
    p = bash_line(tmp, "head", f"set -o pipefail; {run} --dir {d} --json {js} --log {log} -- "
                  f"{LAUNCH} --np 2 -- {SCENARIOS} uneven_shards | head -1; echo run-exit=$?",
                  env)
    expect("run-exit=3" in p.stdout, f"| head -1: {p.stdout}\n{p.stderr}")
    report = json.load(open(js))
    expect(report["findings"][0]["kind"] == "op_mismatch" and
           ranks_of(stopped(report, p)) == [0, 1], f"| head -1: the report file {report}")
    expect(f"stdout went away (a closed pipe or terminal): the report is kept in {js}, {log}"
           in p.stderr, f"run did not say where the report went:\n{p.stderr}")
    # The log has everything run said, on both streams, in order: the report whole.
    text = open(log).read()
    order = ["lockstep: tracing", "made no progress", "[op_mismatch]", "ranks (anon-",
             "stopped the job in ", "traces kept in"]
    at = [text.find(w) for w in order]
    expect(all(a >= 0 for a in at) and at == sorted(at), f"the --log file {at}:\n{text}")
    # (When head has gone is up to the scheduler: anywhere after run's first line.)
    expect(text.find("stdout went away") > 0, f"the log does not say where stdout went:\n{text}")
    expect_nothing_left(d, p)
    # 4. A coprocess of the shell that exec'd run: not the job either.
    d = os.path.join(tmp, "traces-coproc")
    FOLDERS.append(d)
    p = bash_line(tmp, "coproc", f"coproc sleep 5 2>/dev/null; exec {run} --dir {d} -- sh -c 'exit 5'", env)
    expect(p.returncode == 5 and "still runs" not in p.stderr,
           f"coprocess: exit {p.returncode}\n{p.stderr}")


def analyze_folder(d):
    """`lockstep analyze` of a kept trace folder: (text, JSON report)."""
    text = subprocess.run([LOCKSTEP, "analyze", d], capture_output=True, text=True, timeout=60)
    js = subprocess.run([LOCKSTEP, "analyze", "--json", d], capture_output=True, text=True,
                        timeout=60)
    expect(js.returncode in (0, 1), f"analyze --json {d}: {js.returncode} {js.stderr}")
    return text.stdout, json.loads(js.stdout)


def case_stopped_folder(tmp):
    """After run stopped a hung job, `lockstep analyze` of its folder says so ("stopped by
    lockstep run after a stall of 1.0 s") and shows the ranks as they were (waiting), never
    "crashed", with the findings run gave live; a rank that died before the stop (SIGKILL,
    as the OOM killer does) stays dead, and is still the cause."""
    p, live, d = lockstep_run(tmp, "stopped", [LAUNCH, "--np", "2", "--", SCENARIOS,
                                               "uneven_shards"])
    expect_stall(p, live, "op_mismatch")
    text, report = analyze_folder(d)
    expect("stopped by lockstep run after a stall of" in text and "crashed" not in text and
           "stopped with the job" not in text, f"analyze after run's stop:\n{text}")
    states = sorted((r["rank"], r["state"]) for r in per_rank(report))
    expect(states == [(0, "in_call"), (1, "in_call")], f"rank states after the stop: {states}")
    by = report["jobs"][0].get("stopped_by")
    expect(by and by["by"] == "run" and by["signal"] == "SIGTERM" and by["ranks"] == "0-1" and
           by["stall_s"] >= 1.0, f"stopped_by: {by}")
    expect([f["kind"] for f in report["findings"]] == [f["kind"] for f in live["findings"]],
           f"post-mortem {[f['summary'] for f in report['findings']]} != live "
           f"{[f['summary'] for f in live['findings']]}")
    # A node summary of the folder carries the record: the same report from it.
    summary = os.path.join(tmp, "stopped.summary")
    s = subprocess.run([LOCKSTEP, "summarize", "-o", summary, d], capture_output=True, text=True,
                       timeout=60)
    expect(s.returncode == 0, f"summarize: {s.stderr}")
    text2, _ = analyze_folder(summary)
    expect(text2 == text, f"the summary's report differs:\n{text2}\nfrom the folder's:\n{text}")

    # Rank 1 is SIGKILLed mid-job; ranks 0, 2, 3 wait for it until run stops them.
    env = base_env(tmp, {"SCENARIO_VICTIM": "1"})
    p, live, d = lockstep_run(tmp, "killed", [LAUNCH, "--np", "4", "--", SCENARIOS, "sigkill"],
                              env=env)
    expect(p.returncode == 3, f"run: exit {p.returncode}\n{p.stderr}")
    text, report = analyze_folder(d)
    states = dict((r["rank"], r["state"]) for r in per_rank(report))
    expect(states[1] != "in_call" and all(states[r] == "in_call" for r in (0, 2, 3)),
           f"states: {states}\n{text}")
    by = report["jobs"][0].get("stopped_by")
    expect(by and by["ranks"] == "0,2-3", f"stopped_by: {by}")
    first = report["findings"][0]
    expect(1 in first.get("ranks", [1]) and "1" in first["summary"],
           f"the first finding is not rank 1's death: {first['summary']}")


# ---------------------------------------------------------------- 5. stopping a job


LAUNCHER = r"""
import os, signal, subprocess, sys, time
n, delay = int(sys.argv[1]), float(sys.argv[2])
ranks = [subprocess.Popen(sys.argv[3:], start_new_session=True,
                          env=dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(n)))
         for r in range(n)]
got = []
signal.signal(signal.SIGTERM, lambda sig, frame: got.append(sig))
while not got and any(p.poll() is None for p in ranks):
    time.sleep(0.02)
if got:
    time.sleep(delay)  # a launcher that takes its time before it tears its job down
    for p in ranks:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in ranks:
        p.wait()
    sys.exit(128 + got[0])
"""


def case_launcher_first(tmp):
    """A launcher that puts each rank in a session of its own (as torchrun of torch 2 does),
    takes 0.3 s to stop them on SIGTERM, and whose ranks each leave a helper process behind:
    the launcher is signalled first and ends its ranks itself; the helpers, orphaned, are
    found and ended by lockstep and named with their rank."""
    launcher = os.path.join(tmp, "launcher.py")
    with open(launcher, "w") as f:
        f.write(LAUNCHER)
    rank = "sleep 60 & " + rank_cmd("uneven_shards")
    p, report, d = lockstep_run(tmp, "first", [sys.executable, launcher, "4", "0.3", "sh", "-c",
                                               rank])
    expect_stall(p, report, "op_mismatch")
    s = stopped(report, p)
    launchers = [e for e in s if e["role"] == "launcher"]
    expect(len(launchers) == 1 and launchers[0]["signal"] == "SIGTERM" and
           launchers[0]["by"] == "lockstep", f"the launcher: {launchers}")
    ranks = [e for e in s if e["role"].startswith("rank ")]
    expect(ranks_of(ranks) == [0, 1, 2, 3] and all(e["by"] == "launcher" for e in ranks),
           f"the ranks must be ended by their launcher, not by lockstep: {ranks}")
    helpers = [e for e in s if e["role"] == "descendant" and e["command"] == "sleep"]
    expect(len(helpers) == 4 and all(e["by"] == "lockstep" and not e["alive"] for e in helpers),
           f"each rank's helper ended by lockstep: {helpers}")
    expect(sorted(e["relation"] for e in helpers) == [f"child of rank {r}" for r in range(4)],
           f"helpers named by their rank: {[e['relation'] for e in helpers]}")
    # Under a sanitizer the launcher's leak check at exit runs in a clone of it (same command,
    # a child of the launcher, gone in a moment): the launcher ended it, and only that is
    # allowed beside the ranks and the helpers.
    others = [e for e in s if e["role"] == "descendant" and e["command"] != "sleep"]
    lsan = [e for e in others if e["relation"] == "child of the launcher" and
            e["command"] == launchers[0]["command"] and e["by"] == "launcher"]
    expect(others == lsan and (not lsan or "ASAN_OPTIONS" in os.environ),
           f"nothing but the ranks and their helpers (and a sanitizer's leak checker): {others}")
    line = stop_line(p)
    ended = " took SIGTERM and ended 4 ranks in " if not lsan else \
        f" took SIGTERM and ended 4 ranks and {len(lsan)} left-over process"
    expect(ended in line and
           "lockstep ended 4 left-over processes with SIGTERM: pid " in line and
           "(sleep, child of rank " in line, f"stop line: {line}")
    expect_nothing_left(d, p)


def case_stubborn(tmp):
    """launch-ranks forwards SIGTERM, but rank 3 and every rank's helper ignore it: after the
    grace (1 s here, --grace) lockstep SIGTERMs what is left, then SIGKILLs it; the launcher,
    once its ranks are gone, exits by itself and is never killed."""
    rank = ('if [ "$RANK" = 3 ]; then trap "" TERM; fi; (trap "" TERM; exec sleep 60) & '
            + rank_cmd("uneven_shards"))
    p, report, d = lockstep_run(tmp, "stubborn", [LAUNCH, "--np", "4", "--", "sh", "-c", rank],
                                run_args=("--grace", "1"))
    expect_stall(p, report, "op_mismatch")
    s = stopped(report, p)
    by = {e["role"]: e for e in s if e["role"] != "descendant"}
    expect(by["launcher"]["signal"] == "SIGTERM" and not by["launcher"]["alive"],
           f"the launcher took SIGTERM only and exited: {by['launcher']}")
    expect(all(by[f"rank {r}"]["by"] == "launcher" for r in range(3)),
           f"ranks 0-2 ended by the launcher: {s}")
    expect(by["rank 3"]["by"] == "lockstep" and by["rank 3"]["signal"] == "SIGKILL",
           f"rank 3 ignores SIGTERM: lockstep kills it: {by['rank 3']}")
    # (A sanitizer's leak checker may show up too, as a short-lived child of the launcher.)
    helpers = [e for e in s if e["role"] == "descendant" and e["command"] == "sleep"]
    expect(len(helpers) == 4 and all(e["signal"] == "SIGKILL" and e["by"] == "lockstep"
                                     for e in helpers), f"helpers killed: {helpers}")
    line = stop_line(p)
    expect("lockstep killed 1 rank and 4 left-over processes with SIGKILL" in line,
           f"stop line: {line}")
    expect_nothing_left(d, p)


def case_watch_kill(tmp):
    """watch --kill has no launcher to ask: it ends the traced ranks, and reports it."""
    d = os.path.join(tmp, "w")
    os.mkdir(d, 0o700)
    env = base_env(tmp, {"LD_PRELOAD": SHIM, "LOCKSTEP_DIR": d})
    job = subprocess.Popen([LAUNCH, "--np", "2", "--", SCENARIOS, "uneven_shards"], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        js = os.path.join(tmp, "w.json")
        p = subprocess.run([LOCKSTEP, "watch", "--stall", "1", "--json", js, "--kill", d],
                           env=base_env(tmp), capture_output=True, text=True, timeout=60)
        expect(p.returncode == 3, f"watch exited {p.returncode}\n{p.stderr}")
        s = stopped(json.load(open(js)), p)
        expect(ranks_of(s) == [0, 1] and all(e["by"] == "lockstep" for e in s),
               f"watch --kill stopped {s}")
        expect("lockstep ended 2 ranks with SIGTERM" in stop_line(p), stop_line(p))
    finally:
        job.wait(timeout=30)


# ---------------------------------------------------------------- real launchers


def launcher_case(tmp, name, cmd, env, kind="op_mismatch"):
    p, report, d = lockstep_run(tmp, name, cmd, env=env)
    expect_stall(p, report, kind)
    s = stopped(report, p)
    launchers = [e for e in s if e["role"] == "launcher"]
    expect(len(launchers) == 1 and launchers[0]["signal"] == "SIGTERM",
           f"the launcher must be signalled (SIGTERM) and named: {s}")
    line = stop_line(p)
    expect(line.split(": ", 1)[1].startswith(f"{launchers[0]['command']} (pid "),
           f"the stop line names the launcher first: {line}")
    expect_nothing_left(d, p)
    print(f"{name}: {line}")
    return p, report, s


def case_torchrun(tmp):
    """Real torchrun (Debian's python3-torch)."""
    torchrun = shutil.which("torchrun")
    if not torchrun:
        raise Skip("torchrun is not installed (Debian package python3-torch)")
    # Python 3.11 needs its output redirected (torch 1.13 fails to map it otherwise).
    launcher_case(tmp, "torchrun", [torchrun, "--standalone", "--nproc_per_node", "4",
                                    "--monitor_interval", "0.1", "--redirects", "2", "--tee", "2",
                                    "--no_python", SCENARIOS, "uneven_shards"], base_env(tmp))


def case_mpirun(tmp):
    """Real mpirun (Open MPI): it continues its ranks, SIGTERMs them a second later."""
    mpirun = shutil.which("mpirun")
    if not mpirun:
        raise Skip("mpirun is not installed (Debian package openmpi-bin)")
    export = [a for k in ("LD_LIBRARY_PATH", "LOCKSTEP_TEST_IDFILE", "LOCKSTEP_EMU_TAG")
              for a in ("-x", k)]
    launcher_case(tmp, "mpirun", [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "4",
                                  *export, SCENARIOS, "uneven_shards"], base_env(tmp))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SLURM_CONF = """ClusterName=lockstep
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
KillWait=5
NodeName={host} CPUs=16 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


class LocalSlurm:
    """A one-node Slurm (slurmctld and slurmd of this host, no munge: auth/none), started for
    one case and stopped after it."""

    def __init__(self, tmp):
        for prog in ("srun", "slurmctld", "slurmd", "squeue", "sinfo"):
            if not shutil.which(prog):
                raise Skip(f"{prog} is not installed (Debian package slurm-wlm)")
        if os.getuid() != 0:
            raise Skip("a local Slurm needs root (slurmd launches the tasks)")
        self.dir = os.path.join(tmp, "slurm")
        for sub in ("state", "spool"):
            os.makedirs(os.path.join(self.dir, sub))
        self.conf = os.path.join(self.dir, "slurm.conf")
        with open(self.conf, "w") as f:
            f.write(SLURM_CONF.format(host=socket.gethostname().split(".")[0], dir=self.dir,
                                      ctld_port=free_port(), d_port=free_port()))
        self.env = dict(os.environ, SLURM_CONF=self.conf)

    def __enter__(self):
        for daemon in (["slurmctld", "-i"], ["slurmd"]):
            subprocess.run(daemon, env=self.env, check=False, timeout=30)
        deadline = time.time() + 15
        while time.time() < deadline:
            s = subprocess.run(["sinfo", "-h", "-o", "%T"], env=self.env, capture_output=True,
                               text=True, timeout=30)
            if s.stdout.strip() == "idle":
                return self
            time.sleep(0.1)
        logs = "".join(open(os.path.join(self.dir, f)).read()[-600:]
                       for f in ("slurmctld.log", "slurmd.log")
                       if os.path.exists(os.path.join(self.dir, f)))
        self.__exit__()
        raise Skip(f"a one-node Slurm did not come up within 15 s here: {logs}")

    def jobs(self):
        q = subprocess.run(["squeue", "-h", "-o", "%i %T"], env=self.env, capture_output=True,
                           text=True, timeout=30)
        return q.stdout.split("\n") if q.stdout.strip() else []

    def __exit__(self, *exc):
        for name in ("slurmd.pid", "slurmctld.pid"):
            try:
                pid = int(open(os.path.join(self.dir, name)).read())
                os.kill(pid, signal.SIGTERM)
                deadline = time.time() + 10
                while time.time() < deadline and os.path.exists(f"/proc/{pid}"):
                    time.sleep(0.05)
            except (OSError, ValueError):
                pass


def case_srun(tmp):
    """Real srun with a one-node Slurm: srun takes one SIGTERM and ends its step; it is never
    SIGKILLed, and the allocation is gone when run exits."""
    with LocalSlurm(tmp) as slurm:
        env = base_env(tmp, {"SLURM_CONF": slurm.conf})
        p, report, s = launcher_case(tmp, "srun", ["srun", "-n", "4", SCENARIOS,
                                                   "uneven_shards"], env)
        srun = [e for e in s if e["role"] == "launcher"][0]
        expect(srun["command"] == "srun" and srun["by"] == "lockstep" and
               srun["signal"] == "SIGTERM", f"srun took one SIGTERM and exited: {srun}")
        deadline = time.time() + 10
        while slurm.jobs() and time.time() < deadline:
            time.sleep(0.1)
        expect(not slurm.jobs(), f"the allocation outlived the run: {slurm.jobs()}")


# ---------------------------------------------------------------- 6. no RAM left behind


def run_plain(args, env, timeout=60):
    return subprocess.run([LOCKSTEP, "run", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def case_dir_checks(tmp):
    """--dir must be a folder of our own that no other job writes: anything else is refused
    with exit 2 and a message naming the problem."""
    env = base_env(tmp)

    def refused(d, words, what):
        p = run_plain(["--dir", d, "--", "true"], env)
        expect(p.returncode == 2 and words in p.stderr,
               f"{what}: exit {p.returncode}, want 2 and '{words}' in: {p.stderr}")

    refused("/tmp", "is writable by others (mode 1777)", "a world-writable folder")
    shared = os.path.join(tmp, "shared")
    os.mkdir(shared)
    os.chmod(shared, 0o770)
    refused(shared, "is writable by others (mode 770)", "a group-writable folder")
    mine = os.path.join(tmp, "mine")
    os.mkdir(mine, 0o700)
    link = os.path.join(tmp, "link")
    os.symlink(mine, link)
    refused(link, "is a symlink", "a symlink")
    afile = os.path.join(tmp, "afile")
    open(afile, "w").close()
    refused(afile, "not a folder", "a file")
    if os.getuid() == 0:
        theirs = os.path.join(tmp, "theirs")
        os.mkdir(theirs, 0o700)
        os.chown(theirs, 65534, 65534)
        refused(theirs, "belongs to uid 65534", "another user's folder")
    # A folder another job still writes into.
    busy = os.path.join(tmp, "busy")
    os.mkdir(busy, 0o700)
    job = subprocess.Popen([LAUNCH, "--np", "1", "--", SCENARIOS, "pauses"],
                           env=base_env(tmp, {"LD_PRELOAD": SHIM, "LOCKSTEP_DIR": busy,
                                              "SCENARIO_DELAY_MS": "30000"}),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 20
        while not any(n.endswith(".trace") for n in os.listdir(busy)) and time.time() < deadline:
            time.sleep(0.05)
        refused(busy, "which still runs", "a folder with a live process's trace")
    finally:
        job.terminate()
        job.wait(timeout=30)
    # A folder another lockstep run uses.
    first = subprocess.Popen([LOCKSTEP, "run", "--dir", mine, "--", "sleep", "3"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 10
        while "tracing" not in (first.stderr.readline() or "tracing") and time.time() < deadline:
            pass
        refused(mine, "in use by another lockstep run", "a folder of a run still going")
    finally:
        first.terminate()
        first.wait(timeout=30)
    # A new folder is made 0700 (seen by the job: one without NCCL leaves no folder behind).
    mode = os.path.join(tmp, "mode")
    p = run_plain(["--dir", os.path.join(tmp, "new"), "--", "sh", "-c",
                   'stat -c %a "$LOCKSTEP_DIR" > "$0"', mode], env)
    expect(p.returncode == 0 and open(mode).read().strip() == "700",
           f"a new folder is made 0700: {open(mode).read() if os.path.exists(mode) else ''} "
           f"{p.stderr}")


def case_dir_reuse(tmp):
    """A second run in the same --dir reports on itself alone: the first run's traces (a
    crash) are moved to DIR.old; a third run replaces DIR.old with the second's."""
    d, old = os.path.join(tmp, "traces"), os.path.join(tmp, "traces.old")
    env = base_env(tmp)
    crash = run_plain(["--dir", d, "--stall", "30", "--", LAUNCH, "--np", "2", "--fail-fast",
                       "--", SCENARIOS, "segfault"], env)
    expect(crash.returncode == 128 + 11, f"first run: exit {crash.returncode}\n{crash.stderr}")
    for n in (2, 3):
        js = os.path.join(tmp, f"run{n}.json")
        p = run_plain(["--dir", d, "--stall", "30", "--json", js, "--", LAUNCH, "--np", "2",
                       "--", SCENARIOS, "clean"], env)
        expect(p.returncode == 0, f"run {n}: exit {p.returncode}: an earlier run's traces in its "
                                  f"report?\n{p.stdout}\n{p.stderr}")
        r = json.load(open(js))
        expect(r["findings"] == [] and len(per_rank(r)) == 2,
               f"run {n}: findings {[f['kind'] for f in r['findings']]}, {len(per_rank(r))} ranks")
        expect(f"held 2 traces of an earlier run: moved to {old}" in p.stderr,
               f"run {n} did not say where the earlier traces went:\n{p.stderr}")
        expect(n == 2 or "the traces of the run before it were removed" in p.stderr,
               f"run 3 did not say that the first run's traces were removed:\n{p.stderr}")
        a = subprocess.run([LOCKSTEP, "analyze", "--json", d], capture_output=True, text=True,
                           timeout=60)
        expect(a.returncode == 0, f"run {n}: analyze {d} exit {a.returncode}")
        a = subprocess.run([LOCKSTEP, "analyze", "--json", old], capture_output=True, text=True,
                           timeout=60)
        want = 1 if n == 2 else 0  # the crash of run 1, then the clean run 2
        expect(a.returncode == want and len(per_rank(json.loads(a.stdout))) == 2,
               f"run {n}: analyze {old} exit {a.returncode}, want {want}")


# Header offsets (docs/trace-format.md).
H_PID, H_START_NS, H_HEARTBEAT_NS, H_END_KIND, H_END_NS, H_START_TICKS = (
    120, 152, 840, 868, 888, 3056)


def patch(path, fields):
    with open(path, "r+b") as f:
        for off, size, value in fields:
            f.seek(off)
            f.write(value.to_bytes(size, "little"))


def start_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def one_trace(tmp):
    """The trace of a clean one-rank job (a small ring), to copy into made-up run folders."""
    d = os.path.join(tmp, "src")
    p = run_plain(["--dir", d, "--stall", "30", "--", LAUNCH, "--np", "1", "--", SCENARIOS,
                   "clean"], base_env(tmp, {"LOCKSTEP_RING": "64"}))
    expect(p.returncode == 0, f"the source job failed: {p.stderr}")
    return os.path.join(d, [n for n in os.listdir(d) if n.endswith(".trace")][0])


def shm_folder(name):
    """A folder of ours in /dev/shm, where traces are kept by default (tmpfs counts blocks
    reserved and never written as holes, unlike most disk filesystems)."""
    base = f"/dev/shm/lockstep-{os.getuid()}"
    os.makedirs(base, mode=0o700, exist_ok=True)
    return os.path.join(base, f"{TAG}-{name}")


def case_prune(tmp):
    """Run folders whose processes ended longer ago than LOCKSTEP_RETAIN_HOURS are removed
    when a run starts; never one that is recent, whose process lives, that a run holds, or that
    holds files not ours. (In a runs folder of this case's own, LOCKSTEP_RUNS_DIR: runs of other
    tests prune /dev/shm/lockstep-UID meanwhile.)"""
    base = shm_folder("runs")
    src = one_trace(tmp)
    long_ago = time.time_ns() - 100 * 3600 * 10**9
    helper = subprocess.Popen(["sleep", "60"])
    made = {}
    locked = None
    try:
        os.mkdir(base, 0o700)
        for name in ("expired", "recent", "alive", "foreign", "locked", "empty"):
            d = os.path.join(base, f"run-{name}")
            made[name] = d
            os.mkdir(d, 0o700)
            if name == "empty":
                os.utime(d, ns=(long_ago, long_ago))
                continue
            t = os.path.join(d, os.path.basename(src))
            shutil.copyfile(src, t)
            if name != "recent":
                patch(t, [(H_START_NS, 8, long_ago), (H_HEARTBEAT_NS, 8, long_ago),
                          (H_END_NS, 8, long_ago)])
            if name == "alive":  # a process that runs (as if its end were not recorded)
                patch(t, [(H_PID, 4, helper.pid), (H_START_TICKS, 8, start_ticks(helper.pid)),
                          (H_END_KIND, 4, 0)])
            if name == "foreign":
                open(os.path.join(d, "notes.txt"), "w").close()
            if name == "locked":
                locked = os.open(d, os.O_RDONLY)
                fcntl.flock(locked, fcntl.LOCK_EX)
        env = base_env(tmp, {"LOCKSTEP_RUNS_DIR": base})
        p = run_plain(["--", "true"], dict(env, LOCKSTEP_RETAIN_HOURS="0"))
        expect(p.returncode == 0 and all(os.path.isdir(d) for d in made.values()),
               f"LOCKSTEP_RETAIN_HOURS=0 keeps everything: {p.stderr}")
        p = run_plain(["--", "true"], env)
        expect(p.returncode == 0, f"lockstep run: {p.stderr}")
        gone = sorted(n for n, d in made.items() if not os.path.exists(d))
        expect(gone == ["empty", "expired"], f"removed {gone}, want the expired and the empty "
                                             f"one:\n{p.stderr}")
        expect(f"removed 2 run folders from {base} whose processes ended over 72 h ago"
               in p.stderr, f"the pruning was not said: {p.stderr}")
        # Each run made a run-XXXXXX of its own there, and removed it: `true` wrote no trace.
        expect(f"the job wrote no traces (no NCCL call was seen); removed {base}/run-"
               in p.stderr, f"the empty run folder: {p.stderr}")
        runs = sorted(n for n in os.listdir(base) if n.startswith("run-") and n[4:] not in made)
        expect(runs == [], f"empty run folders left in {base}: {runs}")
        p = run_plain(["--", "true"], base_env(tmp))
        expect(f"removed /dev/shm/lockstep-{os.getuid()}/run-" in p.stderr,
               f"without LOCKSTEP_RUNS_DIR a run traces into /dev/shm/lockstep-UID: {p.stderr}")
    finally:
        helper.kill()
        helper.wait()
        if locked is not None:
            os.close(locked)
        shutil.rmtree(base, ignore_errors=True)


def case_no_calls_leave_nothing(tmp):
    """A job that made no NCCL call leaves no folder behind: not its run folder, not the
    per-user folder lockstep made for it (/dev/shm/lockstep-UID, seen here on an empty /dev/shm
    of a mount namespace of its own). A --dir stays (the user named it), and the run says it got
    no traces there rather than "traces kept (0 traces)"."""
    env = base_env(tmp)
    for name, make in (("new-dir", False), ("old-dir", True)):
        d = os.path.join(tmp, name)
        if make:
            os.mkdir(d, 0o700)
        p = run_plain(["--dir", d, "--", "true"], env)
        expect(p.returncode == 0 and os.path.isdir(d), f"--dir {d} is gone: {p.stderr}")
        expect(f"the job wrote no traces into {d}" in p.stderr and "traces kept" not in p.stderr,
               f"what the run said of {d}: {p.stderr}")
    if os.geteuid() != 0 or not shutil.which("unshare"):
        raise Skip("the per-user folder is checked on a /dev/shm of its own: needs root and unshare")
    script = ('mount -t tmpfs -o mode=1777 tmpfs /dev/shm || exit 90; "$0" run -- true || exit 91; '
              'ls -A /dev/shm')
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                        LOCKSTEP], env=env, capture_output=True, text=True, timeout=60)
    if p.returncode == 90 or "unshare failed" in p.stderr:
        raise Skip(f"no mount namespace of its own here: {p.stderr.strip()}")
    expect(p.returncode == 0, f"lockstep run -- true on an empty /dev/shm: {p.stderr}")
    expect(f"/dev/shm/lockstep-{os.getuid()}/run-" in p.stderr,
           f"the run did not trace into /dev/shm/lockstep-UID: {p.stderr}")
    expect(p.stdout.strip() == "", f"left in /dev/shm by a job without NCCL: {p.stdout.split()}")


def blocks(path):
    return os.stat(path).st_blocks * 512


def case_compact(tmp):
    """What a run keeps is what analyze reads: traces of ended processes lose their all-zero
    pages (the files read the same, byte for byte); run says where they are and how much."""
    d, copy = shm_folder("traces"), os.path.join(tmp, "copy")
    old, own = d + ".old", []
    try:
        os.mkdir(d, 0o700)
        job = subprocess.run([LAUNCH, "--np", "4", "--", SCENARIOS, "clean"],
                             env=base_env(tmp, {"LD_PRELOAD": SHIM, "LOCKSTEP_DIR": d}),
                             capture_output=True, timeout=60)
        expect(job.returncode == 0, f"the job failed: {job.stderr}")
        shutil.copytree(d, copy)
        names = sorted(n for n in os.listdir(d) if n.endswith(".trace"))
        before = sum(blocks(os.path.join(d, n)) for n in names)
        # Moved aside by the next run in the same folder, and compacted there.
        p = run_plain(["--dir", d, "--", "true"], base_env(tmp))
        expect(p.returncode == 0, f"lockstep run: {p.stderr}")
        expect(os.path.isdir(old) and sorted(os.listdir(old)) == names,
               f"the earlier traces were not moved to {old}: {p.stderr}")
        after = sum(blocks(os.path.join(old, n)) for n in names)
        for n in names:
            with open(os.path.join(copy, n), "rb") as a, open(os.path.join(old, n), "rb") as b:
                expect(a.read() == b.read(), f"{n} reads differently after compaction")
        expect(after * 8 < before, f"4 traces hold {after} bytes after, {before} before")
        print(f"4 traces of a short clean job: {before / 2**20:.1f} MiB before, "
              f"{after / 2**20:.2f} MiB after")
        # A run's own traces (in a run folder), compacted when it ends; the line says where and
        # how much.
        runs = shm_folder("runs")
        own.append(runs)
        p = run_plain(["--", LAUNCH, "--np", "4", "--", SCENARIOS, "clean"],
                      base_env(tmp, {"LOCKSTEP_RUNS_DIR": runs}))
        expect(p.returncode == 0, f"lockstep run: {p.stderr}")
        line = [l for l in p.stderr.splitlines() if l.startswith("lockstep: traces kept in ")]
        expect(line, f"no closing line: {p.stderr}")
        e = line[0].split()[4]
        held = sum(blocks(os.path.join(e, n)) for n in os.listdir(e))
        expect(f"traces kept in {e} (4 traces, {held / 2**20:.1f} MiB); analyze them with: "
               f"lockstep analyze {e}" in line[0], f"the closing line: {line}, {held} bytes")
        expect(held * 8 < before, f"the run's folder holds {held} bytes")
        a = subprocess.run([LOCKSTEP, "analyze", e], capture_output=True, text=True, timeout=60)
        expect(a.returncode == 0 and "4 traces" in a.stdout, f"analyze: {a.stdout} {a.stderr}")
    finally:
        for f in [d, old] + own:
            shutil.rmtree(f, ignore_errors=True)


if __name__ == "__main__":
    try:
        rc = run(globals(), "lockstep-lifecycle-")
    finally:
        for folder in FOLDERS:
            kill_left(folder)
    sys.exit(rc)
