"""pyranks.py -- loads libpyranks.so (pyranks.c) with ctypes for the test scripts.

Only loads and declares: the scripts call the C functions themselves (`lib.pr_all_reduce(4)`),
so the innermost Python frame of every NCCL call is a line of the script, not of this module.
The library is $PYRANKS_LIB."""
import ctypes
import os


def load():
    lib = ctypes.CDLL(os.environ["PYRANKS_LIB"])  # CDLL calls release the GIL
    for name in ("pr_init", "pr_world_size", "pr_entered", "pr_barrier", "pr_destroy",
                 "pr_all_reduce_async", "pr_sync"):
        getattr(lib, name).argtypes = []
        getattr(lib, name).restype = ctypes.c_int
    lib.pr_all_reduce.argtypes = [ctypes.c_int]
    lib.pr_all_reduce.restype = ctypes.c_int
    lib.pr_broadcast.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.pr_broadcast.restype = ctypes.c_int
    lib.pr_loop.argtypes = [ctypes.c_int64]
    lib.pr_loop.restype = ctypes.c_int64
    return lib


def check(rc, what):
    """Exits 1 (with a message) unless a pyranks call returned 0."""
    if rc != 0:
        raise SystemExit(f"rank {os.environ.get('RANK', '?')}: {what} returned {rc}")
