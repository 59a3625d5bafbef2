"""deep.py DEPTH CALLS -- recurses DEPTH frames deep (through `descend`), then makes CALLS
AllReduces from one line (@loop) and one Broadcast from another (@bcast). Used for the
deduplication of Python stacks, the depth knobs and the layout check. Prints "ok"."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyranks  # noqa: E402

lib = pyranks.load()


def work(calls):
    bad = 0
    for _ in range(calls):
        bad += lib.pr_all_reduce(2) != 0  # @loop
    bad += lib.pr_broadcast(3, 0) != 0  # @bcast
    return bad


def descend(n, calls):
    if n <= 0:
        return work(calls)  # @work
    return descend(n - 1, calls)  # @descend


def main():
    depth, calls = int(sys.argv[1]), int(sys.argv[2])
    lib.pr_init()
    bad = descend(depth, calls)  # @main
    pyranks.check(lib.pr_destroy(), "destroy")
    if bad:
        print(f"{bad} wrong results")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())  # @module
