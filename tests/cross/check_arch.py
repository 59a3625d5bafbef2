#!/usr/bin/env python3
"""check_arch.py -- a trace means the same whichever architecture wrote it and whichever reads it
(scripts/test-aarch64 runs it after the aarch64 suites; the aarch64 programs run under qemu-user
through binfmt_misc).

1. tracegen: the aarch64 generator writes the same bytes as the x86-64 one (the trace format is
   byte-order and word-size explicit: docs/trace-format.md).
2. The aarch64 analyzer's reports (text, JSON, HTML) on generated jobs are byte-identical to the
   x86-64 analyzer's (bench/compare_outputs.sh with the two binaries, cases.txt).
3. Real hangs: a scenario (tests/scenarios/scenarios.c) run by its aarch64 build under the aarch64
   shim and by its x86-64 build under the x86-64 shim. Each set of traces is analyzed by both
   analyzers: the reports must be byte-identical (the x86-64 analyzer reads arm64 traces and the
   reverse); and the diagnosis of the arm64 run must be the x86-64 run's (the same findings, ranks,
   calls, sequence numbers and call sites; process ids, times and communicator ids differ between
   any two runs and are left out).
4. The aarch64 wheel: built by scripts/wheel --arch aarch64 (tagged manylinux_2_28_aarch64 and
   checked by packaging/wheel_tool.py), installed for that platform, and its lockstep (under
   qemu-user) diagnoses a job as the x86-64 build does.

Usage: check_arch.py --x86 BUILD_DIR --aarch64 CROSS_BUILD_DIR
Ends with "check_arch: N passed, N failed".
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
from harness import elf_machine  # noqa: E402
from source_tree import clean_copy  # noqa: E402

# (mode, ranks, environment): hangs of different kinds, each with a culprit rank.
SCENARIOS = [
    ("code_path", 4, {"SCENARIO_VICTIM": "1"}),        # op_mismatch
    ("segfault", 4, {"SCENARIO_VICTIM": "1"}),         # rank_crashed, then missing ranks
    ("unmatched_send", 2, {}),                         # p2p
    ("cross_comm_deadlock", 4, {}),                    # a cycle across communicators
    ("shape_mismatch", 4, {"SCENARIO_VICTIM": "2"}),   # count_mismatch
]
TRACEGEN_CASES = ["--ranks 8 --colls 20 --crash 4:11", "--ranks 16 --colls 30 --p2p --split 4",
                  "--ranks 64 --colls 300 --ring 64 --mismatch count:5:250",
                  "--ranks 4 --ranks-per-host 2 --host-paths --python --missing 3"]

results = []


def check(name, ok, why=""):
    results.append(ok)
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f": {why}"), flush=True)


class Build:
    def __init__(self, d, arch):
        self.d, self.arch = os.path.abspath(d), arch
        self.lockstep = os.path.join(self.d, "analyzer", "lockstep")
        self.tracegen = os.path.join(self.d, "tests", "tracegen", "lockstep-tracegen")
        self.shim = os.path.join(self.d, "shim", "liblockstep.so")
        self.launch = os.path.join(self.d, "tests", "launcher", "launch-ranks")
        self.scenarios = os.path.join(self.d, "tests", "scenarios", "scenarios")
        self.emu = os.path.join(self.d, "tests", "emulator")
        for p in (self.lockstep, self.tracegen, self.shim, self.launch, self.scenarios):
            if not os.path.exists(p):
                sys.exit(f"check_arch: {p} is missing: build {self.d} first")
        if elf_machine(self.shim) != arch:
            sys.exit(f"check_arch: {self.shim} is not an {arch} object")


def analyzer_env():
    env = dict(os.environ, NO_COLOR="1")
    env.pop("LD_PRELOAD", None)
    return env


def reports(build, d):
    """The text, JSON (every rank's object) and HTML reports of `build` on folder d, with the exit
    status, as bytes."""
    out = {}
    for mode, opts in (("text", []), ("json", ["--json", "--ranks", "all"]),
                       ("html", ["--html", "-"])):
        p = subprocess.run([build.lockstep, "analyze", *opts, d], capture_output=True,
                           env=analyzer_env(), timeout=600)
        out[mode] = p.stdout + b"\nexit %d\n" % p.returncode + p.stderr
    return out


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a.splitlines(), b.splitlines())):
        if x != y:
            return f"line {i + 1}: {x[:160]!r} vs {y[:160]!r}"
    return f"lengths {len(a)} vs {len(b)}"


def compare_reports(name, x86, arm, d):
    a, b = reports(x86, d), reports(arm, d)
    for mode in a:
        check(f"{name}: {mode} report, x86-64 analyzer = aarch64 analyzer", a[mode] == b[mode],
              first_difference(a[mode], b[mode]))
    return json.loads(a["json"].rsplit(b"\nexit ", 1)[0])


def run_scenario(build, mode, np, extra, d):
    os.makedirs(d)
    env = dict(os.environ, LD_PRELOAD=build.shim, LOCKSTEP_DIR=d,
               LD_LIBRARY_PATH=build.emu + ":" + os.environ.get("LD_LIBRARY_PATH", ""), **extra)
    # Stopped once no rank made progress for 2 s (emulated ranks are slow to get going).
    p = subprocess.run([build.launch, "--np", str(np), "--timeout", "60", "--stop-when-stuck",
                        "2", "--", build.scenarios, mode], env=env, capture_output=True,
                       text=True, timeout=180)
    n = len([f for f in os.listdir(d) if f.endswith(".trace")])
    check(f"{mode} on {build.arch}: the job hung and left {np} traces",
          p.returncode == 124 and n == np, f"launcher exit {p.returncode}, {n} traces: "
          f"{p.stderr[-400:]}")


def diagnosis(report):
    """What a diagnosis says, without what differs between any two runs (pids, times, comm ids,
    hosts, addresses): each finding's kind, ranks, waiting ranks, and each call it names (op, seq,
    count, dtype, root, call site)."""
    # A communicator by how it was made and by whom (its id hashes NCCL's unique id: random).
    made = {c["comm"]: c for c in report.get("communicators", [])}

    def comm(c):
        m = made.get(c)
        if not m:
            return c and "?"
        return (f"{m['created_by']}({m.get('color')}) of "
                f"{comm(m['parent']) if m.get('parent') else 'none'}: {m.get('members')}")

    def calls(obj):
        found = []
        if isinstance(obj, dict):
            if "op" in obj and ("seq" in obj or "count" in obj):
                site = obj.get("site") or obj.get("callsite") or ""
                if isinstance(site, list):
                    site = site[:1]
                found.append((obj.get("op"), obj.get("seq"), obj.get("count"), obj.get("dtype"),
                              obj.get("root"), json.dumps(site, sort_keys=True)))
            for v in obj.values():
                found += calls(v)
        elif isinstance(obj, list):
            for v in obj:
                found += calls(v)
        return found

    out = []
    for f in report["findings"]:
        out.append({"kind": f["kind"], "ranks": f.get("ranks"), "waiting": f.get("waiting"),
                    "comm": comm(f.get("comm")), "seq": f.get("seq"),
                    "calls": sorted(map(str, calls(f)))})
    # The root causes in their order; what follows from them in any order (findings of one
    # priority are listed by how long they have waited: a matter of timing).
    roots = [f for f, g in zip(out, report["findings"]) if g.get("consequence_of") is None]
    rest = [f for f, g in zip(out, report["findings"]) if g.get("consequence_of") is not None]
    return roots + sorted(rest, key=lambda f: json.dumps(f, sort_keys=True))


def strip_addresses(s):
    return re.sub(r"\+0x[0-9a-f]+", "+0x?", s)


def wheel(tmp, x86):
    py = "/usr/bin/python3"  # Debian's, with python3-mesonpy and python3-build
    need = subprocess.run([py, "-c", "import mesonpy, build"], capture_output=True)
    if need.returncode != 0:
        check("aarch64 wheel", False, "building it needs Debian's python3-mesonpy python3-build "
              "(scripts/test-aarch64 installs them)")
        return
    src, dist, target = (os.path.join(tmp, n) for n in ("wsrc", "dist", "installed"))
    clean_copy(ROOT, src)
    # scripts/wheel: the cross file, libunwind built for aarch64, glibc 2.28's symbols, the
    # manylinux_2_28_aarch64 tag, and its own check of all that (packaging/wheel_tool.py).
    p = subprocess.run([os.path.join(src, "scripts", "wheel"), "--arch", "aarch64", "--out", dist,
                        "--cache", os.path.join(ROOT, "build-wheel")],
                       capture_output=True, text=True, timeout=900)
    whl = sorted(os.listdir(dist)) if os.path.isdir(dist) else []
    check(f"aarch64 wheel built by scripts/wheel --arch aarch64 and passing its check: {whl}",
          p.returncode == 0 and "every ELF needs GLIBC_2.28 or older" in p.stdout and
          whl == ["lockstep-0.1.0-py3-none-manylinux_2_28_aarch64.whl"],
          p.stdout[-1500:] + p.stderr[-1500:])
    if len(whl) != 1:
        return
    whl = os.path.join(dist, whl[0])
    names = zipfile.ZipFile(whl).namelist()
    shim = [n for n in names if n.endswith(".data/data/lib/lockstep/liblockstep.so")]
    if shim:
        with zipfile.ZipFile(whl) as z:
            z.extract(shim[0], tmp)
    machine = elf_machine(os.path.join(tmp, shim[0])) if shim else None
    check("aarch64 wheel: its shim is an aarch64 object", machine == "aarch64",
          f"{shim}: {machine}")
    p = subprocess.run([py, "-m", "pip", "install", "--no-index", "--no-deps", "--quiet",
                        "--platform", "manylinux_2_28_aarch64", "--only-binary=:all:", "--target", target,
                        whl], capture_output=True, text=True, timeout=300)
    exe = os.path.join(target, "bin", "lockstep")
    check("aarch64 wheel: pip installs it for manylinux_2_28_aarch64", p.returncode == 0 and
          os.path.exists(exe), p.stdout[-800:] + p.stderr[-800:])
    if not os.path.exists(exe):
        return
    d = os.path.join(tmp, "wheel-job")
    subprocess.run([x86.tracegen, "--out", d, "--ranks", "8", "--colls", "20", "--missing", "4"],
                   check=True, capture_output=True)
    a = subprocess.run([exe, "analyze", d], capture_output=True, text=True, env=analyzer_env())
    b = subprocess.run([x86.lockstep, "analyze", d], capture_output=True, text=True,
                       env=analyzer_env())
    check("aarch64 wheel: its lockstep (under qemu-user) diagnoses a job as the x86-64 build does",
          a.returncode == 1 and a.stdout == b.stdout and "rank 4 never called it" in a.stdout,
          f"exit {a.returncode}: {a.stdout[:600]} {a.stderr[:300]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--x86", required=True)
    ap.add_argument("--aarch64", required=True)
    args = ap.parse_args()
    x86, arm = Build(args.x86, "x86-64"), Build(args.aarch64, "aarch64")
    tmp = tempfile.mkdtemp(prefix="lockstep-arch-")
    try:
        # 1. The same generated job, byte for byte, from either generator.
        for i, case in enumerate(TRACEGEN_CASES):
            a, b = os.path.join(tmp, f"tg{i}-x86"), os.path.join(tmp, f"tg{i}-arm")
            for build, d in ((x86, a), (arm, b)):
                subprocess.run([build.tracegen, "--out", d, *case.split()], check=True,
                               capture_output=True, timeout=300)
            files = sorted(os.listdir(a))
            same = files == sorted(os.listdir(b)) and all(
                open(os.path.join(a, f), "rb").read() == open(os.path.join(b, f), "rb").read()
                for f in files)
            check(f"tracegen {case}: {len(files)} files, aarch64 bytes = x86-64 bytes", same,
                  f"{files[:4]} vs {sorted(os.listdir(b))[:4]}")
            compare_reports(f"tracegen {case}", x86, arm, a)

        # 2. The analyzers over compare_outputs.sh's cases (cases.txt).
        p = subprocess.run([os.path.join(ROOT, "bench", "compare_outputs.sh"), x86.lockstep,
                            arm.lockstep, x86.tracegen, os.path.join(HERE, "cases.txt")],
                           capture_output=True, text=True, timeout=1800)
        last = (p.stdout.strip().splitlines() or [""])[-1]
        check(f"compare_outputs.sh, x86-64 vs aarch64 analyzer: {last}", p.returncode == 0,
              p.stdout[-1500:] + p.stderr[-500:])

        # 3. Real hangs, traced on each architecture, read by each analyzer.
        for mode, np, extra in SCENARIOS:
            seen = {}
            for build in (x86, arm):
                d = os.path.join(tmp, f"{mode}-{build.arch}")
                run_scenario(build, mode, np, extra, d)
                seen[build.arch] = compare_reports(f"{mode}, traced on {build.arch}", x86, arm,
                                                   d)
            a, b = (diagnosis(seen[k]) for k in ("x86-64", "aarch64"))
            a_s, b_s = (strip_addresses(json.dumps(x, indent=1)) for x in (a, b))
            kinds = [f["kind"] for f in a]
            check(f"{mode}: the diagnosis from arm64 traces is the x86-64 one ({', '.join(kinds)})",
                  a_s == b_s and len(a) > 0, first_difference(a_s, b_s))

        # 4. The aarch64 wheel: built from a clean copy with the cross file, tagged for
        # linux_aarch64, installed for that platform, and its lockstep run (under qemu-user).
        wheel(tmp, x86)
    finally:
        if os.environ.get("KEEP"):
            print(f"(files kept in {tmp})")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    passed = sum(results)
    print(f"check_arch: {passed} passed, {len(results) - passed} failed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
