#!/usr/bin/env python3
"""assert_json.py -- checks a lockstep JSON report: each argument is a Python expression that
must be true. Names: r (the report), F (its findings), f0 (the first finding), kinds (their
kinds), kind(k) (the first finding of kind k, or None), comms (communicator ids), R (the ranks
one object per process: tests/lib/report_ranks.py), json, here (the report's path)."""
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from report_ranks import check_classes, per_rank  # noqa: E402


def main():
    path, exprs = sys.argv[1], sys.argv[2:]
    with open(path, encoding="utf-8") as fh:
        r = json.load(fh)
    for key in ("lockstep_report", "findings", "ranks", "communicators"):
        if key not in r:
            sys.exit(f"report lacks '{key}'")
    F = r["findings"]
    for i, f in enumerate(F):
        for key in ("kind", "summary", "ranks"):
            if key not in f:
                sys.exit(f"finding {i} lacks '{key}'")
        if not all(isinstance(x, int) for x in f["ranks"]):
            sys.exit(f"finding {i}: ranks are not integers")
        if "comm" in f and not re.fullmatch(r"[0-9a-f]{16}", f["comm"]):
            sys.exit(f"finding {i}: comm {f['comm']!r} is not 16 hex digits")
        c = f.get("consequence_of")
        if c is not None and not (0 <= c < i):
            sys.exit(f"finding {i}: consequence_of {c} does not point to an earlier finding")
    for problem in check_classes(r):
        sys.exit(f"ranks: {problem}")
    env = {
        "r": r,
        "F": F,
        "f0": F[0] if F else None,
        "kinds": [f["kind"] for f in F],
        "kind": lambda k: next((f for f in F if f["kind"] == k), None),
        "comms": [c["comm"] for c in r["communicators"]],
        "R": per_rank(r),
        "json": json,
        "here": path,
    }
    for e in exprs:
        try:
            ok = eval(e, env)  # noqa: S307 -- test expressions written in this repository
        except Exception as exc:  # pylint: disable=broad-except
            ok = False
            print(f"error evaluating {e!r}: {exc!r}", file=sys.stderr)
        if not ok:
            print(f"FAILED: {e}", file=sys.stderr)
            print(json.dumps(F, indent=1)[:4000], file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    main()
