"""torch_worker.py - one process of a PyTorch DistributedDataParallel job; torchrun starts one per rank.

Lesson 12's draft. torchrun sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT; on Slurm, torchrun itself is what
srun starts, once per node (PyTorch's own Slurm example does that). Gloo on CPUs, NCCL on GPUs. Usage:
``torchrun ... torch_worker.py OUT_DIR``; rank 0 writes the trained weights to ``OUT_DIR/trained.pt``, and every
rank prints one JSON line.
"""
import hashlib
import json
import sys

import torch
import torch.distributed as dist
from sklearn.datasets import load_digits
from torch.nn.parallel import DistributedDataParallel

out, global_batch, epochs = sys.argv[1], 64, 3
dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")   # reads torchrun's variables
rank, world = dist.get_rank(), dist.get_world_size()

bunch = load_digits()                                   # bundled with scikit-learn: no download
x = torch.tensor(bunch.data / 16.0, dtype=torch.float32)
y = torch.tensor(bunch.target)
keep = len(x) // global_batch * global_batch           # whole global batches only
x, y = x[:keep], y[:keep]
part = global_batch // world                           # my rows of every global batch
mine = torch.arange(keep).reshape(-1, world, part)[:, rank].reshape(-1)

torch.manual_seed(7)                                    # DDP also copies rank 0's weights to every rank
model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)))
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
losses = []
for _ in range(epochs):
    total = torch.zeros(())
    for step in range(len(mine) // part):
        rows = mine[step * part:(step + 1) * part]
        loss = torch.nn.functional.cross_entropy(model(x[rows]), y[rows])   # the mean over my rows
        optimizer.zero_grad()
        loss.backward()                                 # DDP averages the gradients over the ranks here
        optimizer.step()
        total += loss.detach()
    dist.all_reduce(total)                              # the epoch's loss, averaged over all ranks
    losses.append(float(total) / world / (len(mine) // part))
state = {k: v.detach().clone() for k, v in model.module.state_dict().items()}
digest = hashlib.sha256(b"".join(v.numpy().tobytes() for v in state.values())).hexdigest()[:16]
if rank == 0:
    torch.save(state, f"{out}/trained.pt")
print(json.dumps({"rank": rank, "world": world, "rows": len(mine), "weights": digest, "loss": losses}), flush=True)
dist.destroy_process_group()
