#!/usr/bin/env python3
"""test_realjobs.py -- the ways real jobs die, end to end: NCCL programs (realjobs.c) run as
ranks on the CPU emulator under the real shim, launched the way torchrun, srun and mpirun
launch them (fail-fast teardown, restarts, misconfigured ranks), then judged post-mortem
(`lockstep analyze`, JSON and text) and live (`lockstep run`). Timings are drawn at random
within the ranges real reports show (printed with the seed; LOCKSTEP_TEST_SEED repeats a run).

Each case names the root cause a person needs and checks that what follows from it is marked
so: the watchdog's aborts and the launcher's teardown are never the root cause.

Usage: test_realjobs.py CASE   (paths come from the environment meson sets, see meson.build)
"""
import json
import os
import random
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import Failure, Skip, expect, needs, run  # noqa: E402
from report_ranks import check_classes, per_rank  # noqa: E402
import summary_equiv  # noqa: E402

SHIM = os.environ["LOCKSTEP_SHIM"]
TEST_SHIM = os.environ.get("LOCKSTEP_TEST_SHIM", "")  # the shim with the LOCKSTEP_TEST_* knobs
LAUNCH = os.environ["LAUNCH_RANKS"]
EMU_DIR = os.environ["EMULATOR_DIR"]
LOCKSTEP = os.environ["LOCKSTEP_BIN"]
REALJOBS = os.environ["REALJOBS"]
QUERY = os.environ["TRACE_QUERY"]

SEED = int(os.environ.get("LOCKSTEP_TEST_SEED") or random.SystemRandom().randrange(1 << 30))
rng = random.Random(SEED)
HUNG = 124  # the launcher's status when its timeout stopped the job


def note(what):
    """Says what a case drew, so that a failure can be repeated (LOCKSTEP_TEST_SEED)."""
    print(f"seed {SEED}: {what}", flush=True)


# ---------------------------------------------------------------- running


def rank_env(trace_dir, extra=None):
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = EMU_DIR + ":" + env.get("LD_LIBRARY_PATH", "")
    env["LD_PRELOAD"] = SHIM
    env["LOCKSTEP_DIR"] = trace_dir
    for k in list(env):
        if k.startswith(("SCENARIO_", "LOCKSTEP_EMU_", "TORCHELASTIC_", "SLURM_")) or k in (
                "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCKSTEP_RING", "LOCKSTEP_JOB"):
            env.pop(k)
    env.update(extra or {})
    return env


def launcher_env(trace_dir, extra=None):
    """The environment of a real launcher (torchrun, mpirun): the ranks' without the shim,
    which preloaded() gives the ranks alone (a sanitizer build of the shim in the launcher's
    own interpreter would report the interpreter's leaks)."""
    env = rank_env(trace_dir, extra)
    env.pop("LD_PRELOAD")
    return env


def preloaded(*cmd):
    """A rank's command line with the shim preloaded."""
    return ["env", "LD_PRELOAD=" + SHIM, *cmd]


def remove_untagged_segments():
    """Removes the emulator's shared-memory segments of ranks started by a real launcher, which
    sets no LOCKSTEP_EMU_TAG (launch-ranks removes its own)."""
    for f in os.listdir("/dev/shm"):
        if f.startswith("lsemu-u%d-" % os.getuid()):
            try:
                os.unlink(os.path.join("/dev/shm", f))
            except OSError:
                pass


def clean_env(extra=None):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.pop("LOCKSTEP_DIR", None)
    env["NO_COLOR"] = "1"
    env["LD_LIBRARY_PATH"] = EMU_DIR + ":" + env.get("LD_LIBRARY_PATH", "")
    env.update(extra or {})
    return env


def launch_cmd(mode, np=4, launcher=()):
    return [LAUNCH, "--np", str(np), "--seed", str(rng.randrange(1 << 30)), *launcher, "--",
            REALJOBS, mode]


def scenario(tmp, mode, np=4, env=None, launcher=(), want_rc=HUNG, name="traces"):
    """Runs `realjobs MODE` as np ranks until it ends or the launcher stops it; returns the
    trace folder."""
    d = os.path.join(tmp, name)
    os.makedirs(d, exist_ok=True)
    p = subprocess.run(launch_cmd(mode, np, launcher), env=rank_env(d, env), capture_output=True,
                       text=True, timeout=120)
    print(p.stderr, end="")
    if want_rc is not None:
        expect(p.returncode == want_rc,
               f"launcher exited {p.returncode}, want {want_rc}: {p.stdout} {p.stderr}")
    return d


def analyze(d, want_rc=1):
    """`lockstep analyze --json` and the text report of the same folder."""
    return analyze_paths([d], want_rc)


def analyze_paths(paths, want_rc=1):
    """`lockstep analyze --json` and the text report of the same folders (several nodes')."""
    p = subprocess.run([LOCKSTEP, "analyze", "--json", *paths], capture_output=True, text=True,
                       timeout=60, env=clean_env())
    expect(p.returncode == want_rc,
           f"analyze --json exited {p.returncode}, want {want_rc}: {p.stderr}{p.stdout[:2000]}")
    try:
        r = json.loads(p.stdout)
    except ValueError as e:
        raise Failure(f"analyze --json printed no JSON ({e}): {p.stdout[:400]!r}")
    # The same traces summarized per host, as nodes would, must be diagnosed alike.
    problem = summary_equiv.check(LOCKSTEP, paths, p.returncode, p.stdout, env=clean_env())
    expect(problem is None, f"{problem}")
    problems = check_classes(r)
    expect(not problems, f"the report's rank classes: {problems}")
    t = subprocess.run([LOCKSTEP, "analyze", *paths], capture_output=True, text=True, timeout=60,
                       env=clean_env())
    expect(t.returncode == want_rc, f"analyze exited {t.returncode}: {t.stderr}")
    return r, t.stdout


def lockstep_run(tmp, mode, np=4, env=None, launcher=(), stall=2, want_rc=3, name="run",
                 run_args=()):
    """`lockstep run` on a scenario: (report dict, text on stdout, stderr). stall None: the
    default bounds."""
    d = os.path.join(tmp, name)
    js = os.path.join(tmp, name + ".json")
    cmd = [LOCKSTEP, "run", "--dir", d, *(("--stall", str(stall)) if stall is not None else ()),
           *run_args, "--json", js, "--", *launch_cmd(mode, np, launcher)]
    e = clean_env({k: v for k, v in (env or {}).items()})
    p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=180)
    print(p.stderr, end="")
    expect(p.returncode == want_rc, f"lockstep run exited {p.returncode}, want {want_rc}:\n"
                                    f"{p.stdout}\n{p.stderr}")
    expect(os.path.exists(js), f"lockstep run wrote no JSON report: {p.stderr}")
    return json.load(open(js)), p.stdout, p.stderr


# ---------------------------------------------------------------- judging


def kinds(r):
    return [f["kind"] for f in r["findings"]]


def root(r, kind):
    """The first finding: of `kind`, and a root cause."""
    expect(r["findings"], f"no findings, want {kind}")
    f = r["findings"][0]
    expect(f["kind"] == kind, f"first finding is {f['kind']}, want {kind}: {f['summary']}\n"
                              f"all: {[(g['kind'], g['summary']) for g in r['findings']]}")
    expect(f["consequence_of"] is None, f"the first finding follows from {f['consequence_of']}")
    return f


def roots(r):
    return [f for f in r["findings"] if f["consequence_of"] is None]


def one_root(r, kind):
    """Exactly one independent finding (trace_incomplete aside), of `kind`, first."""
    f = root(r, kind)
    others = [g for g in roots(r)[1:] if g["kind"] != "trace_incomplete"]
    expect(not others, f"more root causes than the {kind}: "
                       f"{[(g['kind'], g['summary']) for g in others]}")
    return f


def follows(r, kind, cause_index=0, **fields):
    """The findings of `kind` (other than finding cause_index itself), each following directly
    or not from finding cause_index."""
    got = [(i, f) for i, f in enumerate(r["findings"]) if f["kind"] == kind and i != cause_index]
    expect(got, f"no {kind} finding besides finding {cause_index}: {kinds(r)}")
    for _, f in got:
        at, hops = f["consequence_of"], 0
        while at is not None and at != cause_index and hops < 20:
            at, hops = r["findings"][at]["consequence_of"], hops + 1
        expect(at == cause_index, f"{kind} does not follow from finding {cause_index}: "
                                  f"{f['summary']} (consequence_of {f['consequence_of']})")
        for k, v in fields.items():
            expect(f.get(k) == v, f"{kind}: {k} = {f.get(k)!r}, want {v!r}")
    return [f for _, f in got]


def rank(r, k):
    got = [x for x in per_rank(r) if x["rank"] == k]
    expect(len(got) == 1, f"{len(got)} entries for rank {k} in ranks")
    return got[0]


def no_death_blamed(r, ranks, why):
    """None of `ranks` is named in a rank_crashed/rank_exited finding that is a root cause."""
    for f in roots(r):
        if f["kind"] in ("rank_crashed", "rank_exited"):
            expect(not set(f["dead"]) & set(ranks), f"{why}: {f['summary']}")


def one_line(text, pattern, what):
    expect(re.search(pattern, text), f"the text does not say {what} (/{pattern}/):\n{text}")


# ---------------------------------------------------------------- 1. watchdog cascade


def watchdog_env(action):
    wd = rng.randrange(500, 1600)
    busy = rng.choice(["compute", "sleep"])
    steps = rng.randrange(1, 4)
    env = {"SCENARIO_WATCHDOG_MS": str(wd), "SCENARIO_WATCHDOG": action, "SCENARIO_BUSY": busy,
           "SCENARIO_STEPS": str(steps), "SCENARIO_STEP_MS": str(rng.randrange(2, 30))}
    delay = rng.randrange(50, 2500)
    note(f"watchdog {action} after {wd} ms, victim busy ({busy}), {steps} steps, launcher "
         f"SIGTERM {delay} ms after the first failure")
    return env, steps + 1, ("--fail-fast", "--fail-fast-delay", str(delay))


def check_watchdog(r, text, seq, action):
    """Rank 3 never reached the barrier #seq: the root cause, with where it was busy; the
    waiting ranks' aborts, errors and exits follow from it; the late SIGTERM is no cause."""
    f = one_root(r, "missing_ranks")
    expect(f["missing"] == [3] and f["waiting"] == [0, 1, 2] and f["seq"] == seq,
           f"missing_ranks: {f['summary']}")
    # busy on the CPU (compute) or off it (sleep): the shim's CPU samples tell, after the fact
    one_line(text, r"rank 3 never called it \u2014 it was (busy|off the CPU[^;]*) at "
                   r"[^;]*load_batch", "where the late rank was")
    one_line(text, r"the launcher stopped it \(SIGTERM, [^)]* after rank [0-2] "
                   r"(crashed|exited)\)", "that the launcher's SIGTERM came after the others")
    # The waiting ranks whose watchdog fired before the launcher's SIGTERM reached them ended
    # by it (one finding); any other was stopped with the job.
    if action == "abort":
        d = follows(r, "rank_crashed", 0, signal=6, died_waiting=True)
    else:
        follows(r, "nccl_error", 0)
        d = follows(r, "rank_exited", 0, status=1)
    expect(len(d) == 1 and d[0]["dead"] and set(d[0]["dead"]) <= {0, 1, 2},
           f"the watchdogs' ends are not one finding about ranks of 0-2: {kinds(r)}")
    for k in set([0, 1, 2]) - set(d[0]["dead"]):
        expect(rank(r, k)["stopped_with_job"], f"rank {k}: neither its watchdog's nor stopped")
    no_death_blamed(r, [0, 1, 2, 3], "a death named as a root cause")
    x = rank(r, 3)
    expect(x["state"] == "crashed" and x["signal"] == 15 and x["stopped_with_job"],
           f"rank 3: {x}")


def case_watchdog_abort(tmp):
    """PyTorch's default: the waiting ranks' watchdogs abort() them (SIGABRT)."""
    env, seq, launcher = watchdog_env("abort")
    d = scenario(tmp, "watchdog", env=env, launcher=launcher, want_rc=128 + 6)
    check_watchdog(*analyze(d), seq, "abort")


def case_watchdog_commabort(tmp):
    """The watchdog calls ncclCommAbort from its thread: the blocked call fails, the rank
    exits 1; then the launcher SIGTERMs the late rank."""
    env, seq, launcher = watchdog_env("commabort")
    d = scenario(tmp, "watchdog", env=env, launcher=launcher, want_rc=1)
    check_watchdog(*analyze(d), seq, "commabort")


def case_watchdog_live(tmp):
    """The same under `lockstep run` with a stall longer than the watchdog: the job fails on
    its own, run exits with the job's status and prints the post-mortem diagnosis."""
    action = rng.choice(["abort", "commabort"])
    env, seq, launcher = watchdog_env(action)
    r, text, err = lockstep_run(tmp, "watchdog", env=env, launcher=launcher, stall=30,
                                want_rc=128 + 6 if action == "abort" else 1)
    check_watchdog(r, text, seq, action)
    expect("post-mortem" in err, f"run did not announce the post-mortem: {err}")


# ---------------------------------------------------------------- 2. launcher fail-fast


def oom_launcher():
    sig = rng.choice(["TERM", "KILL"])
    delay = rng.randrange(50, 2500)
    steps = rng.randrange(2, 5)
    note(f"OOM kill at step {steps}, launcher SIG{sig} to the rest {delay} ms later")
    return ({"SCENARIO_STEPS": str(steps), "SCENARIO_STEP_MS": str(rng.randrange(10, 40))},
            ("--fail-fast-signal", sig, "--fail-fast-delay", str(delay)), steps, sig)


def check_oom(r, text, steps, sig):
    f = one_root(r, "rank_crashed")
    expect(f["dead"] == [3] and f["vanished"] is True and f["signal"] is None,
           f"root: {f['summary']}")
    expect("died without an exit record (SIGKILL or the OOM killer?)" in f["summary"],
           f"summary: {f['summary']}")
    m = follows(r, "missing_ranks", 0)[0]
    expect(m["missing"] == [3] and m["waiting"] == [0, 1, 2] and m["seq"] == steps,
           f"missing_ranks: {m['summary']}")
    for k in (0, 1, 2):
        x = rank(r, k)
        expect(x["stopped_with_job"] and x["stopped_after"] == 3, f"rank {k}: {x}")
    expect(not rank(r, 3)["stopped_with_job"], "rank 3 taken as stopped with the job")
    expect("was stopped with the rest of the job" not in text, f"old wording:\n{text}")
    # One line per way the launcher's stop ended them (a rank may die of the SIGKILL that
    # follows the SIGTERM before its handler ran).
    one_line(text, r"(ranks? [0-2,-]+) (was|were) stopped with the job \((SIGTERM|no exit "
                   r"record: SIGKILL), [^)]* after rank 3 ended", "that the launcher stopped the "
                   "others after")


def case_oom_failfast(tmp):
    """The OOM killer takes rank 3; 50 ms to 2.5 s later the launcher stops the others
    (SIGTERM as torchrun and mpirun do first, or SIGKILL as srun -K)."""
    env, launcher, steps, sig = oom_launcher()
    d = scenario(tmp, "oom_kill", env=env, launcher=launcher, want_rc=128 + 9)
    check_oom(*analyze(d), steps, sig)


def case_oom_failfast_live(tmp):
    env, launcher, steps, sig = oom_launcher()
    r, text, err = lockstep_run(tmp, "oom_kill", env=env, launcher=launcher, stall=30,
                                want_rc=128 + 9)
    check_oom(r, text, steps, sig)


def case_oom_mpirun(tmp):
    """The same under real mpirun (Open MPI): it notices the SIGKILL and SIGTERMs the rest."""
    mpirun = shutil.which("mpirun")
    if not mpirun:
        raise Skip("mpirun is not installed (Debian package openmpi-bin)")
    d = os.path.join(tmp, "traces")
    os.makedirs(d)
    steps = rng.randrange(2, 5)
    env = launcher_env(d, {"SCENARIO_STEPS": str(steps),
                           "SCENARIO_STEP_MS": str(rng.randrange(10, 40)),
                           "LOCKSTEP_TEST_IDFILE": os.path.join(tmp, "id")})
    export = [a for k in ("LD_LIBRARY_PATH", "LOCKSTEP_DIR", "LOCKSTEP_TEST_IDFILE",
                          "SCENARIO_STEPS", "SCENARIO_STEP_MS") for a in ("-x", k)]
    p = subprocess.run([mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "4", *export,
                        *preloaded(REALJOBS, "oom_kill")], env=env, capture_output=True,
                       text=True, timeout=120)
    expect(p.returncode == 128 + 9 and "exited on signal 9" in p.stdout + p.stderr,
           f"mpirun exited {p.returncode}: {p.stdout[-1500:]} {p.stderr[-1500:]}")
    remove_untagged_segments()
    check_oom(*analyze(d), steps, "TERM")


# ---------------------------------------------------------------- 3. restarts and steps


def check_attempts(r, attempts, nranks=4, first_death="SIGSEGV"):
    """One job of `attempts` attempts: the newest (nranks traces) in ranks, attempt 1 summarized
    as ending in rank 3's death by `first_death` (words of its summary)."""
    expect(len(r["jobs"]) == 1, f"jobs {r['jobs']}")
    j = r["jobs"][0]
    expect(j["attempt"] == attempts and j["attempts"] == attempts, f"job {j}")
    expect(all(x["attempt"] == attempts for x in per_rank(r)) and len(per_rank(r)) == nranks,
           f"ranks of earlier attempts in ranks: {[(x['rank'], x['attempt']) for x in per_rank(r)]}")
    expect(j["traces"] == nranks and j["world_size"] == nranks, f"job {j}")
    e = j["earlier_attempts"]
    expect(len(e) == attempts - 1, f"earlier attempts {e}")
    first = e[0]
    expect(first["attempt"] == 1 and first["traces"] == 4 and first["root_causes"]
           and first["root_causes"][0]["kind"] == "rank_crashed"
           and first["root_causes"][0]["summary"].startswith("rank 3 ")
           and first_death in first["root_causes"][0]["summary"], f"attempt 1: {first}")
    return j


def case_restart_recovered(tmp):
    """torchrun --max-restarts: rank 3 crashes in attempt 1, attempt 2 completes. Nothing is
    wrong now; attempt 1's crash is summarized, never mixed with attempt 2's clean exit."""
    d = scenario(tmp, "restart", env={"SCENARIO_PLAN": "segv,clean"},
                 launcher=("--max-restarts", "1"), want_rc=0)
    r, text = analyze(d, want_rc=0)
    expect(r["findings"] == [], f"findings {kinds(r)}")
    check_attempts(r, 2)
    one_line(text, r"attempt 2 of 2\), world size 4, 4 traces: no problems found",
             "that attempt 2 is clean")
    one_line(text, r"attempt 1 of 2 \(4 traces\) ended: rank 3 crashed with SIGSEGV",
             "how attempt 1 ended")


def case_restart_hang(tmp):
    """Attempt 1 crashes, attempt 2 hangs (rank 3 late): attempt 2's hang is the finding and
    does not follow from attempt 1's crash."""
    d = scenario(tmp, "restart", env={"SCENARIO_PLAN": "segv,hang"},
                 launcher=("--max-restarts", "1", "--timeout", str(rng.uniform(3, 5))))
    r, text = analyze(d)
    f = one_root(r, "missing_ranks")
    expect(f["missing"] == [3] and f["waiting"] == [0, 1, 2], f"{f['summary']}")
    expect("SIGSEGV" not in json.dumps(r["findings"]), "attempt 1's crash among the findings")
    check_attempts(r, 2)


def case_restart_live(tmp):
    """`lockstep run` over a restarting launcher: the hang of attempt 2 is diagnosed live."""
    r, text, err = lockstep_run(tmp, "restart", env={"SCENARIO_PLAN": "oom,hang"},
                                launcher=("--max-restarts", "1"))
    f = one_root(r, "missing_ranks")
    expect(f["missing"] == [3] and f["waiting"] == [0, 1, 2], f"{f['summary']}")
    j = r["jobs"][0]
    expect(j["attempt"] == 2 and j["earlier_attempts"][0]["root_causes"][0]["kind"]
           == "rank_crashed", f"job {j}")
    one_line(text, r"rank 3 never called it \u2014 it is alive", "that rank 3 lives")


def case_restart_torchrun(tmp):
    """Real torchrun (--max_restarts 1) where Debian's python3-torch is installed."""
    torchrun = shutil.which("torchrun")
    if not torchrun:
        raise Skip("torchrun is not installed (Debian package python3-torch)")
    d = os.path.join(tmp, "traces")
    os.makedirs(d)
    env = launcher_env(d, {"SCENARIO_PLAN": "segv,clean",
                           "LOCKSTEP_TEST_IDFILE": os.path.join(tmp, "id")})
    # Python 3.11 needs its output redirected (torch 1.13 fails to map it otherwise).
    p = subprocess.run([torchrun, "--standalone", "--nproc_per_node", "4", "--max_restarts", "1",
                        "--monitor_interval", "0.1", "--redirects", "2", "--tee", "2",
                        "--no_python", *preloaded(REALJOBS, "restart")], env=env,
                       capture_output=True, text=True, timeout=120)
    expect(p.returncode == 0, f"torchrun exited {p.returncode}: {p.stderr[-2000:]}")
    remove_untagged_segments()
    r, text = analyze(d, want_rc=0)
    expect(r["findings"] == [], f"findings {kinds(r)}")
    j = check_attempts(r, 2)
    expect(j["attempts_from"] == "launcher", f"attempts told apart by {j['attempts_from']}")


def rerun_env(run_id, count, plan):
    """A start of `restart` under a fixed run id and the launcher's restart count `count`
    (torchrun's variables, set the way its agent sets them for each rank); `plan` is what this
    start does (SCENARIO_PLAN is indexed by the count)."""
    return {"TORCHELASTIC_RUN_ID": run_id, "TORCHELASTIC_RESTART_COUNT": str(count),
            "SCENARIO_PLAN": ",".join(["clean"] * count + [plan]),
            "SCENARIO_STEPS": str(rng.randrange(1, 5)),
            "SCENARIO_STEP_MS": str(rng.randrange(5, 30))}


def start_twice(tmp, first_plan, second_np, count=0):
    """Two starts of one job in one folder, the second once the first has ended: 4 ranks whose
    rank 3 dies by `first_plan` (the launcher tearing the others down), then `second_np` ranks
    whose last rank is late for the barrier until the launcher's timeout. Both under one run id
    and one restart count, as a user resubmitting with a fixed id, or torchrun's elastic
    re-rendezvous, starts them. Returns the folder."""
    run_id = "rerun-%d" % rng.randrange(1 << 20)
    note(f"run id {run_id}, restart count {count}, first start: rank 3 {first_plan}, second "
         f"start: {second_np} ranks")
    d = scenario(tmp, "restart", env=rerun_env(run_id, count, first_plan),
                 launcher=("--fail-fast",), want_rc=128 + (11 if first_plan == "segv" else 9))
    time.sleep(rng.uniform(0, 0.3))
    scenario(tmp, "restart", np=second_np, env=rerun_env(run_id, count, "hang"),
             launcher=("--timeout", str(rng.uniform(3, 5))))
    return d


def case_restart_same_run_id(tmp):
    """A user starts the job again under the same run id (restart count 0 both times): the first
    start's rank 3 crashed, the second hangs (rank 3 late for the barrier). Two attempts told
    apart by their processes' lifetimes: the hang is diagnosed alone, the crash summarized."""
    d = start_twice(tmp, "segv", 4)
    r, text = analyze(d)
    f = one_root(r, "missing_ranks")
    expect(f["missing"] == [3] and f["waiting"] == [0, 1, 2], f"{f['summary']}")
    expect("SIGSEGV" not in json.dumps(r["findings"]), "attempt 1's crash among the findings")
    j = check_attempts(r, 2)
    expect(j["attempts_from"] == "start_times", f"attempts told apart by {j['attempts_from']}")
    one_line(text, r"attempt 1 of 2 \(4 traces\) ended: rank 3 crashed with SIGSEGV",
             "how attempt 1 ended")


def case_elastic_resize(tmp):
    """torchrun elastic: rank 3 of 4 dies, the job goes on with 3 ranks (WORLD_SIZE 3) under the
    same run id and the same restart count (a membership change is not a failure restart). The
    3-rank attempt is diagnosed alone: rank 2 late for the barrier."""
    death = rng.choice(["segv", "oom"])
    d = start_twice(tmp, death, 3, count=rng.randrange(0, 3))
    r, text = analyze(d)
    f = one_root(r, "missing_ranks")
    expect(f["missing"] == [2] and f["waiting"] == [0, 1], f"{f['summary']}")
    check_attempts(r, 2, nranks=3,
                   first_death="SIGSEGV" if death == "segv" else "died without an exit record")
    one_line(text, r"attempt 2 of 2\), world size 3, 3 traces", "that attempt 2 has 3 ranks")


def case_restart_same_run_id_live(tmp):
    """`lockstep run` over a script that starts the job twice under one run id (restart count 0
    both times): the second start's hang is diagnosed live, the first start's crash summarized."""
    run_id = "rerun-%d" % rng.randrange(1 << 20)
    starts = []
    for plan, launcher in (("segv", ("--fail-fast",)), ("hang", ())):
        env = rerun_env(run_id, 0, plan)
        starts.append(shlex.join(["env", *("%s=%s" % kv for kv in env.items()),
                                  *launch_cmd("restart", 4, launcher)]))
    d, js = os.path.join(tmp, "run"), os.path.join(tmp, "run.json")
    p = subprocess.run([LOCKSTEP, "run", "--dir", d, "--stall", "2", "--json", js, "--", "sh",
                        "-c", "%s; %s" % tuple(starts)], env=clean_env(), capture_output=True,
                       text=True, timeout=180)
    print(p.stderr, end="")
    expect(p.returncode == 3, f"lockstep run exited {p.returncode}, want 3:\n{p.stdout}\n"
                              f"{p.stderr}")
    r = json.load(open(js))
    f = one_root(r, "missing_ranks")
    expect(f["missing"] == [3] and f["waiting"] == [0, 1, 2], f"{f['summary']}")
    check_attempts(r, 2)
    one_line(p.stdout, r"rank 3 never called it \u2014 it is alive", "that rank 3 lives")


def case_slurm_steps(tmp):
    """Two srun steps of one allocation share SLURM_JOB_ID: two jobs ("77.0", "77.1"), not
    one job whose rank 3 both crashed and exited."""
    d = os.path.join(tmp, "traces")
    for step, plan, want in ((0, "segv", 128 + 11), (1, "clean", 0)):
        scenario(tmp, "restart", env={"SCENARIO_PLAN": plan, "SLURM_JOB_ID": "77",
                                      "SLURM_STEP_ID": str(step)},
                 launcher=("--fail-fast",), want_rc=want)
    r, text = analyze(d)
    jobs = sorted(j["job"] for j in r["jobs"])
    expect(jobs == ["77.0", "77.1"], f"jobs {jobs}")
    f = one_root(r, "rank_crashed")
    expect(f["job"] == "77.0" and f["dead"] == [3] and f["signal"] == 11, f"{f}")
    expect(all(g["job"] == "77.0" for g in r["findings"]), f"findings of step 1: {kinds(r)}")


def case_crash_while_others_compute(tmp):
    """Rank 3 segfaults 0.5 s after its last step while ranks 1-2 still compute (evaluation,
    2 s) and rank 0 waits at the barrier; a fail-fast launcher stops the job at once. The
    crash is the one root cause: ranks 1-2, stopped by the teardown while they ran through the
    step rank 3 died in (not behind it), are no hang of their own, and rank 0's wait follows
    from the crash, explained by rank 3. (realjobs-watchdog_abort is the other side: the rank
    the dead ranks waited for is behind them, and the cause.)"""
    d = scenario(tmp, "restart", env={"SCENARIO_PLAN": "segv", "SCENARIO_LATE": "1,2",
                                      "SCENARIO_LATE_MS": "2000", "SCENARIO_DELAY_MS": "500"},
                 launcher=("--fail-fast",), want_rc=128 + 11)
    r, text = analyze(d)
    f = one_root(r, "rank_crashed")
    expect(f["dead"] == [3] and f["signal"] == 11, f"{f}")
    missing = [g for g in r["findings"] if g["kind"] == "missing_ranks"]
    expect(len(missing) == 1 and missing[0]["consequence_of"] == r["findings"].index(f) and
           missing[0]["waiting"] == [0] and missing[0]["missing"] == [1, 2, 3],
           f"the barrier's wait: {[(g['kind'], g['summary']) for g in r['findings']]}")
    one_line(text, r"waits for rank 3, which crashed with SIGSEGV",
             "that rank 0's wait ends in rank 3's crash")


# ---------------------------------------------------------------- 4. failed calls


def case_bad_args(tmp):
    """Calls NCCL refuses (a bad datatype, a root out of range) take no sequence number; the
    program retried them correctly and finished: nccl_error only, no phantom mismatch."""
    d = scenario(tmp, "bad_args", env={"SCENARIO_STEPS": str(rng.randrange(1, 4))},
                 want_rc=0)
    r, text = analyze(d)
    expect(kinds(r) == ["nccl_error", "nccl_error"], f"findings {kinds(r)}")
    for f in r["findings"]:
        expect(f["refused"] and f["result_name"] == "InvalidArgument" and "seq" not in f
               and f["ranks"] == [3] and f["consequence_of"] is None, f"{f}")
    one_line(text, r"NCCL refused its arguments", "that NCCL refused the arguments")
    expect("mismatch" not in text, f"a phantom mismatch:\n{text}")


# ---------------------------------------------------------------- 5. two processes, one rank


def case_duplicate_rank(tmp):
    """RANK 0,1,1,3: two processes claim rank 1, nobody holds rank 2; every rank waits in
    ncclCommInitRank."""
    d = scenario(tmp, "dup_rank", launcher=("--ranks", "0,1,1,3", "--timeout",
                                            str(rng.uniform(1.5, 3))))
    r, text = analyze(d)
    f = one_root(r, "duplicate_rank")
    expect(f["rank"] == 1 and f["unclaimed"] == [2], f"{f}")
    claimants = [c for c in f["classes"] if c["role"] == "claimant"]
    expect(len(claimants) == 2 and len({c["pid"] for c in claimants}) == 2, f"{f['classes']}")
    one_line(text, r"rank 1 is claimed by 2 processes at once \(pid \d+ on [^,]+, pid \d+ on "
                   r"[^)]+\) and rank 2 by none", "who claims rank 1 and that rank 2 is held by none")


def case_duplicate_rank_live(tmp):
    r, text, err = lockstep_run(tmp, "dup_rank", launcher=("--ranks", "0,1,1,3"))
    f = one_root(r, "duplicate_rank")
    expect(f["rank"] == 1 and f["unclaimed"] == [2], f"{f}")


# ---------------------------------------------------------------- 6. one process, several GPUs


def check_multi(r, text, waiting_cr, missing_cr, missing_proc):
    f = one_root(r, "missing_ranks")
    expect(f.get("several_ranks_per_process") and f.get("waiting_comm_ranks") == waiting_cr
           and f.get("missing_comm_ranks") == missing_cr, f"{f['summary']}")
    expect(f["missing"] == [missing_proc], f"missing {f['missing']}")
    one_line(text, r"comm ranks? [0-9,-]+ \(ranks? [0-9,-]+\) (wait|waited) in AllReduce",
             "the waiting members by communicator rank")
    one_line(text, r"comm rank %d \(rank %d\) never called it" % (missing_cr[0], missing_proc),
             "the missing member by communicator rank")
    expect(not re.search(r"\brank 0 waits? in", text), f"'rank 0 waits':\n{text}")


def case_initall(tmp):
    """ncclCommInitAll: one process drives 4 GPUs; GPU 3's batch is empty, its AllReduce is
    skipped inside the group."""
    d = scenario(tmp, "initall", np=1, launcher=("--timeout", str(rng.uniform(1.5, 3))),
                 env={"SCENARIO_STEPS": str(rng.randrange(1, 4))})
    check_multi(*analyze(d), [0, 1, 2], [3], 0)


def case_multigpu(tmp):
    """nccl-tests -g 2: two processes, two GPUs each; process 1 skips its second GPU."""
    d = scenario(tmp, "multigpu", np=2, launcher=("--timeout", str(rng.uniform(1.5, 3))))
    check_multi(*analyze(d), [0, 1, 2], [3], 1)


def case_multigpu_live(tmp):
    r, text, err = lockstep_run(tmp, "multigpu", np=2)
    check_multi(r, text, [0, 1, 2], [3], 1)


# ---------------------------------------------------------------- 7. open group


def check_open_group(r, text):
    f = one_root(r, "missing_ranks")
    expect(f["missing"] == [3] and f.get("queued") == [3] and f["waiting"] == [0, 1, 2],
           f"{f['summary']}")
    one_line(text, r"rank 3 queued it in a group that never ended \(issued from [^)]*"
                   r"bucket_allreduce", "that rank 3's call waits in a group never ended")
    expect("rank 3 never called it" not in text, f"'never called it' for a queued call:\n{text}")


def case_open_group(tmp):
    """An exception between ncclGroupStart and ncclGroupEnd on rank 3."""
    d = scenario(tmp, "open_group", launcher=("--timeout", str(rng.uniform(1.5, 3))),
                 env={"SCENARIO_STEPS": str(rng.randrange(1, 4))})
    check_open_group(*analyze(d))


def case_open_group_live(tmp):
    r, text, err = lockstep_run(tmp, "open_group")
    check_open_group(r, text)


# ---------------------------------------------------------------- 8. across communicators


def check_child(r, text, nocolor):
    f = one_root(r, "missing_ranks")
    expect(f["missing"] == [1] and f["waiting"] == [0], f"root: {f['summary']}")
    world = [g for g in r["findings"] if g["kind"] == "missing_ranks" and g is not f]
    expect(len(world) == 1 and world[0]["missing"] == [0, 1] and world[0]["waiting"] == [2, 3],
           f"the world's missing_ranks: {[g['summary'] for g in world]}")
    follows(r, "missing_ranks", 0)


def case_child_comm(tmp):
    """Ranks 0-1 in a child communicator (the others NCCL_SPLIT_NOCOLOR, or a child of their
    own); rank 1 is late for the child's collective, ranks 2-3 wait in the world's."""
    child = rng.choice(["nocolor", "color"])
    note(f"child: {child}")
    d = scenario(tmp, "child_comm", env={"SCENARIO_CHILD": child},
                 launcher=("--timeout", str(rng.uniform(1.5, 3))))
    check_child(*analyze(d), child == "nocolor")


def case_child_comm_live(tmp):
    r, text, err = lockstep_run(tmp, "child_comm", env={"SCENARIO_CHILD": "nocolor"})
    check_child(r, text, True)


def case_culprit_no_trace(tmp):
    """The late rank's trace is gone: the others still get 'wait ... for rank 3 (no trace)'."""
    steps = rng.randrange(1, 4)
    d = scenario(tmp, "watchdog", env={"SCENARIO_STEPS": str(steps)},
                 launcher=("--timeout", str(rng.uniform(1.5, 3))))
    gone = [f for f in os.listdir(d) if f.endswith("-r3.trace")]
    expect(len(gone) == 1, f"rank 3's trace: {os.listdir(d)}")
    os.unlink(os.path.join(d, gone[0]))
    r, text = analyze(d)
    f = root(r, "missing_ranks")
    expect(f["missing"] == [3] and f["waiting"] == [0, 1, 2] and f["seq"] == steps + 1, f"{f}")
    one_line(text, r"ranks 0-2 wait in AllReduce #%d [^;]* for rank 3 \(no trace\)" % (steps + 1),
             "whom the others wait for")


# ---------------------------------------------------------------- 9. ranks far apart


def case_far_apart(tmp):
    """GPU-like queues: ranks 0-2 enqueue thousands of collectives past #k, which rank 3
    never issued; the stuck #k is named from the GPU's completion, read further back."""
    steps = rng.randrange(1, 4)
    far = rng.randrange(1500, 4000)
    ring = rng.choice([None, "1024"])
    note(f"{far} collectives past #{steps + 1}, ring {ring or 'default'}")
    env = {"LOCKSTEP_EMU_ASYNC": "1", "SCENARIO_STEPS": str(steps), "SCENARIO_FAR": str(far)}
    if ring:
        env["LOCKSTEP_RING"] = ring
    d = scenario(tmp, "far_apart", env=env, launcher=("--timeout", str(rng.uniform(3, 5))))
    r, text = analyze(d)
    f = root(r, "missing_ranks")
    expect(f["seq"] == steps + 1 and f["missing"] == [3] and f["waiting"] == [0, 1, 2],
           f"{f['summary']}")
    inc = [g for g in r["findings"] if g["kind"] == "trace_incomplete"]
    if ring:  # the rings wrapped past #k: said so, about #k
        expect(inc and inc[0]["reason"] == "wrapped" and inc[0]["seq"] == steps + 1, f"{inc}")
    else:
        expect(not inc, f"trace_incomplete with a ring that holds #k: {inc}")
        w = [c for c in f["classes"] if c["role"] == "waiting"]
        expect(len(w) == 1 and w[0]["op"] == "AllReduce" and w[0]["count"] == 1, f"{w}")


def case_far_apart_stuck(tmp):
    """Every rank issued #k and thousands more; no GPU completes #k (a dead link)."""
    steps = rng.randrange(1, 4)
    env = {"LOCKSTEP_EMU_ASYNC": "1", "SCENARIO_STEPS": str(steps),
           "LOCKSTEP_EMU_HANG_COLL": str(steps + 1), "SCENARIO_FAR": str(rng.randrange(1500, 4000))}
    d = scenario(tmp, "far_apart", env=env, launcher=("--timeout", str(rng.uniform(3, 5))))
    r, text = analyze(d)
    f = one_root(r, "stuck_in_flight")
    expect(f["seq"] == steps + 1 and f["ranks"] == [0, 1, 2, 3], f"{f['summary']}")


def case_far_apart_live(tmp):
    r, text, err = lockstep_run(tmp, "far_apart", env={"LOCKSTEP_EMU_ASYNC": "1",
                                                       "SCENARIO_STEPS": "2"})
    f = root(r, "missing_ranks")
    expect(f["seq"] == 3 and f["missing"] == [3], f"{f['summary']}")


# ---------------------------------------------------------------- 10. is it alive


def start_job(tmp, mode, np=4, env=None, launcher=()):
    d = os.path.join(tmp, "traces")
    os.makedirs(d, exist_ok=True)
    job = subprocess.Popen(launch_cmd(mode, np, launcher), env=rank_env(d, env),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    return job, d


def wait_for(d, pred, what, timeout=20, with_text=False):
    """The JSON report of the traces in d once pred holds for it; with_text: (report, text
    report), both written by that one analysis. A state that lasts a moment (ranks on their way)
    may be over by a second analysis, and on a loaded machine often is."""
    deadline = time.time() + timeout
    text_file = os.path.join(os.path.dirname(d.rstrip("/")), "wait_for.txt")
    while time.time() < deadline:
        also = ["--format", "text=" + text_file] if with_text else []
        p = subprocess.run([LOCKSTEP, "analyze", "--format", "json", *also, d],
                           capture_output=True, text=True, timeout=60, env=clean_env())
        if p.returncode == 1:
            r = json.loads(p.stdout)
            if pred(r):
                if not with_text:
                    return r
                with open(text_file) as f:
                    return r, f.read()
        time.sleep(0.2)
    raise Failure(f"never saw {what}")


def trace_pids(d):
    """Pids recorded in the trace headers of a folder (offset 120, little-endian int32)."""
    pids = []
    for name in os.listdir(d):
        if name.endswith(".trace"):
            with open(os.path.join(d, name), "rb") as f:
                pids.append(struct.unpack("<i", f.read(124)[120:124])[0])
    return pids


def dead(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def stop_job(job, d):
    """Kills the ranks (a stopped one too) and, once they are dead, lets the launcher see them
    go (one that looks at its ranks rarely would sleep through their deaths)."""
    pids = trace_pids(d)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.time() + 10
    while time.time() < deadline and not all(dead(p) for p in pids):
        time.sleep(0.02)
    try:
        job.send_signal(signal.SIGTERM)  # wakes a launcher between its looks at the ranks
        job.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()


def case_zombie(tmp):
    """The OOM killer took rank 3 and its launcher has not reaped it yet (<defunct>): it is
    dead, not alive."""
    job, d = start_job(tmp, "oom_kill", launcher=("--monitor-interval", "60000"))
    try:
        r, text = wait_for(d, lambda r: r["findings"] and
                           r["findings"][0]["kind"] == "rank_crashed", "rank 3's death",
                           with_text=True)
        f = one_root(r, "rank_crashed")
        expect(f["dead"] == [3] and f["vanished"], f"{f}")
        expect(rank(r, 3)["state"] == "vanished", f"rank 3: {rank(r, 3)}")
        one_line(text, r"a zombie its parent has not reaped", "that rank 3 is a zombie")
        expect("rank 3 never called it \u2014 it is alive" not in text,
               f"rank 3 called alive:\n{text}")
    finally:
        stop_job(job, d)


def case_oom_late(tmp):
    """Ranks 0 and 2 always reach the all-reduce 2 s after rank 1 (a slower data path); rank 3
    is OOM-killed before #2. While 0 and 2 are still on their way, rank 1 waits for them and
    for rank 3, but rank 3's death is the whole story: the all-reduce could never complete."""
    env = {"SCENARIO_STEPS": "2", "SCENARIO_LATE": "0,2", "SCENARIO_LATE_MS": "2500"}
    job, d = start_job(tmp, "oom_kill", env=env)
    try:
        # The text is the same analysis's: ranks 0 and 2 are on their way for 2.5 s only.
        r, text = wait_for(d, lambda r: r["findings"] and r["findings"][0]["kind"] ==
                           "rank_crashed" and any(f["kind"] == "missing_ranks" and
                                                  f["waiting"] == [1] for f in r["findings"]),
                           "rank 1 waiting, rank 3 dead", timeout=30, with_text=True)
        f = one_root(r, "rank_crashed")
        expect(f["dead"] == [3], f"{f}")
        m = follows(r, "missing_ranks", seq=2, missing=[0, 2, 3])[0]
        expect(m["en_route"], f"ranks 0, 2 not on their way: {m}")
        one_line(text, r"ranks 0,2 are running and the first waiter has waited only .* they are "
                       r"on the way; rank 3, gone, is why it cannot complete",
                 "that ranks 0 and 2 are late, not stuck")
        r = wait_for(d, lambda r: any(f["kind"] == "missing_ranks" and f["waiting"] == [0, 1, 2]
                                      for f in r["findings"]), "ranks 0-2 waiting", timeout=30)
        one_root(r, "rank_crashed")
        m = follows(r, "missing_ranks", seq=2, missing=[3])[0]
        expect(not m["en_route"], f"nobody is on the way: {m}")
    finally:
        stop_job(job, d)


def case_oom_stuck(tmp):
    """Rank 3 is OOM-killed before the all-reduce #3; ranks 0 and 2, usually on time, are stuck
    in their own work from that step on. Rank 1 waits for them far longer than ranks of this
    job ever take to gather: two faults, two root causes (the death first)."""
    env = {"SCENARIO_LATE": "0,2", "SCENARIO_LATE_MS": "60000", "SCENARIO_LATE_FROM": "3"}
    job, d = start_job(tmp, "oom_kill", env=env)
    try:
        # Two roots, the death among them: at the job's start other moments are real too (a
        # rank still in CommInitRank while the others enter AllReduce #1).
        r = wait_for(d, lambda r: len(roots(r)) == 2 and
                     any(f["kind"] == "rank_crashed" for f in roots(r)),
                     "two root causes, rank 3's death one of them", timeout=30)
        expect(root(r, "rank_crashed")["dead"] == [3], f"{kinds(r)}")
        m = roots(r)[1]
        expect(m["kind"] == "missing_ranks" and m["seq"] == 3 and m["waiting"] == [1] and
               m["missing"] == [0, 2, 3] and not m["en_route"], f"second root: {m}")
        expect(rank(r, 0)["state"] == "idle" and rank(r, 2)["state"] == "idle",
               f"ranks 0, 2: {rank(r, 0)} {rank(r, 2)}")
    finally:
        stop_job(job, d)


def case_sigstop(tmp):
    """Rank 3 is stopped (SIGSTOP: a debugger, Ctrl-Z) before the barrier: stopped, not dead;
    `lockstep run` says the same live."""
    job, d = start_job(tmp, "sigstop")
    try:
        # Until rank 3's trace appears, ranks 0-2 wait in CommInitRank for a rank without one
        # (comm_init_mismatch): a moment of the start, not the state this case is about.
        # Ranks 0-2 may wait in the barrier a moment before rank 3 has stopped itself (on a
        # loaded machine, seen once in 2 soak runs): the state is both.
        r, text = wait_for(d, lambda r: r["findings"] and r["findings"][0]["kind"] ==
                           "missing_ranks" and r["findings"][0].get("waiting") == [0, 1, 2]
                           and any(x["rank"] == 3 and x.get("stopped") for x in per_rank(r)),
                           "ranks 0-2 waiting in a collective rank 3 never called, "
                           "rank 3 stopped", with_text=True)
        f = one_root(r, "missing_ranks")
        expect(f["missing"] == [3], f"{f}")
        x = rank(r, 3)
        expect(x.get("stopped") and x["state"] == "idle", f"rank 3: {x}")
        one_line(text, r"rank 3 never called it \u2014 it is stopped \(SIGSTOP",
                 "that rank 3 is stopped")
    finally:
        stop_job(job, d)
    r, text, err = lockstep_run(tmp, "sigstop")
    f = one_root(r, "missing_ranks")
    expect(f["missing"] == [3] and rank(r, 3).get("stopped"), f"{f['summary']}")


def patch_pid(path, pid):
    with open(path, "r+b") as f:
        f.seek(120)
        f.write(struct.pack("<i", pid))


def case_pid_reused(tmp):
    """Rank 3 died; its pid now belongs to an unrelated process started right after the trace:
    not alive (the process's start time names it, not the pid)."""
    job, d = start_job(tmp, "oom_kill")
    other = None
    try:
        r = wait_for(d, lambda r: r["findings"] and r["findings"][0]["kind"] == "rank_crashed",
                     "rank 3's death")
        other = subprocess.Popen(["sleep", "60"])
        t3 = [f for f in os.listdir(d) if f.endswith("-r3.trace")][0]
        patch_pid(os.path.join(d, t3), other.pid)
        r, text = analyze(d)
        f = one_root(r, "rank_crashed")
        expect(f["dead"] == [3] and rank(r, 3)["state"] == "vanished", f"{f}")
        one_line(text, r"its pid belongs to another process now", "why rank 3 is not alive")
    finally:
        if other:
            other.kill()
            other.wait()
        stop_job(job, d)


@needs("ptrace")
def case_snapshot(tmp):
    """What a runner gathers is a snapshot: its ranks were alive when copied, whatever happened
    to them after; a rank is never both gone and alive in one report (live-two_nodes)."""
    gather = os.path.join(tmp, "gather")
    r, text, err = lockstep_run(tmp, "watchdog", env={"SCENARIO_STEPS": "2",
                                                      "LOCKSTEP_GATHER_DIR": gather,
                                                      "LOCKSTEP_GATHER_WAIT": "5"})
    f = one_root(r, "missing_ranks")
    expect(f["missing"] == [3], f"{f}")
    # Later, every rank long gone: the gathered copy still tells the state it was taken in.
    time.sleep(0.5)
    r, text = analyze(gather)
    f = one_root(r, "missing_ranks")
    expect(f["missing"] == [3] and f["waiting"] == [0, 1, 2], f"{f}")
    expect(all(x["state"] in ("in_call", "idle") for x in per_rank(r)),
           f"states of the snapshot: {[(x['rank'], x['state']) for x in per_rank(r)]}")
    expect("without an exit record" not in text, f"a rank both gone and alive:\n{text}")
    one_line(text, r"rank 3 never called it \u2014 it is alive and busy, not in NCCL, now at "
                   r"[^;]*load_batch", "where rank 3 was when the snapshot was taken")
    # The runner's own folder, post mortem: it stopped every rank itself (SIGTERM), and said
    # so in the folder: the ranks are as they were when it did.
    r, text = analyze(os.path.join(tmp, "run"))
    f = one_root(r, "missing_ranks")
    one_line(text, r"rank 3 never called it \u2014 it was alive and busy, not in NCCL, at "
                   r"[^;]*load_batch[^;]* when lockstep run stopped the job", "where rank 3 was "
             "when stopped")
    expect(r["jobs"][0]["stopped_by"]["by"] == "run", f"{r['jobs'][0]}")


# ---------------------------------------------------------------- 11. aborted communicators


def check_abort(r, text, how):
    f = one_root(r, "comm_aborted")
    expect(f["rank"] == 3 and f["waiting"] == [0, 1, 2], f"{f}")
    one_line(text, r"rank 3 %s comm [0-9a-f]{8} \(nccl%s from [^)]*handle_bad_batch" %
             ("aborted" if how == "abort" else "revoked",
              "CommAbort" if how == "abort" else "CommRevoke"), "who aborted the communicator")
    m = follows(r, "missing_ranks", 0)[0]
    expect(m["missing"] == [3], f"{m}")
    expect("never called it" not in m["summary"], f"{m['summary']}")


def case_comm_abort(tmp):
    """Rank 3 aborts (or revokes) the communicator its peers wait on and goes on."""
    how = rng.choice(["abort", "revoke"])
    note(f"rank 3 does ncclComm{how.capitalize()}")
    d = scenario(tmp, "comm_abort", env={"SCENARIO_ABORT": how},
                 launcher=("--timeout", str(rng.uniform(1.5, 3))))
    check_abort(*analyze(d), how)


def case_comm_abort_live(tmp):
    """With the default bounds: rank 3 computes on after it left the communicator its peers wait
    in, so its work cannot complete their wait: they wait for no rank that can (as for a dead
    one), not for a busy rank (slow, the long bound, here 60 s; its work lasts 150 s)."""
    how = rng.choice(["abort", "revoke"])
    note(f"rank 3 does ncclComm{how.capitalize()}, then computes")
    r, text, err = lockstep_run(tmp, "comm_abort", env={"SCENARIO_ABORT": how,
                                                        "SCENARIO_DELAY_MS": "150000"},
                                stall=None, run_args=("--stall-long", "60"))
    check_abort(r, text, how)
    st = r["stall"]
    expect(st["bound"] == "short" and st["short_s"] < 25,
           f"the stall was not the short bound of a wait for ranks that left: {st}")


# ---------------------------------------------------------------- 12. errors NCCL reports


COMM_ABORTED, COMM_INIT_FAILED, COMM_ASYNC_ERROR = 16, 64, 128


def traces_by_rank(d):
    """Every trace of a folder as the reader loads it (trace_query fails on one it refuses)."""
    p = subprocess.run([QUERY, d], capture_output=True, text=True, timeout=60)
    expect(p.returncode == 0, f"a trace did not load: {p.stderr}")
    return {t["rank"]: t for t in json.loads(p.stdout)}


def async_error_job(tmp):
    """Rank 3's NCCL reports an asynchronous error (ncclSystemError) once AllReduce #k
    completed, while rank 3 computes its next batch; its watchdog, polling every 20 ms, aborts
    the communicator and exits 1; ranks 0-2 wait in #k+1 until the launcher stops them."""
    steps = rng.randrange(1, 4)
    delay = rng.randrange(50, 2500)
    note(f"asynchronous error after AllReduce #{steps} on rank 3, launcher SIGTERM {delay} ms "
         f"after it exits")
    env = {"SCENARIO_STEPS": str(steps), "SCENARIO_STEP_MS": str(rng.randrange(2, 30)),
           "LOCKSTEP_EMU_ASYNC_ERROR": f"3:{steps}"}
    d = scenario(tmp, "async_error", env=env, want_rc=1,
                 launcher=("--fail-fast", "--fail-fast-delay", str(delay)))
    return d, steps


def case_async_error_recorded(tmp):
    """What the shim guarantees: the victim's trace holds the AsyncError its watchdog polled
    (ncclSystemError, from the poll), before its CommAbort; analyze names it an nccl_error."""
    d, steps = async_error_job(tmp)
    t = traces_by_rank(d)[3]
    got = [(r["op"], r["seq"], r["result"]) for r in t["records"]]
    want = ([("CommInitRank", 0, 0)] + [("AllReduce", k, 0) for k in range(1, steps + 1)]
            + [("AsyncError", 0, 2), ("CommAbort", 0, 0)])
    expect(got == want, f"rank 3's records {got}, want {want}")
    ae, ab = t["records"][-2:]
    expect(ae["site"][:1] == ["poll_async_error"] and ae["tid"] == ab["tid"]
           and ae["exit_ns"] <= ab["enter_ns"], f"AsyncError {ae}\nCommAbort {ab}")
    flags = t["comms"][0]["flags"]
    expect(flags & COMM_ASYNC_ERROR and flags & COMM_ABORTED, f"comm flags {flags}")
    for k in (0, 1, 2):
        expect(not any(r["op"] == "AsyncError" for r in traces_by_rank(d)[k]["records"]),
               f"rank {k} recorded an AsyncError")
    r, text = analyze(d)
    errs = [f for f in r["findings"] if f["kind"] == "nccl_error" and f["ranks"] == [3]]
    expect(len(errs) == 1 and errs[0]["result_name"] == "SystemError"
           and errs[0]["comm"] == ae["comm"], f"nccl_error of rank 3: {errs}")
    one_line(text, r"rank 3: AsyncError on comm [0-9a-f]{8} returned SystemError \(2\): NCCL "
                   r"reported it asynchronously [^;]*polled from [^;]*poll_async_error",
             "that rank 3's error was reported asynchronously, and where it was polled")


def case_async_error(tmp):
    """The diagnosis the trace allows: rank 3's asynchronous error is the root cause; its
    watchdog's abort, its exit and the others waiting for it follow from it."""
    d, steps = async_error_job(tmp)
    r, text = analyze(d)
    f = one_root(r, "nccl_error")
    expect(f["ranks"] == [3] and f["result_name"] == "SystemError"
           and "AsyncError" in f["summary"], f"root: {f['summary']}")
    follows(r, "comm_aborted", 0)
    follows(r, "rank_exited", 0, status=1)
    m = follows(r, "missing_ranks", 0)[0]
    expect(m["missing"] == [3] and m["waiting"] == [0, 1, 2] and m["seq"] == steps + 1,
           f"missing_ranks: {m['summary']}")
    no_death_blamed(r, [0, 1, 2, 3], "a death named as a root cause")


def case_truncated(tmp):
    """A mismatch NCCL's transport notices, as DDP's constructor met it on a GPU (init_paths:
    rank 2's AllGather received a Broadcast's 256 KB, "message truncated", ncclInvalidUsage from
    its watchdog's poll, while it went on and the others waited in the next Broadcast): the
    mismatch is the root cause; the victim's asynchronous error and the others' wait follow from
    it. Before, the error and the mismatch were two independent roots, the error first."""
    steps = rng.randrange(1, 4)
    note(f"rank 3 all-reduces 1 value at AllReduce #{steps + 1}, where the others all-reduce "
         "1,024")
    env = {"LOCKSTEP_EMU_ASYNC": "1", "SCENARIO_STEPS": str(steps),
           "SCENARIO_STEP_MS": str(rng.randrange(2, 30)), "LOCKSTEP_EMU_MISMATCH_ERROR": "1",
           "SCENARIO_ON_ERROR": "log"}
    d = scenario(tmp, "truncated", env=env, launcher=("--timeout", str(rng.uniform(2.5, 4))))
    r, text = analyze(d)
    f = one_root(r, "count_mismatch")
    expect(f["seq"] == steps + 1 and 3 in f["ranks"], f"root: {f['summary']}")
    errs = [e for e in follows(r, "nccl_error", 0) if e["result_name"] == "InvalidUsage"]
    expect(len(errs) == 1 and errs[0]["ranks"] == [3] and "AsyncError" in errs[0]["summary"],
           f"no asynchronous InvalidUsage of rank 3 following the mismatch: {kinds(r)}")
    one_line(text, rf"why: rank 3 had made collective #{steps + 1} on comm [0-9a-f]{{8}}, which its "
                   r"members called differently", "why rank 3's error follows from the mismatch")


def wrong_world_job(tmp):
    """Eight ranks; the launcher of ranks 4-7 says the world has 4: NCCL refuses their
    ncclCommInitRank (rank 4..7 of 4), they exit 1; ranks 0-3 wait in theirs until the
    launcher's timeout."""
    return scenario(tmp, "wrong_world", np=8,
                    launcher=("--world-sizes", "8,8,8,8,4,4,4,4",
                              "--timeout", str(rng.uniform(1.5, 3))))


def case_wrong_world_loads(tmp):
    """What the shim and the reader guarantee: every trace loads, the refused ranks' entries
    say so ("rank 4 of 4", init failed), and analyze names their refused CommInitRank."""
    d = wrong_world_job(tmp)
    ts = traces_by_rank(d)
    expect(sorted(ts) == list(range(8)), f"traces of ranks {sorted(ts)}")
    for k in range(4, 8):
        (c,) = ts[k]["comms"]
        expect(c["rank"] == k and c["nranks"] == 4 and c["flags"] & COMM_INIT_FAILED
               and c["init_result"] == 4, f"rank {k}: entry {c}")
        got = [(r["op"], r["comm_rank"], r["count"], r["result"]) for r in ts[k]["records"]]
        expect(got == [("CommInitRank", k, 4, 4)], f"rank {k}: records {got}")
    r, text = analyze(d)
    expect(r["unreadable"] == [] and "could not read" not in text,
           f"unreadable traces: {r['unreadable']}")
    expect(len(per_rank(r)) == 8, f"ranks {[x['rank'] for x in per_rank(r)]}")
    errs = [f for f in r["findings"] if f["kind"] == "nccl_error"]
    expect(len(errs) == 1 and errs[0]["ranks"] == [4, 5, 6, 7]
           and errs[0]["result_name"] == "InvalidArgument"
           and errs[0]["classes"][0]["op"] == "CommInitRank", f"nccl_error: {errs}")
    one_line(text, r"ranks 4-7: CommInitRank on comm [0-9a-f]{8} \([^)]*tp_init_world\)\) "
                   r"returned InvalidArgument \(4\): NCCL refused these arguments \(nranks 4\)",
             "that NCCL refused ranks 4-7's CommInitRank")


def case_wrong_world(tmp):
    """The diagnosis the traces allow: the refused init of ranks 4-7 is the root cause; their
    exits, and ranks 0-3 waiting in ncclCommInitRank for members that never join, follow from
    it."""
    d = wrong_world_job(tmp)
    r, text = analyze(d)
    expect(r["unreadable"] == [], f"unreadable traces: {r['unreadable']}")
    f = one_root(r, "nccl_error")
    expect(f["ranks"] == [4, 5, 6, 7] and f["result_name"] == "InvalidArgument", f"{f}")
    follows(r, "rank_exited", 0, status=1)
    w = follows(r, "comm_init_mismatch", 0)
    expect(any(g["missing"] == [4, 5, 6, 7] for g in w),
           f"ranks 0-3 waiting in init for 4-7: {[g['summary'] for g in w]}")


if __name__ == "__main__":
    sys.exit(run(globals(), "lockstep-realjobs-"))
