"""two_lines.py -- the ranks run the same training loop; at step K rank 1 reaches a Broadcast
from another line of this script than the AllReduce the others are in: a real op mismatch that
hangs on the emulator. The call stack is main -> train -> step -> do_collective. The test finds
the lines by their marker comments (@name)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyranks  # noqa: E402

K = int(os.environ.get("TWO_LINES_K", "4"))
STEPS = 8
lib = pyranks.load()


def do_collective(rank, i):
    if rank == 1 and i == K:
        return lib.pr_broadcast(4, 0)  # @bcast
    return lib.pr_all_reduce(4)  # @allreduce


def step(rank, i):
    pyranks.check(do_collective(rank, i), f"step {i}")  # @step


def train(rank):
    for i in range(STEPS):
        step(rank, i)  # @train


def main():
    rank = lib.pr_init()  # @init
    train(rank)  # @main
    pyranks.check(lib.pr_destroy(), "destroy")
    return 0


if __name__ == "__main__":
    sys.exit(main())  # @module
