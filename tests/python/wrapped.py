"""wrapped.py SITE_PACKAGES -- calls that reach NCCL through frames that are not the user's:
rank 0 through a function of an installed package (fakecomm.py, which the test puts in a
site-packages folder), the other ranks through the standard library (contextlib.ExitStack runs
the ctypes function as a callback). The two differ (AllReduce, Broadcast): an op mismatch
whose call sites must name this script's lines, not the package's or contextlib's."""
import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyranks  # noqa: E402

sys.path.insert(0, sys.argv[1])
import fakecomm  # noqa: E402

lib = pyranks.load()


def via_package():
    return fakecomm.all_reduce(lib, 4)  # @via_package


def via_stdlib():
    with contextlib.ExitStack() as stack:  # @via_stdlib
        stack.callback(lib.pr_broadcast, 4, 0)


rank = lib.pr_init()
pyranks.check(lib.pr_barrier(), "barrier")
if rank == 0:
    via_package()
else:
    via_stdlib()
