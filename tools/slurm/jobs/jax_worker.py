"""jax_worker.py - one process of a 2-process keras.distribution job (JAX backend); lesson 08's worker, drafted.

``keras.distribution.initialize()`` takes no arguments: under srun, JAX reads the coordinator (the step's first
node, a port from the job id), the process count and this process's id from Slurm's variables; started by hand,
Keras reads ``KERAS_DISTRIBUTION_JOB_ADDRESSES``, ``..._NUM_PROCESSES`` and ``..._PROCESS_ID``. Usage:
``python jax_worker.py OUT_DIR``; process 0 writes the trained weights to ``OUT_DIR/trained.npz``, and every
process prints one JSON line.
"""
import json
import sys

sys.modules["tensorflow"] = None         # not needed here: keeps set_random_seed from importing it
import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import distribution as kd  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

out, batch, epochs, seed = sys.argv[1], 64, 3, 7
keras.utils.set_random_seed(seed)                   # the same seed everywhere: the same initial weights
kd.initialize()                                     # who the others are: from Slurm, or from KERAS_DISTRIBUTION_*
kd.set_distribution(kd.DataParallel(devices=kd.list_devices(), auto_shard_dataset=False))
me, n = jax.process_index(), jax.process_count()

bunch = load_digits()                               # bundled with scikit-learn: no download
keep = len(bunch.data) // batch * batch             # whole global batches only
x, y = (bunch.data[:keep] / 16.0).astype("float32"), bunch.target[:keep]
part = batch // n                                   # my rows of every global batch: process 0's devices first
x_mine = x.reshape(-1, n, part, x.shape[1])[:, me].reshape(-1, x.shape[1])
y_mine = y.reshape(-1, n, part)[:, me].reshape(-1)

model = keras.Sequential([keras.Input((x.shape[1],)), keras.layers.Dense(128, activation="relu", name="d1"),
                          keras.layers.Dense(10, activation="softmax", name="d2")], name="mlp")
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
hist = model.fit(x_mine, y_mine, batch_size=part, epochs=epochs, shuffle=False, verbose=0)
weights = model.get_weights()                       # every process reads...
if me == 0:                                         # ...and one process writes
    np.savez(f"{out}/trained.npz", *weights)
print(json.dumps({"process": me, "processes": n, "rows": len(x_mine), "devices": [str(d) for d in kd.list_devices()],
                  "local": [str(d) for d in jax.local_devices()], "loss": hist.history["loss"]}), flush=True)
