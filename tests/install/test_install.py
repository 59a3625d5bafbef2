#!/usr/bin/env python3
"""test_install.py -- lockstep installed as users install it, then used on a hung job from
there: the wheel (built from a clean copy of the tree, pip-installed into a fresh venv), a
`meson install` tree moved elsewhere, and the Spack recipe. docs/install.md says what each is.

Usage: test_install.py CASE   (paths from the environment meson sets, see meson.build)
"""
import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import types
import zipfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import Skip, expect, run  # noqa: E402
from source_tree import clean_copy  # noqa: E402

SOURCE = os.environ["SOURCE_ROOT"]
BUILD = os.environ["BUILD_ROOT"]
LAUNCH = os.environ["LAUNCH_RANKS"]
EMU_DIR = os.environ["EMULATOR_DIR"]
SCENARIOS = os.environ["SCENARIOS"]
# Debian's interpreter, with python3-mesonpy, python3-build and python3-venv (the python3 that
# runs this test may be another one, without Debian's packages).
SYSTEM_PYTHON = "/usr/bin/python3"
NATIVE = ("lockstep", "liblockstep.so", "libnccl-profiler-lockstep.so")
VICTIM = 1  # the rank that never reaches the barrier


def sh(cmd, what, **kw):
    """Runs cmd; fails naming what and showing the end of its output unless it exits 0."""
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    expect(p.returncode == 0, f"{what} exited {p.returncode}:\n{(p.stdout + p.stderr)[-3000:]}")
    return p


def job_env(path_first=None):
    """The environment of a job on the emulator, with nothing pointing lockstep at its shim or
    plugin: the installed `lockstep` must find its own."""
    env = dict(os.environ)
    for k in ("LD_PRELOAD", "LOCKSTEP_DIR", "LOCKSTEP_SHIM", "LOCKSTEP_PROFILER_PLUGIN",
              "NCCL_PROFILER_PLUGIN", "LOCKSTEP_RUNS_DIR"):
        env.pop(k, None)
    env["LD_LIBRARY_PATH"] = EMU_DIR + ":" + env.get("LD_LIBRARY_PATH", "")
    env["SCENARIO_VICTIM"] = str(VICTIM)
    env["NO_COLOR"] = "1"
    if path_first:
        env["PATH"] = path_first + ":" + env["PATH"]
    return env


def diagnose_hang(lockstep, tmp, env, label):
    """`lockstep run` (lockstep: the command as the user types it) on 4 ranks where one never
    reaches the barrier: exit 3, and the report names that rank."""
    d = os.path.join(tmp, "traces-" + label)
    js = os.path.join(tmp, label + ".json")
    cmd = [*lockstep, "run", "--dir", d, "--stall", "2", "--json", js, "--",
           LAUNCH, "--np", "4", "--", SCENARIOS, "prepare_data"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    expect(p.returncode == 3, f"{label}: lockstep run exited {p.returncode}, expected 3\n"
                              f"{p.stdout[-2000:]}{p.stderr[-2000:]}")
    expect(os.path.exists(js), f"{label}: no JSON report\n{p.stderr[-2000:]}")
    f = json.load(open(js))["findings"][0]
    expect(f["kind"] == "missing_ranks" and f["missing"] == [VICTIM],
           f"{label}: first finding {f['kind']} missing {f.get('missing')}, expected "
           f"missing_ranks [{VICTIM}]")
    expect("[missing_ranks]" in p.stdout, f"{label}: the text report was not printed")


def preloaded(lockstep, tmp, env, label):
    """What `lockstep run` gives its job: (LD_PRELOAD, NCCL_PROFILER_PLUGIN)."""
    out = os.path.join(tmp, label + ".env")
    sh([*lockstep, "run", "--dir", os.path.join(tmp, "traces-env-" + label), "--", "sh", "-c",
        'printf "%s\\n%s\\n" "$LD_PRELOAD" "$NCCL_PROFILER_PLUGIN" > "$0"', out],
       f"{label}: lockstep run of a clean job", env=env, timeout=60)
    return open(out).read().splitlines()


def expect_finds_own(lockstep, tmp, env, libdir, label):
    """lockstep run preloads the shim and names the plugin from libdir, the installed tree's."""
    pre, plugin = preloaded(lockstep, tmp, env, label)
    libdir = os.path.realpath(libdir)
    expect(pre == os.path.join(libdir, "liblockstep.so"),
           f"{label}: LD_PRELOAD={pre}, expected the shim in {libdir}")
    expect(plugin == os.path.join(libdir, "libnccl-profiler-lockstep.so"),
           f"{label}: NCCL_PROFILER_PLUGIN={plugin}, expected the plugin in {libdir}")


def expect_no_gpu_libs(paths, label):
    """None of the ELF files needs NCCL or CUDA (readelf -d)."""
    for path in paths:
        dyn = sh(["readelf", "-d", path], f"readelf -d {path}").stdout
        needed = [ln.split("[", 1)[1].rstrip("]") for ln in dyn.splitlines() if "(NEEDED)" in ln]
        bad = [n for n in needed if n.startswith(("libnccl", "libcuda", "libcudart"))]
        expect(not bad, f"{label}: {path} is linked against {bad}")
        expect("(RPATH)" not in dyn and "(RUNPATH)" not in dyn,
               f"{label}: {path} keeps a run path:\n{dyn}")


PLATFORM = f"manylinux_2_28_{os.uname().machine}"
WHEEL_TOOL = os.path.join(SOURCE, "packaging", "wheel_tool.py")
# libunwind's static build (scripts/wheel --cache), kept between runs beside the build.
WHEEL_CACHE = os.path.join(BUILD, "wheel-cache")


def need_wheel_packages():
    need = subprocess.run([SYSTEM_PYTHON, "-c", "import mesonpy, build, ensurepip"],
                          capture_output=True, text=True) if os.path.exists(SYSTEM_PYTHON) else None
    if need is None or need.returncode != 0 or not shutil.which("patchelf"):
        raise Skip("building the wheel needs the Debian packages python3-mesonpy python3-build "
                   "python3-venv patchelf (scripts/test installs them)")


def tree_key(src):
    """A digest of the tree at src (every file's path, mode and bytes): names one build's wheel."""
    h = hashlib.sha256()
    for top, dirs, files in sorted(os.walk(src)):
        dirs.sort()
        for n in sorted(files):
            path = os.path.join(top, n)
            h.update(os.path.relpath(path, src).encode() + b"\0" +
                     str(os.stat(path).st_mode & 0o111).encode() + b"\0")
            with open(path, "rb") as f:
                h.update(f.read())
    return h.hexdigest()[:16]


def build_wheel(tmp):
    """scripts/wheel run in a clean copy of the tree (as git sees it): the wheel's path, after
    checking its name and that the script's own check passed. The cases that need a wheel share
    one build of the same tree (kept in WHEEL_CACHE under the tree's digest for 20 minutes; a
    case that comes second waits for the first's build under a lock): the suite builds it once."""
    import fcntl
    need_wheel_packages()
    src = os.path.join(tmp, "src")
    clean_copy(SOURCE, src)
    os.makedirs(WHEEL_CACHE, exist_ok=True)
    dist = os.path.join(WHEEL_CACHE, "wheel-" + tree_key(src))
    with open(os.path.join(WHEEL_CACHE, ".wheel-lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # Only this suite's own build is shared: a wheel made over 20 minutes ago was made by an
        # earlier run, which this one checks again from scratch.
        fresh = os.path.isdir(dist) and time.time() - os.stat(dist).st_mtime < 1200
        wheels = sorted(os.listdir(dist)) if fresh else []
        if not wheels:
            for old in os.listdir(WHEEL_CACHE):  # another tree's wheel: not needed again
                if old.startswith("wheel-"):
                    shutil.rmtree(os.path.join(WHEEL_CACHE, old), ignore_errors=True)
            part = dist + ".part"
            p = sh([os.path.join(src, "scripts", "wheel"), "--out", part, "--cache",
                    WHEEL_CACHE], "scripts/wheel", timeout=900)
            wheels = os.listdir(part)
            expect(len(wheels) == 1, f"dist holds {wheels}")
            expect("every ELF needs GLIBC_2.28 or older" in p.stdout,
                   f"scripts/wheel did not run its check:\n{p.stdout[-2000:]}")
            expect(p.stdout.strip().splitlines()[-1] == os.path.join(part, wheels[0]),
                   f"scripts/wheel's last line is not the wheel's path:\n{p.stdout[-500:]}")
            os.rename(part, dist)
    expect(len(wheels) == 1, f"{dist} holds {wheels}")
    expect(wheels[0] == f"lockstep-0.1.0-py3-none-{PLATFORM}.whl",
           f"wheel {wheels[0]}: expected the tag py3-none-{PLATFORM} (any Python 3, glibc 2.28 "
           f"or later on this architecture)")
    whl = os.path.join(tmp, wheels[0])
    shutil.copy(os.path.join(dist, wheels[0]), whl)
    return src, whl


def case_wheel(tmp):
    src, whl = build_wheel(tmp)
    z = zipfile.ZipFile(whl)
    names = z.namelist()
    for want in ("scripts/lockstep", "scripts/lockstep-gather", "data/lib/lockstep/liblockstep.so",
                 "data/lib/lockstep/libnccl-profiler-lockstep.so", "purelib/lockstep/__main__.py",
                 "data/share/man/man1/lockstep.1", "data/share/man/man1/lockstep-run.1",
                 "data/share/bash-completion/completions/lockstep",
                 "data/share/doc/lockstep/install.md", "data/share/doc/lockstep/LICENSE"):
        expect(any(n.endswith(".data/" + want) for n in names), f"wheel lacks {want}: {names}")
    lic = [n for n in names if n.endswith(".dist-info/LICENSE")]
    expect(len(lic) == 1 and z.read(lic[0]) == open(os.path.join(SOURCE, "LICENSE"), "rb").read(),
           f"the wheel's dist-info does not hold the repository's LICENSE: {lic}")
    notices = [n for n in names if n.endswith(".dist-info/THIRD_PARTY_NOTICES")]
    text = z.read(notices[0]).decode() if notices else ""
    for carried in ("libunwind", "libdw1", "libelf1", "zlib1g", "liblzma5", "libbz2-1.0"):
        expect(f"==== {carried}" in text, f"the wheel's THIRD_PARTY_NOTICES lack {carried}")
    extra = [n for n in names if os.path.basename(n).startswith(("libnccl.so", "launch-ranks",
                                                                  "scenarios", "test_"))]
    expect(not extra, f"the wheel holds test programs: {extra}")

    venv = os.path.join(tmp, "venv")
    sh([SYSTEM_PYTHON, "-m", "venv", venv], "python3 -m venv")
    sh([os.path.join(venv, "bin", "pip"), "install", "--no-index", "--quiet", whl],
       "pip install --no-index")
    libdir = os.path.join(venv, "lib", "lockstep")
    natives = [os.path.join(venv, "bin", "lockstep")] + [os.path.join(libdir, n) for n in NATIVE[1:]]
    expect_no_gpu_libs(natives, "wheel")
    for path in natives:  # what the wheel carries is linked in: nothing of the system's
        dyn = sh(["readelf", "-d", path], f"readelf -d {path}").stdout
        carried = [n for n in ("libunwind", "libdw", "libelf") if f"[{n}" in dyn]
        expect(not carried, f"{path} needs the system's {carried}")
    env = job_env(path_first=os.path.join(venv, "bin"))
    expect(shutil.which("lockstep", path=env["PATH"]) == os.path.join(venv, "bin", "lockstep"),
           "the venv's lockstep is not the first on PATH")
    diagnose_hang(["lockstep"], tmp, env, "wheel")
    expect_finds_own(["lockstep"], tmp, env, libdir, "wheel")
    expect_finds_own([os.path.join(venv, "bin", "python"), "-m", "lockstep"], tmp, env, libdir,
                     "python -m lockstep")


def fake_wheel(tmp, label, platform, members):
    """A wheel named for `platform` holding members {name: (bytes, mode)}, a dist-info with a
    WHEEL file and a RECORD: what packaging/wheel_tool.py check reads."""
    path = os.path.join(tmp, f"fake{label}-0.1.0-py3-none-{platform}.whl")
    di = f"fake{label}-0.1.0.dist-info"
    members = dict(members)
    members[f"{di}/WHEEL"] = (f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n"
                              f"Tag: py3-none-{platform}\n".encode(), 0o644)
    record = ""
    with zipfile.ZipFile(path, "w") as z:
        for name, (data, mode) in members.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o100000 | mode) << 16
            z.writestr(info, data)
            record += f"{name},sha256=x,{len(data)}\n"  # a hash that lies
        z.writestr(f"{di}/RECORD", record + f"{di}/RECORD,,\n")
    return path


def case_wheel_check(tmp):
    """packaging/wheel_tool.py check refuses what a manylinux wheel must not hold: this build's
    own ELF files (the system's glibc 2.36 versions, libunwind and libdw needed from the
    system), a run path outside the wheel, code of another architecture than the tag's, no
    LICENSE, a RECORD hash that lies; each named."""
    shim = open(os.path.join(BUILD, "shim", "liblockstep.so"), "rb").read()
    cli = open(os.path.join(BUILD, "analyzer", "lockstep"), "rb").read()
    versions = sh(["readelf", "--wide", "-V", os.path.join(BUILD, "shim", "liblockstep.so")],
                  "readelf -V").stdout
    newest = sorted(set(re.findall(r"GLIBC_2\.(\d+)", versions)), key=int)[-1]
    if int(newest) <= 28:
        raise Skip(f"this machine's glibc gives nothing newer than 2.28 (GLIBC_2.{newest})")
    whl = fake_wheel(tmp, "sys", PLATFORM, {"fake.data/data/lib/liblockstep.so": (shim, 0o755),
                                            "fake.data/scripts/lockstep": (cli, 0o755)})
    p = subprocess.run([sys.executable, WHEEL_TOOL, "check", whl], capture_output=True, text=True)
    out = p.stderr
    expect(p.returncode == 1, f"check exited {p.returncode} on this build's ELF files:\n{out}")
    for want in (f"liblockstep.so: needs GLIBC_2.{newest}", "needs libunwind.so.8",
                 "lockstep: needs libdw.so.1", "holds no LICENSE",
                 "RECORD's hash of fake.data/data/lib/liblockstep.so is not its content's"):
        expect(want in out, f"check did not say '{want}':\n{out}")

    # An absolute run path, and code of another architecture than the tag says.
    other = "aarch64" if os.uname().machine == "x86_64" else "x86_64"
    patched = os.path.join(tmp, "rpath.so")
    shutil.copy(os.path.join(BUILD, "shim", "liblockstep.so"), patched)
    sh(["patchelf", "--set-rpath", "/opt/elsewhere", patched], "patchelf --set-rpath")
    whl = fake_wheel(tmp, "arch", f"manylinux_2_28_{other}",
                     {"fake.data/data/lib/rpath.so": (open(patched, "rb").read(), 0o755)})
    p = subprocess.run([sys.executable, WHEEL_TOOL, "check", whl], capture_output=True, text=True)
    for want in ("RUNPATH /opt/elsewhere is not relative to $ORIGIN", f"not {other} as the tag says"):
        expect(want in p.stderr, f"check did not say '{want}':\n{p.stderr}")
    expect(p.returncode == 1, f"check exited {p.returncode}")

    # tag: the name, the WHEEL file's tag and RECORD's line for it change; the members keep their
    # modes; the result's own RECORD is right.
    whl = fake_wheel(tmp, "tag", "linux_x86_64", {"fake.data/scripts/run": (b"#!/bin/sh\n", 0o755)})
    out = sh([sys.executable, WHEEL_TOOL, "tag", whl, PLATFORM, tmp], "wheel_tool.py tag").stdout
    tagged = out.strip()
    expect(os.path.basename(tagged) == f"faketag-0.1.0-py3-none-{PLATFORM}.whl", f"tag gave {out}")
    with zipfile.ZipFile(tagged) as z:
        wheel = z.read("faketag-0.1.0.dist-info/WHEEL").decode()
        expect(f"Tag: py3-none-{PLATFORM}" in wheel and "linux_x86_64" not in wheel, wheel)
        mode = z.getinfo("fake.data/scripts/run").external_attr >> 16
        expect(mode & 0o111, f"the command lost its execute bits: {oct(mode)}")
        record = z.read("faketag-0.1.0.dist-info/RECORD").decode()
        expect("faketag-0.1.0.dist-info/WHEEL,sha256=" in record, record)


def apt_mirror():
    """The Debian archive this machine's apt uses (its sources, not a name of ours)."""
    texts = []
    for d, names in (("/etc/apt/sources.list.d", None), ("/etc/apt", ["sources.list"])):
        if os.path.isdir(d):
            for n in sorted(names or os.listdir(d)):
                if os.path.isfile(os.path.join(d, n)):
                    texts.append(open(os.path.join(d, n)).read())
    for text in texts:
        for stanza in text.split("\n\n"):  # deb822
            uris = re.search(r"^URIs:\s*(\S+)", stanza, re.M)
            suites = re.search(r"^Suites:\s*(.+)$", stanza, re.M)
            if uris and suites and not any("security" in x for x in suites.group(1).split()):
                return uris.group(1)
        for m in re.finditer(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)", text, re.M):
            if "security" not in m.group(2):
                return m.group(1)
    return None


OLD_RELEASE = "bullseye"  # glibc 2.31: before stat (2.33) and libpthread/libdl (2.34) moved
OLD_ROOT = os.path.join(BUILD, f"old-root-{OLD_RELEASE}")


def old_root():
    """A Debian OLD_RELEASE root with python3 and venv (debootstrap, once; kept beside the build
    and used read-only: each run mounts its own folders over it)."""
    if os.path.exists(os.path.join(OLD_ROOT, "usr", "bin", "python3")):
        return OLD_ROOT
    if os.geteuid() != 0 or not shutil.which("debootstrap") or not shutil.which("unshare"):
        raise Skip("installing the wheel into an older Debian needs root, debootstrap and "
                   "unshare (scripts/test installs debootstrap)")
    mirror = apt_mirror()
    if not mirror:
        raise Skip("no Debian archive among this machine's apt sources")
    part = OLD_ROOT + ".part"
    shutil.rmtree(part, ignore_errors=True)
    p = subprocess.run(["debootstrap", "--variant=minbase", "--include=python3,python3-venv",
                        OLD_RELEASE, part, mirror], capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        log = (p.stdout + p.stderr)[-1500:]
        if re.search(r"Failed getting release file|Couldn't download|Temporary failure|"
                     r"couldn't find release", log, re.I):
            raise Skip(f"debootstrap could not reach {OLD_RELEASE} in this machine's Debian "
                       f"archive:\n{log}")
        expect(False, f"debootstrap {OLD_RELEASE} exited {p.returncode}:\n{log}")
    os.rename(part, OLD_ROOT)
    return OLD_ROOT


OLD_ROOT_SCRIPT = r"""
set -u
cd /opt/ls
ldd --version | head -1
python3 -m venv /opt/ls/venv && /opt/ls/venv/bin/pip install --no-index --quiet /opt/ls/*.whl ||
    { echo "pip install failed"; exit 10; }
export PATH=/opt/ls/venv/bin:$PATH LD_LIBRARY_PATH=/opt/ls/emu SCENARIO_VICTIM=1 NO_COLOR=1
lockstep --version || exit 11
/opt/ls/venv/bin/python -m lockstep --version || exit 12
lockstep run --dir /opt/ls/traces --stall 2 --json /opt/ls/run.json --     /opt/ls/launch-ranks --np 4 -- /opt/ls/scenarios prepare_data > /opt/ls/run.txt 2>&1
echo "run exit $?"
lockstep analyze --json /opt/ls/analyze.json /opt/ls/traces > /opt/ls/analyze.txt 2>&1
echo "analyze exit $?"
"""


def case_wheel_old_root(tmp):
    """The manylinux wheel in an older Debian (OLD_RELEASE, glibc 2.31): pip installs it into a
    venv there and its lockstep diagnoses a hang on the emulator (built with the wheel's
    -Dmanylinux=true too), live stacks read by ptrace and call sites by libdw included."""
    root = old_root()
    src, whl = build_wheel(tmp)
    build = os.path.join(tmp, "portable")
    arch = os.uname().machine
    sh(["meson", "setup", build, src, "-Dmanylinux=true",
        f"-Dpkg_config_path={os.path.join(WHEEL_CACHE, 'libunwind-' + arch, 'lib', 'pkgconfig')}"],
       "meson setup -Dmanylinux=true", timeout=300)
    progs = ["tests/emulator/libnccl.so.2", "tests/emulator/libcuda.so.1",
             "tests/launcher/launch-ranks", "tests/scenarios/scenarios"]
    sh(["ninja", "-C", build] + progs, "building the emulator for the old root", timeout=600)
    ls = os.path.join(tmp, "ls")
    os.makedirs(os.path.join(ls, "emu"))
    for prog in progs:
        dest = os.path.join(ls, "emu" if "emulator" in prog else "", os.path.basename(prog))
        shutil.copy(os.path.join(build, prog), dest)
    shutil.copy(whl, ls)
    open(os.path.join(ls, "go.sh"), "w").write(OLD_ROOT_SCRIPT)
    # A mount namespace of its own: /proc, and empty /dev/shm, /tmp and /root over the kept root,
    # the test's folder at /opt/ls; all gone when it ends.
    mounts = (f"mount -t proc proc {root}/proc && mount -t tmpfs tmpfs {root}/dev/shm && "
              f"mount -t tmpfs tmpfs {root}/tmp && mount -t tmpfs tmpfs {root}/root && "
              f"mkdir -p {root}/opt/ls && mount --bind {ls} {root}/opt/ls && "
              f"exec chroot {root} /bin/sh /opt/ls/go.sh")
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "LANG": "C.UTF-8",
           "PYTHONDONTWRITEBYTECODE": "1", "PIP_NO_CACHE_DIR": "1"}
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", mounts],
                       capture_output=True, text=True, timeout=300, env=env)
    out = p.stdout + p.stderr
    logs = "".join(f"\n--- {n}:\n" + open(os.path.join(ls, n)).read()[-2500:]
                   for n in ("run.txt", "analyze.txt") if os.path.exists(os.path.join(ls, n)))
    expect(p.returncode == 0, f"the old root's script exited {p.returncode}:\n{out}{logs}")
    glibc = re.search(r"GLIBC ([\d.]+)", out) or re.search(r"\b(2\.\d+)\s*$", out, re.M)
    expect(glibc and version_tuple(glibc.group(1)) < (2, 33),
           f"the old root's glibc is not older than 2.33: {out}")
    expect("run exit 3" in out, f"lockstep run in {OLD_RELEASE} did not exit 3:\n{out}{logs}")
    expect("analyze exit 1" in out,  # 1: findings
           f"lockstep analyze in {OLD_RELEASE} did not exit 1 (findings):\n{out}{logs}")
    for report in ("run.json", "analyze.json"):
        f = json.load(open(os.path.join(ls, report)))["findings"][0]
        expect(f["kind"] == "missing_ranks" and f["missing"] == [VICTIM],
               f"{OLD_RELEASE}, {report}: first finding {f['kind']} {f.get('missing')}")
    text = open(os.path.join(ls, "run.txt")).read()
    # rank 1's live stack (libunwind-ptrace) with functions and lines (libdw), in the old root
    expect(re.search(r"scenarios\.c:\d+ \(compute_ms\)", text) and "(prepare_data)" in text,
           f"{OLD_RELEASE}: the report names no line of the busy rank's live stack:\n{text}")
    print(f"{OLD_RELEASE} ({glibc.group(1)}): {text.splitlines()[-1] if text else ''}")


def version_tuple(text):
    return tuple(int(x) for x in text.split("."))


def case_tree(tmp):
    dest = os.path.join(tmp, "destdir")
    sh(["meson", "install", "-C", BUILD, "--no-rebuild", "--quiet", "--destdir", dest],
       "meson install --destdir")
    prefix = json.load(open(os.path.join(BUILD, "meson-info", "intro-buildoptions.json")))
    prefix = [o["value"] for o in prefix if o["name"] == "prefix"][0]
    staged = os.path.join(dest, prefix.lstrip("/"))
    moved = os.path.join(tmp, "moved", "elsewhere")
    os.makedirs(os.path.dirname(moved))
    shutil.move(staged, moved)  # an installed tree works wherever it is moved
    shutil.rmtree(dest)

    files = sorted(os.path.relpath(os.path.join(d, n), moved)
                   for d, _, ns in os.walk(moved) for n in ns)
    for want in ("bin/lockstep", "bin/lockstep-gather", "lib/lockstep/liblockstep.so",
                 "lib/lockstep/libnccl-profiler-lockstep.so", "share/doc/lockstep/README.md",
                 "share/doc/lockstep/install.md", "share/man/man1/lockstep.1",
                 "share/man/man1/lockstep-run.1", "share/bash-completion/completions/lockstep"):
        expect(want in files, f"the install lacks {want}: {files}")
    stray = [f for f in files if not f.startswith(("bin/", "lib/", "share/"))]
    expect(not stray, f"installed outside bin/, lib/ and share/: {stray}")
    bins = [f for f in files if f.startswith("bin/")]
    expect(bins == ["bin/lockstep", "bin/lockstep-gather"], f"bin/ holds {bins}")
    libs = [f for f in files if f.startswith("lib")]
    expect(libs == ["lib/lockstep/liblockstep.so", "lib/lockstep/libnccl-profiler-lockstep.so"],
           f"lib/ holds {libs} (test programs or the emulator installed?)")
    expect_no_gpu_libs([os.path.join(moved, "bin", "lockstep")] +
                       [os.path.join(moved, "lib", "lockstep", n) for n in NATIVE[1:]], "install")

    lockstep = [os.path.join(moved, "bin", "lockstep")]
    env = job_env()
    diagnose_hang(lockstep, tmp, env, "moved")
    expect_finds_own(lockstep, tmp, env, os.path.join(moved, "lib", "lockstep"), "moved")


class Recorder:
    """Stands in for Spack's package API: records what the recipe declares."""

    def __init__(self):
        self.calls = []

    def directive(self, name):
        return lambda *a, **kw: self.calls.append((name, a, kw))


RECIPE = os.path.join(SOURCE, "packaging", "spack", "package.py")


def load_recipe():
    """Runs the recipe against a stand-in for spack.package: (its class, the directives it
    declared as (name, args, kwargs))."""
    rec = Recorder()
    fake = types.ModuleType("spack.package")
    fake.MesonPackage = type("MesonPackage", (), {})
    for name in ("version", "depends_on", "variant", "conflicts", "maintainers", "license",
                 "requires", "patch", "provides"):
        setattr(fake, name, rec.directive(name))
    fake.__all__ = [n for n in vars(fake) if not n.startswith("_")]
    spack = types.ModuleType("spack")
    spack.package = fake
    sys.modules.update({"spack": spack, "spack.package": fake})
    ns = {"__name__": "lockstep_recipe"}
    exec(compile(open(RECIPE).read(), RECIPE, "exec"), ns)
    return ns["Lockstep"], rec.calls


def case_spack(tmp):
    sh([sys.executable, "-m", "py_compile", RECIPE], "python3 -m py_compile package.py",
       env=dict(os.environ, PYTHONPYCACHEPREFIX=tmp))
    tree = ast.parse(open(RECIPE).read())
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    expect([c.name for c in classes] == ["Lockstep"], f"classes {[c.name for c in classes]}")
    expect([ast.unparse(b) for b in classes[0].bases] == ["MesonPackage"],
           f"Lockstep derives from {[ast.unparse(b) for b in classes[0].bases]}")

    cls, calls = load_recipe()
    for attr in ("homepage", "url", "git"):
        expect(isinstance(getattr(cls, attr, None), str), f"the recipe sets no {attr}")
    expect(cls.__doc__ and "NCCL" in cls.__doc__, "the recipe's class has no description")
    versions = [a[0] for n, a, _ in calls if n == "version"]
    expect(versions, "the recipe declares no version")
    deps = {a[0].split()[0].split("@")[0]: kw for n, a, kw in calls if n == "depends_on"}
    for dep in ("nccl", "libunwind", "cuda", "pkgconfig"):
        expect(dep in deps, f"the recipe does not depend on {dep}: {sorted(deps)}")
    expect(deps["nccl"].get("type") == "build",
           "nccl must be a build dependency only (headers; the job brings its own libnccl)")
    expect(hasattr(cls, "meson_args"), "the recipe passes no meson arguments")

    class Spec(dict):
        prefix = "/spack/opt/x"

    spec = {"nccl": Spec(), "cuda": Spec()}
    spec["nccl"].prefix, spec["cuda"].prefix = "/spack/nccl", "/spack/cuda"
    pkg = cls.__new__(cls)
    pkg.spec = spec
    args = pkg.meson_args()
    expect("-Dtests=false" in args and "-Dnccl_home=/spack/nccl" in args,
           f"meson_args {args}: expected -Dtests=false and -Dnccl_home=NCCL's prefix")


# Spack's libunwind builds its base library (pkg-config libunwind, libunwind-generic) always, and
# each other library only when its `components` variant names it.
UNWIND_COMPONENTS = {"libunwind": None, "libunwind-generic": None, "libunwind-ptrace": "ptrace",
                     "libunwind-coredump": "coredump", "libunwind-setjmp": "setjmp"}


def meson_unwind_modules():
    """The libunwind pkg-config modules the build asks for (the meson.build files outside tests/,
    which the recipe does not build): {module: the meson.build naming it}."""
    mods = {}
    for top, dirs, files in os.walk(SOURCE):
        dirs[:] = [d for d in dirs if d not in ("tests", "subprojects") and not d.startswith(".")
                   and not os.path.exists(os.path.join(top, d, "meson-private"))]
        if "meson.build" in files:
            path = os.path.join(top, "meson.build")
            for m in re.findall(r"dependency\(\s*'(libunwind[\w-]*)'", open(path).read()):
                mods[m] = os.path.relpath(path, SOURCE)
    return mods


def case_spack_libunwind(tmp):
    """The recipe asks Spack's libunwind for every library the build links: Spack builds the
    ptrace one only on request, and the build then stops at pkg-config libunwind-ptrace."""
    mods = meson_unwind_modules()
    expect("libunwind-ptrace" in mods, f"read no libunwind-ptrace from the meson.build files: {mods}")
    unknown = sorted(m for m in mods if m not in UNWIND_COMPONENTS)
    expect(not unknown, f"the build asks for {unknown}: which libunwind component builds it?")
    _, calls = load_recipe()
    specs = [a[0] for n, a, _ in calls
             if n == "depends_on" and re.match(r"libunwind(\W|$)", a[0])]
    expect(len(specs) == 1, f"the recipe depends on libunwind {len(specs)} times: {specs}")
    given = set()
    for value in re.findall(r"\bcomponents=([\w,]+)", specs[0]):
        given.update(value.split(","))
    for mod, where in sorted(mods.items()):
        comp = UNWIND_COMPONENTS[mod]
        expect(comp is None or comp in given,
               f"{where} asks for {mod}, but the recipe's depends_on(\"{specs[0]}\") does not "
               f"ask Spack's libunwind for components={comp}")


if __name__ == "__main__":
    sys.exit(run(globals(), "lockstep-install-"))
