"""event_wait.py -- every rank, after one all-reduce, waits for an event nobody sets: stuck
outside NCCL, in the standard library's threading code that this script's wait_for_peer called.
With argument "one", only rank 0 waits and the others go on to the next all-reduce (rank 0 is
then the missing one). The report must name wait_for_peer's line first, the library frames
after it. The test finds the lines by their marker comments (@name)."""
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyranks  # noqa: E402

lib = pyranks.load()


def wait_for_peer():
    threading.Event().wait()  # @wait


def main():
    rank = lib.pr_init()
    pyranks.check(lib.pr_all_reduce(4), "first all_reduce")
    if rank == 0 or sys.argv[1:] != ["one"]:
        wait_for_peer()  # @call
    pyranks.check(lib.pr_all_reduce(4), "second all_reduce")
    return 0


if __name__ == "__main__":
    sys.exit(main())  # @module
