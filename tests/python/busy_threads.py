"""busy_threads.py CALLS -- Python threads stay busy running Python code (pure-Python loops and
recursion, allocations, cycles and GC, exceptions, generators) while one thread calls NCCL
through ctypes CALLS times: every 10th call a Broadcast (@w_bcast), the others AllReduces
(@w_allreduce). The main thread, busy too, makes one barrier (@main_barrier) before and after.
Prints "ok" when every result was right."""
import gc
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyranks  # noqa: E402

lib = pyranks.load()
stop = threading.Event()


class Node:
    def __init__(self, parent):
        self.parent = parent
        self.children = [self]  # a cycle: only the GC frees it


def churn(n):
    """Allocations, reference cycles and collections."""
    keep = []
    while not stop.is_set():
        keep.append([Node(None) for _ in range(50)])
        d = {i: str(i) * (i % 7) for i in range(100)}
        del d
        if len(keep) > 20:
            keep.clear()
            gc.collect(n % 3)


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def squares(n):
    for i in range(n):
        yield i * i


def spin():
    """Pure Python: recursion, generators, exceptions, code compiled on the fly."""
    i = 0
    while not stop.is_set():
        fib(12)
        sum(squares(200))
        try:
            raise KeyError(i)
        except KeyError:
            pass
        exec(compile(f"x = {i} * 2", "<spin>", "exec"), {})
        i += 1


def nccl_worker(calls, nranks, result):
    bad = 0
    for i in range(calls):
        if i % 10 == 9:
            bad += lib.pr_broadcast(3, i % nranks) != 0  # @w_bcast
        else:
            bad += lib.pr_all_reduce(4) != 0  # @w_allreduce
    result.append(bad)


def main():
    calls = int(sys.argv[1])
    sys.setswitchinterval(0.0002)  # hand the GIL back quickly to the thread leaving NCCL
    lib.pr_init()
    nranks = lib.pr_world_size()
    pyranks.check(lib.pr_barrier(), "barrier")  # @main_barrier
    busy = [threading.Thread(target=churn, args=(k,), daemon=True) for k in range(2)]
    busy.append(threading.Thread(target=spin, daemon=True))
    for t in busy:
        t.start()
    result = []
    worker = threading.Thread(target=nccl_worker, args=(calls, nranks, result))
    worker.start()
    while worker.is_alive():  # the main thread keeps busy too
        fib(10)
        worker.join(0.001)
    stop.set()
    for t in busy:
        t.join()
    pyranks.check(lib.pr_barrier(), "barrier")  # @main_barrier_end
    pyranks.check(lib.pr_destroy(), "destroy")
    if result != [0]:
        print(f"wrong results: {result}")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
