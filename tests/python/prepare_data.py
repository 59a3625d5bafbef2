"""prepare_data.py -- the hang users meet most: rank 0 is still busy preparing data in Python
while the others already wait in the next collective. Under `lockstep run`, the live stack of
rank 0 must name this script's busy loop, in prepare_data, called from main. The test finds
the lines by their marker comments (@name)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyranks  # noqa: E402

lib = pyranks.load()


def prepare_data():
    x = 1
    while True:  # @loop_first
        x = (x * 31 + 7) % 1000003  # @loop_body
        x ^= x >> 3  # @loop_last


def main():
    rank = lib.pr_init()
    pyranks.check(lib.pr_all_reduce(4), "first all_reduce")
    if rank == 0:
        prepare_data()  # @call_prepare
    pyranks.check(lib.pr_all_reduce(4), "second all_reduce")  # @second
    return 0


if __name__ == "__main__":
    sys.exit(main())  # @module
