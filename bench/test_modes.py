#!/usr/bin/env python3
"""test_modes.py -- runs every mode of scripts/bench with --quick and fails when one reports no
figure where it should have one.

    test_modes.py --build DIR [--work DIR] [--scratch DIR] [--modes full,shim,...]

The full run writes a report; each --X-only mode then runs on a copy of it whose section of that
mode was replaced by a stale stub ("n/a"), and must put its own section in place of the stub and
leave the rest of the report as it was. Each section is read back and every figure it should
hold checked: times, sizes and counts must be positive numbers (no 0, "n/a", "-", nan or empty
table), the analyzer rows must have found their finding, the live rows must have a detection
time, the heartbeat its CPU figures, the Python call sites a time per call. Differences of two
noisy timings (the shim's cost per call) may be 0 or negative in a quick run: they must be
numbers. Instruction counts (valgrind) must be positive where valgrind is installed; where it is
not, the section must say so in the words run_bench.py uses (NO_VALGRIND below), nothing else.
No assertion on how fast anything is (these machines are noisy), only that a live detection time
is one: no sooner than the stall, within seconds after it. Ends with one line per mode: what was
checked. Stdlib only (python3 on PATH may not be Debian's).
"""
import argparse
import math
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "scripts", "bench")

# Word for word what bench/run_bench.py writes in place of a table it could not measure.
NO_VALGRIND = "Instructions per call: not counted (valgrind is not installed)."
NO_CALLGRIND_QUICK = ("Instructions per call: not counted with `--quick` (a Python process under "
                      "callgrind is slow).")

SHIM = "## Shim cost per intercepted call"
MEMORY = "## Memory"
ANALYZER = "## Analyzer"
LIVE = "## Live detection latency"
DETECT = "## Detection with the default bounds"
PYTHON = "## Python call sites"
HEARTBEAT = "## The heartbeat"
GRAPH = "## CUDA-graph launches"
TARGETS = "## Targets"

# mode: (scripts/bench option, the sections it writes)
MODES = {
    "full": (None, [SHIM, MEMORY, ANALYZER, LIVE, DETECT, PYTHON, HEARTBEAT, GRAPH, TARGETS]),
    "shim": ("--shim-only", [SHIM]),
    "analyzer": ("--analyzer-only", [ANALYZER]),
    "live": ("--live-only", [LIVE]),
    "detect": ("--detect-only", [DETECT]),
    "python": ("--python-only", [PYTHON]),
    "heartbeat": ("--heartbeat-only", [HEARTBEAT]),
    "graph": ("--graph-only", [GRAPH]),
}

# The rows the shim's tables must have (bench/run_bench.py FLOOR and CASES; the instruction
# counts are taken for the floor and the first six).
SHIM_CASES = ["the floor", "call sites off (depth 0), shallow stack",
              "call sites off (depth 0), deep stack", "default (depth 16), shallow stack",
              "default (depth 16), deep stack", "depth 32, shallow stack", "depth 32, deep stack",
              "default, deep stack, 16 threads at once",
              "default, deep stack, async mode + completion tracking"]
PYTHON_ROWS = ["no shim", "shim, LOCKSTEP_PYTHON_DEPTH=0", "shim, default depth (16)",
               "shim, LOCKSTEP_PYTHON_DEPTH=64"]
HEARTBEAT_ROWS = ["no shim", "shim, heartbeat 1000 ms", "shim, heartbeat 100 ms",
                  "shim, heartbeat 10 ms"]
STUB = "STALE: n/a (bench/test_modes.py's stub: the mode should have replaced it)"


class Check:
    """The problems and the figures found for one mode."""

    def __init__(self, mode):
        self.mode = mode
        self.problems = []
        self.found = []

    def fail(self, figure, why):
        self.problems.append(f"{figure}: {why}")

    def mark(self):
        return len(self.problems)

    def clean(self, mark):
        """True when no problem was noted since `mark`."""
        return len(self.problems) == mark

    def number(self, figure, text, positive=True, allow_zero=False):
        """The number in `text` (bold, thousands commas, a unit or a sign around it), checked:
        finite, and > 0 (positive) or >= 0 (allow_zero). None, with the problem noted, when
        there is none."""
        m = re.search(r"[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?", text or "")
        if not m or re.search(r"\b(nan|inf|n/a)\b", text, re.I):
            self.fail(figure, f"no number (wrote {text.strip()!r})" if text is not None
                      else "missing")
            return None
        v = float(m.group(0).replace(",", ""))
        if not math.isfinite(v):
            self.fail(figure, f"not a number ({text.strip()!r})")
            return None
        if positive and not (v > 0 or (allow_zero and v == 0)):
            self.fail(figure, f"{v:g} where a measured figure {'>= 0' if allow_zero else '> 0'} "
                      "belongs")
            return None
        return v


def value(text):
    """The number in `text` (bold, commas, a sign or a unit around it), or None."""
    m = re.search(r"[-+]?\d[\d,]*(?:\.\d+)?", text or "")
    return float(m.group(0).replace(",", "")) if m else None


def sections(text):
    """{"## Title": [its lines, the title first]} and "" for what comes before the first."""
    out, key = {"": []}, ""
    for line in text.split("\n"):
        if line.startswith("## "):
            key = line
            out[key] = []
        out[key].append(line)
    return out


def table(lines, header_start):
    """The rows (lists of cells) of the table whose header line starts with `header_start`, or
    None when there is no such table."""
    for i, l in enumerate(lines):
        if l.startswith(header_start):
            rows = []
            for r in lines[i + 2:]:
                if not r.startswith("|"):
                    break
                rows.append([c.strip() for c in r.strip().strip("|").split("|")])
            return rows
    return None


def rows_named(c, rows, names, what):
    """{name: row} for each name of `names` that begins a row's first cell; notes the missing."""
    got = {}
    for n in names:
        r = [row for row in rows if row[0].startswith(n)]
        if r:
            got[n] = r[0]
        else:
            c.fail(f"{what} '{n}'", "row missing")
    return got


def find(c, figure, pattern, text, n=1):
    m = re.search(pattern, text)
    if not m:
        c.fail(figure, f"not written (looked for /{pattern}/)")
        return None
    return [m.group(i + 1) for i in range(n)]


# ---- the sections ----------------------------------------------------------------------------

def check_shim(c, lines):
    rows = table(lines, "| case | calls timed |")
    if not rows:
        c.fail("shim cost table", "missing or empty")
        return
    got = rows_named(c, rows, SHIM_CASES, "shim case")
    floor_cycles, good = None, 0
    for name, r in got.items():
        m = c.mark()
        if len(r) != 7:
            c.fail(f"shim '{name}'", f"{len(r)} cells, not 7")
            continue
        c.number(f"shim '{name}' calls timed", r[1])
        c.number(f"shim '{name}' no shim ns/call", r[2])
        c.number(f"shim '{name}' with ns/call", r[3])
        # Differences of two timings: any sign in a quick run, but numbers.
        c.number(f"shim '{name}' cost ns/call", r[4], positive=False)
        cyc = c.number(f"shim '{name}' cost TSC cycles/call", r[5], positive=False)
        if name == "the floor":
            floor_cycles = cyc
        good += c.clean(m)
    for name, r in got.items():
        if len(r) == 7 and floor_cycles is not None and floor_cycles > 0:
            c.number(f"shim '{name}' cycles / floor's", r[6], positive=False)
    c.found.append(f"shim ns+cycles {good}/{len(SHIM_CASES)} cases")
    # The 16 threads' line is written when the single thread's cost is > 0 (run_bench.py).
    one = got.get("default (depth 16), deep stack")
    if one and len(one) == 7 and (value(one[4]) or 0) > 0:
        f = find(c, "shim 16 threads vs one ratio",
                 r"16 threads at once against one thread.*shim cost (\S+) ns vs (\S+) ns per "
                 r"call, ratio (\S+)\.", "\n".join(lines), 3)
        m = c.mark()
        if f:
            c.number("shim 16 threads cost", f[0], positive=False)
            c.number("shim 16 threads ratio", f[2], positive=False)
            if c.clean(m):
                c.found.append("16-thread ratio")
    ir = table(lines, "| case | no shim instr/call |")
    if shutil.which("valgrind"):
        if not ir:
            c.fail("shim instructions per call", "no table, and valgrind is installed")
        else:
            got, good = rows_named(c, ir, SHIM_CASES[:7], "shim instructions"), 0
            for name, r in got.items():
                m = c.mark()
                c.number(f"shim instructions '{name}' no shim", r[1])
                c.number(f"shim instructions '{name}' shim", r[2])
                c.number(f"shim instructions '{name}' cost", r[3])
                good += c.clean(m)
            c.found.append(f"instructions {good}/7 cases")
    elif ir:
        c.fail("shim instructions per call", "a table, but valgrind is not installed")
    elif NO_VALGRIND not in lines:
        c.fail("shim instructions per call", f"no table and not the line {NO_VALGRIND!r}")
    else:
        c.found.append("no instruction counts: said valgrind is not installed")


def check_memory(c, text, figure):
    """The four memory figures, in the full report's Memory section or shim-only's line."""
    m = c.mark()
    f = find(c, f"{figure} peak RSS",
             r"(\S+) MiB without the shim, (\S+) MiB (?:with )?call sites off .*?, (\S+) MiB "
             r"(?:at the )?default depth", text, 3)
    if f:
        for what, v in zip(("without the shim", "call sites off", "default depth"), f):
            c.number(f"{figure} peak RSS {what}", v)
    t = find(c, f"{figure} trace file", r"trace file[^:\n]*?:? (\S+) MiB", text)
    if t:
        c.number(f"{figure} trace file MiB", t[0])
    if c.clean(m):
        c.found.append("memory 4 figures")


def check_targets(c, lines, expect, title):
    rows = table(lines, "| target | measured |")
    if not rows:
        c.fail(title, "missing or empty")
        return
    got, good = rows_named(c, rows, expect, "target"), 0
    for r in rows:
        m = c.mark()
        if len(r) != 3:
            c.fail(f"target '{r[0]}'", f"{len(r)} cells, not 3")
            continue
        if r[2] not in ("", "**met**", "**not met**"):
            c.fail(f"target '{r[0]}'", f"verdict {r[2]!r}")
        # A number, and the times in s and sizes in MiB > 0: 'worst 1.21 s', 'not run; 1,024
        # ranks: 0.26 s, 165 MiB', '5.02 MiB'. Costs in ns and cycles are differences of two
        # timings, of any sign in a quick run ('34 vs 27 ns (1.24x)').
        if c.number(f"target '{r[0]}' measured", r[1], positive=False) is None:
            continue
        for v in re.findall(r"(?<![-\d.,])(\d[\d,]*(?:\.\d+)?) (?:s|MiB)\b", r[1]):
            c.number(f"target '{r[0]}' measured", v)
        good += c.clean(m)
    c.found.append(f"{title} {good}/{len(rows)} rows measured ({len(got)}/{len(expect)} "
                   "expected ones there)")


def shim_targets(valgrind):
    t = ["call sites off: <= 1.5x the floor's TSC cycles per call",
         "default setting: <= 300 ns per call", "depth 32 (no target",
         "async mode, completion tracking on", "trace file per process <= 8 MiB",
         "resident memory grows by no more than the trace file"]
    if valgrind:
        t += ["call sites off: <= 100 instructions per call",
              "default depth, call-site cache hit: <= 200 instructions per call"]
    return t


def tracegen_summaries(build):
    """True when this build's lockstep-tracegen writes node summaries (the analyzer grid then
    has a node-summary row; bench/run_bench.py tracegen_has)."""
    p = subprocess.run([os.path.join(build, "tests", "tracegen", "lockstep-tracegen"), "--help"],
                       capture_output=True, text=True)
    return re.search(r"(^|\s)--summary\b", p.stdout + p.stderr) is not None


def check_analyzer(c, lines, out_dir, build):
    rows = table(lines, "| scenario | ranks |")
    if not rows:
        c.fail("analyzer table", "missing or empty")
        return
    kinds = ["mixed calls", "scale: all-reduces, one rank missing (trace files)"]
    if tracegen_summaries(build):
        kinds.append("scale: all-reduces, one rank missing (node summaries)")
    rows_named(c, rows, kinds, "analyzer kind")
    cols = ["ranks", "records per rank", "records read per trace", "trace data GiB", "wall s",
            "peak RSS MiB", "us per rank", "KiB per rank", "JSON report MB"]
    good = 0
    for r in rows:
        m = c.mark()
        what = f"analyzer '{r[0]}' {r[1] if len(r) > 1 else ''}"
        if len(r) != 12:
            c.fail(what, f"{len(r)} cells, not 12")
            continue
        for name, v in zip(cols, r[1:10]):
            c.number(f"{what} {name}", v)
        if r[10] != "yes":
            c.fail(f"{what} found it", f"{r[10]!r}: the analyzer did not report the finding")
        c.number(f"{what} load", r[11], allow_zero=True)
        good += c.clean(m)
    c.found.append(f"analyzer {good}/{len(rows)} rows timed and found their finding")
    g = re.search(r"time grows as ranks\^(-?[0-9.]+), memory as ranks\^(-?[0-9.]+)",
                  "\n".join(lines))
    if not g:
        c.fail("analyzer growth", "no growth exponents under the table")
    else:
        c.found.append(f"growth exponents {g.group(1)}/{g.group(2)}")
    if shutil.which("gnuplot"):
        m = re.search(r"!\[analyzer time and memory\]\(([^)]+)\)", "\n".join(lines))
        png = os.path.join(out_dir, m.group(1)) if m else None
        if not png or not os.path.isfile(png) or os.path.getsize(png) == 0:
            c.fail("analyzer plot", "no PNG though gnuplot is installed")
        else:
            c.found.append("plot")


def detection(c, figure, rep, ex, stall):
    """A detection time: `lockstep run --stall S` reports no sooner than S after the last
    progress, and well within S + 5 s (+ 10 s to its exit) even on a loaded machine. A reader
    that reads the wrong field gives 0 (no figure), a time too recent (the heartbeat's: under
    S) or one from long before."""
    if rep is not None and ex is not None and not (
            0.9 * stall <= rep <= stall + 5 and rep <= ex <= stall + 10):
        c.fail(figure, f"report {rep:g} s, exit {ex:g} s after the last progress: not a "
               f"detection time for --stall {stall:g}")


def check_live(c, lines):
    text = "\n".join(lines)
    s = find(c, "live --stall", r"`lockstep run --stall (\S+)`", text)
    stall = value(s[0]) if s else 1
    rows = table(lines, "| scenario | to the report, s |")
    if not rows:
        c.fail("live table", "missing or empty")
    good = 0
    for r in rows or []:
        m = c.mark()
        rep = c.number(f"live '{r[0]}' to the report", r[1] if len(r) > 1 else None)
        ex = c.number(f"live '{r[0]}' to the exit", r[2] if len(r) > 2 else None)
        detection(c, f"live '{r[0]}'", rep, ex, stall)
        good += c.clean(m)
    c.found.append(f"live detection time {good}/{len(rows or [])} scenarios")
    f = find(c, "live partial hang",
             r"to the first line of the diagnosis (\S+)–(\S+) s \(median (\S+) s\), to the exit "
             r"(\S+)–(\S+) s", text, 5)
    m = c.mark()
    if f:
        v = [c.number(f"live partial hang {what}", v)
             for what, v in zip(("first", "last", "median", "exit first", "exit last"), f)]
        detection(c, "live partial hang (first)", v[0], v[3], stall)
        detection(c, "live partial hang (last)", v[1], v[4], stall)
    if "did not exit 3" in text:
        c.fail("live partial hang", "some runs did not exit 3")
    if f and c.clean(m):
        c.found.append("partial hang")
    f = find(c, "live monitor poll", r"median (\S+) ms, 90th percentile (\S+) ms", text, 2)
    m = c.mark()
    if f:
        c.number("live monitor poll median ms", f[0])
        c.number("live monitor poll p90 ms", f[1])
        if c.clean(m):
            c.found.append("monitor poll")
    m = c.mark()
    f = find(c, "live stacks held",
             r"median (\S+) µs, 90th percentile (\S+) µs, most (\S+) µs over (\S+) thread reads",
             text, 4)
    if f:
        for what, v in zip(("median", "p90", "most", "thread reads"), f):
            c.number(f"live stacks held {what}", v)
    f = find(c, "live stacks wall", r"takes (\S+) ms \(median\)", text)
    if f:
        c.number("live stacks wall ms", f[0])
    if c.clean(m):
        c.found.append("live stacks")


def check_detect(c, lines):
    """The hang rows each diagnosed (a positive time, a bound, exit 3, a root cause named and not
    marked wrong); the clean rows each with
    an exit status, none stopped (the quick run's clean job is a 3 s CPU pause); the two summary
    lines."""
    rows = table(lines, "| hang shape |")
    if not rows:
        c.fail("detect hang table", "missing or empty")
    good = 0
    for r in rows or []:
        m = c.mark()
        c.number(f"detect '{r[0]}' hung to diagnosis", r[2] if len(r) > 2 else None)
        if len(r) < 5 or r[3] not in ("short", "long", "fixed") or r[4] != "3":
            c.fail(f"detect '{r[0]}'", f"bound {r[3:4]} exit {r[4:5]}: not a diagnosed stall")
        if len(r) < 6 or r[5] in ("", "-") or "wrong" in r[5]:
            c.fail(f"detect '{r[0]}' root cause", f"{r[5:6]}: none, or not the suite's")
        good += c.clean(m)
    crows = table(lines, "| clean job |")
    if not crows:
        c.fail("detect clean table", "missing or empty")
    for r in crows or []:
        if len(r) < 5 or r[4] != "no":
            c.fail(f"detect clean '{r[0]}'", f"stopped: {r}")
    text = "\n".join(lines)
    if not re.search(r"(\d+) of (\d+) diagnosed: median (\S+) s, worst (\S+) s; the root cause the "
                         r"suite's test wants named in (\d+) of (\d+)", text):
        c.fail("detect summary", "no 'N of M diagnosed: median, worst' line")
    if not re.search(r"0 of (\d+) clean jobs stopped", text):
        c.fail("detect clean summary", "no '0 of N clean jobs stopped' line")
    c.found.append(f"detect: {good}/{len(rows or [])} hangs diagnosed, "
                   f"{len(crows or [])} clean jobs not stopped")


def check_python(c, lines):
    rows = table(lines, "| configuration | ns per call")
    if not rows:
        c.fail("python table", "missing or empty")
        return
    got, good = rows_named(c, rows, PYTHON_ROWS, "python"), 0
    for name, r in got.items():
        m = c.mark()
        c.number(f"python '{name}' ns per call", r[1])
        lo_hi = r[2].split(" - ")
        if len(lo_hi) != 2:
            c.fail(f"python '{name}' min - max", f"{r[2]!r}")
        else:
            c.number(f"python '{name}' min", lo_hi[0])
            c.number(f"python '{name}' max", lo_hi[1])
        if name != "no shim":
            c.number(f"python '{name}' vs depth 0", r[3], positive=False)
        good += c.clean(m)
    c.found.append(f"python ns per call {good}/{len(PYTHON_ROWS)} configurations")
    f = find(c, "python target", r"Measured: (\S+) ns per call over depth 0", "\n".join(lines))
    if f and c.number("python target ns per call", f[0], positive=False) is not None:
        c.found.append("target")
    ir = table(lines, "| configuration | instructions per call")
    if ir:
        got, good = rows_named(c, ir, PYTHON_ROWS, "python instructions"), 0
        for name, r in got.items():
            good += c.number(f"python instructions '{name}'", r[1]) is not None
        c.found.append(f"instructions {good}/{len(PYTHON_ROWS)}")
    else:
        why = NO_VALGRIND if not shutil.which("valgrind") else NO_CALLGRIND_QUICK
        if why not in lines:
            c.fail("python instructions per call", f"no table and not the line {why!r}")
        else:
            c.found.append("no instruction counts: said " + ("valgrind is not installed"
                                                           if why == NO_VALGRIND else "--quick"))


def check_heartbeat(c, lines):
    rows = table(lines, "| | CPU s per hour idle |")
    if not rows:
        c.fail("heartbeat table", "missing or empty")
        return
    got, good = rows_named(c, rows, HEARTBEAT_ROWS, "heartbeat"), 0
    for name, r in got.items():
        m = c.mark()
        # An idle rank without the shim may well take no CPU, and a 1 s quick window may hold
        # no 1 s heartbeat: figures >= 0 there; the 100 ms and 10 ms heartbeats must show.
        strict = name in ("shim, heartbeat 100 ms", "shim, heartbeat 10 ms")
        c.number(f"heartbeat '{name}' CPU s per hour", r[1], allow_zero=not strict)
        c.number(f"heartbeat '{name}' wakeups per s", r[2], allow_zero=not strict)
        good += c.clean(m)
    c.found.append(f"heartbeat CPU s per hour and wakeups {good}/{len(HEARTBEAT_ROWS)} rows")


GRAPH_ROWS = ["0", "1", "8", "64"]
NO_VALGRIND_GRAPH = "Instructions per launch: not counted (valgrind is not installed)."


def check_graph(c, lines):
    if not shutil.which("valgrind"):
        if NO_VALGRIND_GRAPH not in lines:
            c.fail("graph launches", f"no table and not the line {NO_VALGRIND_GRAPH!r}")
        else:
            c.found.append("graph launches: said valgrind is not installed")
        return
    rows = table(lines, "| NCCL calls the graph replays |")
    if not rows:
        c.fail("graph launch table", "missing or empty")
        return
    got, good = rows_named(c, rows, GRAPH_ROWS, "graph launches"), 0
    for name, r in got.items():
        m = c.mark()
        c.number(f"graph of {name} calls, no shim", r[1])
        c.number(f"graph of {name} calls, with the shim", r[2])
        if name != "0":  # records are written: the shim's share shows
            c.number(f"graph of {name} calls, the shim's", r[3])
            c.number(f"graph of {name} calls, per replayed call", r[4])
        good += c.clean(m)
    c.found.append(f"graph launch instructions {good}/{len(GRAPH_ROWS)} rows")


# ---- running the modes -----------------------------------------------------------------------

def seed(report, titles):
    """The report with each section of `titles` replaced by a stale stub, and the analyzer's rows
    of the Targets table by one stale row when the Analyzer section is among them."""
    out = []
    for key, lines in sections(report).items():
        if key in titles:
            lines = [key, "", STUB, ""]
        elif key == TARGETS and ANALYZER in titles:
            rows = [l for l in lines if not l.startswith("| analyze ")]
            at = next((i for i, l in enumerate(rows) if l.startswith("|---")), len(rows) - 1)
            lines = rows[:at + 1] + [f"| analyze stale | {STUB} | |"] + rows[at + 1:]
        out += lines
    return "\n".join(out)


def rest(report, titles):
    """The report less the sections of `titles` (and less the Targets table's analyzer rows
    when the Analyzer section is among them): what the mode must leave as it was."""
    keep = {}
    for key, lines in sections(report).items():
        if key in titles:
            continue
        if key == TARGETS and ANALYZER in titles:
            lines = [l for l in lines if not l.startswith("| analyze ")]
        keep[key] = "\n".join(lines).rstrip("\n")
    return keep


def run_mode(mode, a, out, c):
    option, _ = MODES[mode]
    cmd = [BENCH, "--quick", "--build", a.build, "--work", a.work, "--out", out]
    cmd += [option] if option else []
    print(f"=== {mode}: {' '.join(cmd)}", flush=True)
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       encoding="utf-8", errors="replace")
    took = time.monotonic() - t0
    print(p.stdout.rstrip(), flush=True)
    if p.returncode != 0:
        c.fail("scripts/bench", f"exited {p.returncode}")
    if not os.path.exists(out):
        c.fail("scripts/bench", f"wrote no {out}")
    return took


def check_mode(mode, a, c, report, seeded):
    secs = sections(report)
    valgrind = shutil.which("valgrind") is not None
    for title in MODES[mode][1]:
        if title not in secs:
            c.fail(title, "section missing")
        elif any(STUB in l for l in secs[title]):
            c.fail(title, "the stale stub is still there: the mode did not replace its section")
    if STUB in report:
        c.fail("report", "a stale stub is left in it (a section the mode should have replaced)")
    heads = [l for l in report.split("\n") if l.startswith("## ")]
    for h in sorted({h for h in heads if heads.count(h) > 1}):
        c.fail(h, f"{heads.count(h)} sections of that title in the report")
    text = lambda t: secs.get(t, [])
    if SHIM in MODES[mode][1]:
        check_shim(c, text(SHIM))
        if mode == "full":
            check_memory(c, "\n".join(text(MEMORY)), "memory")
            # The quick grid has none of the analyzer's target rows: the 131,072-rank one says
            # "not run" with the largest row run.
            expect = shim_targets(valgrind) + ["live: exit <= stall + 0.5 s",
                                               "analyze 131,072 ranks"]
            check_targets(c, text(TARGETS), expect, "targets")
        else:
            s = "\n".join(text(SHIM))
            check_memory(c, s[s.find("Memory (this run)"):] if "Memory (this run)" in s else "",
                         "shim memory")
            sub = text(SHIM)[next((i for i, l in enumerate(text(SHIM))
                                   if l == "### Shim targets (this run)"), len(text(SHIM))):]
            check_targets(c, sub, shim_targets(valgrind), "shim targets")
    if ANALYZER in MODES[mode][1]:
        check_analyzer(c, text(ANALYZER), os.path.join(a.scratch, mode), a.build)
        if mode == "analyzer" and seeded and TARGETS in secs:
            analyze, m = [l for l in secs[TARGETS] if l.startswith("| analyze ")], c.mark()
            if not analyze:
                c.fail("targets", "the analyzer's rows of the Targets table are gone")
            for l in analyze:
                if STUB in l:
                    c.fail("targets", "the stale analyzer row is still there")
                else:
                    for v in re.findall(r"(\d[\d,]*(?:\.\d+)?) (?:s|MiB)\b", l):
                        c.number("targets analyzer row", v)
            if c.clean(m):
                c.found.append(f"Targets' analyzer rows replaced ({len(analyze)})")
    if LIVE in MODES[mode][1]:
        check_live(c, text(LIVE))
    if DETECT in MODES[mode][1]:
        check_detect(c, text(DETECT))
    if PYTHON in MODES[mode][1]:
        check_python(c, text(PYTHON))
    if HEARTBEAT in MODES[mode][1]:
        check_heartbeat(c, text(HEARTBEAT))
    if GRAPH in MODES[mode][1]:
        check_graph(c, text(GRAPH))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="the meson build folder")
    ap.add_argument("--work", default="/tmp", help="scripts/bench --work")
    ap.add_argument("--scratch", default=None,
                    help="where the reports go (default: bench-modes under --build)")
    ap.add_argument("--modes", default=",".join(MODES),
                    help="comma-separated, of " + ", ".join(MODES))
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    a.scratch = os.path.abspath(a.scratch or os.path.join(a.build, "bench", "bench-modes"))
    modes = a.modes.split(",")
    for m in modes:
        if m not in MODES:
            raise SystemExit(f"test_modes.py: no mode {m!r} (of {', '.join(MODES)})")
    full_report = None
    results = []
    for mode in (["full"] if "full" in modes else []) + [m for m in modes if m != "full"]:
        c = Check(mode)
        d = os.path.join(a.scratch, mode)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        out = os.path.join(d, "performance.md")
        seeded = None
        if mode != "full" and full_report is not None:
            seeded = seed(full_report, MODES[mode][1])
            with open(out, "w", encoding="utf-8") as f:
                f.write(seeded + "\n")
        took = run_mode(mode, a, out, c)
        report = open(out, encoding="utf-8").read() if os.path.exists(out) else ""
        if mode == "full" and report:
            full_report = report
        check_mode(mode, a, c, report, seeded)
        if seeded is not None and report:
            before, after = rest(seeded, MODES[mode][1]), rest(report, MODES[mode][1])
            changed = [k or "(the top)" for k in set(before) | set(after)
                       if before.get(k) != after.get(k)]
            if changed:
                c.fail("report", "the mode changed sections not its own: " + ", ".join(changed))
            else:
                c.found.append("rest of the report kept")
        results.append((c, took, seeded is not None))
    print()
    failed = 0
    for c, took, seeded in results:
        for p in c.problems:
            print(f"FAIL {c.mode}: {p}")
        failed += bool(c.problems)
    print()
    for c, took, seeded in results:
        on = "" if c.mode == "full" else (" on a seeded report" if seeded else " on a new report")
        n = len(c.problems)
        verdict = "ok" if not n else f"FAILED ({n} problem{'s' if n > 1 else ''})"
        print(f"{c.mode:9} {verdict}, {took:.0f} s{on}: {'; '.join(c.found)}")
    print(f"{len(results) - failed} of {len(results)} modes report their figures")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
