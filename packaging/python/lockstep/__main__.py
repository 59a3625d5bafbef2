"""python -m lockstep ARGS: runs the `lockstep` command installed with this package."""
import os
import sys
from importlib.metadata import PackageNotFoundError, files


def command():
    """The path of the `lockstep` executable the wheel put in the installation's bin/ (pip's
    record of the install lists it), or None."""
    try:
        installed = files("lockstep") or []
    except PackageNotFoundError:
        return None
    for f in installed:
        if f.name == "lockstep" and f.parent.name == "bin":
            return os.path.realpath(f.locate())
    return None


def main():
    exe = command()
    if not exe or not os.access(exe, os.X_OK):
        sys.exit("lockstep: the lockstep command of this installation is missing; reinstall the "
                 "wheel (pip install --force-reinstall lockstep-*.whl)")
    os.execv(exe, ["lockstep", *sys.argv[1:]])


if __name__ == "__main__":
    main()
