#!/usr/bin/env python3
"""test_blind.py -- `lockstep run` says up front when it cannot see: a trace folder on a small or
full tmpfs (Docker's 64 MiB /dev/shm, shared with NCCL's segments) is announced with how many
ranks' traces fit, the shim shrinks its ring to the room left, ranks it could not trace at all are
named in the report (never "the job made no NCCL call"), and a --dir longer than the shim takes is
refused before the job starts.

Usage: test_blind.py CASE   (paths from the environment meson sets, see meson.build). The tmpfs
cases need root (they mount); they run in a mount namespace of their own (unshare -m), and
unmount in a finally, so no mount outlives them.
"""
import json
import os
import re
import subprocess
import sys

from test_live import (LAUNCH, LOCKSTEP, SCENARIOS, remove_tagged_segments,  # noqa: E402
                       tagged_env)
from harness import Skip, expect, run  # noqa: E402

TAG = "bl%d" % os.getpid()  # names this case's emulator segments (LOCKSTEP_EMU_TAG)
MIB = 1024 * 1024


def base_env(tmp):
    return tagged_env(tmp, TAG)


def remove_segments():
    remove_tagged_segments(TAG)


class Tmpfs:
    """A tmpfs of `size` mounted at `path` while the `with` block runs, unmounted after it even
    when the block fails."""

    def __init__(self, path, size, options=""):
        self.path, self.size, self.options = path, size, options

    def __enter__(self):
        if os.getuid() != 0:
            raise Skip("mounting a tmpfs needs root (CI runs these cases as root)")
        os.makedirs(self.path, exist_ok=True)
        options = f"size={self.size},mode=700{self.options}"
        p = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", self.path],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise Skip(f"cannot mount a tmpfs here: {p.stderr.strip()}")
        return self.path

    def __exit__(self, *exc):
        subprocess.run(["umount", "-l", self.path], capture_output=True)
        return False


def fill(path, mib):
    """Writes `mib` MiB into file `path`, as NCCL's shared-memory segments would take them."""
    with open(path, "wb") as f:
        for _ in range(mib):
            f.write(b"\1" * MIB)


def lockstep_run(tmp, d, job, stall=1):
    """`lockstep run --dir d` over `job`; returns (process, JSON report or None)."""
    js = os.path.join(tmp, "report.json")
    out, err = os.path.join(tmp, "run.out"), os.path.join(tmp, "run.err")
    with open(out, "w") as o, open(err, "w") as e:
        p = subprocess.run([LOCKSTEP, "run", "--dir", d, "--stall", str(stall), "--json", js,
                            "--", *job], env=base_env(tmp), stdout=o, stderr=e, timeout=120)
    p.stdout, p.stderr = open(out).read(), open(err).read()
    remove_segments()
    return p, json.load(open(js)) if os.path.exists(js) else None


def hanging_job(extra=()):
    """8 ranks; rank 7 runs one training step fewer and stops in a collective the others never
    call: the job hangs until stopped."""
    return [LAUNCH, "--np", "8", *extra, "--", SCENARIOS, "uneven_shards"]


def files(d, suffix):
    return sorted(n for n in os.listdir(d) if n.endswith(suffix))


def analyze(d, *args):
    """`lockstep analyze` of trace folder `d` afterwards; returns (process, JSON report)."""
    p = subprocess.run([LOCKSTEP, "analyze", *args, d], capture_output=True, text=True,
                       timeout=60)
    js = subprocess.run([LOCKSTEP, "analyze", "--json", *args, d], capture_output=True, text=True,
                        timeout=60)
    try:
        report = json.loads(js.stdout)
    except ValueError:
        report = None
    return p, report


def expect_untraced_named(d, where, blind, why):
    """A post-mortem report of `where` (a trace folder, or node summaries) names the ranks
    `blind` as untraced for want of room in folder `d`: the line before the diagnosis, the JSON's
    untraced, and the words of the finding that names them (`why`: a finding kind, or None)."""
    p, report = analyze(where)
    line = "could not be traced: no room in " + d + " ("
    expect(line in p.stdout, f"analyze does not name the untraced ranks:\n{p.stdout}{p.stderr}")
    untraced = (report or {}).get("untraced", [])
    expect(sorted(u["rank"] for u in untraced) == blind and
           all(u["reason"] == "folder_full" and u["folder"] == d for u in untraced),
           f"analyze --json untraced {untraced}, markers of ranks {blind}")
    if why:
        said = [f["summary"] for f in (report or {}).get("findings", []) if f["kind"] == why]
        expect(said and all(line in s for s in said),
               f"{why} does not say why ranks have no trace: {said}\n{p.stdout}")


def case_shrink(tmp):
    """A 64 MiB tmpfs with 40 MiB taken by another consumer: the run says up front how many
    full-size traces fit, the shim takes smaller rings so that all 8 ranks are traced, and the
    stall is diagnosed (exit 3)."""
    with Tmpfs(os.path.join(tmp, "shm"), "64m") as shm:
        fill(os.path.join(shm, "nccl-segment"), 40)
        d = os.path.join(shm, "traces")
        p, report = lockstep_run(tmp, d, hanging_job())
        both = p.stdout + p.stderr
        room = re.search(r"lockstep: warning: .*: (\S+ \S+) free of 64\.0 MiB, room for (\d+) "
                         r"ranks' traces of (\S+ MiB); NCCL's shared-memory transport uses the "
                         r"same filesystem", p.stderr)
        expect(room and int(room.group(2)) < 8, f"no warning of the room left:\n{p.stderr}")
        expect(p.stderr.find(room.group(0)) < p.stderr.find("lockstep: tracing"),
               f"the warning comes after the job started:\n{p.stderr}")
        shrunk = [l for l in p.stderr.splitlines() if "this trace keeps the last" in l]
        expect(shrunk, f"no rank said it took a smaller ring:\n{p.stderr}")
        expect(len(files(d, ".trace")) == 8 and not files(d, ".blind"),
               f"want 8 traces and no marker: {os.listdir(d)}\n{p.stderr}")
        expect(p.returncode == 3, f"lockstep run exited {p.returncode}, want 3\n{both}")
        kinds = [f["kind"] for f in (report or {}).get("findings", [])]
        expect("op_mismatch" in kinds, f"findings {kinds}\n{both}")
        expect("8 traces" in p.stdout and "untraced" not in (report or {}),
               f"every rank traced:\n{p.stdout}")


def case_partial(tmp):
    """A tmpfs with room for one small trace: one rank is traced, the others leave markers; the
    stall is still diagnosed and the report names the ranks that could not be traced."""
    with Tmpfs(os.path.join(tmp, "shm"), "64m") as shm:
        fill(os.path.join(shm, "nccl-segment"), 62)
        d = os.path.join(shm, "traces")
        p, report = lockstep_run(tmp, d, hanging_job(["--timeout", "30"]))
        both = p.stdout + p.stderr
        traced, marked = files(d, ".trace"), files(d, ".trace.blind")
        expect(len(traced) >= 1 and len(traced) + len(marked) == 8,
               f"want 8 traces and markers, some traced: {os.listdir(d)}\n{both}")
        blind = sorted(int(re.search(r"-r(\d+)\.trace\.blind$", n).group(1)) for n in marked)
        expect(p.returncode == 3, f"lockstep run exited {p.returncode}, want 3\n{both}")
        line = [l for l in p.stdout.splitlines() if "could not be traced: no room in " + d in l]
        expect(line, f"the report does not name the untraced ranks:\n{p.stdout}")
        untraced = (report or {}).get("untraced", [])
        expect(sorted(u["rank"] for u in untraced) == blind and
               all(u["reason"] == "folder_full" and u["folder"] == d for u in untraced),
               f"JSON untraced {untraced}, markers of ranks {blind}")
        # Afterwards, post-mortem: the same words, and the finding says why they are missing.
        expect_untraced_named(d, d, blind, "missing_ranks")
        # A node summary of the folder's traces, made as lockstep-gather makes it (in the folder,
        # of ./NAME.trace), keeps the markers under the folder's path, and so does a summary of
        # that summary: a gathered diagnosis names the untraced ranks as the folder's does.
        where = ["./" + n for n in traced]
        for name in ("node.summary", "again.summary"):
            summary = os.path.join(tmp, name)
            s = subprocess.run([LOCKSTEP, "summarize", "-o", summary, *where], cwd=d,
                               capture_output=True, text=True, timeout=60)
            expect(s.returncode == 0, f"summarize {where} exited {s.returncode}:\n{s.stderr}")
            expect_untraced_named(d, summary, blind, "missing_ranks")
            where = [summary]


def case_nothing_fits(tmp):
    """A 64 KiB tmpfs: not one trace fits. The job runs untouched (its launcher's timeout ends
    it); the report says which ranks could not be traced and why, never that the job made no
    NCCL call."""
    with Tmpfs(os.path.join(tmp, "shm"), "64k") as shm:
        d = os.path.join(shm, "traces")
        p, report = lockstep_run(tmp, d, hanging_job(["--timeout", "3"]))
        both = p.stdout + p.stderr
        expect("room for 0 ranks' traces" in p.stderr, f"no warning up front:\n{p.stderr}")
        expect("made no NCCL call" not in both, f"the report blames the job:\n{both}")
        expect("lockstep: ranks 0-7 could not be traced: no room in " + d + " (64 KiB, " in
               p.stdout, f"the report does not say why nothing was traced:\n{both}")
        expect(p.returncode == 124, f"lockstep run exited {p.returncode}: want the launcher's "
                                    f"timeout status, 124\n{both}")
        untraced = (report or {}).get("untraced", [])
        expect(sorted(u["rank"] for u in untraced) == list(range(8)) and
               all(u["folder_bytes"] == 64 * 1024 and u["need_bytes"] > u["free_bytes"]
                   for u in untraced), f"JSON untraced: {untraced}")
        expect_untraced_named(d, d, list(range(8)), None)
        a, _ = analyze(d)
        expect(a.returncode == 1, f"analyze of markers only exited {a.returncode}, want 1")
        # Not even a marker (no inode left for one): the runner still says the folder had no
        # room, from the folder itself.
    with Tmpfs(os.path.join(tmp, "shm2"), "64k", ",nr_inodes=2") as shm:
        d = os.path.join(shm, "traces")
        p, report = lockstep_run(tmp, d, hanging_job(["--timeout", "3"]))
        both = p.stdout + p.stderr
        expect(not files(d, ".blind"), f"markers made: {os.listdir(d)}")
        expect("made no NCCL call" not in both and "lockstep: no traces in " + d + ", which is "
               "full (64 KiB, " in p.stdout and "the job's processes could not be traced" in
               p.stdout, f"without markers:\n{both}")


def case_long_dir(tmp):
    """A --dir of 600 characters, longer than the shim takes (its traces would go to the default
    folder): refused before the job starts, with exit 2 and the limit named."""
    parent = os.path.join(tmp, "a" * 200, "b" * 200)
    os.makedirs(parent)
    d = os.path.join(parent, "c" * (600 - len(parent) - 1))
    expect(len(d) == 600, f"the path is {len(d)} characters")
    p = subprocess.run([LOCKSTEP, "run", "--dir", d, "--", LAUNCH, "--np", "2", "--", SCENARIOS,
                        "clean"], env=base_env(tmp), capture_output=True, text=True, timeout=60)
    remove_segments()
    expect(p.returncode == 2 and "lockstep: --dir is 600 characters long; the shim takes a trace "
           "folder of at most 510" in p.stderr, f"exit {p.returncode}:\n{p.stderr}")
    expect(not os.path.exists(d) and "tracing" not in p.stderr, f"the job started:\n{p.stderr}")


if __name__ == "__main__":
    # The mounts of a case live in a mount namespace of its own: none leaks, whatever happens.
    if os.getuid() == 0 and not os.environ.get("LOCKSTEP_BLIND_NS"):
        os.environ["LOCKSTEP_BLIND_NS"] = "1"
        try:
            can = subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0
        except OSError:
            can = False
        if can:
            sys.exit(subprocess.run(["unshare", "-m", "--propagation", "private",
                                     sys.executable, *sys.argv]).returncode)
    sys.exit(run(globals(), "lockstep-blind-"))
