"""overhead.py -- what the shim adds where it matters, on a real GPU. tests/gpu/run.py runs each
mode with and without the shim, alternating, and reports the ratio.

  small   one rank: N all_reduce of 1 fp32 through torch.distributed, the GPU synchronized
          once at the end: the host-side cost of a call (PyTorch's, NCCL's, the shim's)
  large   one rank: all_reduce of 64 MiB, synchronized after each: a call the GPU dominates
  step    torchrun, 2 ranks: a DDP training step of a small model (forward, backward with the
          gradient all_reduce, optimizer), synchronized after each
  one     small, then large, in one process (one start for both)

Prints one JSON line {"mode", "per_call_us"} per mode (rank 0 only for `step`). `large` also
splits a call's time: `call_us` (the host in dist.all_reduce), `gpu_us` (CUDA events on the
current stream before and after it: the collective and the stream waits) and `sync_us` (the
synchronize after it), each the median of its calls. With OVH_PROFILE=1 `large` also prints
{"mode": "profile", "gpu": {name: [count, total_us]}, "cpu": {...}}: torch.profiler's view of
20 calls, to show work the GPU or the CUDA runtime does under the shim and not without it."""
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


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def split_large(x, n):
    """Medians of the host's time in the call, the GPU's between events around it, and the
    synchronize after it."""
    call, gpu, sync = [], [], []
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(n):
        t0 = time.perf_counter()
        a.record()
        dist.all_reduce(x)
        t1 = time.perf_counter()
        b.record()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        call.append((t1 - t0) * 1e6)
        sync.append((t2 - t1) * 1e6)
        gpu.append(a.elapsed_time(b) * 1e3)
    return {"call_us": round(median(call), 3), "gpu_us": round(median(gpu), 3),
            "sync_us": round(median(sync), 3)}


def profile_large(x, n):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            dist.all_reduce(x)
            torch.cuda.synchronize()
    gpu, cpu = {}, {}
    for e in prof.key_averages():
        dev = getattr(e, "self_device_time_total", None)
        if dev is None:
            dev = getattr(e, "self_cuda_time_total", 0)
        if dev:
            gpu[e.key[:120]] = [e.count, round(dev, 1)]
        elif e.key.startswith(("cuda", "cu")):
            cpu[e.key[:120]] = [e.count, round(e.self_cpu_time_total, 1)]
    return {"mode": "profile", "gpu": gpu, "cpu": cpu}


def run_small():
    x = torch.ones(1, device="cuda")
    us = timed(lambda: dist.all_reduce(x), 20000, False)
    print(json.dumps({"mode": "small", "per_call_us": round(us, 3)}), flush=True)


def run_large():
    x = torch.ones(16 << 20, device="cuda")  # 64 MiB of fp32
    blocks = [timed(lambda: dist.all_reduce(x), 100, True) for _ in range(5)]
    out = {"mode": "large", "per_call_us": round(median(blocks), 3),
           "blocks_us": [round(b, 3) for b in blocks]}
    out.update(split_large(x, 200))
    print(json.dumps(out), flush=True)
    if os.environ.get("OVH_PROFILE") == "1":
        print(json.dumps(profile_large(x, 20)), flush=True)


def main():
    if MODE in ("small", "large", "one"):
        init_one_rank()
        if MODE in ("small", "one"):
            run_small()
        if MODE in ("large", "one"):
            run_large()
        dist.destroy_process_group()
        return 0
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
