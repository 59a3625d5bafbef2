"""stories.py -- real PyTorch DDP jobs on real NCCL that hang or die the ways users report them.

Run by torchrun, one process per rank: `torchrun --standalone --nproc_per_node 4 stories.py
STORY`. tests/gpu/run.py runs each story under `lockstep run` and checks the diagnosis against
the `# @marker` lines below. Stories:

  prepare_data    rank 0 prepares data in Python for minutes after a few steps; the others
                  wait at the barrier that follows
  uneven_val      validation shards of different sizes: rank 3 runs out of batches and reaches
                  the end-of-validation all_reduce (2 values) while the others still reduce a
                  batch's loss (1 value)
  init_paths      rank 2 finds no checkpoint, skips the broadcast of the loaded weights that
                  the others do and goes straight into DDP's constructor
  resume          resuming from a checkpoint, rank 1 reads a stale data-loader position: it has
                  two steps left when the others reach the end-of-epoch all_reduce
  sigkill         rank 2 is SIGKILLed in the middle of training (the OOM killer's way); the
                  launcher stops the rest
  watchdog        as prepare_data, with PyTorch's NCCL watchdog timeout shortened
                  (STORY_TIMEOUT_S): the waiting ranks abort, then the launcher stops rank 0.
                  The steps also all_reduce one value, so that the barrier's all_reduce finds
                  NCCL's small-message connections made and waits on the GPU, where the
                  watchdog sees it (a call still connecting inside NCCL is not yet work the
                  watchdog times: on a real GPU the job then never timed out)
  gpu_stuck       a collective stuck on the GPU while every host runs on: rank 1 launches a
                  kernel that spins for minutes (torch.cuda._sleep) on its stream, then the
                  all_reduce, so its NCCL kernel waits behind the spin and the other ranks'
                  kernels wait for it on the GPU; every host returns from the call and waits
                  in torch.cuda.synchronize, outside NCCL
  clean           a few steps, then exit (every wrapped call the job makes, recorded once)

Several ranks share one GPU when the machine has fewer GPUs than ranks. NCCL 2.30+ allows that
with NCCL_MULTI_RANK_GPU_ENABLE=1; older NCCL refuses two ranks of one host on one device
("Duplicate GPU detected"), so each rank then names its own host (NCCL_HOSTID) and the ranks
talk through NCCL's socket transport on the loopback (run.py sets NCCL_SOCKET_IFNAME=lo)."""
import datetime
import os
import signal
import sys
import time

STORY = sys.argv[1] if len(sys.argv) > 1 else "clean"
RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
LOCAL_WORLD = int(os.environ.get("LOCAL_WORLD_SIZE", WORLD))
BUSY_S = float(os.environ.get("STORY_BUSY_S", "600"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402


def place_rank():
    n = torch.cuda.device_count()
    if n == 0:
        sys.exit("stories.py: no CUDA device")
    if n < LOCAL_WORLD:
        os.environ.setdefault("NCCL_MULTI_RANK_GPU_ENABLE", "1")
        os.environ.setdefault("NCCL_HOSTID", f"lockstep-gpu-rank-{RANK}")
    dev = int(os.environ.get("LOCAL_RANK", RANK)) % n
    torch.cuda.set_device(dev)
    return torch.device("cuda", dev)


def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))


def batch(dev, step):
    g = torch.Generator().manual_seed(1000 * RANK + step)
    x = torch.randn(64, 256, generator=g)
    y = torch.randint(0, 10, (64,), generator=g)
    return x.to(dev), y.to(dev)


def train_step(model, opt, dev, step):
    x, y = batch(dev, step)
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()  # DDP's gradient all_reduce, from the autograd engine's thread
    opt.step()
    return loss.detach()


def prepare_data():
    """Rank 0's long preprocessing, in Python (tokenizing, building an index...)."""
    x, deadline = 1, time.monotonic() + BUSY_S
    while time.monotonic() < deadline:  # @prep_loop
        for _ in range(1000):
            x = (x * 31 + 7) % 1000003  # @prep_body
    return x


def story_prepare_data(dev):
    model = DDP(net().to(dev))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(3):
        train_step(model, opt, dev, step)
        if STORY == "watchdog":  # log the loss: NCCL connects its small-message path now
            dist.all_reduce(torch.zeros(1, device=dev))
    torch.cuda.synchronize()
    if RANK == 0:
        prepare_data()  # @call_prepare
    dist.barrier()  # @barrier
    for step in range(3, 6):
        train_step(model, opt, dev, step)


def validate(dev, batches):
    total = torch.zeros(2, device=dev)
    for i in range(batches):
        loss = torch.full((1,), float(i), device=dev)
        dist.all_reduce(loss)  # @val_batch
        total += torch.cat([loss, torch.ones(1, device=dev)])
    dist.all_reduce(total)  # @val_end
    return total


def story_uneven_val(dev):
    model = DDP(net().to(dev))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(2):
        train_step(model, opt, dev, step)
    # Each rank validates its own shard: 100 samples split without padding, 32 a batch.
    validate(dev, 2 if RANK == WORLD - 1 else 4)  # @call_validate
    torch.cuda.synchronize()
    for step in range(2, 4):
        train_step(model, opt, dev, step)


def story_init_paths(dev):
    dist.all_reduce(torch.ones(1, device=dev))  # @hello: every rank is up
    model = net().to(dev)
    if RANK != 2:  # rank 2's node has no checkpoint: it starts from scratch
        for p in model.state_dict().values():
            dist.broadcast(p, 0)  # @resume_bcast
    model = DDP(model)  # @ddp_init
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(3):
        train_step(model, opt, dev, step)


def story_resume(dev):
    model = DDP(net().to(dev))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    steps_per_epoch = 8
    start = 4 if RANK == 1 else 6  # rank 1 read the step of an older checkpoint
    epoch_loss = torch.zeros(1, device=dev)
    for step in range(start, steps_per_epoch):
        epoch_loss += train_step(model, opt, dev, step)  # @resume_step
    dist.all_reduce(epoch_loss)  # @epoch_end
    torch.cuda.synchronize()


def story_sigkill(dev):
    model = DDP(net().to(dev))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(1000):
        if RANK == 2 and step == 4:
            torch.cuda.synchronize()
            os.kill(os.getpid(), signal.SIGKILL)  # @kill
        train_step(model, opt, dev, step)  # @sigkill_step
        torch.cuda.synchronize()
        time.sleep(0.05)


def story_gpu_stuck(dev):
    x = torch.ones(1, device=dev)
    for _ in range(3):  # NCCL's connections for this size are made: the stuck call waits on the GPU
        dist.all_reduce(x)  # @warm
    torch.cuda.synchronize()
    if RANK == 1:
        torch.cuda._sleep(int(float(os.environ.get("STORY_SPIN_CYCLES", "2.4e11"))))  # @spin
    dist.all_reduce(x)  # @stuck_call
    torch.cuda.synchronize()  # @host_sync


def story_clean(dev):
    model = DDP(net().to(dev))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(4):
        train_step(model, opt, dev, step)
    t = torch.arange(4, dtype=torch.float32, device=dev)
    dist.broadcast(t, 0)
    out = [torch.zeros(4, device=dev) for _ in range(WORLD)]
    dist.all_gather(out, t)
    dist.reduce_scatter_tensor(torch.zeros(1, device=dev), torch.ones(WORLD, device=dev))
    if WORLD >= 2:
        if RANK == 0:
            dist.send(t, 1)
        elif RANK == 1:
            dist.recv(t, 0)
    dist.barrier()
    torch.cuda.synchronize()


STORIES = {
    "prepare_data": story_prepare_data,
    "watchdog": story_prepare_data,
    "uneven_val": story_uneven_val,
    "init_paths": story_init_paths,
    "resume": story_resume,
    "sigkill": story_sigkill,
    "gpu_stuck": story_gpu_stuck,
    "clean": story_clean,
}


def main():
    dev = place_rank()
    timeout = datetime.timedelta(seconds=float(os.environ.get("STORY_TIMEOUT_S", "900")))
    dist.init_process_group("nccl", timeout=timeout)
    STORIES[STORY](dev)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())  # @module
