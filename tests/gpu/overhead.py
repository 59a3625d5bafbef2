"""overhead.py -- what the shim adds where it matters, on a real GPU. tests/gpu/run.py runs each
mode with and without the shim, alternating, and reports the ratio.

  small   one rank: N all_reduce of 1 fp32 through torch.distributed, the GPU synchronized
          once at the end: the host-side cost of a call (PyTorch's, NCCL's, the shim's)
  large   one rank: all_reduce of 64 MiB, synchronized after each: a call the GPU dominates
  step    torchrun, 2 ranks: a DDP training step of a small model (forward, backward with the
          gradient all_reduce, optimizer), synchronized after each

Prints one JSON line {"mode", "per_call_us"} (rank 0 only for `step`)."""
import datetime
import json
import os
import sys
import time

MODE = sys.argv[1]

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def init_one_rank():
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29600 + os.getpid() % 200))
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=120))


def timed(fn, n, sync_each):
    for _ in range(max(10, n // 20)):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
        if sync_each:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6


def main():
    if MODE == "small":
        init_one_rank()
        x = torch.ones(1, device="cuda")
        us = timed(lambda: dist.all_reduce(x), 20000, False)
    elif MODE == "large":
        init_one_rank()
        x = torch.ones(16 << 20, device="cuda")  # 64 MiB of fp32
        us = timed(lambda: dist.all_reduce(x), 200, True)
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        sys.argv = [sys.argv[0], "clean"]
        import stories
        dev = stories.place_rank()
        dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=120))
        model = torch.nn.parallel.DistributedDataParallel(stories.net().to(dev))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        step = [0]

        def one():
            stories.train_step(model, opt, dev, step[0] % 16)
            step[0] += 1

        us = timed(one, 300, True)
    if dist.get_rank() == 0:
        print(json.dumps({"mode": MODE, "per_call_us": round(us, 3)}), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
