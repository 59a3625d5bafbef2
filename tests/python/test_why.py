#!/usr/bin/env python3
"""test_why.py -- why a rank ended, end to end: Python ranks (raises.py) on the emulator under the
real shim end with uncaught exceptions; `lockstep analyze` must name each exception at its line,
the original cause of a chained one, torchrun's error file before the traceback, and the first
failure as the root cause of the later ones (docs/python.md, "Why a rank ended").

Expected lines come from raises.py's marker comments (`# @name`). No timing is asserted: the
cascade's ranks fail seconds apart. Usage: test_why.py CASE (paths from the environment)."""
import json
import os
import shutil
import socket
import subprocess
import sys

from test_python import (LAUNCH, LOCKSTEP, PYTHON, SHIM, analyze, analyze_text, analyzer_env,
                         marks, need_python, rank_env, script)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import Skip, expect, run  # noqa: E402

RAISES = script("raises.py")


def run_case(tmp, case, np=3, fail_fast=True, extra=None):
    d = os.path.join(tmp, "t")
    os.makedirs(d, exist_ok=True)
    env = rank_env(d, dict({"WHY_CASE": case}, **(extra or {})))
    cmd = [LAUNCH, "--np", str(np), "--timeout", "90", *(["--fail-fast"] if fail_fast else []),
           "--", PYTHON, RAISES]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    return p, d


def deaths(rep):
    """{rank: finding} of the rank_exited findings, by their first rank, with its index."""
    out = {}
    for i, f in enumerate(rep["findings"]):
        if f["kind"] == "rank_exited":
            out[f["rank"]] = dict(f, index=i)
    return out


def check_exc(label, exc, typ, line, func, message=None):
    expect(exc is not None, f"{label}: no exception")
    expect(exc["type"] == typ, f"{label}: type {exc['type']!r}, want {typ!r}")
    expect(exc["file"] == RAISES, f"{label}: file {exc['file']!r}, want {RAISES!r}")
    expect(exc["line"] == line, f"{label}: line {exc['line']}, want {line}")
    expect(exc["function"] == func, f"{label}: function {exc['function']!r}, want {func!r}")
    if message is not None:
        expect(exc["message"] == message, f"{label}: message {exc['message']!r}")


def case_why_one(tmp):
    """Rank 2 raises in load() while ranks 0-1 wait for it in the next AllReduce: the root
    rank_exited names the exception, its message and its line (text, JSON, GitHub), and NCCL's
    last warning from NCCL_DEBUG_FILE (its %h expanded; the emulator writes none, so the test
    writes NCCL's line there first)."""
    need_python()
    m = marks("raises.py")
    warn = "NET/Socket : peer 10.0.0.2 closed the connection"
    with open(os.path.join(tmp, f"nccl.{socket.gethostname()}.log"), "w") as fp:
        fp.write(f"vm:1:1 [0] NCCL INFO Bootstrap : Using eth0\n"
                 f"vm:1:1 [0] transport/net.cc:870 NCCL WARN {warn}\n"
                 f"vm:1:1 [0] NCCL INFO comm 0x1 rank 2 nranks 3 - Init COMPLETE\n")
    p, d = run_case(tmp, "one", extra={"NCCL_DEBUG_FILE": os.path.join(tmp, "nccl.%h.log")})
    expect("rank 2: exited 1" in p.stderr, f"rank 2 did not exit 1: {p.stderr[-1500:]}")
    rep = analyze(d, want_rc=1)
    ds = deaths(rep)
    expect(2 in ds, f"no rank_exited for rank 2: {[f['kind'] for f in rep['findings']]}")
    f = ds[2]
    expect(f["consequence_of"] is None, f"rank 2's exit is not a root: {f['consequence_of']}")
    msg = "Expected a 'cuda' device type for generator but found 'cpu'"
    check_exc("one", f.get("exception"), "RuntimeError", m["one"], "load", msg)
    expect(f["exception"]["source"] == "stderr", f"source {f['exception']['source']}")
    want = f"after RuntimeError: {msg} (raises.py:{m['one']} in load)"
    expect(want in f["summary"], f"summary {f['summary']!r} lacks {want!r}")
    expect(want in analyze_text(d), "the text report does not name the exception")
    missing = [x for x in rep["findings"] if x["kind"] == "missing_ranks"]
    expect(missing and f"it exited with status 1 after RuntimeError (raises.py:{m['one']} in "
           "load)" in missing[0]["summary"], f"missing_ranks does not say why rank 2 is gone: "
           f"{[x['summary'] for x in missing]}")
    expect(f.get("nccl_warning") == warn, f"nccl_warning {f.get('nccl_warning')!r}")
    gh = subprocess.run([LOCKSTEP, "analyze", "--format", "github", d], capture_output=True,
                        text=True, timeout=60, env=analyzer_env(), cwd=tmp)
    ann = f"line={m['one']},title=lockstep rank_exited::"
    expect(ann in gh.stdout, f"no GitHub annotation at the raising line: {gh.stdout[:800]}")
    (r2,) = [os.path.join(d, n) for n in os.listdir(d) if n.endswith("-r2.trace")]
    dump = subprocess.run([LOCKSTEP, "dump", r2], capture_output=True, text=True, timeout=60,
                          env=analyzer_env())
    expect(f"ended by RuntimeError: {msg}" in dump.stdout, f"dump: {dump.stdout[:1500]}")
    gl = subprocess.run([LOCKSTEP, "analyze", "--format", "gitlab", d], capture_output=True,
                        text=True, timeout=60, env=analyzer_env(), cwd=tmp)
    issues = [i for i in json.loads(gl.stdout) if i["check_name"] == "rank_exited"]
    expect([i["location"]["lines"]["begin"] for i in issues] == [m["one"]],
           f"GitLab issues of rank_exited: {issues}")


def case_why_cascade(tmp):
    """Every rank raises a different exception at a different time: rank 1's ValueError first;
    rank 0's watchdog DistBackendError (waiting for rank 1 in an AllReduce) and rank 2's later
    KeyError (outside NCCL, no wait joins it to rank 1) follow from it."""
    need_python()
    m = marks("raises.py")
    p, d = run_case(tmp, "cascade", fail_fast=False)
    for r in range(3):
        expect(f"rank {r}: exited 1" in p.stderr, f"rank {r} did not exit 1: {p.stderr[-2000:]}")
    rep = analyze(d, want_rc=1)
    ds = deaths(rep)
    expect(sorted(ds) == [0, 1, 2], f"rank_exited findings for ranks {sorted(ds)}")
    check_exc("rank 1", ds[1].get("exception"), "ValueError", m["first"], "cascade")
    check_exc("rank 0", ds[0].get("exception"), "DistBackendError", m["watchdog"],
              "watched_all_reduce")
    check_exc("rank 2", ds[2].get("exception"), "KeyError", m["last"], "cascade")
    root = ds[1]["index"]
    expect(ds[1]["consequence_of"] is None, f"rank 1's ValueError is not the root: {ds[1]}")
    for r in (0, 2):
        expect(ds[r]["consequence_of"] == root,
               f"rank {r}'s exception follows {ds[r]['consequence_of']}, want {root}")
    why = "rank 2's KeyError follows from rank 1's ValueError"
    expect(any(why in x for x in ds[2]["details"]), f"no {why!r}: {ds[2]['details']}")
    why = "rank 0's DistBackendError follows from rank 1's ValueError"
    expect(any(why in x for x in ds[0]["details"]), f"no {why!r}: {ds[0]['details']}")
    roots = [f["kind"] for f in rep["findings"] if f["consequence_of"] is None]
    expect(roots == ["rank_exited"], f"roots {roots}, want rank 1's exit alone")


def case_why_chained(tmp):
    """raise RuntimeError(...) from FileNotFoundError: the exception and its original cause,
    each at its line."""
    need_python()
    m = marks("raises.py")
    p, d = run_case(tmp, "chained")
    expect("rank 1: exited 1" in p.stderr, f"rank 1 did not exit 1: {p.stderr[-1500:]}")
    f = deaths(analyze(d, want_rc=1)).get(1)
    expect(f is not None, "no rank_exited for rank 1")
    exc = f.get("exception")
    check_exc("chained", exc, "RuntimeError", m["chained"], "load_chained",
              "could not load the next batch")
    check_exc("cause", exc.get("cause"), "FileNotFoundError", m["original"], "open_shard",
              "shard-1.bin is missing")
    expect(f"raised from FileNotFoundError: shard-1.bin is missing (raises.py:{m['original']} "
           "in open_shard)" in f["summary"], f"summary does not name the cause: {f['summary']}")


def case_why_cuda(tmp):
    """Rank 1's (emulated) GPU faults: its synchronization fails, it raises; the finding names
    the exception and the CUDA error the shim's completion queries met, with the driver's text."""
    need_python()
    m = marks("raises.py")
    p, d = run_case(tmp, "cuda", extra={"LOCKSTEP_EMU_ASYNC": "1",
                                        "LOCKSTEP_EMU_CUDA_FAULT": "1:3"})
    expect("rank 1: exited 1" in p.stderr, f"rank 1 did not exit 1: {p.stderr[-1500:]}")
    f = deaths(analyze(d, want_rc=1)).get(1)
    expect(f is not None, "no rank_exited for rank 1")
    check_exc("cuda", f.get("exception"), "RuntimeError", m["cuda"], "cuda_step")
    want = {"result": 700, "message": "an illegal memory access was encountered"}
    expect(f.get("cuda_error") == want, f"cuda_error {f.get('cuda_error')}, want {want}")
    expect(any("CUDA error 700 (an illegal memory access" in x for x in f["details"]),
           f"no detail names the CUDA error: {f['details']}")


def error_file_json(typ, message, line):
    """An error file as torchrun's @record writes it (torch.distributed.elastic.multiprocessing.
    errors.ErrorHandler.record_exception)."""
    stack = ("Traceback (most recent call last):\n"
             f'  File "{RAISES}", line {line}, in record_step\n'
             "    raise it\n"
             f"{typ}: {message}\n")
    return {"message": {"message": f"{typ}: {message}",
                        "extraInfo": {"py_callstack": stack, "timestamp": "1700000000"}}}


def case_why_error_file(tmp):
    """TORCHELASTIC_ERROR_FILE holds what @record wrote: the analyzer prefers its traceback to
    the one on stderr (written here the way @record writes it, as torchrun may not run)."""
    need_python()
    m = marks("raises.py")
    err = os.path.join(tmp, "error.json")
    p, d = run_case(tmp, "one", extra={"TORCHELASTIC_ERROR_FILE": err})
    expect("rank 2: exited 1" in p.stderr, f"rank 2 did not exit 1: {p.stderr[-1500:]}")
    with open(err, "w") as fp:
        json.dump(error_file_json("torch.OutOfMemoryError", "CUDA out of memory", m["record"]),
                  fp)
    f = deaths(analyze(d, want_rc=1)).get(2)
    expect(f is not None, "no rank_exited for rank 2")
    check_exc("error file", f.get("exception"), "torch.OutOfMemoryError", m["record"],
              "record_step", "CUDA out of memory")
    expect(f["exception"]["source"] == "error_file", f"source {f['exception']['source']}")
    os.unlink(err)  # gone: the traceback on stderr again
    f = deaths(analyze(d, want_rc=1)).get(2)
    check_exc("stderr", f.get("exception"), "RuntimeError", m["one"], "load")


def case_why_torchrun(tmp):
    """A job under torchrun with @record (Debian's python3-torch): rank 1 raises; its finding
    names the exception from the error file torchrun gave it."""
    need_python()
    torchrun = shutil.which("torchrun")
    if not torchrun:
        raise Skip("torchrun is not installed (Debian package python3-torch)")
    py = "/usr/bin/python3"  # torchrun's own interpreter: the one torch is installed for
    if subprocess.run([py, "-c", "import torch.distributed.elastic.multiprocessing.errors"],
                      capture_output=True, timeout=120).returncode != 0:
        raise Skip(f"{py} cannot import torch")
    m = marks("raises.py")
    d = os.path.join(tmp, "t")
    os.makedirs(d)
    env = rank_env(d, {"WHY_CASE": "record", "LOCKSTEP_TEST_IDFILE": os.path.join(tmp, "id")})
    env.pop("LD_PRELOAD")  # the ranks alone are preloaded, not torchrun's own interpreter
    p = subprocess.run([torchrun, "--standalone", "--nproc_per_node", "3", "--monitor_interval",
                        "0.1", "--redirects", "2", "--tee", "2", "--no_python", "env",
                        "LD_PRELOAD=" + SHIM, py,
                        RAISES], env=env, capture_output=True, text=True, timeout=300)
    expect(p.returncode != 0, f"torchrun exited 0: {p.stderr[-2000:]}")
    for f in os.listdir("/dev/shm"):  # the emulator's segments of ranks torchrun started
        if f.startswith("lsemu-u%d-" % os.getuid()):
            try:
                os.unlink(os.path.join("/dev/shm", f))
            except OSError:
                pass
    f = deaths(analyze(d, want_rc=1)).get(1)
    expect(f is not None, f"no rank_exited for rank 1: {p.stderr[-2000:]}")
    check_exc("torchrun", f.get("exception"), "RuntimeError", m["record"], "record_step",
              "CUDA out of memory. Tried to allocate 2.00 GiB")
    expect(f["exception"]["source"] == "error_file",
           f"source {f['exception']['source']}, want torchrun's error file")


if __name__ == "__main__":
    sys.exit(run(globals(), "lockstep-why-"))
