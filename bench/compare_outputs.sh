#!/bin/bash
# compare_outputs.sh -- runs tracegen jobs through two lockstep binaries and diffs their reports.
#
# Usage: bench/compare_outputs.sh OLD_LOCKSTEP NEW_LOCKSTEP TRACEGEN [CASES_FILE]
# Each line of CASES_FILE (default: the list below) is a set of lockstep-tracegen arguments;
# for each, the text, JSON and HTML reports of `lockstep analyze` (and their exit statuses) of
# both binaries must be byte-identical. Exits 1 after naming every case that differs.
# JSON reports are compared rank by rank: a binary that knows `--ranks` (report format 2: ranks
# in classes) is asked for every rank's object (`--ranks all`), and its report is brought back
# to one object per rank (format 1's `ranks`) before the comparison, so format 2 is checked to
# say the same as format 1 in everything but the ranks' grouping; two binaries that both know
# `--ranks` are compared on their default JSON too ("classes").
set -u
OLD=$1 NEW=$2 TG=$3
W=$(mktemp -d /tmp/lockstep-compare-XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT
cases() {
    if [ -n "${1:-}" ]; then grep -v '^#' "$1"; return; fi
    cat <<'CASES'
--ranks 8 --colls 20
--ranks 8 --colls 20 --missing 4
--ranks 64 --colls 5 --missing 5
--ranks 8 --colls 20 --crash 4:11
--ranks 8 --colls 20 --missing 4 --terminated
--ranks 8 --colls 20 --crash 4:11 --terminated
--ranks 8 --colls 20 --vanish 4 --terminated
--ranks 4 --colls 20 --deadlock 2 --terminated
--ranks 8 --colls 20 --exit 4:0
--ranks 4 --colls 5 --exit 2:3:6
--ranks 8 --colls 20 --vanish 4
--ranks 8 --colls 20 --mismatch op:3:7
--ranks 8 --colls 20 --mismatch count:3
--ranks 8 --colls 20 --mismatch dtype:3:12
--ranks 8 --colls 20 --mismatch root:3:20
--ranks 4 --colls 10 --mismatch redop:3:10
--ranks 8 --colls 20 --p2p --p2p-skip-recv 5
--ranks 8 --colls 20 --p2p --p2p-size 5
--ranks 4 --colls 20 --deadlock 2
--ranks 8 --colls 20 --straggler 6:5
--ranks 8 --colls 20 --straggler 6:0.2
--ranks 8 --colls 20 --error 2:7:5
--ranks 8 --colls 20 --init-size 2
--ranks 8 --colls 20 --never-join 2
--ranks 8 --colls 20 --no-trace 3
--ranks 8 --colls 20 --half-written 3
--ranks 4 --colls 300 --ring 64
--ranks 4 --colls 300 --ring 64 --missing 1
--ranks 4 --ranks-per-host 2 --host-paths --missing 3
--ranks 4 --ranks-per-host 2 --host-paths --python --missing 3
--ranks 8 --colls 20 --grouped --missing 2
--ranks 8 --colls 20 --no-env-rank --missing 6
--ranks 8 --colls 20 --no-sites --mismatch count:2
--ranks 16 --colls 40 --p2p --split 4 --deadlock 3
--ranks 256 --colls 30 --p2p --split 8 --missing 5
--ranks 256 --colls 30 --p2p --split 8 --no-trace 7 --no-trace 100 --missing 9
--ranks 256 --colls 30 --p2p --split 8 --crash 17:9 --terminated
--ranks 512 --colls 200 --ring 1024 --p2p --split 8 --missing 5
--ranks 512 --colls 40 --straggler 300:2 --mismatch count:7
--ranks 1024 --colls 60 --ring 256 --split 16 --vanish 1000 --terminated
--ranks 300 --colls 20 --init-size 2
--ranks 300 --colls 20 --straggler 6:5
--ranks 64 --colls 10 --crash 3:9 --crash 5:9 --exit 7:1
--ranks 300 --colls 20 --never-join 7 --no-trace 9
--ranks 128 --colls 10 --split 4 --vanish 5 --exit 6:0:11
--ranks 64 --colls 300 --ring 64 --mismatch count:5:250
--ranks 64 --colls 300 --ring 64 --mismatch count:5:100
--ranks 32 --colls 50 --grouped --mismatch dtype:3:40
--ranks 16 --colls 30 --p2p --split 4 --mismatch root:2:10
--ranks 16 --colls 30 --split 4 --mismatch op:0:3 --mismatch count:9:2
--ranks 300 --colls 30 --ring 64 --mismatch redop:299:29 --straggler 7:3
--ranks 300 --colls 12 --crash 10:9:12 --crash 11:9:12 --crash 200:11:5 --vanish 250 --exit 40:1:6
--ranks 64 --colls 20 --p2p --split 4 --crash 5:9 --crash 6:9 --exit 9:0
CASES
}
# A format 2 report as format 1 wrote it: rank_detail (every rank, --ranks all) as `ranks`,
# the same for earlier attempts; the version as 1. Anything else is left as it is.
as_v1() {
    python3 -c '
import json, sys
text = open(sys.argv[1]).read()
body, _, status = text.rpartition("exit ")
try:
    r = json.loads(body)
except ValueError:
    sys.stdout.write(text)
    sys.exit(0)
if r.get("lockstep_report") == 2:
    r["lockstep_report"] = 1
    r["ranks"] = r.pop("rank_detail")
    for j in r.get("jobs", []):
        for e in j.get("earlier_attempts", []):
            e["ranks"] = e.pop("rank_detail")
sys.stdout.write(json.dumps(r, indent=1) + "\nexit " + status)
' "$1"
}
ranks_opt() { "$1" analyze --help 2>&1 | grep -q -- '--ranks' && echo --ranks all; }
# Two format 2 binaries are also compared on their default JSON as it is (the classes, and
# which ranks get their own object), which the rank by rank comparison leaves out.
modes="text json html"
[ -n "$(ranks_opt "$OLD")" ] && [ -n "$(ranks_opt "$NEW")" ] && modes="$modes classes"
bad=0 n=0
while read -r args; do
    [ -n "$args" ] || continue
    n=$((n + 1))
    d=$W/t$n
    # shellcheck disable=SC2086
    "$TG" --out "$d" $args >/dev/null 2>&1 || { echo "tracegen failed: $args"; bad=1; continue; }
    for mode in $modes; do
        for bin in OLD NEW; do
            exe=${!bin}
            case $mode in
            text) opt=() ;;
            json) read -ra opt <<<"--json $(ranks_opt "$exe")" ;;
            classes) opt=(--json) ;;
            html) opt=(--html -) ;;
            esac
            NO_COLOR=1 "$exe" analyze "${opt[@]}" "$d" >"$W/$bin.$mode" 2>"$W/$bin.$mode.err"
            echo "exit $?" >>"$W/$bin.$mode"
            if [ "$mode" = json ]; then
                as_v1 "$W/$bin.$mode" >"$W/$bin.$mode.v1" && mv "$W/$bin.$mode.v1" "$W/$bin.$mode"
            fi
        done
        if ! cmp -s "$W/OLD.$mode" "$W/NEW.$mode" || ! cmp -s "$W/OLD.$mode.err" "$W/NEW.$mode.err"; then
            echo "DIFFERS ($mode): $args"
            diff "$W/OLD.$mode" "$W/NEW.$mode" | head -5
            bad=1
        fi
    done
    rm -rf "$d"
done < <(cases "${4:-}")
echo "$n cases, ${modes// //}: $([ $bad = 0 ] && echo identical || echo DIFFERENT)"
exit $bad
