"""lightning_stories.py -- two of the stories as Lightning users meet them, on real NCCL.

Run by torchrun (`torchrun --standalone --nproc_per_node 4 lightning_stories.py STORY`);
tests/gpu/run.py runs it under `lockstep run`. Stories:

  prepare_data  LightningDataModule.prepare_data (prepare_data_per_node=False: global rank 0
                only) runs for minutes; the other ranks wait in the barrier Lightning puts
                after it
  uneven_val    each rank validates its own shard (no distributed sampler), rank 3's is
                shorter; validation_step gathers each batch's loss from every rank

On a machine with fewer GPUs than ranks, every rank is told it is alone on its node
(LOCAL_RANK 0, GROUP_RANK = RANK), so Lightning places each on GPU 0; see stories.py for how
NCCL is let put several ranks on one GPU."""
import os
import sys
import time

STORY = sys.argv[1] if len(sys.argv) > 1 else "prepare_data"
RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
BUSY_S = float(os.environ.get("STORY_BUSY_S", "600"))

import torch  # noqa: E402

if torch.cuda.device_count() < int(os.environ.get("LOCAL_WORLD_SIZE", WORLD)):
    os.environ.update(LOCAL_RANK="0", LOCAL_WORLD_SIZE="1", GROUP_RANK=str(RANK))
    os.environ.setdefault("NCCL_MULTI_RANK_GPU_ENABLE", "1")
    os.environ.setdefault("NCCL_HOSTID", f"lockstep-gpu-rank-{RANK}")
    NODES, DEVICES = WORLD, 1
else:
    NODES, DEVICES = 1, WORLD

import lightning as L  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402


def dataset(n, seed):
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randn(n, 32, generator=g), torch.randint(0, 4, (n,), generator=g))


class Data(L.LightningDataModule):
    def __init__(self):
        super().__init__()
        self.prepare_data_per_node = False  # one download for the whole job

    def prepare_data(self):
        if STORY != "prepare_data":
            return
        x, deadline = 1, time.monotonic() + BUSY_S
        while time.monotonic() < deadline:  # @prep_loop
            for _ in range(1000):
                x = (x * 31 + 7) % 1000003  # @prep_body

    def train_dataloader(self):
        return DataLoader(dataset(128, RANK), batch_size=32)

    def val_dataloader(self):
        # Each rank's own shard: in uneven_val rank 3's is the short one (in prepare_data every
        # shard is as long, so the job ends by itself once prepare_data has).
        n = 64 if RANK == WORLD - 1 and STORY == "uneven_val" else 128
        return DataLoader(dataset(n, 100 + RANK), batch_size=32)


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))

    def training_step(self, b, i):
        x, y = b
        return F.cross_entropy(self.net(x), y)

    def validation_step(self, b, i):
        x, y = b
        loss = F.cross_entropy(self.net(x), y)
        # A per-batch gather for the metric (self.log(sync_dist=True) syncs once per epoch in
        # Lightning 2.x, which uneven shards do not hang).
        losses = self.all_gather(loss)  # @val_log
        self.log("val_loss", losses.mean())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main():
    trainer = L.Trainer(accelerator="gpu", devices=DEVICES, num_nodes=NODES, strategy="ddp",
                        max_epochs=3, use_distributed_sampler=False, enable_checkpointing=False,
                        logger=False, enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0)
    trainer.fit(Model(), datamodule=Data())  # @fit
    return 0


if __name__ == "__main__":
    sys.exit(main())  # @module
