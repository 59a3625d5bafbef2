"""harness.py -- what the end-to-end test drivers share: failures that say what broke, and
running one named case (`test_x.py CASE`) in a fresh temporary folder, kept when it fails."""
import os
import shutil
import sys
import tempfile


class Failure(Exception):
    """A check of the case did not hold; the message says which and what was seen."""


class Skip(Exception):
    """The case cannot run on this machine; meson reports exit status 77 as skipped."""


ELF_MACHINES = {62: "x86-64", 183: "aarch64"}


def elf_machine(path):
    """The architecture an ELF file is built for ("x86-64", "aarch64", or e_machine's number)."""
    with open(os.path.realpath(path), "rb") as f:
        head = f.read(20)
    if head[:4] != b"\x7fELF":
        return None
    m = int.from_bytes(head[18:20], "little")
    return ELF_MACHINES.get(m, str(m))


def need_python_for(lib):
    """Skips a case whose Python process must load `lib` when this interpreter cannot: a build
    for another architecture (scripts/test-aarch64 runs the aarch64 build's cases with the
    host's x86-64 python3; an aarch64 CPython is not installed there)."""
    built, mine = elf_machine(lib), elf_machine(sys.executable)
    if built and mine and built != mine:
        raise Skip(f"needs an {built} Python to load {os.path.basename(lib)}; "
                   f"this python3 is {mine}")


def emulated():
    """The build under test is another architecture's, run under qemu-user (scripts/test-aarch64):
    the programs' ELF machine (LOCKSTEP_BIN's, else LOCKSTEP_SHIM's) is not this machine's."""
    exe = os.environ.get("LOCKSTEP_BIN") or os.environ.get("LOCKSTEP_SHIM")
    host = {"x86_64": "x86-64", "aarch64": "aarch64"}.get(os.uname().machine, os.uname().machine)
    return bool(exe) and os.path.exists(exe) and elf_machine(exe) not in (None, host)


# What qemu-user cannot give an emulated process, for the cases that need it (docs/install.md,
# "aarch64"): such a case says SKIP with the reason under emulation, and runs everywhere else.
EMULATION_LACKS = {
    "ptrace": "live stacks hold threads with ptrace, which qemu-user does not emulate for another "
              "emulated process (the registers and frames read would be qemu's own)",
    "subreaper": "prctl(PR_SET_CHILD_SUBREAPER), which qemu-user refuses: lockstep run cannot "
                 "reap the job's orphans there",
}


def needs(what):
    """Marks a case as needing `what` (a key of EMULATION_LACKS)."""
    def mark(case):
        case.needs = getattr(case, "needs", ()) + (what,)
        return case
    return mark


def expect(cond, what):
    """Raises Failure(what) unless cond holds."""
    if not cond:
        raise Failure(what)


def run(namespace, prefix):
    """Runs the case named by argv[1] among the functions `case_NAME` of `namespace`, giving
    it a fresh temporary folder. Returns the exit status: 0 ok, 1 failed (the folder is kept
    and named), 2 usage, 77 skipped."""
    cases = {n[5:]: f for n, f in namespace.items() if n.startswith("case_") and callable(f)}
    script = os.path.basename(sys.argv[0])
    if len(sys.argv) != 2 or sys.argv[1] not in cases:
        print(f"usage: {script} {{{','.join(cases)}}}", file=sys.stderr)
        return 2
    name = sys.argv[1]
    lacking = [w for w in getattr(cases[name], "needs", ()) if emulated()]
    if lacking:
        print(f"SKIP {name}: under emulation: {EMULATION_LACKS[lacking[0]]}")
        return 77
    tmp = tempfile.mkdtemp(prefix=prefix)
    try:
        cases[name](tmp)
    except Skip as e:
        print(f"SKIP {name}: {e}")
        shutil.rmtree(tmp, ignore_errors=True)
        return 77
    except Failure as e:
        print(f"FAIL {name}: {e}")
        print(f"(files kept in {tmp})")
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"ok {name}")
    return 0
