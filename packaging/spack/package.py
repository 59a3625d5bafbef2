# Spack recipe for lockstep (docs/install.md). Copy it into a Spack repository of your own:
#   spack repo create ~/spack-lockstep && mkdir -p ~/spack-lockstep/packages/lockstep
#   cp packaging/spack/package.py ~/spack-lockstep/packages/lockstep/ && spack repo add ~/spack-lockstep
# lockstep publishes no release tarball yet: `url` and `git` name a placeholder host. Point them at
# where your site keeps lockstep (a `meson dist` tarball or a git mirror), or build a checkout:
#   spack add lockstep@develop && spack develop --path /path/to/lockstep lockstep@develop
#   spack install          (in an active Spack environment; docs/install.md)

from spack.package import *


class Lockstep(MesonPackage):
    """Finds which rank and which NCCL call hung a distributed GPU job: an LD_PRELOAD shim and an
    NCCL profiler plugin record every NCCL call of unmodified programs, and the lockstep command
    diagnoses hangs (`lockstep run -- CMD` stops a hung job and exits 3 with a diagnosis)."""

    homepage = "https://lockstep.example.org/"
    url = "https://lockstep.example.org/releases/lockstep-0.1.0.tar.xz"
    git = "https://lockstep.example.org/lockstep.git"

    version("develop", branch="main")

    # The shim compiles against nccl.h, which includes CUDA's cuda_runtime.h: headers only. Nothing
    # is linked against NCCL or CUDA; at run time the job's own libnccl is used, any NCCL 2.x.
    depends_on("nccl", type="build")
    depends_on("cuda", type="build")
    # The shim unwinds call sites with libunwind; the command reads live stacks of other processes
    # with libunwind's ptrace library (pkg-config libunwind-ptrace), which Spack's libunwind builds
    # only when its `components` variant names it.
    depends_on("libunwind components=ptrace")
    # The command names call sites from the modules' debug info in-process with libdw.
    depends_on("elfutils")
    depends_on("pkgconfig", type="build")
    depends_on("meson@0.63:", type="build")

    conflicts("platform=darwin", msg="lockstep preloads into Linux processes (glibc)")

    def setup_build_environment(self, env):
        # scripts/find-nccl looks for cuda_runtime.h under CUDA_HOME.
        env.set("CUDA_HOME", self.spec["cuda"].prefix)

    def meson_args(self):
        # -Dtests=false: no CPU NCCL emulator or test programs, only what users run.
        return ["-Dtests=false", "-Dnccl_home={0}".format(self.spec["nccl"].prefix)]

    def setup_run_environment(self, env):
        # `lockstep run` finds the shim and the plugin by itself (PREFIX/lib/lockstep/); these
        # name them for jobs that preload the shim by hand (docs/install.md).
        env.set("LOCKSTEP_SHIM", join_path(self.prefix.lib.lockstep, "liblockstep.so"))
        env.set("LOCKSTEP_PROFILER_PLUGIN",
                join_path(self.prefix.lib.lockstep, "libnccl-profiler-lockstep.so"))
