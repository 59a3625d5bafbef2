#!/usr/bin/env python3
"""test_install.py -- lockstep installed as users install it, then used on a hung job from
there: the wheel (built from a clean copy of the tree, pip-installed into a fresh venv), a
`meson install` tree moved elsewhere, and the Spack recipe. docs/install.md says what each is.

Usage: test_install.py CASE   (paths from the environment meson sets, see meson.build)
"""
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
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


def case_wheel(tmp):
    need = subprocess.run([SYSTEM_PYTHON, "-c", "import mesonpy, build, ensurepip"],
                          capture_output=True, text=True) if os.path.exists(SYSTEM_PYTHON) else None
    if need is None or need.returncode != 0 or not shutil.which("patchelf"):
        raise Skip("building the wheel needs the Debian packages python3-mesonpy python3-build "
                   "python3-venv patchelf (scripts/test installs them)")
    src, dist = os.path.join(tmp, "src"), os.path.join(tmp, "dist")
    clean_copy(SOURCE, src)
    sh([SYSTEM_PYTHON, "-m", "build", "--wheel", "--no-isolation", "--outdir", dist,
        "-Ccompile-args=-j2", src], "python3 -m build --wheel", timeout=540)
    wheels = os.listdir(dist)
    expect(len(wheels) == 1, f"dist holds {wheels}")
    whl = os.path.join(dist, wheels[0])
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    expect(wheels[0].endswith(f"-py3-none-{plat}.whl"),
           f"wheel {wheels[0]}: expected the tag py3-none-{plat} (any Python 3, this platform)")
    names = zipfile.ZipFile(whl).namelist()
    for want in ("scripts/lockstep", "scripts/lockstep-gather", "data/lib/lockstep/liblockstep.so",
                 "data/lib/lockstep/libnccl-profiler-lockstep.so", "purelib/lockstep/__main__.py",
                 "data/share/man/man1/lockstep.1", "data/share/man/man1/lockstep-run.1",
                 "data/share/bash-completion/completions/lockstep",
                 "data/share/doc/lockstep/install.md"):
        expect(any(n.endswith(".data/" + want) for n in names), f"wheel lacks {want}: {names}")
    extra = [n for n in names if os.path.basename(n).startswith(("libnccl.so", "launch-ranks",
                                                                  "scenarios", "test_"))]
    expect(not extra, f"the wheel holds test programs: {extra}")

    venv = os.path.join(tmp, "venv")
    sh([SYSTEM_PYTHON, "-m", "venv", venv], "python3 -m venv")
    sh([os.path.join(venv, "bin", "pip"), "install", "--no-index", "--quiet", whl],
       "pip install --no-index")
    libdir = os.path.join(venv, "lib", "lockstep")
    expect_no_gpu_libs([os.path.join(venv, "bin", "lockstep")] +
                       [os.path.join(libdir, n) for n in NATIVE[1:]], "wheel")
    env = job_env(path_first=os.path.join(venv, "bin"))
    expect(shutil.which("lockstep", path=env["PATH"]) == os.path.join(venv, "bin", "lockstep"),
           "the venv's lockstep is not the first on PATH")
    diagnose_hang(["lockstep"], tmp, env, "wheel")
    expect_finds_own(["lockstep"], tmp, env, libdir, "wheel")
    expect_finds_own([os.path.join(venv, "bin", "python"), "-m", "lockstep"], tmp, env, libdir,
                     "python -m lockstep")


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
