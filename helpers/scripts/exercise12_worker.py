"""Exercise 12.1/12.2's worker, one of two gloo ranks: ``torchrun --standalone --nproc_per_node=2 worker.py MODE``,
beside answer.py (the learner's function; ``ANSWERS`` lists it, or the course's tests' several); started by
helpers/exercises/lesson12.py. Runs each answer on a fresh model and writes out-K-RANK.json for the K-th.
"""

import ctypes
import json
import os
import signal
import sys

if sys.platform.startswith("linux"):   # die with torchrun: it starts each rank in a session of its own
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
os.environ["KERAS_BACKEND"] = "torch"
sys.modules["tensorflow"] = sys.modules["jax"] = None  # not used: Keras would import them if installed
import keras  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from answer import ANSWERS  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402
from torch.utils.data import DataLoader, DistributedSampler  # noqa: E402

GLOBAL, STEPS, LR = 32, 2, 0.5     # rows per step over both ranks; steps (or epochs); SGD's learning rate


class Mode(keras.layers.Layer):   # passes its input on; records the `training` flag of every call
    def __init__(self):
        super().__init__()
        self.calls = []

    def call(self, x, training=False):   # Keras sets it from the model's call, never from PyTorch's .train()
        self.calls.append(bool(training))
        return x


def model_fn():               # fixed first weights: the same on both ranks and in the reference
    model = keras.Sequential([keras.Input((8,)), Mode(), keras.layers.Dense(3)])
    model.layers[0].calls.clear()        # building the model called it once, symbolically
    rng = np.random.default_rng(1)
    model.set_weights([rng.uniform(-0.5, 0.5, w.shape).astype("float32") for w in model.get_weights()])
    return model


def flat(model):
    return np.concatenate([w.ravel() for w in model.get_weights()]).tolist()


class Logged(torch.utils.data.Dataset):   # remembers which rows this rank read, in order
    def __init__(self, x, y):
        self.x, self.y, self.read = x, y, []

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        self.read.append(int(i))
        return self.x[i], self.y[i]


def run_answer(answer, *args):  # the learner's function; what it raises is kept for the checker's message
    try:
        answer(*args)
    except Exception as e:
        with open(f"error-{dist.get_rank()}.txt", "w") as f:
            f.write(f"{type(e).__name__}: {e}")
        raise


def run_one(k, answer):         # one answer on a fresh model, its own optimizer, rows and folders; its DDP wrapper
    with keras.device("cpu"):
        model = model_fn()
        ddp = DistributedDataParallel(model)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=LR)
        out = {"rank": rank, "start": flat(model), "after": []}
        if sys.argv[1] == "step":      # the learner's train_step twice on this rank's rows; one process's steps beside
            ref, out["reference"] = model_fn(), []
            sgd = torch.optim.SGD(ref.parameters(), lr=LR)
            for s in range(STEPS):
                rows = slice(s * GLOBAL, (s + 1) * GLOBAL)
                run_answer(answer, ddp, optimizer, loss_fn, x[rows][rank::world], y[rows][rank::world])
                sgd.zero_grad()
                loss_fn(y[rows], ref(x[rows], training=True)).backward()      # the whole global batch
                sgd.step()
                out["after"].append(flat(model))
                out["reference"].append(flat(ref))
        else:                          # the learner's run_epochs: the rows each epoch read, the files each rank wrote
            data = Logged(x, y)
            loader = DataLoader(data, batch_size=GLOBAL // world, sampler=DistributedSampler(data, seed=0))
            mine = f"answer{k}/rank{rank}"              # a folder per rank, to see who writes
            os.makedirs(mine, exist_ok=True)
            run_answer(answer, ddp, loader, optimizer, loss_fn, STEPS, mine)
            out.update(read=data.read, per_epoch=len(data) // world, files=sorted(os.listdir(mine)), after=flat(model))
    out["training"] = model.layers[0].calls    # the flag of each of the learner's calls of the model
    with open(f"out-{k}-{rank}.json", "w") as f:  # in the working folder, the checker's
        json.dump(out, f)
    return ddp


dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
rng = np.random.default_rng(0)
x = torch.tensor(rng.normal(size=(GLOBAL * STEPS, 8)), dtype=torch.float32)
y = torch.tensor(rng.integers(0, 3, GLOBAL * STEPS))
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
for k, answer in enumerate(ANSWERS):
    ddp = run_one(k, answer)                   # the last answer's wrapper goes as the next one's comes
del ddp                                        # it holds the process group: its gloo threads end with it
dist.destroy_process_group()
