"""fork_child.py -- os.fork() in a traced Python process (the heartbeat thread running): the
child makes a communicator of its own, calls NCCL from the line the parent used before the
fork (same Python stack) and from a line of its own; each process's trace names its own lines.
Prints "ok" from the parent when both did their part."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyranks  # noqa: E402

lib = pyranks.load()


def new_comm():
    """The child's own communicator (the parent's belongs to the parent)."""
    if os.environ.get("LOCKSTEP_TEST_IDFILE"):  # not the parent's id file
        os.environ["LOCKSTEP_TEST_IDFILE"] += ".child"
    lib.pr_init()


def main():
    lib.pr_init()
    pid = None
    for i in range(2):
        if i == 1:
            pid = os.fork()
            if pid == 0:
                new_comm()
        # The parent before the fork, then parent and child: one Python stack, seen by the
        # child's shim for the first time in the child's trace.
        pyranks.check(lib.pr_all_reduce(5), "all_reduce")  # @shared
    if pid == 0:
        pyranks.check(lib.pr_all_reduce(6), "child all_reduce")  # @child_call
        pyranks.check(lib.pr_destroy(), "child destroy")
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise SystemExit(f"child status {status}")
    pyranks.check(lib.pr_all_reduce(7), "parent all_reduce after")  # @parent_after
    pyranks.check(lib.pr_destroy(), "destroy")
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())  # @module
