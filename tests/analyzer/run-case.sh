#!/bin/bash
# run-case.sh -- one CLI test of `lockstep` against traces made by lockstep-tracegen.
# Usage: run-case.sh LOCKSTEP TRACEGEN CASE
set -eu
LOCKSTEP=$1
TRACEGEN=$2
CASE=$3
HERE=$(cd "$(dirname "$0")" && pwd)
D=$(mktemp -d "${TMPDIR:-/tmp}/lockstep-cli-XXXXXX")
trap 'rm -rf "$D"' EXIT
rc=0

fail() {
    echo "FAIL [$CASE]: $*" >&2
    [ -f "$D/err" ] && sed 's/^/  stderr: /' "$D/err" >&2
    exit 1
}
gen() { "$TRACEGEN" --out "$D/t" "$@" >/dev/null || fail "tracegen $*"; }
# Every JSON analysis is also made of the same traces summarized per host (as nodes would), and
# must give the same report (tests/lib/summary_equiv.py says what is normalized).
analyze_json() {
    set +e
    "$LOCKSTEP" analyze --json "$@" >"$D/out.json" 2>"$D/err"
    rc=$?
    set -e
    python3 "$HERE/../lib/summary_equiv.py" "$LOCKSTEP" "$D/out.json" "$rc" "$@" ||
        fail "node summaries of $* diagnose otherwise"
}
analyze_text() {
    set +e
    "$LOCKSTEP" analyze "$@" >"$D/out.txt" 2>"$D/err"
    rc=$?
    set -e
}
run() {
    set +e
    "$LOCKSTEP" "$@" >"$D/out.txt" 2>"$D/err"
    rc=$?
    set -e
}
expect_rc() { [ "$rc" = "$1" ] || fail "exit status $rc, want $1"; }
check() { python3 "$HERE/assert_json.py" "$D/out.json" "$@" || fail "JSON assertions"; }
contains() { grep -qF -- "$2" "$1" || { sed 's/^/  | /' "$1" >&2; fail "$1 lacks '$2'"; }; }
first_trace() { ls "$D"/t/*-r"$1".trace; }
# Overwrites bytes of a file at an offset with a printf-style string.
poke() { printf "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none; }

case $CASE in
clean)
    gen --ranks 8 --colls 20
    analyze_json "$D/t"; expect_rc 0
    check 'F == []' 'len(R) == 8' 'all(x["state"] == "exited" for x in R)' \
        'r["lockstep_report"] == 2'
    ;;
missing)
    gen --ranks 8 --colls 20 --missing 4
    analyze_json "$D/t"; expect_rc 1
    check 'kinds == ["missing_ranks"]' 'f0["missing"] == [4]' 'f0["waiting"] == [0,1,2,3,5,6,7]' \
        'f0["seq"] == 20' 'f0["comm"] in comms' 'f0["ranks"] == list(range(8))' \
        'f0["consequence_of"] is None' \
        'any(c["role"] == "missing" and c["ranks"] == [4] and c["state"] == "idle" for c in f0["classes"])'
    analyze_text "$D/t"; expect_rc 1
    contains "$D/out.txt" "ranks 0-3,5-7 wait in Broadcast #20"
    contains "$D/out.txt" "rank 4 never called it"
    contains "$D/out.txt" "it is alive, last seen in AllReduce #19"
    ;;
compressed)
    gen --ranks 64 --colls 5 --missing 5
    analyze_text "$D/t"; expect_rc 1
    contains "$D/out.txt" "ranks 0-4,6-63 wait"
    if grep -q "0,1,2,3" "$D/out.txt"; then fail "ranks not compressed"; fi
    ;;
crash)
    gen --ranks 8 --colls 20 --crash 4:11
    analyze_json "$D/t"; expect_rc 1
    check 'kinds == ["rank_crashed", "missing_ranks"]' 'f0["rank"] == 4' 'f0["signal"] == 11' \
        'F[1]["consequence_of"] == 0' 'F[1]["missing"] == [4]'
    ;;
job-killed)
    # The launcher stopped the hung job: the kill is not a cause, the missing rank is.
    gen --ranks 8 --colls 20 --missing 4 --terminated
    analyze_json "$D/t"; expect_rc 1
    check 'kinds == ["missing_ranks"]' 'f0["missing"] == [4]' \
        'all(x["state"] == "crashed" for x in R)'
    # Where the missing rank was: outside NCCL, and for how long before the job was stopped.
    analyze_text "$D/t"; expect_rc 1
    contains "$D/out.txt" "rank 4 never called it — it was busy outside NCCL for 30 s when the whole job was stopped (SIGTERM); its last call was AllReduce #19"
    ;;
crash-then-job-killed)
    # A rank crashed first; the launcher later stopped the others: the crash is the cause.
    gen --ranks 8 --colls 20 --crash 4:11 --terminated
    analyze_json "$D/t"; expect_rc 1
    check 'kinds == ["rank_crashed", "missing_ranks"]' 'f0["rank"] == 4' 'f0["signal"] == 11' \
        'F[1]["consequence_of"] == 0'
    ;;
oom-then-job-killed)
    # The OOM killer took rank 4 (no end record); the launcher later stopped the others with
    # SIGTERM: the first death is the story, the SIGTERMs are the launcher's teardown.
    gen --ranks 8 --colls 20 --vanish 4 --terminated
    analyze_json "$D/t"; expect_rc 1
    check 'f0["kind"] == "rank_crashed"' 'f0["dead"] == [4]' 'f0["vanished"] is True' \
        'F[1]["kind"] == "missing_ranks"' 'F[1]["consequence_of"] == 0' \
        'kinds.count("rank_crashed") == 1' \
        'all(x["stopped_with_job"] and x["stopped_after"] == 4 for x in R if x["rank"] != 4)'
    analyze_text "$D/t"; expect_rc 1
    contains "$D/out.txt" "ranks 0-3,5-7 were stopped with the job (SIGTERM"
    ;;
deadlock-job-killed)
    # Rank 2 alone used the communicators in the other order: it is the root, not a deadlock.
    gen --ranks 4 --colls 20 --deadlock 2 --terminated
    analyze_json "$D/t"; expect_rc 1
    check 'f0["kind"] == "missing_ranks"' 'f0["missing"] == [2]' '"rank_crashed" not in kinds' \
        '"deadlock_cycle" not in kinds'
    ;;
exit)
    gen --ranks 8 --colls 20 --exit 4:0
    analyze_json "$D/t"; expect_rc 1
    check 'f0["kind"] == "rank_exited"' 'f0["rank"] == 4' 'f0["status"] == 0' \
        'kind("missing_ranks")["consequence_of"] == 0'
    ;;
exit-nonzero)
    gen --ranks 4 --colls 5 --exit 2:3:6
    analyze_json "$D/t"; expect_rc 1
    check 'kinds == ["rank_exited"]' 'f0["rank"] == 2' 'f0["status"] == 3'
    ;;
vanish)
    gen --ranks 8 --colls 20 --vanish 4
    analyze_json "$D/t"; expect_rc 1
    check 'f0["kind"] == "rank_crashed"' 'f0["rank"] == 4' 'f0["vanished"] is True' \
        'f0["signal"] is None' '[x["state"] for x in R if x["rank"] == 4] == ["vanished"]'
    ;;
mismatch-op | mismatch-count | mismatch-dtype | mismatch-redop | mismatch-root)
    what=${CASE#mismatch-}
    seq=10 # a Broadcast (rooted every 10th), so a root can differ
    [ "$what" = redop ] && seq=9 # an AllReduce: Broadcast has no reduction op
    gen --ranks 8 --colls 20 --mismatch "$what:3:$seq"
    analyze_json "$D/t"; expect_rc 1
    check "f0['kind'] == '${what}_mismatch'" "f0['seq'] == $seq" 'f0["comm"] in comms' \
        'len(f0["classes"]) == 2' 'f0["classes"][0]["ranks"] == [0,1,2,4,5,6,7]' \
        'f0["classes"][1]["ranks"] == [3]' \
        'f0["classes"][0]["callsite"] != f0["classes"][1]["callsite"]' \
        'all(k in c for c in f0["classes"] for k in ("ranks","op","count","dtype","redop","root","callsite"))'
    ;;
redop-ignored-on-broadcast)
    # A reduction op passed to a Broadcast means nothing to NCCL: not a mismatch.
    gen --ranks 4 --colls 10 --mismatch redop:3:10
    analyze_json "$D/t"; expect_rc 0
    ;;
bcast-matches-broadcast)
    # Bcast and Broadcast are the same collective across ranks: no finding from the op alone.
    gen --ranks 4 --colls 12
    python3 - "$D"/t/*-r1.trace <<'PY'
import struct, sys
path = sys.argv[1]
with open(path, "r+b") as f:
    data = bytearray(f.read())
    ring_off, ring_cap = struct.unpack_from("<QQ", data, 96)
    next_ticket = struct.unpack_from("<Q", data, 848)[0]
    changed = 0
    for t in range(next_ticket):
        at = ring_off + (t % ring_cap) * 128
        if struct.unpack_from("<H", data, at + 116)[0] == 2:  # Broadcast -> Bcast
            struct.pack_into("<H", data, at + 116, 3)
            changed += 1
    assert changed
    f.seek(0); f.write(data)
PY
    analyze_json "$D/t"; expect_rc 0
    check 'F == []'
    ;;
p2p-unmatched)
    gen --ranks 8 --colls 20 --p2p --p2p-skip-recv 5
    analyze_json "$D/t"; expect_rc 1
    check 'kind("p2p_unmatched")["src"] == 4' 'kind("p2p_unmatched")["dst"] == 5' \
        'kind("p2p_unmatched")["seq"] == 20' 'kind("p2p_unmatched")["ranks"] == [4, 5]'
    ;;
p2p-size)
    gen --ranks 8 --colls 20 --p2p --p2p-size 5
    analyze_json "$D/t"; expect_rc 1
    check 'f0["kind"] == "p2p_size_mismatch"' 'f0["src"] == 5' 'f0["dst"] == 6' \
        'kind("missing_ranks")["consequence_of"] == 0'
    ;;
deadlock)
    # Two ranks using two communicators in opposite orders wait on each other alike: a deadlock.
    gen --ranks 2 --colls 20 --deadlock 1
    analyze_json "$D/t"; expect_rc 1
    check 'f0["kind"] == "deadlock_cycle"' 'sorted(f0["cycle"]) == [0, 1]' \
        'f0["ranks"] == [0, 1]' \
        'all(f["consequence_of"] is not None for f in F if f["kind"] == "missing_ranks")'
    # Of four, rank 2 alone did: every wait of the cycle comes back to it, the root.
    gen --ranks 4 --colls 20 --deadlock 2
    analyze_json "$D/t"; expect_rc 1
    check 'f0["kind"] == "missing_ranks"' 'f0["missing"] == [2]' \
        'f0["consequence_of"] is None' '"deadlock_cycle" not in kinds' \
        'any("why not a deadlock" in d for d in f0.get("details", []))' \
        'all(f["consequence_of"] is not None for f in F[1:])'
    ;;
straggler)
    gen --ranks 8 --colls 20 --straggler 6:5
    analyze_json "$D/t"; expect_rc 1
    check 'kinds == ["straggler"]' 'f0["rank"] == 6' '4.9 < f0["late_by_s"] < 5.1' 'f0["ranks"] == [6]'
    ;;
no-straggler)
    gen --ranks 8 --colls 20 --straggler 6:0.2
    analyze_json "$D/t"; expect_rc 0
    ;;
nccl-error)
    gen --ranks 8 --colls 20 --error 2:7:5
    analyze_json "$D/t"; expect_rc 1
    check 'f0["kind"] == "nccl_error"' 'f0["ranks"] == [2]' 'f0["seq"] == 7' 'f0["result"] == 5' \
        'kind("rank_exited")["consequence_of"] == 0'
    ;;
init-size)
    gen --ranks 8 --colls 20 --init-size 2
    analyze_json "$D/t"; expect_rc 1
    check 'f0["kind"] == "comm_init_mismatch"' 'f0["ranks"] == list(range(8))' \
        'sorted(c["count"] for c in f0["classes"]) == [8, 9]'
    ;;
never-join)
    gen --ranks 8 --colls 20 --never-join 2
    analyze_json "$D/t"; expect_rc 1
    check 'f0["kind"] == "comm_init_mismatch"' 'f0["missing"] == [2]'
    ;;
no-trace)
    gen --ranks 8 --colls 20 --no-trace 3
    analyze_json "$D/t"; expect_rc 1
    check 'kinds == ["trace_incomplete"]' 'f0["ranks"] == [3]' 'f0["reason"] == "no_trace"'
    ;;
half-written)
    gen --ranks 8 --colls 20 --half-written 3
    analyze_json "$D/t"; expect_rc 1
    check 'f0["kind"] == "rank_crashed"' 'f0["rank"] == 3' \
        'any(f["reason"] == "half_written" and f["ranks"] == [3] for f in F if f["kind"] == "trace_incomplete")'
    ;;
entering)
    # Traces read as ranks 0 and 2 enter AllReduce #5: their communicator counts it (the shim
    # counts a call just before it publishes the record); rank 0's record is not there yet,
    # rank 2's is being written (its slot busy). They entered it; no record was lost (no ring
    # wrapped) and no process died while writing, so no trace is incomplete.
    gen --ranks 4 --colls 5 --missing 1 --entering 0 --writing 2 --stall 0.03
    analyze_json "$D/t"; expect_rc 1
    check 'kinds == ["missing_ranks"]' 'f0["seq"] == 5' 'f0["missing"] == [1]' \
        'f0["waiting"] == [0, 2, 3]'
    run analyze "$D/t"; expect_rc 1
    contains "$D/out.txt" "waiting: ranks 0,2 entered #5 (their communicator counts it), the record was not yet written"
    run analyze --format html "$D/t"; expect_rc 1
    contains "$D/out.txt" '<g class="cell unrecorded focus" data-col="4"><title>ranks 0,2 · #5: issued, no record of it read'
    ;;
wrapped)
    gen --ranks 4 --colls 300 --ring 64
    analyze_json "$D/t"; expect_rc 0
    check 'all(x["wrapped"] for x in R)'
    run dump "$(first_trace 0)"; expect_rc 0
    contains "$D/out.txt" "WRAPPED"
    ;;
wrapped-missing)
    gen --ranks 4 --colls 300 --ring 64 --missing 1
    analyze_json "$D/t"; expect_rc 1
    check 'kinds == ["missing_ranks"]' 'f0["missing"] == [1]' 'f0["seq"] == 300'
    ;;
truncated-alone)
    gen --ranks 2 --colls 5
    f=$(first_trace 0)
    truncate -s 5000 "$f"
    analyze_json "$f"; expect_rc 2
    contains "$D/err" "$f"
    contains "$D/err" "truncated"
    ;;
truncated-ring)
    gen --ranks 4 --colls 20 --missing 3
    f=$(first_trace 1)
    ring_off=$(python3 -c 'import struct,sys; print(struct.unpack_from("<Q", open(sys.argv[1],"rb").read(), 96)[0])' "$f")
    truncate -s $((ring_off + 128 * 10 + 7)) "$f"
    analyze_json "$D/t"; expect_rc 1
    check 'any(f["kind"] == "trace_incomplete" and f["reason"] == "truncated" and f["ranks"] == [1] for f in F)' \
        '[x["truncated"] for x in R if x["rank"] == 1] == [True]'
    ;;
corrupt-alone)
    gen --ranks 2 --colls 5
    f=$(first_trace 0)
    poke "$f" 0 'XXXX'
    analyze_json "$f"; expect_rc 2
    contains "$D/err" "$f"
    contains "$D/err" "bad magic"
    run dump "$f"; expect_rc 2
    contains "$D/err" "bad magic"
    ;;
corrupt-among-good)
    gen --ranks 4 --colls 5
    f=$(first_trace 2)
    poke "$f" 40 '\377\377\377\377' # comm_cap
    analyze_json "$D/t"; expect_rc 1
    check 'any(f["kind"] == "trace_incomplete" and f["reason"] == "unreadable" for f in F)' \
        'len(R) == 3' 'len(r["unreadable"]) == 1'
    contains "$D/err" "$f"
    ;;
summary-tracegen)
    # tracegen --summary (no trace file) makes what summarize makes of the traces it would write:
    # the same bytes after made_ns, and the same report.
    gen --ranks 20 --colls 300 --p2p --split 3 --missing 5 --python
    run summarize --per-host "$D/s1" "$D/t"; expect_rc 0
    "$TRACEGEN" --out "$D/s2" --summary --ranks 20 --colls 300 --p2p --split 3 --missing 5 \
        --python >/dev/null || fail "tracegen --summary"
    [ "$(ls "$D/s2")" = "$(ls "$D/s1")" ] || fail "summaries $(ls "$D/s2"), want $(ls "$D/s1")"
    if ls "$D/s2" | grep -q '\.trace$'; then fail "tracegen --summary wrote traces"; fi
    for f in "$D"/s1/*.summary; do
        cmp <(tail -c +33 "$f") <(tail -c +33 "$D/s2/${f##*/}") || fail "${f##*/} differs"
    done
    "$LOCKSTEP" analyze --json "$D/s1" >"$D/a1.json" 2>/dev/null || true
    "$LOCKSTEP" analyze --json "$D/s2" >"$D/a2.json" 2>/dev/null || true
    sed "s#$D/s1/##g" "$D/a1.json" >"$D/a1n.json"; sed "s#$D/s2/##g" "$D/a2.json" >"$D/a2n.json"
    cmp "$D/a1n.json" "$D/a2n.json" || fail "tracegen --summary diagnosed otherwise"
    analyze_json "$D/s2"; expect_rc 1
    check '"missing_ranks" in kinds' '"p2p_unmatched" in kinds' 'len(R) == 20'
    ;;
summary-window)
    # A summary keeps the window the analysis reads (LOCKSTEP_ANALYZE_RECORDS); a narrower one
    # asked of it gives what the traces give with that window, a wider one what it holds.
    gen --ranks 8 --colls 400 --missing 2
    LOCKSTEP_ANALYZE_RECORDS=300 run summarize -o "$D/n.summary" "$D/t"; expect_rc 0
    for w in 50 300; do
        LOCKSTEP_ANALYZE_RECORDS=$w "$LOCKSTEP" analyze --json "$D/t" >"$D/a.json" 2>/dev/null || true
        LOCKSTEP_ANALYZE_RECORDS=$w "$LOCKSTEP" analyze --json "$D/n.summary" >"$D/b.json" 2>/dev/null || true
        sed -i "s#$D/t/##g" "$D/a.json"; sed -i "s#$D/n.summary/##g" "$D/b.json"
        cmp "$D/a.json" "$D/b.json" || fail "window $w: the summary diagnosed otherwise"
    done
    # A summary lying beside the traces it was made of adds no process.
    cp "$D/n.summary" "$D/t/"
    LOCKSTEP_ANALYZE_RECORDS=300 "$LOCKSTEP" analyze --json "$D/t" >"$D/d.json" 2>/dev/null || true
    sed -i "s#$D/t/##g" "$D/d.json"
    cmp "$D/a.json" "$D/d.json" || fail "a summary beside its traces changed the diagnosis"
    rm "$D/t/n.summary"
    "$LOCKSTEP" dump "$D/n.summary" >"$D/out.txt" || fail "dump of a summary"
    [ "$(grep -c '^trace ' "$D/out.txt")" = 8 ] || fail "dump shows $(grep -c '^trace ' "$D/out.txt") traces, want 8"
    contains "$D/out.txt" "300 kept"
    # Asked for more than it holds: what it holds, the same diagnosis as at 300.
    LOCKSTEP_ANALYZE_RECORDS=1000 "$LOCKSTEP" analyze --json "$D/n.summary" >"$D/c.json" || true
    sed -i "s#$D/n.summary/##g" "$D/c.json"
    cmp "$D/b.json" "$D/c.json" || fail "a wider window than the summary holds diagnosed otherwise"
    ;;
summary-damaged)
    # A damaged summary is refused whole, exit 2, naming the file and the problem; cut anywhere
    # or with any byte changed, never a crash.
    gen --ranks 8 --colls 20 --missing 2
    run summarize -o "$D/n.summary" "$D/t"; expect_rc 0
    size=$(stat -c %s "$D/n.summary")
    head -c 100 "$D/n.summary" >"$D/cut.summary"
    run analyze "$D/cut.summary"; expect_rc 2
    contains "$D/err" "$D/cut.summary: truncated"
    head -c $((size - 1)) "$D/n.summary" >"$D/cut.summary"
    run analyze "$D/cut.summary"; expect_rc 2
    contains "$D/err" "$D/cut.summary: truncated"
    printf 'LSSUMMRX' | cat - <(tail -c +9 "$D/n.summary") >"$D/bad.summary"
    run analyze "$D/bad.summary"; expect_rc 2
    contains "$D/err" "not a lockstep node summary"
    run dump "$D/bad.summary"; expect_rc 2
    # summarize refuses bad input with exit 2.
    run summarize; expect_rc 2
    run summarize -o "$D/x.summary" "$D/no-such-folder"; expect_rc 2
    contains "$D/err" "no-such-folder"
    run summarize -o "$D/x.summary" --per-host "$D/y" "$D/t"; expect_rc 2
    mkdir "$D/empty"
    run summarize -o "$D/x.summary" "$D/empty"; expect_rc 2
    contains "$D/err" "no trace files"
    for k in $(seq 0 97); do
        off=$(( (k * 7919) % size ))
        cp "$D/n.summary" "$D/x.summary"
        printf "\\$(printf %03o $(( (k * 37 + 1) % 256 )))" |
            dd of="$D/x.summary" bs=1 seek="$off" conv=notrunc status=none
        set +e
        "$LOCKSTEP" analyze --json "$D/x.summary" >/dev/null 2>"$D/err"
        rc=$?
        set -e
        [ "$rc" -le 2 ] || fail "byte $off changed: exit $rc (a crash?)"
        [ "$rc" != 2 ] || grep -qF "$D/x.summary" "$D/err" || fail "byte $off: message without the file"
    done
    ;;
corrupt-among-many)
    # 300 traces: loaded by two threads (analysis.c); what they found is kept in path order.
    gen --ranks 300 --colls 20 --missing 7
    for r in 3 150 151 299; do poke "$(first_trace $r)" 0 'JUNKJUNK'; done
    truncate -s 5000 "$(first_trace 200)"
    analyze_json "$D/t"; expect_rc 1
    check 'len(r["unreadable"]) == 5' 'r["unreadable"] == sorted(r["unreadable"])' \
        '[u.split(": ")[0].rsplit("-r", 1)[1] for u in r["unreadable"]] == ["3.trace", "150.trace", "151.trace", "200.trace", "299.trace"]' \
        'r["jobs"][0]["traces"] == 295' \
        'any(f["kind"] == "missing_ranks" and f["missing"] == [7] for f in F)'
    [ "$(grep -c '^lockstep: .*trace: ' "$D/err")" = 5 ] || fail "want 5 messages on stderr"
    grep -o 'r[0-9]*\.trace: ' "$D/err" | tr -d '\n' | grep -qx 'r3.trace: r150.trace: r151.trace: r200.trace: r299.trace: ' ||
        fail "stderr names the unreadable traces out of path order: $(cat "$D/err")"
    ;;
newer-version)
    gen --ranks 1 --colls 1
    f=$(first_trace 0)
    poke "$f" 8 '\002'
    analyze_json "$f"; expect_rc 2
    contains "$D/err" "written by a newer lockstep (format 2, this reader knows 1)"
    ;;
random-damage)
    gen --ranks 2 --colls 30
    f=$(first_trace 0)
    cp "$f" "$D/orig"
    for seed in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
        cp "$D/orig" "$f"
        python3 - "$f" "$seed" <<'PY'
import random, sys
path, seed = sys.argv[1], int(sys.argv[2])
rnd = random.Random(seed)
data = bytearray(open(path, "rb").read())
for _ in range(rnd.randint(1, 6)):
    at = rnd.randrange(1024) if rnd.random() < 0.5 else rnd.randrange(len(data))
    data[at] = rnd.randrange(256)
if rnd.random() < 0.3:
    data = data[: rnd.randrange(len(data))]
open(path, "wb").write(data)
PY
        run analyze "$f"
        [ "$rc" -le 2 ] || fail "seed $seed: exit status $rc (crash?)"
        run dump "$f"
        [ "$rc" -le 2 ] || fail "dump, seed $seed: exit status $rc (crash?)"
    done
    ;;
rank-classes)
    # The report's ranks are classes of ranks in equal state; only the ranks findings name
    # apart get an object of their own, unless --ranks all asks for every rank's.
    gen --ranks 64 --colls 20 --missing 5
    analyze_json "$D/t"; expect_rc 1
    check 'len(r["ranks"]) == 2' \
        'r["ranks"][0]["ranks"] == "0-4,6-63" and r["ranks"][0]["processes"] == 63' \
        'r["ranks"][0]["hosts"] == 8 and r["ranks"][0]["host"] is None' \
        'r["ranks"][0]["state"] == "in_call" and r["ranks"][0]["current"]["seq"] == 20' \
        'r["ranks"][1]["ranks"] == "5" and r["ranks"][1]["state"] == "idle"' \
        'r["ranks"][1]["host"] == "tg-node0" and r["ranks"][1]["last_call"]["seq"] == 19' \
        'len(r["ranks"][0]["since_s_ago"]) == 2' \
        '[d["rank"] for d in r["rank_detail"]] == [5] and r["rank_detail"][0]["pid"] == 4005' \
        '"rank_detail_left_out" not in r' 'len(R) == 64'
    cp "$D/out.json" "$D/out.json.named"
    analyze_json --ranks all "$D/t"; expect_rc 1
    check '[d["rank"] for d in r["rank_detail"]] == list(range(64))' \
        'r["ranks"] == json.load(open(here + ".named"))["ranks"]'
    # A crash names the dead rank, a mismatch the odd one: the crowd's ranks stay in classes.
    rm -rf "$D/t"; gen --ranks 16 --colls 20 --crash 9:11
    analyze_json "$D/t"; expect_rc 1
    check '[d["rank"] for d in r["rank_detail"]] == [9]' 'r["rank_detail"][0]["signal"] == 11'
    rm -rf "$D/t"; gen --ranks 16 --colls 20 --mismatch count:3
    analyze_json "$D/t"; expect_rc 1
    check 'kinds[0] == "count_mismatch"' '[d["rank"] for d in r["rank_detail"]] == [3]'
    run analyze --ranks every "$D/t"; expect_rc 2
    contains "$D/err" "--ranks wants 'named' or 'all', not 'every'"
    ;;
ranks-scale)
    # What the ranks take grows with their classes, not their number: 16 times the ranks, one
    # culprit, adds only the longer rank sets.
    gen --ranks 64 --colls 10 --missing 33 --summary
    analyze_json "$D/t"; expect_rc 1
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(len(json.dumps([r["ranks"], r["rank_detail"]])))' "$D/out.json" >"$D/out.json.small"
    rm -rf "$D/t"; gen --ranks 1024 --colls 10 --missing 33 --summary
    analyze_json "$D/t"; expect_rc 1
    check 'len(json.dumps([r["ranks"], r["rank_detail"]])) < int(open(here + ".small").read()) + 64' \
        'len(R) == 1024'
    ;;
multi-job)
    gen --ranks 4 --colls 5 --job alpha --missing 1
    gen --ranks 4 --colls 5 --job beta --seed 2 --pid-base 7000
    analyze_json "$D/t"; expect_rc 1
    check 'sorted(j["job"] for j in r["jobs"]) == ["alpha", "beta"]' 'len(R) == 8' \
        'kinds == ["missing_ranks"]' 'f0["job"] == "alpha"'
    analyze_json --job beta "$D/t"; expect_rc 0
    check 'F == []' 'len(R) == 4' 'all(x["job"] == "beta" for x in R)'
    analyze_json --job gamma "$D/t"; expect_rc 2
    contains "$D/err" "no job 'gamma'"
    ;;
anon-jobs)
    gen --ranks 3 --colls 5 --job "" --missing 2
    gen --ranks 3 --colls 5 --job "" --seed 9 --pid-base 7000
    analyze_json "$D/t"; expect_rc 1
    check 'len(r["jobs"]) == 2' 'kinds == ["missing_ranks"]' 'f0["missing"] == [2]'
    ;;
anon-never-join)
    # Without a job id, a rank that has not made its first NCCL call has a trace (made at the
    # call's entry) that names no communicator yet. It belongs to the job of its world size,
    # not to one of its own that would miss every other rank; another anonymous job of another
    # size in the folder keeps its own rank that has not joined.
    gen --ranks 8 --colls 20 --job "" --never-join 2
    gen --ranks 3 --colls 5 --job "" --seed 9 --pid-base 7000 --never-join 1
    analyze_json "$D/t"; expect_rc 1
    check 'sorted((j["world_size"], j["traces"]) for j in r["jobs"]) == [(3, 3), (8, 8)]' \
        'kinds == ["comm_init_mismatch", "comm_init_mismatch"]' \
        'sorted(f["missing"] for f in F) == [[1], [2]]' \
        'all(f["consequence_of"] is None for f in F)'
    # Two starts of one anonymous 4-rank job (a restart): the rank that has not joined goes
    # with its own start, the one that had started last when it started, whether that start is
    # the earlier (it hung there) or the later one.
    for hung in earlier later; do
        rm -rf "$D/t"
        a=() b=()
        [ $hung = earlier ] && a=(--never-join 2) || b=(--never-join 2)
        gen --ranks 4 --colls 10 --job "" --stall 120 "${a[@]}"
        gen --ranks 4 --colls 10 --job "" --seed 9 --pid-base 7000 --stall 5 "${b[@]}"
        analyze_json "$D/t"; expect_rc 1
        check 'len(r["jobs"]) == 2' 'all(j["traces"] == 4 for j in r["jobs"])' \
            'kinds == ["comm_init_mismatch"]' 'f0["missing"] == [2]' 'f0["waiting"] == [0, 1, 3]'
    done
    ;;
subdir)
    gen --ranks 2 --colls 3
    mkdir -p "$D/top/node1"
    mv "$D"/t/*.trace "$D/top/node1/"
    analyze_json "$D/top"; expect_rc 0
    check 'len(R) == 2'
    ;;
host-paths)
    # Hosts run their own copies of one program and script: the same places under different
    # paths. The text and the HTML report group the ranks by the place as shown, so the three
    # ranks inside the same call from the same line make one group, not one per host.
    for py in "" --python; do
        rm -rf "$D/t"
        gen --ranks 4 --ranks-per-host 2 --host-paths $py --missing 3
        analyze_text "$D/t"; expect_rc 1
        contains "$D/out.txt" "  in_call   0-2          in Broadcast #20"
        grep -q "^  in_call   2 " "$D/out.txt" && fail "text report: rank 2 grouped apart"
        run analyze --html "$D/r.html" "$D/t"; expect_rc 1
        contains "$D/r.html" '<tr><td>in_call</td><td class="mono">0-2</td>'
    done
    ;;
usage)
    run; expect_rc 2
    run analyze; expect_rc 2
    run analyze --bogus "$D"; expect_rc 2
    contains "$D/err" "--bogus"
    run analyze "$D/does-not-exist"; expect_rc 2
    contains "$D/err" "does-not-exist"
    mkdir -p "$D/empty"
    run analyze "$D/empty"; expect_rc 2
    contains "$D/err" "no trace files"
    run frobnicate; expect_rc 2
    run --help; expect_rc 0
    contains "$D/out.txt" "analyze"
    contains "$D/out.txt" "dump"
    run help analyze; expect_rc 0
    contains "$D/out.txt" "usage: lockstep analyze"
    run --version; expect_rc 0
    contains "$D/out.txt" "lockstep"
    run dump; expect_rc 2
    ;;
dump)
    gen --ranks 2 --colls 3 --missing 1
    run dump "$(first_trace 0)"; expect_rc 0
    contains "$D/out.txt" "IN FLIGHT"
    contains "$D/out.txt" "rank 0  local rank 0  world size 2"
    contains "$D/out.txt" "train_step+0x1a (train)"
    contains "$D/out.txt" "AllReduce"
    ;;
*)
    fail "no such case"
    ;;
esac
