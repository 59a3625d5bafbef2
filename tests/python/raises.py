"""raises.py -- ranks that end with an uncaught exception (why_* cases of test_python.py).

WHY_CASE picks the story; the test finds the lines by their marker comments (@name):
  one      rank 2 logs 12 KiB to stderr per step and raises in load() at step 3; the others wait
           for it in the next AllReduce
  cascade  rank 1 raises a ValueError first; rank 0 gives up on the AllReduce that waits for it
           (a watchdog's DistBackendError, 2 s later); rank 2, busy outside NCCL, raises a
           KeyError 4 s later
  chained  rank 1 raises RuntimeError from the FileNotFoundError it met opening a shard
  record   every rank runs main() under torchrun's @record; rank 1 raises (torchrun case)
  cuda     AllReduces on the emulated GPU (LOCKSTEP_EMU_ASYNC=1); rank 1's GPU faults
           (LOCKSTEP_EMU_CUDA_FAULT) and it raises the CUDA error its synchronization returned
"""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyranks  # noqa: E402

CASE = os.environ.get("WHY_CASE", "one")
STEPS = 6
lib = pyranks.load()


class DistBackendError(RuntimeError):
    """What PyTorch raises when its watchdog gives up on a collective."""


def load(rank, step):
    if rank == 2:  # a job that logs to stderr: 12 KiB per step, more than the shim's ring holds
        sys.stderr.write("".join(f"step {step} batch {i}: loss 0.{i:04d}\n" for i in range(500)))
    if rank == 2 and step == 3:
        raise RuntimeError("Expected a 'cuda' device type for generator but found 'cpu'")  # @one
    return step


def open_shard(rank):
    raise FileNotFoundError(f"shard-{rank}.bin is missing")  # @original


def load_chained(rank, step):
    if rank == 1 and step == 3:
        try:
            open_shard(rank)
        except OSError as e:
            raise RuntimeError("could not load the next batch") from e  # @chained
    return step


def watched_all_reduce(timeout):
    """An AllReduce given up on after `timeout` s, as PyTorch's watchdog does."""
    t = threading.Thread(target=lib.pr_all_reduce, args=(4,), daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise DistBackendError(f"AllReduce timed out after {timeout} s")  # @watchdog
    return 0


def cascade(rank, step):
    if step < 3:
        return lib.pr_all_reduce(4)
    if rank == 1:
        raise ValueError("bad batch size 0")  # @first
    if rank == 0:
        time.sleep(0.5)
        return watched_all_reduce(2.0)
    time.sleep(4.0)
    raise KeyError("labels")  # @last


def record_step(rank, step):
    if rank == 1 and step == 3:
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")  # @record
    return step


def cuda_step():
    pyranks.check(lib.pr_all_reduce_async(), "AllReduce")
    rc = lib.pr_sync()
    if rc != 0:
        raise RuntimeError(f"CUDA error: an illegal memory access was encountered ({rc})")  # @cuda


def main():
    rank = lib.pr_init()
    for step in range(STEPS):
        if CASE == "cuda":
            cuda_step()
            continue
        if CASE == "cascade":
            pyranks.check(cascade(rank, step), f"step {step}")
            continue
        if CASE == "one":
            load(rank, step)
        elif CASE == "chained":
            load_chained(rank, step)
        elif CASE == "record":
            record_step(rank, step)
        pyranks.check(lib.pr_all_reduce(4), f"step {step}")
    pyranks.check(lib.pr_destroy(), "destroy")
    print("ok", flush=True)
    return 0


if __name__ == "__main__":
    if CASE == "record":
        from torch.distributed.elastic.multiprocessing.errors import record

        main = record(main)
    sys.exit(main())
