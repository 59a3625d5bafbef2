#!/usr/bin/env python3
"""test_keep.py -- `lockstep watch --keep`, a watch that serves as long as the job does: a
tensor-parallel group serving requests (`partial serve`, a collective every 50 ms) wedges for
5 s and serves on. Watch reports each wedge once, says when it resumed, publishes it in its
Prometheus metrics file while it lasts, outlives the job, and exits 0 on SIGTERM with
`lockstep_watch_up 0`. `--keep --kill` is refused.

Usage: test_keep.py CASE   (paths from the environment meson sets, see meson.build)
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import expect, run  # noqa: E402
from test_live import LAUNCH, LOCKSTEP, SHIM, base_env, stop_launchers  # noqa: E402

PARTIAL = os.environ["PARTIAL"]
JOB = "tp-server"
# Generous bounds for a loaded 2-core machine: the job serves for about 20 s.
JOB_TIMEOUT = 120
WATCH_SAYS_TIMEOUT = 60

# A sample line of the exposition format: name, optional {labels}, a number as Go's ParseFloat
# reads it (an exponent may be negative: 9.7856e-05).
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"'
                    r'(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")*)?\})? (NUMBER)$'
                    .replace("NUMBER", r'-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?Inf|NaN'))


def parse_metrics(text, label):
    """The samples of a Prometheus text file as {(name, labels): value}, after checking that
    each family has HELP and TYPE before its samples, a counter's name ends in _total, and no
    series is written twice (node_exporter refuses such a file)."""
    types, samples = {}, {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            expect(kind in ("gauge", "counter") and name not in types,
                   f"{label}: TYPE line {line!r}")
            expect(kind != "counter" or name.endswith("_total"), f"{label}: counter {name}")
            types[name] = kind
            continue
        m = SAMPLE.match(line)
        expect(m, f"{label}: not a sample line: {line!r}")
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        expect(name in types, f"{label}: {name} has no TYPE before its samples")
        expect((name, labels) not in samples, f"{label}: {name}{labels} written twice")
        samples[(name, labels)] = float(value)
    return samples


def read_when_there(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return None


def wait_for_text(path, text, what, timeout=WATCH_SAYS_TIMEOUT):
    """Waits until file `path` holds `text`; returns its content."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = read_when_there(path) or ""
        if text in got:
            return got
        time.sleep(0.1)
    expect(False, f"{what}: {path} never said {text!r}:\n{read_when_there(path)}")


def start_watch(tmp, d, prom):
    out = open(os.path.join(tmp, "watch.out"), "w")
    err = open(os.path.join(tmp, "watch.err"), "w")
    return subprocess.Popen([LOCKSTEP, "watch", "--keep", "--stall", "1", "--metrics", prom,
                             "--json", os.path.join(tmp, "report.json"), d],
                            env=base_env(), stdout=out, stderr=err)


def start_server(d, wedges):
    """`partial serve` on 4 ranks: rank 3 wedges the group for 5 s after 20 requests, and
    again every 60 requests after that, `wedges` times; the group serves for 15 s more than
    its wedges take."""
    env = base_env({"LD_PRELOAD": SHIM, "LOCKSTEP_DIR": d, "LOCKSTEP_JOB": JOB,
                    "PARTIAL_VICTIM": "3", "PARTIAL_STEPS": "20", "PARTIAL_WEDGES": str(wedges),
                    "PARTIAL_WEDGE_GAP": "60", "PARTIAL_HANG_S": "5", "PARTIAL_LAG_MS": "0",
                    "PARTIAL_TOTAL_S": str(5 * wedges + 15)})
    return subprocess.Popen([LAUNCH, "--np", "4", "--timeout", str(JOB_TIMEOUT), "--", PARTIAL,
                             "serve"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def sample_while(job, prom, label):
    """Reads the metrics file every 0.1 s until the job ends; returns the values of
    lockstep_stalled for the job, one per change, and every finding series seen."""
    stalled, findings = [], set()
    deadline = time.time() + JOB_TIMEOUT
    while job.poll() is None and time.time() < deadline:
        text = read_when_there(prom)
        if text:
            samples = parse_metrics(text, label)
            v = samples.get(("lockstep_stalled", f'{{job_name="{JOB}"}}'))
            if v is not None and (not stalled or stalled[-1] != v):
                stalled.append(v)
            findings |= {labels for (name, labels) in samples if name == "lockstep_finding"}
        time.sleep(0.1)
    expect(job.poll() is not None, f"{label}: the job did not end in {JOB_TIMEOUT} s")
    return stalled, findings


def serve_and_check(tmp, wedges, label):
    d = os.path.join(tmp, "traces")
    os.mkdir(d, 0o700)
    textfile = os.path.join(tmp, "textfile")
    os.mkdir(textfile)
    prom = os.path.join(textfile, "lockstep.prom")
    err_path = os.path.join(tmp, "watch.err")
    watch = start_watch(tmp, d, prom)
    job = None
    try:
        wait_for_text(err_path, "lockstep: watching", label)
        job = start_server(d, wedges)
        stalled, findings = sample_while(job, prom, label)
        job_err = job.stderr.read()
        expect(job.returncode == 0, f"{label}: the job exited {job.returncode}: {job_err}")
        expect(job_err.count("stopped calling") == wedges, f"{label}: the job: {job_err}")
        # Each wedge shows in the metrics while it lasts, and is over afterwards.
        expect(stalled == [0.0, 1.0] * wedges + [0.0],
               f"{label}: lockstep_stalled{{job_name=\"{JOB}\"}} went {stalled}")
        expect(f'{{job_name="{JOB}",kind="missing_ranks",ranks="3"}}' in findings,
               f"{label}: finding series seen: {findings}")
        err = wait_for_text(err_path, "every traced process has ended", label)
        # Watch outlived each stall and the job's end, and said the end once.
        time.sleep(1.5)
        expect(watch.poll() is None, f"{label}: watch exited {watch.returncode}")
        err = read_when_there(err_path)
        expect(err.count("every traced process has ended") == 1, f"{label}: {err}")
        expect(err.count("diagnosing the live job") == wedges, f"{label}: stalls said:\n{err}")
        resumed = re.findall(rf"job {JOB} \(ranks 0-3\) resumed after ([0-9.]+) s", err)
        expect(len(resumed) == wedges and all(4 <= float(s) <= 30 for s in resumed),
               f"{label}: resumed {resumed}:\n{err}")
        out = read_when_there(os.path.join(tmp, "watch.out"))
        expect(out.count("[missing_ranks]") == wedges,
               f"{label}: the stall should be diagnosed {wedges} time(s):\n{out}")
        report = json.load(open(os.path.join(tmp, "report.json")))
        f = report["findings"][0]
        expect(report["stall"]["job"] == JOB and f["kind"] == "missing_ranks" and
               f["missing"] == [3], f"{label}: report {report['stall']} {f['summary']}")
        samples = parse_metrics(read_when_there(prom), label)
        expect(samples.get(("lockstep_stalls_total", f'{{job_name="{JOB}"}}')) == wedges and
               samples.get(("lockstep_watch_up", "")) == 1, f"{label}: metrics {samples}")
        status = json.load(open(os.path.join(textfile, "lockstep.json")))
        expect(status["up"] and status["jobs"][0]["job"] == JOB and
               status["jobs"][0]["stalls"] == wedges and not status["jobs"][0]["stalled"],
               f"{label}: status {status}")
        # SIGTERM: a last write with lockstep_watch_up 0, exit 0.
        watch.send_signal(signal.SIGTERM)
        rc = watch.wait(timeout=30)
        expect(rc == 0, f"{label}: watch exited {rc} on SIGTERM:\n{read_when_there(err_path)}")
        samples = parse_metrics(read_when_there(prom), label)
        expect(samples.get(("lockstep_watch_up", "")) == 0, f"{label}: after SIGTERM {samples}")
        expect(not json.load(open(os.path.join(textfile, "lockstep.json")))["up"],
               f"{label}: the status file still says up")
        expect(not [n for n in os.listdir(textfile) if ".tmp" in n],
               f"{label}: temporary files left: {os.listdir(textfile)}")
    finally:
        if job:
            stop_launchers([job])
        if watch.poll() is None:
            watch.kill()
            watch.wait()


def case_serve(tmp):
    """One wedge of 5 s, watched with --keep --stall 1 --metrics: reported once, resumed."""
    serve_and_check(tmp, 1, "serve")


def case_two_wedges(tmp):
    """Two wedges in a row: each reported once, each resumed."""
    serve_and_check(tmp, 2, "two_wedges")


def case_kill_refused(tmp):
    """--keep with --kill: a usage error, nothing watched, no file written."""
    prom = os.path.join(tmp, "m.prom")
    try:
        p = subprocess.run([LOCKSTEP, "watch", "--keep", "--kill", "--metrics", prom, tmp],
                           env=base_env(), capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        expect(False, "watch --keep --kill was not refused: it watched on")
    expect(p.returncode == 2, f"watch --keep --kill exited {p.returncode}\n{p.stderr}")
    expect("--keep and --kill do not go together" in p.stderr and "usage: lockstep watch" in
           p.stderr and p.stdout == "", f"watch --keep --kill said:\n{p.stderr}")
    expect(not os.path.exists(prom), "a metrics file was written")


if __name__ == "__main__":
    sys.exit(run(globals(), "lockstep-keep-"))
