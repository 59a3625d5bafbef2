#!/bin/bash
# cli-case.sh -- one end-to-end test of how the lockstep CLI explains itself.
# Usage: cli-case.sh LOCKSTEP TRACEGEN CASE (SRC: the source root; LOCKSTEP_SHIM: the shim;
# MAN_DIR: the command man pages the build made)
set -eu
LOCKSTEP=$1
TRACEGEN=$2
CASE=$3
SRC=${SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
COMMANDS="run watch analyze stacks dump export summarize"
D=$(mktemp -d "${TMPDIR:-/tmp}/lockstep-clitest-XXXXXX")
trap 'rm -rf "$D"' EXIT
rc=0

fail() {
    echo "FAIL [$CASE]: $*" >&2
    [ -f "$D/err" ] && sed 's/^/  stderr: /' "$D/err" >&2
    exit 1
}
run() {
    set +e
    "$LOCKSTEP" "$@" >"$D/out" 2>"$D/err"
    rc=$?
    set -e
}
expect_rc() { [ "$rc" = "$1" ] || fail "lockstep exited $rc, want $1"; }
contains() { grep -qF -- "$2" "$1" || { sed 's/^/  | /' "$1" >&2; fail "$1 lacks '$2'"; }; }
lacks() { ! grep -qF -- "$2" "$1" || { sed 's/^/  | /' "$1" >&2; fail "$1 has '$2'"; }; }
empty() { [ ! -s "$1" ] || { sed 's/^/  | /' "$1" >&2; fail "$1 is not empty"; }; }
lines() { [ "$(wc -l <"$1")" -eq "$2" ] || { sed 's/^/  | /' "$1" >&2; fail "$1 is not $2 lines"; }; }
# The long options a text names (--name), sorted, one a line.
long_options() { grep -oE -- '--[a-z][a-z-]*' | sort -u; }
# The options of the OPTIONS section of a man page: the tag lines of its .TP entries, read
# from the roff source (no rendering, no justification).
man_options() {
    awk '/^\.SH OPTIONS/ { on = 1; next } /^\.SH/ { on = 0 } on && prev == ".TP" { print }
         { prev = $0 }' "$1" | sed 's/\\-/-/g' | long_options
}
same() { diff <(echo "$2") <(echo "$3") >"$D/diff" || { cat "$D/diff" >&2; fail "$1"; }; }
# doc_table_is LIST SECTION HEADER: the table under HEADER in SECTION of docs/analyzer.md has the
# rows of LIST (lines of tab-separated columns, as lockstep --list-settings prints them), in
# order: the first column in backticks, the others as they are
doc_table_is() {
    python3 - "$1" "$SRC/docs/analyzer.md" "$2" "$3" <<'PY'
import sys
rows = [tuple(l.split("\t")) for l in open(sys.argv[1]).read().splitlines()]
ncols = sys.argv[4].count(" | ") + 1
assert len(rows) >= 10 and all(len(r) == ncols for r in rows), f"{sys.argv[1]}: {rows}"
d = open(sys.argv[2]).read()
t = d[d.index(sys.argv[3] + "\n"):]
t = t[t.index(sys.argv[4]):].split("\n\n")[0].splitlines()[2:]
docs = [tuple(l[2:-2].split(" | ", ncols - 1)) for l in t]
docs = [(r[0].strip("`"),) + r[1:] for r in docs]
assert rows == docs, "\n".join(f"{a} <> {b}" for a, b in zip(rows + [None] * 9, docs + [None] * 9) if a != b)
PY
}
# The names of the format table (analyzer/report/output.c's formats[] rows), in its order, one a line.
formats_of_table() {
    sed -n '/^static const struct output_format formats\[\] = {/,/^};/p' "$SRC/analyzer/report/output.c" |
        grep -oE '^ *\{"[a-z0-9_]+"' | grep -oE '[a-z0-9_]+'
}
# The commands that write reports, and so take --format.
REPORT_COMMANDS="run watch analyze export"
# A program of two files named train.c (src/a, src/b) in a git tree under $D/repo: rank 0
# calls AllReduce from src/a/train.c:5, rank 1 Broadcast from src/b/train.c:9; traces in $1.
two_train_c() {
    mkdir -p "$D/repo/.git" "$D/repo/src/a" "$D/repo/src/b"
    cat >"$D/repo/src/main.c" <<'C'
#include "common.h"
void a_step(ncclComm_t comm, float *buf);
void b_step(ncclComm_t comm, float *buf);
int main(void)
{
    static float buf[16];
    ncclComm_t comm;
    tp_init_world(&comm);
    if (tp_rank() == 0)
        a_step(comm, buf);
    else
        b_step(comm, buf);
    return 0;
}
C
    printf '%s\n' '#include <nccl.h>' '' 'void a_step(ncclComm_t comm, float *buf)' '{' \
        '    ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, NULL);' '}' \
        >"$D/repo/src/a/train.c"
    printf '%s\n' '#include <nccl.h>' '' '/* the other train.c */' '' '' \
        'void b_step(ncclComm_t comm, float *buf)' '{' '    /* a Broadcast, not an AllReduce */' \
        '    ncclBroadcast(buf, buf, 16, ncclFloat32, 0, comm, NULL);' '}' >"$D/repo/src/b/train.c"
    # built from a build folder, as meson does: the debug info names ../src/a/train.c
    mkdir -p "$D/repo/build"
    (cd "$D/repo/build" && "$CC" -g -O0 -I"$SRC/tests/programs" -I"$NCCL_INC" -I"$CUDA_INC" \
        -o train ../src/main.c ../src/a/train.c ../src/b/train.c "$SRC/tests/programs/common.c" \
        -L"$EMULATOR_DIR" -l:libnccl.so.2 -lm -ldl) || fail "cannot build the two-train.c program"
    set +e
    LD_LIBRARY_PATH="$EMULATOR_DIR" "$LOCKSTEP" run --stall 1 --dir "$1" -- \
        "$LAUNCH_RANKS" --np 2 -- "$D/repo/build/train" >/dev/null 2>&1
    set -e
    ls "$1"/*.trace >/dev/null 2>&1 || fail "the two-train.c job left no traces"
}

case $CASE in
version)
    run --version; expect_rc 0
    ver=$(sed -n "s/^#define LS_FORMAT_VERSION *\([0-9]*\).*/\1/p" "$SRC/include/lockstep/trace_format.h")
    rep=$(sed -n "s/^#define REPORT_FORMAT_VERSION *\([0-9]*\).*/\1/p" "$SRC/analyzer/report/report.h")
    contains "$D/out" "trace format $ver"
    contains "$D/out" "JSON report format $rep"
    grep -qE '^lockstep [0-9]+\.[0-9]+\.[0-9]+ ' "$D/out" || fail "no version number"
    empty "$D/err"
    ;;
help)
    for h in --help -h help; do
        run $h; expect_rc 0; empty "$D/err"
        for c in $COMMANDS; do contains "$D/out" "  $c "; done
    done
    for c in $COMMANDS; do
        run help "$c"; expect_rc 0; empty "$D/err"
        contains "$D/out" "usage: lockstep $c "
        contains "$D/out" "exit status"
        cp "$D/out" "$D/help-$c"
        for h in --help -h; do
            run "$c" "$h"; expect_rc 0; empty "$D/err"
            cmp -s "$D/out" "$D/help-$c" || fail "'$c $h' differs from 'help $c'"
        done
    done
    run help nosuch; expect_rc 2; contains "$D/err" "no command 'nosuch'"
    run; expect_rc 2; contains "$D/err" "usage: lockstep COMMAND"
    ;;
usage-errors)
    for c in $COMMANDS; do
        run "$c" --no-such-option x; expect_rc 2; empty "$D/out"
        contains "$D/err" "lockstep $c: unknown option '--no-such-option'"
        contains "$D/err" "usage: lockstep $c "
        lines "$D/err" 3
        run "$c" -Z x; expect_rc 2
        contains "$D/err" "unknown option '-Z'"
    done
    # a missing argument: of an option, and the command's own
    for a in "run --stall" "run --dir" "watch --json" "analyze --job" "export --perfetto"; do
        run $a; expect_rc 2
        contains "$D/err" "option '--${a#* --}' needs a value"
        contains "$D/err" "usage: lockstep ${a%% *} "
    done
    for c in watch analyze stacks dump; do
        run "$c"; expect_rc 2; contains "$D/err" "usage: lockstep $c "; lines "$D/err" 3
    done
    run run --; expect_rc 2; contains "$D/err" "no command to run after '--'"
    run export "$D"; expect_rc 2; contains "$D/err" "--perfetto OUT.json"
    run dump a b; expect_rc 2; contains "$D/err" "one trace file at a time"
    run run --stall abc -- true; expect_rc 2; contains "$D/err" "--stall wants"
    run run --stall-short 0 -- true; expect_rc 2; contains "$D/err" "--stall-short wants"
    run run --stall-short 60 --stall-long 30 -- true; expect_rc 2
    contains "$D/err" "--stall-short 60 is longer than --stall-long 30"
    run watch --stall-long x "$D"; expect_rc 2; contains "$D/err" "--stall-long wants"
    run run --format xml -- true; expect_rc 2; contains "$D/err" "--format xml: no such format"
    run frobnicate; expect_rc 2; contains "$D/err" "'frobnicate' is not a command"
    ;;
value-not-an-option)
    # One rule for every command: the value an option needs is never '--' nor another option.
    LOCKSTEP=$(realpath "$LOCKSTEP") TRACEGEN=$(realpath "$TRACEGEN")
    cd "$D"
    for a in "run --json" "run --dir" "run --format" "watch --json" "run --stall"; do
        run ${a% *} ${a#* } -- true; expect_rc 2; empty "$D/out"
        contains "$D/err" "lockstep ${a%% *}: ${a#* } needs its "
        contains "$D/err" "not '--' (the end of the options)"
        [ ! -e "$D/--" ] || fail "'$a -- true' made a file named '--'"
    done
    run run --json --stall 5 -- true; expect_rc 2
    contains "$D/err" "--json needs its FILE, not '--stall' (an option"
    run analyze --job --json "$D"; expect_rc 2; contains "$D/err" "--job needs its ID, not '--json'"
    # a value that starts with '-' on purpose: --NAME=VALUE; '-' alone and numbers are values
    "$TRACEGEN" --out "$D/t" --ranks 2 --colls 2 --missing 1 >/dev/null
    run analyze --format=json=-x.json "$D/t"; expect_rc 1; [ -s "$D/-x.json" ] || fail "no -x.json"
    run analyze --format json=- "$D/t"; expect_rc 1; contains "$D/out" '"findings"'
    # analyze --json takes a FILE as run and watch do: the next word when it is '-' or *.json
    run analyze --json "$D/report.json" "$D/t"; expect_rc 1
    contains "$D/report.json" '"findings"'; lacks "$D/out" '"findings"'
    run analyze --json "$D/t"; expect_rc 1; contains "$D/out" '"findings"'
    run analyze --json - "$D/t"; expect_rc 1; contains "$D/out" '"findings"'
    run analyze --json="$D/eq.json" "$D/t"; expect_rc 1; contains "$D/eq.json" '"findings"'
    # a report's name where a trace path goes gets a hint
    run analyze "$D/t" "$D/nosuch.html"; expect_rc 2
    contains "$D/err" "nosuch.html: No such file or directory"
    contains "$D/err" "(did you mean --format html=$D/nosuch.html?)"
    run analyze "$D/t" "$D/nosuch"; expect_rc 2; lacks "$D/err" "did you mean"
    ;;
run-no-dashdash)
    run run ls; expect_rc 2
    contains "$D/err" "lockstep run: the command to run goes after '--': lockstep run [OPTIONS] -- ls"
    lines "$D/err" 1
    run run --stall 5 ls -l; expect_rc 2
    contains "$D/err" "goes after '--'"
    ;;
not-a-trace)
    printf 'hello\n' >"$D/x.trace"
    for c in analyze dump; do
        run "$c" "$D/x.trace"; expect_rc 2
        contains "$D/err" "$D/x.trace: not a lockstep trace"
        contains "$D/err" "LOCKSTEP"
        lacks "$D/err" "truncated"
    done
    # a file that starts as a trace does but is cut short is still "truncated"
    "$TRACEGEN" --out "$D/t" --ranks 2 --colls 2 >/dev/null
    head -c 100 "$(ls "$D"/t/*.trace | head -1)" >"$D/cut.trace"
    run dump "$D/cut.trace"; expect_rc 2
    contains "$D/err" "$D/cut.trace: truncated"
    # cut inside the ring: dump still prints every field, each line whole (every "(" closed),
    # and says once how much is missing
    f=$(ls "$D"/t/*.trace | head -1)
    head -c $(( $(stat -c %s "$f") - 512 )) "$f" >"$D/ring.trace"
    run dump "$D/ring.trace"; expect_rc 0
    contains "$D/out" "TRUNCATED: $(stat -c %s "$D/ring.trace") of $(stat -c %s "$f") bytes"
    contains "$D/out" "bytes (truncated)"
    awk '{ o = gsub(/\(/, "("); c = gsub(/\)/, ")"); if (o != c) { print NR": "$0; bad = 1 } }
         END { exit bad }' "$D/out" >"$D/unbalanced" ||
        { cat "$D/unbalanced" >&2; fail "dump of a truncated trace prints a broken line"; }
    printf 'LOCK' >"$D/short.trace"
    run analyze "$D/short.trace"; expect_rc 2
    contains "$D/err" "truncated"
    ;;
summarize-unreadable)
    # each trace that cannot be read is named once, as "lockstep: FILE: problem"; when none could
    # be read, one line says so, nothing is written and the exit status is 2
    once() { # once FILE: the name of FILE is on exactly one line of stderr, with the prefix
        [ "$(grep -cF -- "$1:" "$D/err")" = 1 ] || fail "$1 not named exactly once"
        grep -qF -- "lockstep: $1: " "$D/err" || fail "$1 named without 'lockstep: '"
    }
    "$TRACEGEN" --out "$D/t" --ranks 2 --colls 2 >/dev/null
    mkdir "$D/bad" "$D/mix"
    printf 'hello\n' >"$D/bad/junk.trace"
    head -c 100 "$(ls "$D"/t/*.trace | head -1)" >"$D/bad/cut.trace"
    head -c 5000 "$(ls "$D"/t/*.trace | head -1)" >"$D/bad/tables.trace"
    run summarize -o "$D/bad.summary" "$D/bad"; expect_rc 2
    for f in junk cut tables; do once "$D/bad/$f.trace"; done
    contains "$D/err" "lockstep: no trace could be read (3 unreadable): no summary written"
    lines "$D/err" 4
    empty "$D/out"
    [ ! -e "$D/bad.summary" ] || fail "a summary written of no readable trace"
    cp "$D"/t/*.trace "$D/bad/junk.trace" "$D/bad/cut.trace" "$D/mix/"
    run summarize -o "$D/mix.summary" "$D/mix"; expect_rc 0
    for f in junk cut; do once "$D/mix/$f.trace"; done
    contains "$D/err" "lockstep: summarized 2 traces (2 unreadable) into 1 summary"
    lines "$D/err" 3
    [ -s "$D/mix.summary" ] || fail "no summary of the readable traces"
    ;;
watch-no-dir)
    set +e
    timeout 10 "$LOCKSTEP" watch --stall 1 "$D/nosuch" >"$D/out" 2>"$D/err"
    rc=$?
    set -e
    expect_rc 2
    contains "$D/err" "$D/nosuch"
    contains "$D/err" "No such file or directory"
    touch "$D/file"
    run watch "$D/file"; expect_rc 2; contains "$D/err" "not a folder"
    ;;
json-unwritable)
    run run --json "$D/nosuch/r.json" -- touch "$D/started"; expect_rc 2
    contains "$D/err" "$D/nosuch/r.json"
    [ ! -e "$D/started" ] || fail "the job was started"
    mkdir "$D/w"
    run watch --json "$D/nosuch/r.json" "$D/w"; expect_rc 2
    contains "$D/err" "$D/nosuch/r.json"
    # a writable one that did not exist is not left behind by the check
    run run --json "$D/ok.json" -- sh -c "test ! -e '$D/ok.json'"; expect_rc 0
    ;;
json-no-nccl)
    run run --dir "$D/r" --json "$D/r.json" -- true; expect_rc 0
    [ -s "$D/r.json" ] || fail "no --json written for a job without NCCL"
    python3 - "$D/r.json" <<'PY' || fail "report not valid"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["lockstep_report"] == 2, r
for k in ("jobs", "findings", "ranks", "communicators", "unreadable"):
    assert r[k] == [], (k, r)
PY
    run run --dir "$D/r2" --json "$D/r2.json" -- sh -c 'exit 5'; expect_rc 5
    [ -s "$D/r2.json" ] || fail "no --json written for a failed job without NCCL"
    ;;
symbols)
    # call sites named from what each program keeps: file:line (function) with debug info,
    # function (module) with symbols only (never symbol+0xOFF when the function is known)
    cp "$SCENARIOS" "$D/scen_lines"
    "${OBJCOPY:-objcopy}" --strip-debug "$SCENARIOS" "$D/scen_syms"
    for prog in scen_lines scen_syms; do
        set +e
        LD_LIBRARY_PATH="$EMULATOR_DIR" LOCKSTEP_ADDR2LINE=1 "$LOCKSTEP" run --stall 1 \
            --dir "$D/t_$prog" -- "$LAUNCH_RANKS" --np 4 -- "$D/$prog" code_path >/dev/null 2>&1
        set -e
        LOCKSTEP_ADDR2LINE=1 run analyze "$D/t_$prog"; expect_rc 1
        cp "$D/out" "$D/$prog.txt"
        # The node summary of the traces names the call sites alike (the same report).
        run summarize -o "$D/$prog.summary" "$D/t_$prog"; expect_rc 0
        LOCKSTEP_ADDR2LINE=1 run analyze "$D/$prog.summary"; expect_rc 1
        same "$prog: the summary's report differs" "$(sed "s#$D/t_$prog/##g" "$D/$prog.txt")" \
            "$(sed "s#$D/$prog.summary/##g" "$D/out")"
    done
    contains "$D/scen_lines.txt" "from scenarios.c:"
    contains "$D/scen_lines.txt" "(eval_broadcast_config)"
    contains "$D/scen_syms.txt" "from train_step (scen_syms)"
    contains "$D/scen_syms.txt" "from eval_broadcast_config (scen_syms)"
    lacks "$D/scen_syms.txt" "+0x"
    # the knob that turns debug info off still does
    run analyze "$D/t_scen_lines"; expect_rc 1
    lacks "$D/out" "scenarios.c:"
    ;;
dump-pending)
    # a record is in flight when both its exit time and its result say so (ls_record_pending),
    # in dump as in every other reader: a returned call whose exit time was lost is not
    "$TRACEGEN" --out "$D/t" --ranks 2 --colls 4 >/dev/null
    f=$(ls "$D"/t/*.trace | head -1)
    ring_off=$(od -An -t u8 -j 96 -N 8 "$f" | tr -d ' ')
    run dump "$f"; expect_rc 0
    grep -E '^ +0 [A-Z]' "$D/out" | grep -q Success || fail "record 0 did not return Success: $(cat "$D/out")"
    lacks "$D/out" "IN FLIGHT"
    # record 0 (slot 0): exit_ns (at 64) zeroed, result (at 120) still Success
    dd if=/dev/zero of="$f" bs=1 seek=$((ring_off + 64)) count=8 conv=notrunc status=none
    run dump "$f"; expect_rc 0
    grep -E '^ +0 [A-Z]' "$D/out" >"$D/rec0" || fail "dump lost record 0"
    lacks "$D/rec0" "IN FLIGHT"
    contains "$D/rec0" "Success"
    ;;
kinds-documented)
    # every finding kind of the one list (analyzer/diagnose/finding_kinds.h) has its row in
    # docs/report-format.md's table of kinds, and the table names no kind the list lacks
    grep -oE '^ *X\([A-Z0-9_]+, "[a-z0-9_]+"' "$SRC/analyzer/diagnose/finding_kinds.h" |
        sed -E 's/.*"(.*)"/\1/' | sort -u >"$D/listed"
    [ "$(wc -l <"$D/listed")" -ge 10 ] || fail "read only $(wc -l <"$D/listed") kinds from finding_kinds.h"
    awk '/^\| kind \| extra keys \|/ { t = 1; next } t && !/^\|/ { t = 0 } t' \
        "$SRC/docs/report-format.md" | grep -oE '^\| [^|]*' | grep -oE '`[a-z0-9_]+`' |
        tr -d '`' | sort -u >"$D/documented"
    missing=$(comm -23 "$D/listed" "$D/documented")
    extra=$(comm -13 "$D/listed" "$D/documented")
    [ -z "$missing" ] || fail "docs/report-format.md has no row for: $missing"
    [ -z "$extra" ] || fail "docs/report-format.md names kinds finding_kinds.h lacks: $extra"
    ;;
kinds-listed)
    # every finding kind of the one list (analyzer/diagnose/finding_kinds.h) has its line in the prose
    # lists docs/analyzer.md keeps: "Diagnosis rules in short" names each kind, and the order
    # of root causes names them all in their priority's order (the table of docs/report-format.md
    # is kinds-documented's)
    sed -nE 's/^ *X\(([A-Z0-9_]+), "([a-z0-9_]+)", [A-Z_]+, ([0-9]+),.*/\3 \2/p' \
        "$SRC/analyzer/diagnose/finding_kinds.h" | sort -n | cut -d' ' -f2 >"$D/by_priority"
    [ "$(wc -l <"$D/by_priority")" -ge 10 ] ||
        fail "read only $(wc -l <"$D/by_priority") kinds from finding_kinds.h"
    awk '/^## Diagnosis rules in short/ { on = 1; next } /^## / { on = 0 } on' \
        "$SRC/docs/analyzer.md" >"$D/rules"
    [ -s "$D/rules" ] || fail "docs/analyzer.md has no section 'Diagnosis rules in short'"
    unlisted=$(while read -r k; do grep -qF "\`$k\`" "$D/rules" || echo "$k"; done <"$D/by_priority")
    [ -z "$unlisted" ] || fail "docs/analyzer.md's diagnosis rules name no:" $unlisted
    # the paragraph of the order: from "ordered by the priority" to "checks this order"
    tr '\n' ' ' <"$SRC/docs/analyzer.md" | grep -oE 'ordered by the priority of their [^:]*:' |
        grep -oE '`[a-z0-9_]+`' | tr -d '`' >"$D/order"
    [ -s "$D/order" ] || fail "docs/analyzer.md does not list the kinds in the order of root causes"
    same "docs/analyzer.md's order of root causes is not finding_kinds.h's priorities" \
        "$(cat "$D/by_priority")" "$(cat "$D/order")"
    ;;
html-stdout)
    # `--html -`: the page alone on stdout (no text report before it); a file: both
    "$TRACEGEN" --out "$D/t" --ranks 2 --colls 2 >/dev/null
    run analyze --html - "$D/t"; expect_rc 0
    head -c 15 "$D/out" | grep -qF '<!DOCTYPE html>' || fail "stdout does not start with the page"
    lacks "$D/out" "lockstep: job"
    run analyze --html "$D/r.html" "$D/t"; expect_rc 0
    contains "$D/out" "lockstep: job"
    contains "$D/r.html" "<!DOCTYPE html>"
    ;;
slurm-job)
    "$TRACEGEN" --out "$D/t" --ranks 2 --colls 2 --job 4 >/dev/null
    run analyze "$D/t"; expect_rc 0
    contains "$D/out" "lockstep: job 4,"
    # the same traces as if the job id came from SLURM_JOB_ID (the header's job_source, at 288)
    for f in "$D"/t/*.trace; do
        printf 'SLURM_JOB_ID\0' | dd of="$f" bs=1 seek=288 conv=notrunc status=none
    done
    run dump "$(ls "$D"/t/*.trace | head -1)"; expect_rc 0
    contains "$D/out" "(from SLURM_JOB_ID)"
    run analyze "$D/t"; expect_rc 0
    contains "$D/out" "lockstep: Slurm job 4,"
    run analyze --json "$D/t"; expect_rc 0
    contains "$D/out" '"job": "4"'
    for f in "$D"/t/*.trace; do
        printf 'TORCHELASTIC_RUN_ID\0' | dd of="$f" bs=1 seek=288 conv=notrunc status=none
    done
    run analyze "$D/t"; expect_rc 0
    contains "$D/out" "lockstep: torchrun run 4,"
    ;;
completion)
    # the completion asks the lockstep it completes for each command's options
    PATH="$(cd "$(dirname "$LOCKSTEP")" && pwd):$PATH"
    bash -n "$SRC/completion/lockstep.bash" || fail "bash -n"
    comp() { # comp WORD... : what completing the last word offers
        bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _lockstep
                 printf "%s\n" "${COMPREPLY[@]}"' _ "$SRC/completion/lockstep.bash" "$@" | sort
    }
    got=$(comp lockstep "" | grep -v '^-' | tr '\n' ' ')
    same "commands" "$(echo $COMMANDS help | tr ' ' '\n' | sort | tr '\n' ' ')" "$got"
    same "run r" "run" "$(comp lockstep r)"
    for c in $COMMANDS; do
        "$LOCKSTEP" help "$c" >"$D/h"
        same "options of $c" "$(long_options <"$D/h")" "$(comp lockstep "$c" -- | grep -v '^--$')"
    done
    # the formats come from the lockstep being completed (its help prints output.c's table)
    comp lockstep run --format "" >"$D/fmts"
    same "--format" "$(formats_of_table | sort)" "$(cat "$D/fmts")"
    mkdir -p "$D/cwd/somedir" && touch "$D/cwd/somefile.trace"
    cd "$D/cwd"
    same "analyze PATH" "$(printf 'somedir\nsomefile.trace')" "$(comp lockstep analyze so)"
    same "watch DIR" "somedir" "$(comp lockstep watch so)"
    same "--dir" "somedir" "$(comp lockstep run --dir so)"
    same "-o" "$(printf 'somedir\nsomefile.trace')" "$(comp lockstep summarize -o so)"
    same "--ranks" "$(printf 'all\nnamed')" "$(comp lockstep analyze --ranks "")"
    same "--stall" "" "$(comp lockstep run --stall so)"
    ;;
man-render)
    version=$("$LOCKSTEP" --version | awk '{ print $2 }')
    for c in "" $COMMANDS; do
        m="$MAN_DIR/lockstep-$c.1"
        [ -n "$c" ] || m="$MAN_DIR/lockstep.1"
        [ -f "$m" ] || fail "no man page $m"
        grep -q "^\.TH .*\"lockstep $version\"" "$m" || fail "$m: .TH does not say lockstep $version"
        groff -man -Tutf8 -ww -z "$m" 2>"$D/err" || fail "groff $m"
        empty "$D/err"
        groff -man -Tascii -P-cbou "$m" >"$D/out" 2>/dev/null
        contains "$D/out" "NAME"
        contains "$D/out" "EXIT STATUS"
        [ -z "$c" ] || contains "$D/out" "lockstep $c"
    done
    # the command list of lockstep(1) is that of --help
    "$LOCKSTEP" --help | awk '/^commands:/ { on = 1; next } on && /^  / { print $1 }' | sort >"$D/a"
    groff -man -Tascii -P-cbou "$MAN_DIR/lockstep.1" |
        awk '/^COMMANDS/ { on = 1; next } /^[A-Z]/ { on = 0 } on && /^       [a-z]/ { print $1 }' |
        grep -v '^help$' | sort >"$D/b"
    diff "$D/a" "$D/b" || fail "lockstep(1) lists other commands than --help"
    ;;
man-options)
    # each command's options, from its one table: the rows of --help, the man page's OPTIONS
    # and SYNOPSIS, the completion's list
    for c in $COMMANDS; do
        "$LOCKSTEP" help "$c" >"$D/h"
        m="$MAN_DIR/lockstep-$c.1"
        rows=$(grep -oE -- '^  (-[a-zA-Z], )?--[a-z][a-z-]*' "$D/h" | grep -oE -- '--[a-z-]+' | sort -u)
        [ "$(echo "$rows" | wc -l)" -ge 1 ] || fail "no option rows in 'help $c'"
        same "options of $c: --help's rows (<) against its text (>)" "$rows" "$(long_options <"$D/h")"
        same "options of $c: --help (<) against lockstep-$c(1) (>)" "$rows" "$(man_options "$m")"
        same "options of $c: --help (<) against --list-options (>)" "$rows" \
            "$("$LOCKSTEP" --list-options "$c" | awk '$1 ~ /^--/ { print $1 }' | sort -u)"
        # the SYNOPSIS is the usage line
        usage=$(sed -n "s/^usage: lockstep $c //p" "$D/h")
        syn=$(awk '/^\.SH SYNOPSIS/ { on = 1; next } /^\.SH/ { on = 0 } on && !/^\.ad/' "$m" |
            sed -e 's/\\f[BIR]//g' -e 's/\\-/-/g' -e 's/^\.B //' | paste -sd' ')
        same "lockstep-$c(1) SYNOPSIS (<) against the usage (>)" "$syn" "lockstep $c $usage"
    done
    ;;
help-defaults)
    # a default the help and the man pages say is the one the settings table holds, printed from
    # it (COMMAND_HELP_DEFAULT): no mark is left unprinted, and each "default N" said beside a
    # setting's name is that setting's default as --list-settings gives it
    "$LOCKSTEP" --list-settings >"$D/settings"
    default_of() { awk -F'\t' -v n="$1" '$1 == n { print $2 }' "$D/settings"; }
    grace=$(default_of LOCKSTEP_STOP_GRACE)
    [ -n "$grace" ] || fail "--list-settings has no LOCKSTEP_STOP_GRACE"
    for c in $COMMANDS; do
        "$LOCKSTEP" help "$c" >"$D/h"
        cat "$D/h" "$MAN_DIR/lockstep-$c.1" >"$D/both"
        ! grep -nE '@(DEFAULT:[A-Z_]*|FORMATS|THRESHOLDS)@?' "$D/both" ||
            fail "help or man page of $c has a mark left unprinted"
    done
    "$LOCKSTEP" help run | paste -sd' ' | tr -s ' ' >"$D/run"
    grep -qF "before SIGKILL (default $grace)" "$D/run" ||
        fail "run --help: --grace's default is not LOCKSTEP_STOP_GRACE's ($grace)"
    grep -qF "default $(default_of LOCKSTEP_RETAIN_HOURS), 0 keeps them" "$D/run" ||
        fail "run --help: not LOCKSTEP_RETAIN_HOURS's default ($(default_of LOCKSTEP_RETAIN_HOURS))"
    grep -qF "default $(default_of LOCKSTEP_RUNS_DIR))" "$D/run" ||
        fail "run --help: not LOCKSTEP_RUNS_DIR's default ($(default_of LOCKSTEP_RUNS_DIR))"
    "$LOCKSTEP" help watch | paste -sd' ' | tr -s ' ' | grep -qF "(default $grace, or LOCKSTEP_STOP_GRACE)" ||
        fail "watch --help: --grace's default is not LOCKSTEP_STOP_GRACE's ($grace)"
    "$LOCKSTEP" help summarize | paste -sd' ' | tr -s ' ' |
        grep -qF "are kept (default $(default_of LOCKSTEP_ANALYZE_RECORDS))" ||
        fail "summarize --help: not LOCKSTEP_ANALYZE_RECORDS's default"
    ;;
formats-listed)
    # one table of formats (analyzer/report/output.c); the help of each command that writes reports,
    # lockstep(1)'s FORMATS (made from the table), docs/analyzer.md's table of formats and the
    # completion list the same names (a format added to the table and missing from the docs'
    # table fails here)
    formats_of_table >"$D/table"
    [ "$(wc -l <"$D/table")" -ge 5 ] || fail "read only $(wc -l <"$D/table") formats from output.c"
    for c in $REPORT_COMMANDS; do
        "$LOCKSTEP" help "$c" >"$D/h"
        contains "$D/h" "--format NAME[=FILE]"
        same "formats in 'help $c' (<) against output.c (>)" \
            "$(sed -n 's/^ *formats: //p' "$D/h" | tr -d ' ' | tr ',' '\n')" "$(cat "$D/table")"
    done
    for c in stacks dump summarize; do
        "$LOCKSTEP" help "$c" >"$D/h"
        lacks "$D/h" "--format"
    done
    awk '/^\.SH FORMATS/ { on = 1; next } /^\.SH/ { on = 0 } on && prev == ".TP" { print $2 }
         { prev = $0 }' "$MAN_DIR/lockstep.1" >"$D/man"
    same "lockstep(1) FORMATS (<) against output.c (>)" "$(cat "$D/man")" "$(cat "$D/table")"
    awk '/^\| format \| file \|/ { t = 1; next } t && !/^\|/ { t = 0 } t' "$SRC/docs/analyzer.md" |
        grep -oE '^\| `[a-z0-9_]+`' | grep -oE '[a-z0-9_]+' >"$D/doc"
    same "docs/analyzer.md's table of formats (<) against output.c (>)" "$(cat "$D/doc")" \
        "$(cat "$D/table")"
    ;;
format-unknown)
    # an unknown name: exit 2, nothing started, and the message lists the table's names
    names=$(formats_of_table | paste -sd, | sed 's/,/, /g')
    "$TRACEGEN" --out "$D/t" --ranks 2 --colls 2 >/dev/null
    for a in "analyze --format xml $D/t" "export --format xml $D/t" "run --format xml -- touch $D/started" \
        "run --format xml=$D/r.xml -- touch $D/started" "watch --format xml $D/t"; do
        run $a; expect_rc 2; empty "$D/out"
        contains "$D/err" "lockstep: --format xml"
        contains "$D/err" "no such format (the formats are $names)"
    done
    [ ! -e "$D/started" ] || fail "the job was started"
    # two formats for stdout, or two for one file, are refused, saying which
    run analyze --format json --format html "$D/t"; expect_rc 2; empty "$D/out"
    contains "$D/err" "lockstep: --format html: stdout already gets json"
    run analyze --json --html - "$D/t"; expect_rc 2
    contains "$D/err" "stdout already gets json"
    run analyze --format json="$D/x" --format html="$D/x" "$D/t"; expect_rc 2
    contains "$D/err" "json already goes to $D/x"
    run analyze --format json= "$D/t"; expect_rc 2; contains "$D/err" "the file name is empty"
    # run/watch: stdout has the text report; another format there needs a file
    run run --format json -- touch "$D/started"; expect_rc 2
    contains "$D/err" "give json a file: --format json=FILE"
    [ ! -e "$D/started" ] || fail "the job was started"
    ;;
format-repeat)
    # --format NAME[=FILE] repeatable: text on stdout, JSON and HTML to files in one run, each
    # byte for byte what the old spellings write
    "$TRACEGEN" --out "$D/t" --ranks 4 --colls 3 --mismatch op:2 >/dev/null
    "$LOCKSTEP" analyze "$D/t" >"$D/alias.txt" || true
    "$LOCKSTEP" analyze --json "$D/t" >"$D/alias.json" || true
    "$LOCKSTEP" analyze --html "$D/alias.html" "$D/t" >/dev/null || true
    run analyze --format text --format json="$D/f.json" --format html="$D/f.html" "$D/t"
    expect_rc 1
    cmp "$D/out" "$D/alias.txt" || fail "text on stdout differs from 'analyze'"
    cmp "$D/f.json" "$D/alias.json" || fail "json=FILE differs from 'analyze --json'"
    cmp "$D/f.html" "$D/alias.html" || fail "html=FILE differs from 'analyze --html FILE'"
    # no format for stdout: the text report still goes there; '-' is stdout
    run analyze --format json="$D/g.json" "$D/t"
    cmp "$D/out" "$D/alias.txt" || fail "text on stdout missing beside a file"
    run analyze --format json=- "$D/t"
    cmp "$D/out" "$D/alias.json" || fail "json=- differs from --json"
    # export: --format perfetto=FILE is --perfetto FILE; two formats in one export
    run export --perfetto "$D/a.perfetto" "$D/t"; expect_rc 0
    run export --format perfetto="$D/b.perfetto" --format json="$D/b.json" "$D/t"; expect_rc 0
    cmp "$D/a.perfetto" "$D/b.perfetto" || fail "export --format perfetto=FILE differs"
    python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$D/b.json" || fail "export json"
    ;;
format-live-files)
    # run/watch --format NAME=FILE: checked before the job starts, written even when the job
    # made no NCCL call; --json FILE is the same as --format json=FILE
    run run --format json="$D/nosuch/r.json" -- touch "$D/started"; expect_rc 2
    contains "$D/err" "$D/nosuch/r.json"
    [ ! -e "$D/started" ] || fail "the job was started"
    mkdir "$D/w"
    run watch --format html="$D/nosuch/r.html" "$D/w"; expect_rc 2
    contains "$D/err" "$D/nosuch/r.html"
    run run --dir "$D/r" --format json="$D/f.json" --format html="$D/f.html" \
        --format gitlab="$D/f.gitlab" -- true; expect_rc 0
    run run --dir "$D/r2" --json "$D/alias.json" -- true; expect_rc 0
    [ -s "$D/f.json" ] || fail "no json=FILE written for a job without NCCL"
    cmp "$D/f.json" "$D/alias.json" || fail "--format json=FILE differs from --json FILE"
    contains "$D/f.html" "<!DOCTYPE html>"
    python3 -c 'import json, sys; assert json.load(open(sys.argv[1])) == []' "$D/f.gitlab" ||
        fail "the gitlab report of a job without findings is not []"
    # a stalled job: the JSON file gets its "stall" and "stopped" members, the text on stdout
    # is there alongside the github annotations
    set +e
    LD_LIBRARY_PATH="$EMULATOR_DIR" "$LOCKSTEP" run --stall 1 --dir "$D/s" \
        --format json="$D/s.json" --format github -- "$LAUNCH_RANKS" --np 2 -- "$SCENARIOS" \
        code_path >"$D/out" 2>"$D/err"
    rc=$?
    set -e
    expect_rc 3
    contains "$D/out" "lockstep: job"
    contains "$D/out" "::error "
    python3 - "$D/s.json" <<'PY' || fail "the stalled run's json=FILE lacks its members"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["findings"], r
assert "stall" in r and "stopped" in r, sorted(r)
PY
    ;;
format-github-paths)
    export LOCKSTEP_ADDR2LINE=1 # call sites from debug info
    # two files named train.c: each annotation names its own, relative to the repository
    two_train_c "$D/t"
    GITHUB_WORKSPACE="$D/repo" run analyze --format github "$D/t"; expect_rc 1
    contains "$D/out" "::error file=src/a/train.c,line=5,"
    contains "$D/out" "::error file=src/b/train.c,line=9,"
    lacks "$D/out" "file=train.c"
    cp "$D/out" "$D/ws.txt"
    # without GITHUB_WORKSPACE: the folder holding .git at or above the current one
    exe=$(readlink -f "$LOCKSTEP")
    (cd "$D/repo/src/b" && env -u GITHUB_WORKSPACE "$exe" analyze --format github "$D/t") \
        >"$D/out" 2>"$D/err" || true
    cmp "$D/out" "$D/ws.txt" || fail "from inside the tree the annotations differ"
    # a file outside the repository keeps its full path
    GITHUB_WORKSPACE="$D/repo/src/a" run analyze --format github "$D/t"; expect_rc 1
    contains "$D/out" "::error file=train.c,line=5,"
    contains "$D/out" "::error file=$D/repo/src/b/train.c,line=9,"
    ;;
format-gitlab)
    export LOCKSTEP_ADDR2LINE=1
    # GitLab Code Quality: a JSON array of issues with the fields GitLab reads; fingerprints
    # unique, and the same for a second run of the same job
    two_train_c "$D/t1"
    two_train_c "$D/t2"
    for i in 1 2; do
        GITHUB_WORKSPACE="$D/repo" run analyze --format gitlab="$D/cq$i.json" "$D/t$i"; expect_rc 1
    done
    python3 - "$D/cq1.json" "$D/cq2.json" <<'PY' || fail "Code Quality report"
import json, sys
runs = [json.load(open(p)) for p in sys.argv[1:]]
for issues in runs:
    assert isinstance(issues, list) and issues, issues
    for i in issues:
        assert isinstance(i["description"], str) and i["description"], i
        assert isinstance(i["check_name"], str) and i["check_name"], i
        assert i["severity"] in ("info", "minor", "major", "critical", "blocker"), i
        assert isinstance(i["location"]["path"], str), i
        assert isinstance(i["location"]["lines"]["begin"], int), i
    fps = [i["fingerprint"] for i in issues]
    assert len(set(fps)) == len(fps), fps
paths = {(i["location"]["path"], i["location"]["lines"]["begin"]) for i in runs[0]}
assert ("src/a/train.c", 5) in paths and ("src/b/train.c", 9) in paths, paths
assert [i["fingerprint"] for i in runs[0]] == [i["fingerprint"] for i in runs[1]], runs
PY
    ;;
format-once-per-place)
    # ranks whose stacks differ but end at one line (every rank of shape_mismatch calls from
    # the same line): one annotation there per finding, in github and in gitlab alike
    export LOCKSTEP_ADDR2LINE=1 # call sites from debug info
    set +e
    LD_LIBRARY_PATH="$EMULATOR_DIR" "$LOCKSTEP" run --stall 1 --dir "$D/s" \
        --format github="$D/gh.txt" --format gitlab="$D/gl.json" -- "$LAUNCH_RANKS" --np 4 -- \
        "$SCENARIOS" shape_mismatch >"$D/out" 2>"$D/err"
    rc=$?
    set -e
    expect_rc 3
    contains "$D/gh.txt" "::error file="
    [ -z "$(sort "$D/gh.txt" | uniq -d)" ] ||
        fail "the same github annotation twice: $(sort "$D/gh.txt" | uniq -d)"
    python3 - "$D/gl.json" <<'PY' || fail "the gitlab report shows a finding twice at one place"
import json, sys
issues = json.load(open(sys.argv[1]))
assert issues, issues
places = [(i["check_name"], i["description"], i["location"]["path"],
           i["location"]["lines"]["begin"]) for i in issues]
assert len(set(places)) == len(places), places
PY
    ;;
stacks-json-file)
    # stacks --json takes a FILE as analyze's --json does: --json FILE, --json - and --json
    # alone (stdout; a folder after it stays an operand); a FILE that cannot be written: exit 2
    mkdir -m 700 "$D/t"
    # a session of its own: the launcher stops its ranks by their process group, not this one
    LD_LIBRARY_PATH="$EMULATOR_DIR" LD_PRELOAD="$LOCKSTEP_SHIM" LOCKSTEP_DIR="$D/t" \
        SCENARIO_DELAY_MS=30000 setsid "$LAUNCH_RANKS" --np 2 -- "$SCENARIOS" prepare_data \
        >/dev/null 2>&1 &
    job=$!
    trap 'kill $job 2>/dev/null; wait $job 2>/dev/null || true; rm -rf "$D"' EXIT
    for _ in $(seq 200); do
        [ "$(ls "$D/t" | grep -c '\.trace$')" -ge 2 ] && break
        sleep 0.05
    done
    run stacks --json "$D/s.json" "$D/t"; expect_rc 0
    empty "$D/out"
    python3 -c 'import json, sys; assert len(json.load(open(sys.argv[1]))["ranks"]) == 2' \
        "$D/s.json" || fail "stacks --json FILE: not the JSON of 2 ranks"
    for a in "--json -" "--json"; do
        run stacks $a "$D/t"; expect_rc 0
        python3 -c 'import json, sys; assert len(json.load(open(sys.argv[1]))["ranks"]) == 2' \
            "$D/out" || fail "stacks $a: not the JSON of 2 ranks on stdout"
    done
    run stacks --json "$D/nosuch/s.json" "$D/t"; expect_rc 2
    contains "$D/err" "cannot write --json $D/nosuch/s.json"
    ;;
settings-documented)
    # the one table of the analyzer's settings (analyzer/base/settings.h, SETTINGS, as
    # `lockstep --list-settings` prints it, with the defaults its readers get) and
    # docs/analyzer.md's table of settings: the same variables, in order, with the same
    # defaults and meanings
    "$LOCKSTEP" --list-settings >"$D/settings" || fail "--list-settings"
    doc_table_is "$D/settings" "## Settings" "| variable | default | meaning |" || fail "settings"
    # and every LOCKSTEP_* variable the analyzer names is read through settings.c (the shim's
    # knobs too, which it foresees from the shim's own rows: lockstep/knobs.h)
    grep -n 'getenv' "$SRC"/analyzer/*.c "$SRC"/analyzer/*/*.c | grep -v '^[^:]*/settings\.c:' | grep 'LOCKSTEP_' &&
        fail "a LOCKSTEP_* variable read outside settings.c"
    ;;
setting-bad-value)
    # a value a setting cannot take: exit 2 (bad usage) before anything runs, one line naming
    # the variable and the value
    "$TRACEGEN" --out "$D/t" --ranks 2 --colls 2 >/dev/null
    for nv in LOCKSTEP_ANALYZE_RECORDS=lots LOCKSTEP_ANALYZE_RECORDS=-5 LOCKSTEP_STOP_GRACE=soon \
        LOCKSTEP_STOP_GRACE=3601 LOCKSTEP_RETAIN_HOURS=99999999999999999999999 \
        LOCKSTEP_GATHER_WAIT=0 LOCKSTEP_ADDR2LINE=maybe LOCKSTEP_PRELOAD=2; do
        for c in "analyze $D/t" "summarize -o $D/s.summary $D/t" "run -- touch $D/started"; do
            set +e
            env "$nv" "$LOCKSTEP" $c >"$D/out" 2>"$D/err"
            rc=$?
            set -e
            expect_rc 2; empty "$D/out"; lines "$D/err" 1
            contains "$D/err" "lockstep: ${nv%%=*}='${nv#*=}' refused: it takes "
        done
    done
    [ ! -e "$D/started" ] || fail "the job was started"
    [ ! -e "$D/s.summary" ] || fail "a summary was written"
    # the values they take
    for nv in LOCKSTEP_ANALYZE_RECORDS=all LOCKSTEP_ANALYZE_RECORDS=300 LOCKSTEP_STOP_GRACE=0.5 \
        LOCKSTEP_RETAIN_HOURS=0 LOCKSTEP_GATHER_WAIT=2 LOCKSTEP_ADDR2LINE=off LOCKSTEP_PRELOAD=1; do
        set +e
        env "$nv" "$LOCKSTEP" analyze "$D/t" >"$D/out" 2>"$D/err"
        rc=$?
        set -e
        expect_rc 0; empty "$D/err"
    done
    ;;
thresholds-documented)
    # the one table of thresholds (analyzer/base/analysis_opts.h, as `lockstep
    # --list-thresholds` prints it) and docs/analyzer.md's table: the same names, in order, with
    # the same defaults, units and meanings; and help lists each with its default
    "$LOCKSTEP" --list-thresholds >"$D/thr" || fail "--list-thresholds"
    doc_table_is "$D/thr" "## Thresholds" "| threshold | default | unit | meaning |" ||
        fail "thresholds"
    for c in analyze run watch; do
        "$LOCKSTEP" help "$c" >"$D/h"
        while IFS="$(printf '\t')" read -r name def unit meaning; do
            grep -qE "^ +$name=$def +" "$D/h" || fail "'help $c' does not list $name=$def"
        done <"$D/thr"
    done
    ;;
threshold)
    # --threshold reaches the diagnosis: a rank 3 s late at every collective is a straggler by
    # default (straggler-min 1 s), not at straggler-min=5; a rank gone 30 s before the others'
    # last heartbeat is dead by default (silent 1 s), alive and missing at silent=86400 (a
    # threshold of the model)
    kinds() { python3 -c 'import json, sys
print("\n".join(f["kind"] for f in json.load(open(sys.argv[1]))["findings"]))' "$1"; }
    "$TRACEGEN" --out "$D/s" --straggler 2:3 >/dev/null
    "$LOCKSTEP" analyze --json "$D/a.json" "$D/s" >/dev/null && rc=0 || rc=$?
    expect_rc 1
    kinds "$D/a.json" >"$D/k" && same "kinds by default" "straggler" "$(cat "$D/k")"
    "$LOCKSTEP" analyze --threshold straggler-min=5 --json "$D/b.json" "$D/s" >/dev/null && rc=0 || rc=$?
    expect_rc 0
    kinds "$D/b.json" >"$D/k" && same "kinds at straggler-min=5" "" "$(cat "$D/k")"
    "$LOCKSTEP" analyze --threshold=straggler-min=2.5 --json "$D/c.json" "$D/s" >/dev/null && rc=0 || rc=$?
    expect_rc 1
    "$TRACEGEN" --out "$D/v" --vanish 1 >/dev/null
    "$LOCKSTEP" analyze --json "$D/d.json" "$D/v" >/dev/null || true
    kinds "$D/d.json" | head -1 >"$D/k" && same "the vanished rank by default" "rank_crashed" "$(cat "$D/k")"
    "$LOCKSTEP" analyze --threshold silent=86400 --json "$D/e.json" "$D/v" >/dev/null || true
    kinds "$D/e.json" | head -1 >"$D/k" && same "at silent=86400" "missing_ranks" "$(cat "$D/k")"
    # what it refuses, before anything runs: exit 2, one line naming the threshold
    for nv in nope=1 silent=0 silent straggler-repeats=1.5 clock-skew=-1 en-route=soon =1; do
        for c in "analyze $D/s" "run -- touch $D/started" "watch $D/s"; do
            set +e
            "$LOCKSTEP" ${c%% *} --threshold "$nv" ${c#* } >"$D/out" 2>"$D/err"
            rc=$?
            set -e
            expect_rc 2; empty "$D/out"
            contains "$D/err" "lockstep: --threshold $nv"
        done
    done
    [ ! -e "$D/started" ] || fail "the job was started"
    ;;
*)
    fail "no case '$CASE'"
    ;;
esac
echo "ok [$CASE]"
