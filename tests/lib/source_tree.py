"""source_tree.py -- a copy of the source tree as git sees it, for the tests that build from it
(the wheel on x86-64, tests/install; and on aarch64, tests/cross/check_arch.py)."""
import os
import shutil
import subprocess


def clean_copy(source, dest):
    """Copies the source tree `source` to `dest` as git sees it (tracked files and new ones not
    ignored), so no build folder of the developer goes into a wheel; outside a git checkout,
    everything but meson's build folders."""
    os.makedirs(dest, exist_ok=True)
    git = subprocess.run(["git", "-C", source, "ls-files", "-z", "--cached", "--others",
                          "--exclude-standard"], capture_output=True)
    if git.returncode == 0:
        for rel in git.stdout.decode().split("\0"):
            src = os.path.join(source, rel)
            if rel and os.path.isfile(src):  # a tracked file deleted in the work tree is skipped
                os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
                shutil.copy2(src, os.path.join(dest, rel))
        return

    def ignore(d, names):  # not a git checkout: leave out every meson build folder
        return [n for n in names if n == ".git" or n.startswith(".mesonpy-") or
                os.path.exists(os.path.join(d, n, "meson-private"))]
    shutil.copytree(source, dest, dirs_exist_ok=True, ignore=ignore)
