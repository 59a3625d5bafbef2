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
