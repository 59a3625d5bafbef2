"""outside.py -- the Python rank of tests/live/test_outside.py: a few AllReduces, then a barrier
that is not NCCL's (rank 0 accepts one Unix socket connection per other rank and answers each;
the others wait in recv), then one last AllReduce. Before the barrier rank 0 runs
prepare_data(), which takes a lock it already holds: the job hangs with no rank in NCCL, rank 0
on the lock and the others in their recv. NCCL is reached through ctypes
(tests/python/pyranks.py); OUTSIDE_SOCK names the socket."""
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import pyranks  # noqa: E402

lib = pyranks.load()
SOCK = os.environ.get("OUTSIDE_SOCK", "/tmp/outside-py.sock")
shard_lock = threading.Lock()


def load_shard():
    with shard_lock:  # @lock (held already: taken twice)
        pass


def prepare_data():
    with shard_lock:
        load_shard()


def serve_barrier(listener, world):
    conns = []
    while len(conns) < world - 1:
        c, _ = listener.accept()
        c.recv(4)
        conns.append(c)
    for c in conns:
        c.sendall(b"\x01")
        c.close()


def wait_barrier(rank):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    while True:
        try:
            s.connect(SOCK)
            break
        except OSError:
            time.sleep(0.02)
    s.sendall(rank.to_bytes(4, "little"))
    s.recv(1)  # @barrier
    s.close()


def main():
    rank = int(os.environ.get("RANK", "0"))
    listener = None
    if rank == 0:
        try:
            os.unlink(SOCK)
        except FileNotFoundError:
            pass
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(SOCK)
        listener.listen(64)
    lib.pr_init()
    world = lib.pr_world_size()
    for _ in range(3):
        pyranks.check(lib.pr_all_reduce(64), "all_reduce")
    if rank == 0:
        prepare_data()
        serve_barrier(listener, world)
    else:
        wait_barrier(rank)
    pyranks.check(lib.pr_all_reduce(1), "last all_reduce")
    return 0


if __name__ == "__main__":
    sys.exit(main())
