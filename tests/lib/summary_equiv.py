#!/usr/bin/env python3
"""summary_equiv.py -- the node-summary equivalence check every analyze helper of the suite makes:
after `lockstep analyze --json PATH...` of traces, summarize the same traces per host (as each
node's runner would: `lockstep summarize --per-host`), analyze the summaries and require the same
exit status and the same JSON report.

Traces of a job still running move between two commands (heartbeats every 10 ms), so when the
reports differ the check is made again on a frozen copy of the paths (their traces, `.live`
sidecars and SNAPSHOT marks, copied once): the copy analyzed as traces against the copy's
summaries, which then hold the very same bytes. A difference there is a failure.

What is normalized, and why (nothing else is):
  - the folder part of trace paths: a trace read from a summary is named SUMMARY/NAME (the summary
    file, then the trace's own file name), a trace file DIR/NAME; the report must name the same
    NAME (and SUMMARY/ is cut where the input was summaries already). Paths appear in "trace" keys, the "unreadable" messages and finding summaries that name
    a truncated file, so every occurrence of an input folder or a summary file followed by "/" is
    cut, leaving NAME.

Usable as a module (check(lockstep, args, rc, report_text, env)) or from a shell:
  summary_equiv.py LOCKSTEP REPORT_JSON RC ANALYZE_ARGS...
exits 1 with the difference when the reports differ, 0 when they agree (or there is nothing to
compare: the first analysis refused its input, exit 2).
"""
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# analyze's options that take a value (the rest of the arguments are paths).
VALUE_OPTIONS = {"--job", "--html", "--ranks"}


def split_args(args):
    """analyze's arguments as (options, paths)."""
    opts, paths, i = [], [], 0
    while i < len(args):
        a = args[i]
        if a in VALUE_OPTIONS and i + 1 < len(args):
            if a in ("--job", "--ranks"):
                opts += [a, args[i + 1]]
            i += 2  # --html writes a file: not repeated
            continue
        if a.startswith("--html=") or a.startswith("-"):
            if a.startswith("--job") or a.startswith("--ranks"):
                opts.append(a)
            i += 1
            continue
        paths.append(a)
        i += 1
    return opts, paths


def normalize(text, prefixes, summary_root=None):
    """The report text with each prefix + '/' cut (longest first), and SUMMARY_ROOT/X.summary/."""
    if summary_root:
        text = re.sub(re.escape(summary_root) + r"/[^/\"]*\.summary/", "", text)
    for p in sorted(set(prefixes), key=len, reverse=True):
        text = text.replace(p.rstrip("/") + "/", "")
    # Traces that were read from summaries already: SUMMARY/NAME.
    return re.sub(r"[A-Za-z0-9_.@+-]*\.summary/", "", text)


def folders_of(paths):
    """Every folder a trace of these paths can lie in: each path (a folder), its parent (a file),
    and the subfolders a folder scan descends into (one level)."""
    out = []
    for p in paths:
        for q in (p, os.path.abspath(p)):
            if os.path.isdir(q):
                out.append(q)
                try:
                    out += [os.path.join(q, e) for e in os.listdir(q)
                            if os.path.isdir(os.path.join(q, e))]
                except OSError:
                    pass
            out.append(os.path.dirname(q) or ".")
    return [o for o in out if o not in ("", ".", "/")]


KEEP = (".trace", ".trace.live", ".summary", "SNAPSHOT")


def freeze(paths, dest):
    """Copies the traces (and sidecars, summaries, SNAPSHOT marks) of each path, a folder and
    its direct subfolders or a file, under dest/<i>/; returns the copies' paths."""
    out = []
    for i, p in enumerate(paths):
        base = os.path.join(dest, str(i))
        os.makedirs(base)
        if os.path.isdir(p):
            q = os.path.join(base, os.path.basename(os.path.normpath(p)) or "d")
            os.makedirs(q)
            for e in os.listdir(p):
                src = os.path.join(p, e)
                if os.path.isdir(src):
                    os.makedirs(os.path.join(q, e))
                    for f in os.listdir(src):
                        if f.endswith(KEEP) and os.path.isfile(os.path.join(src, f)):
                            shutil.copyfile(os.path.join(src, f), os.path.join(q, e, f))
                elif e.endswith(KEEP) and os.path.isfile(src):
                    shutil.copyfile(src, os.path.join(q, e))
        else:
            q = os.path.join(base, os.path.basename(p))
            if os.path.isfile(p):
                shutil.copyfile(p, q)
                if os.path.isfile(p + ".live"):
                    shutil.copyfile(p + ".live", q + ".live")
        out.append(q)
    return out


def compare(lockstep, opts, paths, rc, report_text, sums, env):
    """None when the summaries of `paths` in `sums` give report_text (exit rc), else why not."""
    s = subprocess.run([lockstep, "summarize", "--per-host", sums] + paths,
                       capture_output=True, text=True, timeout=120, env=env)
    if s.returncode != 0:
        return f"lockstep summarize exited {s.returncode}: {s.stderr}"
    a = subprocess.run([lockstep, "analyze", "--json"] + opts + [sums], capture_output=True,
                       text=True, timeout=120, env=env)
    if a.returncode != rc:
        return f"analyze of the summaries exited {a.returncode}, of the traces {rc}: {a.stderr}"
    want = normalize(report_text, folders_of(paths))
    got = normalize(a.stdout, [], summary_root=sums)
    try:
        jw, jg = json.loads(want), json.loads(got)
    except ValueError as e:
        return f"a report is not JSON: {e}"
    if jw == jg:
        return None
    w = json.dumps(jw, indent=1, sort_keys=True).splitlines()
    g = json.dumps(jg, indent=1, sort_keys=True).splitlines()
    diff = "\n".join(list(difflib.unified_diff(w, g, "traces", "summaries", lineterm=""))[:60])
    return "the report of the node summaries differs from the traces' one:\n" + diff


def check(lockstep, args, rc, report_text, env=None):
    """Compares the report `report_text` (exit status rc) of `analyze --json ARGS` with the one of
    the same traces summarized per host (again on a frozen copy when they differ: see above).
    Returns None when they agree, else a message."""
    if rc == 2:
        return None  # refused input: nothing was diagnosed
    opts, paths = split_args(args)
    if not paths:
        return None
    tmp = tempfile.mkdtemp(prefix="lockstep-sumeq-")
    try:
        if compare(lockstep, opts, paths, rc, report_text,
                   os.path.join(tmp, "sums"), env) is None:
            return None
        frozen = freeze(paths, os.path.join(tmp, "frozen"))
        a = subprocess.run([lockstep, "analyze", "--json"] + opts + frozen, capture_output=True,
                           text=True, timeout=120, env=env)
        if a.returncode == 2:
            return None
        return compare(lockstep, opts, frozen, a.returncode, a.stdout,
                       os.path.join(tmp, "sums-frozen"), env)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv):
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    lockstep, report, rc = argv[1], argv[2], int(argv[3])
    with open(report, encoding="utf-8", errors="replace") as f:
        text = f.read()
    problem = check(lockstep, argv[4:], rc, text)
    if problem:
        print(f"FAIL [summary equivalence]: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
