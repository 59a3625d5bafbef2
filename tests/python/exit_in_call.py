"""exit_in_call.py MODE -- the interpreter shuts down while NCCL calls are under way.

  exit      rank 0's daemon thread blocks in an AllReduce rank 1 never joins (@daemon_call,
            reached through blocker -> hold); rank 0's main thread then calls sys.exit(7)
  fall_off  the same, and rank 0's main thread falls off the end of the script (status 0)
  atexit    every rank registers an atexit handler that makes an AllReduce (@atexit_call);
            an object torn down with __main__ makes a barrier (@del_barrier) and destroys the
            communicator (@del_destroy) once finalization started; sys.exit(5)
"""
import atexit
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyranks  # noqa: E402

lib = pyranks.load()


def hold():
    return lib.pr_all_reduce(4)  # @daemon_call


def blocker():
    hold()  # @blocker
    os.write(2, b"the blocked AllReduce returned\n")


def on_exit():
    rc = lib.pr_all_reduce(4)  # @atexit_call
    os.write(1, b"atexit allreduce %d\n" % rc)


class Teardown:
    """Held only by __main__: its __del__ runs when finalization clears the module."""

    def __init__(self):
        self.barrier, self.destroy = lib.pr_barrier, lib.pr_destroy
        self.write = os.write

    def __del__(self):
        rc = self.barrier()  # @del_barrier
        rc2 = self.destroy()  # @del_destroy
        self.write(1, b"teardown %d %d\n" % (rc, rc2))


mode = sys.argv[1]
rank = lib.pr_init()
if mode in ("exit", "fall_off"):
    if rank == 0:
        threading.Thread(target=blocker, daemon=True).start()
        while lib.pr_entered() < 1:
            time.sleep(0.005)
        time.sleep(0.3)  # well inside the call now
        print("main thread leaving", flush=True)
        if mode == "exit":
            sys.exit(7)
else:
    pyranks.check(lib.pr_barrier(), "barrier")
    atexit.register(on_exit)
    teardown = Teardown()
    sys.exit(5)
