#!/usr/bin/env bash
# bench/callsites.sh BUILD_DIR [OLD_LOCKSTEP] -- the time to name 1,000 unique call sites.
# Generates a program of 1,000 functions, each calling ncclAllReduce once from its own line,
# runs it under the shim on the CPU NCCL emulator (1 rank), then times `lockstep dump` and
# `lockstep export --perfetto`, which name every call site of the trace. With OLD_LOCKSTEP (a
# lockstep built from an earlier commit) both are timed for it too, on the same trace.
set -euo pipefail
build=$(cd "${1:?usage: bench/callsites.sh BUILD_DIR [OLD_LOCKSTEP]}" && pwd)
old=${2:-}
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/lockstep-callsites.XXXXXX)
trap 'rm -rf "$work"' EXIT
n=1000
{
    echo '#include "common.h"'
    echo 'static float *buf; static ncclComm_t comm;'
    for i in $(seq 1 $n); do
        echo "__attribute__((noinline)) void site_$i(void) { TP_CHECK(ncclAllReduce(buf, buf, 1, ncclFloat, ncclSum, comm, NULL)); }"
    done
    echo 'int main(void) { buf = tp_alloc(64); tp_init_world(&comm);'
    for i in $(seq 1 $n); do echo "site_$i();"; done
    echo 'tp_sync(); ncclCommDestroy(comm); return 0; }'
} >"$work/sites.c"
nccl_inc=$(cd "$build" && meson introspect --buildoptions 2>/dev/null >/dev/null; "$src/scripts/find-nccl" 2>/dev/null | head -1 || true)
cc -g -O1 -o "$work/sites" "$work/sites.c" "$src/tests/programs/common.c" -I"$src/tests/programs" \
    -I"${nccl_inc:-/usr/local/cuda/include}" -I/usr/local/cuda/include \
    -L"$build/tests/emulator" -lnccl -lcuda -ldl -lm -lpthread
LD_LIBRARY_PATH="$build/tests/emulator" LD_PRELOAD="$build/shim/liblockstep.so" \
    LOCKSTEP_DIR="$work/traces" "$work/sites"
trace=$(ls "$work"/traces/*.trace)
time_it() { # LABEL CMD...: best of 3 wall seconds
    local best=999999 t0 t1 t
    for _ in 1 2 3; do
        t0=$(date +%s.%N); "${@:2}" >/dev/null 2>&1 || true; t1=$(date +%s.%N)
        t=$(echo "$t1 - $t0" | bc)
        best=$(echo "if ($t < $best) $t else $best" | bc)
    done
    printf '%-44s %6.2f s\n' "$1" "$best"
}
sites=$("$build/analyzer/lockstep" dump "$trace" | grep -c 'sites\.c:' || true)
echo "trace: $trace ($sites lines naming sites.c)"
for lk in "$build/analyzer/lockstep" ${old:+"$old"}; do
    time_it "$(basename "$(dirname "$(dirname "$lk")")")/dump" "$lk" dump "$trace"
    time_it "$(basename "$(dirname "$(dirname "$lk")")")/export --perfetto" "$lk" export --perfetto "$work/p.json" "$trace"
done
