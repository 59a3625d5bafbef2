"""report_ranks.py -- a JSON report's ranks one object per process again, for tests that ask
about single ranks: each class of "ranks" (docs/report-format.md, "Ranks") expanded into its
ranks, with the rank's own object from "rank_detail" laid over it where the report has one.

What only a rank's own object has (host when the class spans several, pid, trace, live stacks
and threads, exact times) is there only for ranks in rank_detail: ask with --ranks all where a
test needs it for every rank."""


def rank_set(text):
    """The ranks of a rank set ("0-3,5,?": ? is a process without a global rank, -1)."""
    out = []
    for part in filter(None, (text or "").split(",")):
        if part == "?":
            out.append(-1)
        elif "-" in part:
            lo, hi = part.split("-", 1)
            out.extend(range(int(lo), int(hi) + 1))
        else:
            out.append(int(part))
    return out


def per_rank(report):
    """One dict per process: the class's keys with "rank" (a class's [least, greatest] times
    and counts kept as they are), replaced by the rank's own object where rank_detail has it.
    In the report's order: by job (as "jobs" lists them), then rank."""
    jobs = [j["job"] for j in report.get("jobs", [])]
    detail = {(d["job"], d["rank"]): d for d in report.get("rank_detail", [])}
    out = []
    for c in report["ranks"]:
        for r in rank_set(c["ranks"]):
            x = {k: v for k, v in c.items() if k not in ("ranks", "processes", "hosts")}
            x["rank"] = r
            out.append(detail.get((c["job"], r), x))
    order = {j: i for i, j in enumerate(jobs)}
    out.sort(key=lambda x: (order.get(x["job"], len(order)), x["rank"]))
    return out


def rank_of(report, rank, job=None):
    """The object of `rank` (of `job` when given), or None."""
    for x in per_rank(report):
        if x["rank"] == rank and (job is None or x["job"] == job):
            return x
    return None


# The keys whose values a class holds as [least, greatest] (the rest are equal in its ranks).
RANGES = ("since_s_ago", "heartbeat_age_s", "records")
CALL_RANGES = ("entered_s_ago",)
ONLY_CLASS = ("ranks", "processes", "hosts", "host")


def _ranged(obj):
    """(the object without its ranges, {path: value}) of a class or a rank object."""
    same, ranges = {}, {}
    for k, v in obj.items():
        if k in ONLY_CLASS or k in ("rank", "pid", "trace"):
            continue
        if k in RANGES:
            ranges[k] = v
        elif k in ("current", "last_call", "died_in") and isinstance(v, dict):
            same[k] = {a: b for a, b in v.items() if a not in CALL_RANGES}
            ranges.update({f"{k}.{a}": b for a, b in v.items() if a in CALL_RANGES})
        elif k == "live" and isinstance(v, dict):
            same[k] = {a: b for a, b in v.items()
                       if a in ("activity", "where", "python")}
            ranges["live.cpu_share"] = v.get("cpu_share")
        else:
            same[k] = v
    return same, ranges


def check_classes(report):
    """What must hold of any report's ranks: the classes cover every traced process once, no
    two classes are equal but for their ranks, each range is [least, greatest], and each rank
    of rank_detail says what its class says, its times and counts within the class's ranges.
    Returns the problems found, in words ([] none)."""
    bad = []
    classes = report["ranks"]
    traces = sum(j["traces"] for j in report.get("jobs", []))
    if sum(c["processes"] for c in classes) != traces:
        bad.append(f"classes hold {sum(c['processes'] for c in classes)} processes, "
                   f"the jobs {traces}")
    keys, where = [], {}
    for i, c in enumerate(classes):
        if not isinstance(c.get("ranks"), str):
            bad.append(f"class {i}: ranks {c.get('ranks')!r} is not a rank set")
            continue
        same, ranges = _ranged(c)
        key = repr(sorted(same.items()))
        if key in keys:
            bad.append(f"classes {keys.index(key)} and {i} are equal but for their ranks")
        keys.append(key)
        for k, v in ranges.items():
            if not (isinstance(v, list) and len(v) == 2 and v[0] <= v[1]):
                bad.append(f"class {i}: {k} {v!r} is not [least, greatest]")
        if (c["hosts"] == 1) != (c["host"] is not None):
            bad.append(f"class {i}: hosts {c['hosts']} but host {c['host']!r}")
        for r in rank_set(c["ranks"]):
            where[(c["job"], r)] = (same, ranges)
    for d in report.get("rank_detail", []):
        got = where.get((d["job"], d["rank"]))
        if got is None:
            bad.append(f"rank_detail: rank {d['rank']} of {d['job']} is in no class")
            continue
        same, ranges = _ranged(d)
        if same != got[0]:
            bad.append(f"rank_detail: rank {d['rank']} differs from its class: {same} vs {got[0]}")
        for k, v in ranges.items():
            lo, hi = got[1].get(k) or (None, None)
            if v is not None and lo is not None and not lo <= v <= hi:
                bad.append(f"rank_detail: rank {d['rank']}'s {k} {v} is outside [{lo}, {hi}]")
    return bad
