#!/usr/bin/env python3
"""test_pictures.py -- the pictures of a hang: `lockstep export --perfetto` (Chrome trace
event JSON, checked with Python's JSON parser against the traces themselves as printed by
trace_query) and `lockstep analyze --html` (rendered in headless Chromium: no script errors,
readable, fast). Real hung jobs come from the scenario programs run as ranks on the CPU
emulator under the real shim (`lockstep run`); large jobs from lockstep-tracegen.

Usage: test_pictures.py CASE   (paths from the environment meson sets, see meson.build)
"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import Failure, expect, run  # noqa: E402

LOCKSTEP = os.environ["LOCKSTEP_BIN"]
LAUNCH = os.environ["LAUNCH_RANKS"]
EMU_DIR = os.environ["EMULATOR_DIR"]
SCENARIOS = os.environ["SCENARIOS"]
QUERY = os.environ["TRACE_QUERY"]
TRACEGEN = os.environ["TRACEGEN"]
OUT = os.environ["PICTURES_OUT"]
CHROMIUM = "/usr/bin/chromium"

HTML_MAX_BYTES = 5 * 1024 * 1024
RENDER_BOUND_S = 20  # the goal is 5 s (docs/pictures.md); generous against noisy machines
SUSPECT_BG = (0xFD, 0xE3, 0xE1)  # fill of a lane holding the ranks the diagnosis blames


# ---------------------------------------------------------------- producing traces


def run_scenario(tmp, mode, np=4, env=None):
    """Runs `scenarios MODE` under `lockstep run` until it is diagnosed and stopped; returns
    the trace folder."""
    d = os.path.join(tmp, "traces-" + mode)
    e = dict(os.environ)
    e["LD_LIBRARY_PATH"] = EMU_DIR + ":" + e.get("LD_LIBRARY_PATH", "")
    for k in ("LD_PRELOAD", "LOCKSTEP_DIR", "LOCKSTEP_RING", "SCENARIO_DELAY_MS", "RANK",
              "WORLD_SIZE"):
        e.pop(k, None)
    e.update(env or {})
    cmd = [LOCKSTEP, "run", "--dir", d, "--stall", "1", "--", LAUNCH, "--np", str(np), "--",
           SCENARIOS, mode]
    p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=90)
    expect(p.returncode == 3, f"{mode}: lockstep run exited {p.returncode}, want 3: {p.stderr}")
    return d


def tracegen(tmp, name, *args):
    d = os.path.join(tmp, name)
    p = subprocess.run([TRACEGEN, "--out", d, *args], capture_output=True, text=True, timeout=120)
    expect(p.returncode == 0, f"tracegen failed: {p.stderr}")
    return d


def traces(d):
    """Every trace of a folder as trace_query prints it (the independent witness)."""
    files = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".trace"))
    p = subprocess.run([QUERY, *files], capture_output=True, text=True, timeout=120)
    expect(p.returncode == 0, f"trace_query failed: {p.stderr}")
    return json.loads(p.stdout)


def lockstep(*args):
    return subprocess.run([LOCKSTEP, *args], capture_output=True, text=True, timeout=120)


# ---------------------------------------------------------------- Perfetto checks


def export(tmp, d, name="out.json"):
    out = os.path.join(tmp, name)
    p = lockstep("export", "--perfetto", out, d)
    expect(p.returncode == 0, f"export exited {p.returncode}: {p.stderr}")
    with open(out) as f:
        doc = json.load(f)  # a real JSON parser: fails on any syntax error
    expect(isinstance(doc.get("traceEvents"), list), "no traceEvents array")
    return doc


def by_ph(doc, ph):
    return [e for e in doc["traceEvents"] if e["ph"] == ph]


def check_processes(doc, ts):
    """One process per rank, pid = global rank, named "rank N (host:pid)"."""
    names = {e["pid"]: e["args"]["name"] for e in by_ph(doc, "M") if e["name"] == "process_name"}
    expect(len(names) == len(ts), f"{len(names)} processes for {len(ts)} traces")
    for t in ts:
        want = f"rank {t['rank']} ({t['host']}:{t['pid']})"
        expect(names.get(t["rank"]) == want, f"process {t['rank']}: {names.get(t['rank'])!r}, "
                                             f"want {want!r}")
    pids = {e["pid"] for e in doc["traceEvents"]}
    expect(pids == set(names), f"events on processes without a name: {pids - set(names)}")


def check_slices(doc, ts):
    """Every record is one complete slice on its rank, at its own time on the shared axis;
    records in flight are open slices drawn to the end of the trace."""
    origin = min(r["enter_ns"] for t in ts for r in t["records"])
    expect(doc["otherData"]["origin_ns"] == origin,
           f"origin {doc['otherData']['origin_ns']}, want the earliest record {origin}")
    slices = by_ph(doc, "X")
    end_of_trace = max(e["ts"] + e["dur"] for e in slices)
    newest = max([t["heartbeat_ns"] for t in ts] +
                 [max(r["enter_ns"], r["exit_ns"]) for t in ts for r in t["records"]])
    expect(end_of_trace * 1000 + origin >= newest - 1000,
           "the trace ends before the newest sign of life")
    open_total = 0
    for t in ts:
        mine = [e for e in slices if e["pid"] == t["rank"]]
        expect(len(mine) == len(t["records"]),
               f"rank {t['rank']}: {len(mine)} slices for {len(t['records'])} records")
        mine.sort(key=lambda e: e["args"]["ticket"])
        for e, r in zip(mine, t["records"]):
            expect(e["args"]["ticket"] == r["ticket"] and e["args"]["op"] == r["op"],
                   f"rank {t['rank']}: slice {e['name']} for record {r['ticket']} {r['op']}")
            expect(abs(e["ts"] * 1000 - (r["enter_ns"] - origin)) <= 1,
                   f"rank {t['rank']} {e['name']}: ts {e['ts']} us, record entered "
                   f"{r['enter_ns'] - origin} ns after the origin")
            expect(e["args"].get("seq", 0) == r["seq"], f"{e['name']}: seq {r['seq']}")
            expect(e["args"]["in_flight"] == r["in_flight"],
                   f"rank {t['rank']} {e['name']}: in_flight {e['args']['in_flight']}")
            if r["in_flight"]:
                open_total += 1
                expect(e["name"].endswith(" (in flight)"), f"open slice named {e['name']!r}")
                expect(abs(e["ts"] + e["dur"] - end_of_trace) < 0.002,
                       f"rank {t['rank']} {e['name']} ends at {e['ts'] + e['dur']} us, not "
                       f"at the end of the trace {end_of_trace} us")
            else:
                expect(abs(e["dur"] * 1000 - (r["exit_ns"] - r["enter_ns"])) <= 1,
                       f"{e['name']}: dur {e['dur']} us")
    return open_total


def check_findings(doc, d):
    """Each finding of `lockstep analyze --json` is an instant on exactly the ranks it names."""
    p = lockstep("analyze", "--json", d)
    expect(p.returncode in (0, 1), f"analyze exited {p.returncode}")
    report = json.loads(p.stdout)
    instants = by_ph(doc, "i")
    for i, f in enumerate(report["findings"]):
        on = sorted(e["pid"] for e in instants if e["args"]["finding"] == i + 1)
        expect(on == f["ranks"], f"finding {i + 1} ({f['kind']}) on {on}, names {f['ranks']}")
        for e in instants:
            if e["args"]["finding"] == i + 1:
                expect(e["s"] == "p" and e["name"] == f["kind"] and
                       e["args"]["summary"] == f["summary"], f"finding instant {e}")
    expect(len(instants) == sum(len(f["ranks"]) for f in report["findings"]),
           "instants that belong to no finding")
    return report


def enclosing(slices, pid, tid, ts, op):
    return [e for e in slices if e["pid"] == pid and e["tid"] == tid and e["args"]["op"] == op
            and e["ts"] <= ts + 0.0005 and ts <= e["ts"] + e["dur"] + 0.0005]


def expected_pairs(ts):
    """(comm, src, dst, seq) of every send whose receive was also posted, from the records."""
    sends, recvs = set(), set()
    for t in ts:
        for r in t["records"]:
            if r["op"] == "Send":
                sends.add((r["comm"], r["comm_rank"], r["peer"], r["seq"]))
            elif r["op"] == "Recv":
                recvs.add((r["comm"], r["peer"], r["comm_rank"], r["seq"]))
    return sends & recvs


def check_flows(doc, ts):
    """Flow arrows join send #k from s to d with receive #k on d from s, nothing else."""
    slices = by_ph(doc, "X")
    starts = {e["id"]: e for e in by_ph(doc, "s")}
    ends = {e["id"]: e for e in by_ph(doc, "f")}
    expect(set(starts) == set(ends) and len(starts) == len(by_ph(doc, "s")),
           "flow starts and ends do not pair up by id")
    pairs = expected_pairs(ts)
    expect(len(starts) == len(pairs), f"{len(starts)} flows for {len(pairs)} matched sends")
    rank_of = {}  # (comm, comm rank) -> global rank
    for t in ts:
        for c in t["comms"]:
            rank_of[(c["id"], c["rank"])] = t["rank"]
    seen = set()
    for fid, s in starts.items():
        f = ends[fid]
        expect(f.get("bp") == "e", "flow end not bound to its enclosing slice")
        send = enclosing(slices, s["pid"], s["tid"], s["ts"], "Send")
        recv = enclosing(slices, f["pid"], f["tid"], f["ts"], "Recv")
        expect(len(send) == 1 and len(recv) == 1, f"flow {fid} not inside one send/recv slice")
        a, b = send[0]["args"], recv[0]["args"]
        key = (a["comm"], a["comm_rank"], a["peer"], a["seq"])
        expect(b["comm"] == a["comm"] and b["peer"] == a["comm_rank"] and
               b["comm_rank"] == a["peer"] and b["seq"] == a["seq"],
               f"flow {fid} joins {send[0]['name']} with {recv[0]['name']}")
        expect(key in pairs and key not in seen, f"flow {fid}: unexpected pair {key}")
        expect(rank_of[(a["comm"], a["comm_rank"])] == s["pid"], "flow starts on the wrong rank")
        seen.add(key)
    return len(starts)


def case_perfetto_prepare_data(tmp):
    d = run_scenario(tmp, "prepare_data", env={"SCENARIO_DELAY_MS": "60000"})
    ts = traces(d)
    doc = export(tmp, d)
    check_processes(doc, ts)
    n_open = check_slices(doc, ts)
    # Ranks 0-2 wait in the barrier (AllReduce #3); rank 3 is busy in prepare_data.
    opened = sorted((e["pid"], e["name"]) for e in by_ph(doc, "X") if e["args"]["in_flight"])
    expect(opened == [(r, "AllReduce #3 (in flight)") for r in (0, 1, 2)],
           f"open slices {opened}")
    expect(n_open == 3, f"{n_open} records in flight")
    threads = [e["args"]["name"] for e in by_ph(doc, "M") if e["name"] == "thread_name"]
    expect(any(re.fullmatch(r"comm [0-9a-f]{8} \(4 ranks, rank \d\)", n) for n in threads),
           f"no communicator track: {threads}")
    report = check_findings(doc, d)
    expect(report["findings"][0]["kind"] == "missing_ranks", "prepare_data not diagnosed")


def case_perfetto_p2p(tmp):
    d = run_scenario(tmp, "p2p_size_mismatch")
    ts = traces(d)
    doc = export(tmp, d)
    check_processes(doc, ts)
    check_slices(doc, ts)
    expect(check_flows(doc, ts) == 1, "the send from 0 to 1 and its receive are not joined")
    s, f = by_ph(doc, "s")[0], by_ph(doc, "f")[0]
    expect((s["pid"], f["pid"]) == (0, 1), f"flow from {s['pid']} to {f['pid']}")
    check_findings(doc, d)

    d = run_scenario(tmp, "unmatched_send")
    ts = traces(d)
    doc = export(tmp, d, "unmatched.json")
    check_processes(doc, ts)
    check_slices(doc, ts)
    expect(check_flows(doc, ts) == 0, "a flow for a send nobody received")
    opened = [(e["pid"], e["name"]) for e in by_ph(doc, "X") if e["args"]["in_flight"]]
    expect((0, "Send #1 to 1 (in flight)") in opened, f"the unmatched send is not open: {opened}")
    check_findings(doc, d)


def case_perfetto_synthetic(tmp):
    d = tracegen(tmp, "tg", "--ranks", "16", "--ranks-per-host", "4", "--colls", "12", "--p2p",
                 "--split", "2", "--missing", "5")
    ts = traces(d)
    doc = export(tmp, d)
    check_processes(doc, ts)
    check_slices(doc, ts)
    expect(check_flows(doc, ts) > 100, "too few flows for 12 ring exchanges of 16 ranks")
    hosts = {e["args"]["name"].split("(")[1].split(":")[0] for e in by_ph(doc, "M")
             if e["name"] == "process_name"}
    expect(len(hosts) == 4, f"hosts {hosts}")
    for t in ts:  # a named track per communicator of every rank
        names = {e["args"]["name"] for e in by_ph(doc, "M")
                 if e["name"] == "thread_name" and e["pid"] == t["rank"]}
        for c in t["comms"]:
            want = f"comm {c['id'][:8]} ({c['nranks']} ranks, rank {c['rank']})"
            expect(want in names, f"rank {t['rank']}: no track {want!r} in {names}")
    check_findings(doc, d)


def case_export_bad_input(tmp):
    empty = os.path.join(tmp, "empty")
    os.mkdir(empty)
    corrupt = os.path.join(tmp, "bad.trace")
    with open(corrupt, "wb") as f:
        f.write(b"NOTATRACE" * 100)
    out = os.path.join(tmp, "x.json")
    for paths in ([os.path.join(tmp, "nonexistent")], [empty], [corrupt]):
        a = lockstep("analyze", *paths)
        e = lockstep("export", "--perfetto", out, *paths)
        expect(a.returncode == 2 and e.returncode == 2,
               f"{paths}: analyze {a.returncode}, export {e.returncode}, want 2 and 2")
        expect(e.stderr == a.stderr, f"{paths}: export says {e.stderr!r}, analyze {a.stderr!r}")
        expect(not os.path.exists(out), "an output file was left after bad input")
    good = tracegen(tmp, "tg", "--ranks", "2")
    for args in (["export", good], ["export", "--perfetto"], ["export", "--perfetto", out],
                 ["export", "--bogus", out, good],
                 ["export", "--perfetto", os.path.join(tmp, "no", "such", "dir.json"), good]):
        p = lockstep(*args)
        expect(p.returncode == 2 and p.stderr, f"{args}: exit {p.returncode}, want 2 with a message")
    p = lockstep("export", "--perfetto", "-", good)
    expect(p.returncode == 0 and json.loads(p.stdout)["traceEvents"], "export to stdout")
    expect("export" in lockstep("--help").stdout, "export missing from --help")


# ---------------------------------------------------------------- HTML checks


def chromium(tmp, url, *mode, height=1000):
    """Runs headless Chromium on url in a window 1400 px wide, `height` high; returns (stdout,
    console log, wall seconds)."""
    if not os.path.exists(CHROMIUM):
        raise Failure(f"{CHROMIUM} is missing: the HTML report tests need Debian's chromium "
                      "package (scripts/test installs it; or apt-get install chromium)")
    profile = tempfile.mkdtemp(dir=tmp, prefix="chromium-")
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
           f"--window-size=1400,{height}", *mode, url]
    env = dict(os.environ, HOME=profile)
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    wall = time.monotonic() - t0
    expect(p.returncode == 0, f"chromium exited {p.returncode}: {p.stderr[-2000:]}")
    return p.stdout, p.stderr, wall


def render(tmp, html, png=None, height=1000):
    """Loads the report: the script must run to its end (it marks <html data-lockstep=ready>)
    with no uncaught error; with png, the same load also takes the screenshot (`height` px of
    the page). Returns (DOM, seconds to load and run it, the screenshot's included)."""
    url = "file://" + os.path.abspath(html)
    if png and os.path.exists(png):
        os.unlink(png)  # a picture of an earlier run proves nothing
    dom, log, wall = chromium(tmp, url, "--dump-dom", *([f"--screenshot={png}"] if png else []),
                              height=height)
    errors = [l for l in log.splitlines() if "Uncaught" in l or ":CONSOLE" in l and "rror" in l]
    expect(not errors, f"{html}: script errors: {errors}")
    expect('data-lockstep="ready"' in dom, f"{html}: the page's script did not finish")
    if png:
        expect(os.path.exists(png) and os.path.getsize(png) > 1000, f"no screenshot in {png}")
    return dom, wall


def check_detector(tmp):
    """The checks above must catch a page whose script throws."""
    bad = os.path.join(tmp, "broken.html")
    with open(bad, "w") as f:
        f.write("<!DOCTYPE html><html><body><p>x</p><script>no_such_function();"
                "document.documentElement.setAttribute('data-lockstep','ready');"
                "</script></body></html>")
    try:
        render(tmp, bad)
    except Failure as e:
        expect("script errors" in str(e), f"broken page caught for the wrong reason: {e}")
        return
    raise Failure("a page with a throwing script passed the render check")


def check_self_contained(html):
    text = open(html, encoding="utf-8").read()
    for bad in ("http:", "https:", "//cdn", "<link", "@import", "src=", "@font-face"):
        expect(bad not in text, f"{html} refers to something outside itself: {bad!r}")
    expect(text.count("<script>") == 1 and len(re.search(r"<script>(.*?)</script>", text,
                                                         re.S).group(1)) < 2000,
           "more than one small inline script")
    return text


def png_pixels(path):
    """Decodes an 8-bit RGB/RGBA PNG (what Chromium writes); returns (w, h, rows of bytes, bpp)."""
    data = open(path, "rb").read()
    expect(data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG")
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, color = struct.unpack(">IIBB", body[:10])
            expect(depth == 8 and color in (2, 6), f"PNG depth {depth} color type {color}")
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        ftype, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 255
            elif ftype == 2:
                line[i] = (line[i] + b) & 255
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return w, h, rows, bpp


def count_colour(png, rgb):
    w, h, rows, bpp = png_pixels(png)
    target = bytes(rgb)
    return sum(1 for row in rows for x in range(0, w * bpp, bpp) if row[x:x + 3] == target)


def lanes(dom):
    """(suspect?, label) of every lane drawn."""
    return [(bool(m.group(1)), re.sub(r"<title>.*?</title>", "", m.group(2)))
            for m in re.finditer(r'<g class="lane( suspect)?">.*?<text[^>]*class="l1">(.*?)</text>',
                                 dom, re.S)]


def html_report(tmp, d, name):
    """analyze --html: the text report on stdout unchanged, --json still JSON."""
    html = os.path.join(tmp, name + ".html")
    plain = lockstep("analyze", d)
    p = lockstep("analyze", "--html", html, d)
    expect(p.returncode == plain.returncode == 1, f"analyze --html exited {p.returncode}")
    expect(p.stdout == plain.stdout, "--html changed the text report on stdout")
    js = lockstep("analyze", "--json", d)
    both = lockstep("analyze", f"--html={html}.2", "--json", d)
    expect(both.returncode == 1 and json.loads(both.stdout) == json.loads(js.stdout),
           "--json with --html differs from --json")
    expect(open(html + ".2").read() == open(html).read(), "the HTML differs between runs")
    check_self_contained(html)
    return html, json.loads(js.stdout)


def case_html_prepare_data(tmp):
    check_detector(tmp)
    d = run_scenario(tmp, "prepare_data", env={"SCENARIO_DELAY_MS": "60000"})
    html, report = html_report(tmp, d, "prepare_data")
    png = os.path.join(OUT, "prepare_data.png")
    dom, wall = render(tmp, html, png)
    print(f"prepare_data: {os.path.getsize(html)} bytes, rendered in {wall:.2f} s, "
          f"screenshot {png}")
    f = report["findings"][0]
    expect(f["kind"] == "missing_ranks" and f["missing"] == [3], f"first finding {f['kind']}")
    expect("missing_ranks" in dom and f["summary"].split(" (")[0] in dom.replace("&amp;", "&"),
           "the finding is not at the top of the page")
    expect(dom.index("missing_ranks") < dom.index("<svg"), "findings are not above the timeline")
    got = lanes(dom)
    expect(got == [(False, "ranks 0-2 (3)"), (True, "rank 3")], f"lanes {got}")
    expect(re.search(r'class="col focus">#3\b', dom), "the diverging call #3 is not highlighted")
    expect(re.search(r'<g class="cell not-reached focus"', dom), "rank 3's missing #3 not drawn")
    expect(dom.count('class="cell waiting focus"') == 1, "the waiting ranks' #3 not drawn")
    expect(re.search(r"<title>[^<]*scenarios\.c:46 \(barrier\)", dom), "no call site on hover")
    # Readable at a glance: the blamed lane is visible on the first screen, in its colour.
    n = count_colour(png, SUSPECT_BG)
    expect(n > 3000, f"the missing rank's lane does not stand out in the screenshot ({n} px)")


def case_html_mismatch(tmp):
    d = run_scenario(tmp, "shape_mismatch")
    html, report = html_report(tmp, d, "shape_mismatch")
    png = os.path.join(OUT, "shape_mismatch.png")
    dom, _ = render(tmp, html, png)
    f = report["findings"][0]
    expect(f["kind"] == "count_mismatch", f"first finding {f['kind']}")
    odd = min(f["classes"], key=lambda c: len(c["ranks"]))["ranks"]
    got = lanes(dom)
    suspects = [label for s, label in got if s]
    expect(len(suspects) == 1 and suspects[0].startswith("rank") and
           str(odd[0]) in suspects[0], f"lanes {got}, odd class {odd}")
    expect(re.search(r'class="col focus">#%d\b' % f["seq"], dom), "mismatching seq not marked")
    expect('focus differs"' in dom, "the differing call is not highlighted")
    expect(count_colour(png, SUSPECT_BG) > 3000, "the odd rank does not stand out")


def case_html_waits(tmp):
    """The wait-for graph drawn: the call where the waits end on the left, in red; each class of
    waiting ranks one box with an arrow to what it waits for; every rank in the boxes' titles;
    the same classes as the JSON's waits_for."""
    d = tracegen(tmp, "p2p", "--ranks", "8", "--colls", "20", "--p2p", "--p2p-size", "5")
    html, report = html_report(tmp, d, "waits")
    png = os.path.join(OUT, "waits.png")
    dom, _ = render(tmp, html, png)
    svg = re.search(r'<svg class="waits".*?</svg>', dom, re.S)
    expect(svg, "no picture of the waits")
    svg = svg.group(0)
    boxes = re.findall(r'<g class="wclass([^"]*)"><title>(.*?)</title>', svg)
    sinks = [t for c, t in boxes if "sink" in c]
    expect(len(sinks) == 1 and re.match(r"(Send|Recv) #20 on comm [0-9a-f]{8}: can never "
                                        r"complete", sinks[0]), f"where the waits end: {sinks}")
    waiting = sorted(t for c, t in boxes if "sink" not in c)
    expect(len(waiting) == 2 and waiting[0].startswith("ranks 0-4,7: wait in Broadcast #20")
           and waiting[1].startswith("ranks 5-6: wait in "), f"classes: {waiting}")
    expect(len(waiting) == len(report["waits_for"]), f"{waiting} against {report['waits_for']}")
    arrows = svg.count('<line class="wait"')
    expect(arrows == 2, f"{arrows} arrows, want 2: ranks 5-6 to the call, ranks 0-4,7 to 5-6")
    expect(dom.index('class="waits"') < dom.index('class="tl"'), "the graph is below the timeline")
    expect(count_colour(png, SUSPECT_BG) > 2000, "where the waits end does not stand out")
    # A healthy job draws no graph.
    clean = tracegen(tmp, "clean", "--ranks", "4", "--colls", "10")
    page = os.path.join(tmp, "clean.html")
    lockstep("analyze", "--html", page, clean)
    expect('class="waits"' not in open(page).read(), "a graph of waits in a healthy job")


CYCLE_FILL = (0xF7, 0xC6, 0xC0)  # fill of a send or receive a deadlock cycle's rank is blocked in


def case_html_p2p_deadlock(tmp):
    """A send/recv deadlock (ranks 0 and 1 both send first, ranks 2-3 idle): the sends and
    receives drawn per sender and receiver, each blocked Send above the Recv its peer never
    posted, the cycle's calls marked with an arrow from each to the other's; the collectives
    above split the two ranks in Send from the two outside NCCL."""
    d = run_scenario(tmp, "sendrecv_deadlock")
    html, report = html_report(tmp, d, "sendrecv_deadlock")
    png = os.path.join(OUT, "sendrecv_deadlock.png")
    dom, _ = render(tmp, html, png, height=1600)  # below three findings and the waits
    f = report["findings"][0]
    expect(f["kind"] == "deadlock_cycle" and sorted(f["cycle"]) == [0, 1],
           f"first finding {f['kind']} {f.get('cycle')}")
    svg = re.search(r'<svg class="tl p2p".*?</svg>', dom, re.S)
    expect(svg, "no picture of the sends and receives")
    svg = svg.group(0)
    pairs = {}
    for m in re.finditer(r'<g class="pair lane( suspect)?" data-sender="(\d+)" data-receiver="(\d+)">'
                         r'(.*?)</g>\n', svg, re.S):
        pairs[(int(m.group(2)), int(m.group(3)))] = (bool(m.group(1)), m.group(4))
    expect(sorted(pairs) == [(0, 1), (1, 0)], f"sender and receiver lanes {sorted(pairs)}")
    for (src, dst), (suspect, body) in pairs.items():
        label = re.sub(r"<title>.*?</title>", "", body, flags=re.S)
        expect(suspect and f">rank {src} \u2192 rank {dst}<" in label, f"lane {src}->{dst}: {label}")
        halves = re.findall(r'<g class="half (send|recv) ([a-z-]+)( cycle)?"><title>(.*?)</title>',
                            body, re.S)
        expect([(h[0], h[1], bool(h[2])) for h in halves] ==
               [("send", "waiting", True), ("recv", "not-posted", False)],
               f"lane {src}->{dst}: halves {halves}")
        expect(halves[0][3].startswith(f"rank {src} \u00b7 Send #1 to rank {dst}: count 256 fp32")
               and "scenarios.c:" in halves[0][3] and
               f"deadlock cycle: rank {src} waits here for rank {dst}" in halves[0][3],
               f"the blocked send's title: {halves[0][3]!r}")
        expect(halves[1][3] == f"rank {dst} never posted Recv #1 from rank {src}",
               f"the missing receive's title: {halves[1][3]!r}")
    arrows = sorted((int(a), int(b)) for a, b in
                    re.findall(r'<path class="cyc" data-from="(\d+)" data-to="(\d+)"', svg))
    expect(arrows == [(0, 1), (1, 0)], f"cycle arrows {arrows}")
    got = lanes(dom)
    expect(got == [(True, "ranks 0-1 (2)"), (False, "ranks 2-3 (2)")], f"collective lanes {got}")
    n = count_colour(png, CYCLE_FILL)
    expect(n > 1000, f"the cycle's blocked sends do not stand out in the screenshot ({n} px)")


def case_html_1024_ranks(tmp):
    d = tracegen(tmp, "tg1024", "--ranks", "1024", "--colls", "40", "--split", "4",
                 "--missing", "31")
    html, report = html_report(tmp, d, "ranks1024")
    size = os.path.getsize(html)
    png = os.path.join(OUT, "ranks1024.png")
    dom, wall = render(tmp, html, png)
    print(f"1024 ranks: HTML {size} bytes, Chromium loaded and ran it in {wall:.2f} s "
          f"(goal 5 s, asserted {RENDER_BOUND_S} s)")
    expect(size < HTML_MAX_BYTES, f"HTML of 1,024 ranks is {size} bytes")
    expect(wall < RENDER_BOUND_S, f"rendering took {wall:.1f} s")
    got = lanes(dom)
    expect(got[:2] == [(False, "ranks 0-30,32-1023 (1023)"), (True, "rank 31")],
           f"world communicator lanes {got[:2]}")
    expect(len(got) <= 12, f"{len(got)} lanes for 1,024 ranks in 5 communicators")
    heights = [int(h) for h in re.findall(r'<svg class="tl" width="\d+" height="(\d+)"', dom)]
    expect(heights and heights[0] < 200, f"world timeline {heights[:1]} px high")
    expect(count_colour(png, SUSPECT_BG) > 3000, "rank 31 does not stand out")


def case_html_bad_input(tmp):
    good = tracegen(tmp, "tg", "--ranks", "2", "--missing", "1")
    for args in (["analyze", "--html"], ["analyze", "--html", os.path.join(tmp, "x.html")],
                 ["analyze", "--html", os.path.join(tmp, "no", "dir", "x.html"), good],
                 ["analyze", "--html", os.path.join(tmp, "y.html"), os.path.join(tmp, "none")]):
        p = lockstep(*args)
        expect(p.returncode == 2 and p.stderr, f"{args}: exit {p.returncode}, want 2 + message")
    expect(not os.path.exists(os.path.join(tmp, "y.html")), "HTML written for bad input")
    clean = tracegen(tmp, "clean", "--ranks", "2", "--colls", "3")
    html = os.path.join(tmp, "clean.html")
    p = lockstep("analyze", "--html", html, clean)
    expect(p.returncode == 0 and os.path.exists(html), f"clean job: exit {p.returncode}")
    dom, _ = render(tmp, html)
    expect("<svg" in dom or "No collectives" in dom, "clean job without a timeline")


if __name__ == "__main__":
    sys.exit(run(globals(), "lockstep-pictures-"))
