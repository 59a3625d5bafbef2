"""sleepers.py -- the Python rank of tests/live/sleepers.c: after one AllReduce the rank
SLEEPER_RANK (default the last) waits SLEEPER_MS milliseconds in time.sleep (a download),
prints "slept python <seconds> ok" on stderr and joins the others in a second AllReduce.
With the argument "thread" the sleep runs in a data-loader thread that never calls NCCL, and
the main thread joins it. NCCL is reached through ctypes (tests/python/pyranks.py)."""
import os
import sys
import threading
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
        seconds = int(os.environ.get("SLEEPER_MS", "2000")) / 1000
        took = []
        if sys.argv[1:] == ["thread"]:
            loader = threading.Thread(target=lambda: took.append(wait_for_download(seconds)))
            loader.start()
            loader.join()
        else:
            took.append(wait_for_download(seconds))
        label = "python_thread" if sys.argv[1:] == ["thread"] else "python"
        print(f"slept {label} {took[0]:.3f} ok", file=sys.stderr, flush=True)
    pyranks.check(lib.pr_all_reduce(1), "second all_reduce")
    return 0


if __name__ == "__main__":
    sys.exit(main())
