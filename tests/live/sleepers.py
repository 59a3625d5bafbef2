"""sleepers.py -- the Python rank of tests/live/sleepers.c: after one AllReduce the rank
SLEEPER_RANK (default the last) waits SLEEPER_MS milliseconds in time.sleep (a download),
prints "slept python <seconds> ok" on stderr and joins the others in a second AllReduce.
NCCL is reached through ctypes (tests/python/pyranks.py)."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import pyranks  # noqa: E402

lib = pyranks.load()


def wait_for_download(seconds):
    t0 = time.monotonic()
    time.sleep(seconds)  # @sleep
    return time.monotonic() - t0


def main():
    rank = lib.pr_init()
    world = lib.pr_world_size()
    pyranks.check(lib.pr_all_reduce(256), "first all_reduce")
    if rank == int(os.environ.get("SLEEPER_RANK", world - 1)):
        took = wait_for_download(int(os.environ.get("SLEEPER_MS", "2000")) / 1000)
        print(f"slept python {took:.3f} ok", file=sys.stderr, flush=True)
    pyranks.check(lib.pr_all_reduce(1), "second all_reduce")
    return 0


if __name__ == "__main__":
    sys.exit(main())
