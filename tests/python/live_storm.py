"""live_storm.py SECONDS [STOP_FILE] -- a Python program that pushes and pops frames as fast as
it can (recursion, generators, exceptions, comprehensions) after one NCCL call, while the test
interrupts it with the shim's live-stack signal thousands of times: every interruption reads the
frame chain wherever the interpreter was. It churns for SECONDS seconds, or with STOP_FILE until
that file exists (SECONDS is then only a bound), so a slow machine gets as many interruptions
as a fast one. Prints "ok" when it got to the end."""
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


def churn(seconds, stop_file):
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        for depth in range(0, 40, 3):
            recurse(depth)
        n += 1
        if stop_file:
            try:  # os.stat, not os.path.exists: no Python frame of a library in the stacks
                os.stat(stop_file)
                break
            except FileNotFoundError:
                pass
    return n


def main():
    lib.pr_init()
    pyranks.check(lib.pr_all_reduce(4), "all_reduce")  # the trace and the layout check
    print("ready", flush=True)
    churn(float(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None)
    pyranks.check(lib.pr_all_reduce(4), "all_reduce after")
    pyranks.check(lib.pr_destroy(), "destroy")
    print("ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
