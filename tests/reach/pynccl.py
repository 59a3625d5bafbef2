#!/usr/bin/env python3
"""pynccl.py -- NCCL through Python's ctypes, the way vLLM's pynccl and nccl4py reach it:
ctypes.CDLL on libnccl.so.2 (RTLD_LOCAL), every function looked up by name with dlsym.

Usage: pynccl.py LIBNCCL clean|hang. Rank and size from RANK/WORLD_SIZE, the unique id through
$LOCKSTEP_TEST_IDFILE.world (launch-ranks sets both). In hang mode rank $REACH_VICTIM (default
1) passes a count of 8 at step 3 where the others pass 16: the job hangs (count mismatch).
The emulator runs on the CPU, so buffers are host memory."""
import ctypes
import os
import sys
import time

NCCL_FLOAT32, NCCL_SUM = 7, 0


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]


def exchange_id(nccl, rank):
    path = os.environ["LOCKSTEP_TEST_IDFILE"] + ".world"
    uid = UniqueId()
    if rank == 0:
        check(nccl.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
        with open(path + ".tmp", "wb") as f:
            f.write(bytes(uid.internal))
        os.rename(path + ".tmp", path)
        return uid
    while True:
        try:
            with open(path, "rb") as f:
                data = f.read()
            if len(data) == 128:
                ctypes.memmove(ctypes.byref(uid), data, 128)
                return uid
        except FileNotFoundError:
            pass
        time.sleep(0.01)


def check(result, what):
    if result != 0:
        sys.exit(f"pynccl: {what} returned {result}")


def all_reduce(nccl, comm, send, recv, count):
    check(nccl.ncclAllReduce(send, recv, ctypes.c_size_t(count), NCCL_FLOAT32, NCCL_SUM, comm,
                             None), "ncclAllReduce")


def main():
    lib, mode = sys.argv[1], sys.argv[2]
    nccl = ctypes.CDLL(lib)
    rank, size = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    victim = int(os.environ.get("REACH_VICTIM", "1"))
    uid = exchange_id(nccl, rank)
    comm = ctypes.c_void_p()
    check(nccl.ncclCommInitRank(ctypes.byref(comm), size, uid, rank), "ncclCommInitRank")
    send = (ctypes.c_float * 16)(*([rank + 1.0] * 16))
    recv = (ctypes.c_float * 16)()
    for step in range(1, 6):
        count = 8 if mode == "hang" and step == 3 and rank == victim else 16
        all_reduce(nccl, comm, send, recv, count)
    check(nccl.ncclCommDestroy(comm), "ncclCommDestroy")
    print(f"sum {recv[0]:.1f}")


if __name__ == "__main__":
    main()
