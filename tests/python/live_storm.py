"""live_storm.py -- a Python program that pushes and pops frames as fast as it can (recursion,
generators, exceptions, comprehensions) for SECONDS seconds after one NCCL call, while the
test interrupts it with the shim's live-stack signal thousands of times: every interruption
reads the frame chain wherever the interpreter was. Prints "ok" when it got to the end."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyranks  # noqa: E402

lib = pyranks.load()


def gen(n):
    for i in range(n):
        yield i * i


def recurse(k):
    if k == 0:
        try:
            raise ValueError(sum(gen(5)))
        except ValueError as e:
            return [x for x in e.args]
    return recurse(k - 1)


def churn(seconds):
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        for depth in range(0, 40, 3):
            recurse(depth)
        n += 1
    return n


def main():
    lib.pr_init()
    pyranks.check(lib.pr_all_reduce(4), "all_reduce")  # the trace and the layout check
    print("ready", flush=True)
    churn(float(sys.argv[1]))
    pyranks.check(lib.pr_all_reduce(4), "all_reduce after")
    pyranks.check(lib.pr_destroy(), "destroy")
    print("ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
