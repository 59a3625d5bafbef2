# scripts/lib.sh -- shared steps of scripts/test and scripts/demo: packages, configure, build.
# Sourced, not run. Every step says what it does.

LOCKSTEP_PACKAGES="meson ninja-build check libunwind-dev libdw-dev pkg-config gcc libc6-dev binutils python3"
# What building the wheel needs (scripts/wheel, docs/install.md): Debian's meson-python and
# `build` for /usr/bin/python3, venv to install it into, patchelf (meson-python asks for it),
# what builds libunwind from its source package, and the static libraries libdw.a needs.
LOCKSTEP_WHEEL_PACKAGES="python3-mesonpy python3-build python3-venv patchelf make patch xz-utils zlib1g-dev liblzma-dev libbz2-dev"
BUILD_DIR=${BUILD_DIR:-build}

say() { printf '==> %s\n' "$*"; }

# Installs the Debian packages lockstep needs that are missing (as root), or prints the
# exact command to run and fails.
ensure_packages() {
    local missing="" p
    for p in $LOCKSTEP_PACKAGES; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            missing="$missing $p"
    done
    if [ -z "$missing" ]; then
        say "packages: all present ($LOCKSTEP_PACKAGES)"
        return 0
    fi
    if [ "$(id -u)" != 0 ]; then
        echo "lockstep needs these Debian packages:$missing" >&2
        echo "run: sudo apt-get update && sudo apt-get install -y$missing" >&2
        return 1
    fi
    say "installing missing packages:$missing"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
}

# Configures build folder DIR once with meson setup's ARGS (meson finds NCCL; see
# scripts/find-nccl), then builds it: build_in DIR [ARGS...].
build_in() {
    local dir=$1
    shift
    if [ ! -f "$dir/build.ninja" ]; then
        say "configuring $dir (meson setup${*:+ $*})"
        meson setup "$dir" "$@"
    else
        say "build folder $dir already configured"
    fi
    say "building (meson compile -C $dir)"
    meson compile -C "$dir"
}

# Configures DIR as build_in does and builds only the given outputs (paths inside DIR, as ninja
# names them): build_only DIR "SETUP ARGS" OUTPUT...
build_only() {
    local dir=$1 setup=$2
    shift 2
    if [ ! -f "$dir/build.ninja" ]; then
        say "configuring $dir (meson setup${setup:+ $setup})"
        # shellcheck disable=SC2086 # setup holds separate words
        meson setup "$dir" $setup
    else
        say "build folder $dir already configured"
    fi
    say "building what it needs: $*"
    ninja -C "$dir" "$@"
}

# The sanitized build, in which scripts/test runs every suite a second time (and scripts/soak
# --sanitized its suites): the shim, the emulator, the analyzer and the test programs built with
# AddressSanitizer and UndefinedBehaviorSanitizer. Left out there: the suite bench (figures of an
# instrumented build measure nothing), the real launchers' stop cases (slow to start, no code of
# ours the other cases do not run), the suite plain_only (cases that measure timing or render
# large pictures, whose code the other cases run under the sanitizers too; tests/live/meson.build
# lists them) and the suite install (the wheel it builds is a plain build anyway).
SAN_DIR=${SAN_BUILD_DIR:-build-asan}
SAN_SETUP=(-Db_sanitize=address,undefined -Db_lundef=false)
SAN_NO_SUITES=(--no-suite bench --no-suite launchers --no-suite plain_only --no-suite install)

# Exports the sanitizers' options for a test run in $SAN_DIR. verify_asan_link_order=0: the shim
# is LD_PRELOADed ahead of the programs' own libasan, which is fine because the one function ASan
# intercepts that it defines, write() (the stderr tail, shim/stderr_tail.c), forwards to the next
# definition: ASan's interceptor. handle_*=0: the shim's own fatal-signal handling is under test.
# The suppressions name the tests' deliberate crashes.
san_env() {
    local supp="$PWD/tests/sanitizers"
    export ASAN_OPTIONS="verify_asan_link_order=0:handle_segv=0:handle_abort=0:handle_sigbus=0:handle_sigfpe=0:handle_sigill=0:detect_leaks=1:abort_on_error=1"
    export LSAN_OPTIONS="suppressions=$supp/lsan.supp"
    export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1:suppressions=$supp/ubsan.supp"
}

# The main build folder, $BUILD_DIR: build_all [ARGS...].
build_all() {
    build_in "$BUILD_DIR" "$@"
}
