"""mwms_worker.py - one task of a MultiWorkerMirroredStrategy job; srun starts it once per task.

Lesson 07's worker, drafted for Slurm: the same custom loop (Keras 3 ``fit`` under MWMS fails, keras#20585), the
loss divided by the global batch, a ``tf.train.CheckpointManager`` backup with an epoch counter. Started by srun
without a TF_CONFIG, a task builds its own from Slurm's variables (``slurm_tf_config.py``, beside this file).
Each task appends one JSON line per epoch to ``<out>/history-worker-<i>.jsonl`` and writes ``result-worker-<i>.json``
at the end.
"""
import argparse
import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from slurm_tf_config import tf_config_from_slurm

if "SLURM_PROCID" in os.environ and "TF_CONFIG" not in os.environ:   # a task started by srun
    os.environ["TF_CONFIG"] = tf_config_from_slurm()

import keras  # noqa: E402 - after TF_CONFIG, as the strategy reads it
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int, default=3)
p.add_argument("--global-batch", type=int, default=64)       # examples per step, all workers together
p.add_argument("--min-epoch-seconds", type=float, default=0.0)
p.add_argument("--out", required=True)                       # history, results and the backup go here
args = p.parse_args()

impl = tf.distribute.experimental.CommunicationImplementation
gpus = tf.config.list_physical_devices("GPU")
strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=tf.distribute.experimental.
    CommunicationOptions(implementation=impl.NCCL if gpus else impl.RING))   # first, before other TF work
resolver = strategy.cluster_resolver
n_workers = len(resolver.cluster_spec().as_dict().get("worker", [])) or 1
index = resolver.task_id or 0
name, chief = f"worker-{index}", index == 0

bunch = load_digits()                                        # bundled with scikit-learn: no download
x, y = (bunch.images / 16.0).astype("float32")[..., None], bunch.target.astype("int64")


def dataset_fn(ctx, epoch):
    """This worker's batches of one epoch: its shard of one shared order, its share of the global batch."""
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=42 + epoch, reshuffle_each_iteration=False)
    ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
    return ds.batch(ctx.get_per_replica_batch_size(args.global_batch), drop_remainder=True)


steps = len(x) // n_workers // (args.global_batch // n_workers)   # the same on every worker
keras.utils.set_random_seed(42)                              # the same initial weights on every worker
with strategy.scope():
    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Conv2D(16, 3, activation="relu"),
                              keras.layers.Flatten(), keras.layers.Dense(10, activation="softmax")])
    optimizer = keras.optimizers.Adam(0.01)
    optimizer.build(model.trainable_variables)               # Adam's slots exist, so a restore can fill them
    epochs_done = tf.Variable(0, dtype=tf.int64, trainable=False)
rows = keras.losses.SparseCategoricalCrossentropy(reduction=None)


def replica_step(xb, yb):
    with tf.GradientTape() as tape:
        loss = tf.nn.compute_average_loss(rows(yb, model(xb, training=True)), global_batch_size=args.global_batch)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))   # all-reduced across the workers
    return loss


@tf.function
def train_step(xb, yb):
    loss = strategy.run(replica_step, args=(xb, yb))
    return strategy.reduce("SUM", loss, axis=None), strategy.experimental_local_results(loss)


out, backup_dir = Path(args.out), os.path.join(args.out, "backup")
out.mkdir(parents=True, exist_ok=True)
ckpt = tf.train.Checkpoint(model=model, optimizer=optimizer, epochs_done=epochs_done)
write_dir = backup_dir if chief else tempfile.mkdtemp(prefix="backup-not-chief-")
manager = tf.train.CheckpointManager(ckpt, directory=write_dir, max_to_keep=1)
latest = tf.train.latest_checkpoint(backup_dir)              # the chief's backup, for everybody
if latest:
    ckpt.restore(latest).assert_existing_objects_matched()
done = int(epochs_done.numpy())
print(f"[{name}] {n_workers} worker(s), {strategy.num_replicas_in_sync} replica(s); "
      f"{'restored ' + Path(latest).name if latest else 'no backup'}: {done} epoch(s) done", flush=True)
for epoch in range(done + 1, args.epochs + 1):
    started = time.time()
    it = iter(strategy.distribute_datasets_from_function(lambda ctx, e=epoch: dataset_fn(ctx, e)))
    results = [train_step(*next(it)) for _ in range(steps)]
    loss, own = np.mean([float(r[0]) for r in results]), np.mean([float(sum(r[1])) for r in results])
    time.sleep(max(0.0, args.min_epoch_seconds - (time.time() - started)))
    epochs_done.assign(epoch)
    manager.save(checkpoint_number=epoch)                    # every worker saves; only the chief's is kept
    weights = hashlib.sha256(b"".join(v.numpy().tobytes() for v in model.weights)).hexdigest()[:16]
    row = dict(epoch=epoch, loss=float(loss), own_share=float(own), weights=weights, pid=os.getpid())
    with open(out / f"history-{name}.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")
    print(f"[{name}] epoch {epoch}/{args.epochs} loss={loss:.6f} own share={own:.6f} | backup saved", flush=True)
shutil.rmtree(write_dir, ignore_errors=True)                # finished: the next job starts fresh
(out / f"result-{name}.json").write_text(json.dumps(dict(
    workers=n_workers, replicas=strategy.num_replicas_in_sync, resumed_after=done, weights=weights)))
print(f"[{name}] done", flush=True)
os._exit(0)     # files closed, the last collective done on every worker: skip TensorFlow's slow clean-up
