"""One worker of a MultiWorkerMirroredStrategy job (lesson 07). Every worker runs this same file.

Start it N times with a different ``TF_CONFIG`` each (``python -m helpers.cluster``
does that on one machine), or once per Slurm task with ``srun`` (the
``SlurmClusterResolver`` then builds the cluster spec from Slurm's variables).

Routes (``--route``):

* ``ctl`` - Keras 3 model, custom training loop: ``strategy.run`` + ``tf.GradientTape``
  + ``tf.nn.compute_average_loss``.  Backups with ``tf.train.CheckpointManager``
  (chief writes, everybody restores), so a killed job resumes where it stopped.
* ``fit`` - Keras 3 ``model.fit`` under the same strategy.  Fails with Keras 3.15
  (``ValueError: Attempt to convert a value (PerReplica...)``, keras-team/keras#20585).

Outputs in ``--out``: ``history-<task>-<index>.jsonl`` (one line per finished
epoch), ``result-<task>-<index>.json`` and, from the chief, ``model.keras``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

STARTED = time.time()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

from helpers.data import load_dataset  # noqa: E402
from helpers.models import small_cnn  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--route", choices=("ctl", "fit"), default="ctl")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--global-batch", type=int, default=64, help="examples per step, all workers together")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--out", required=True, help="folder for history, results and the saved model")
    p.add_argument("--backup-dir", default=None, help="fault-tolerance backups (default: <out>/backup)")
    p.add_argument("--data", choices=("auto", "digits", "cifar10"), default="auto")
    p.add_argument("--port-base", type=int, default=8888, help="first port on each host (Slurm only)")
    p.add_argument("--min-epoch-seconds", type=float, default=0.0,
                   help="wait until an epoch has lasted this long before backing it up (a lesson that kills "
                        "the job after an epoch then has time to do it before the next epochs end, on any machine)")
    args = p.parse_args(argv)
    if args.epochs < 1 or args.global_batch < 1 or args.lr <= 0 or args.min_epoch_seconds < 0:
        p.error("--epochs and --global-batch must be >= 1, --lr > 0 and --min-epoch-seconds >= 0")
    return args


def make_strategy(port_base=8888):
    """TF_CONFIG if set (our launcher, Kubernetes, Vertex AI...), else Slurm's variables (srun)."""
    resolvers = tf.distribute.cluster_resolver
    if "TF_CONFIG" not in os.environ and "SLURM_PROCID" in os.environ:
        resolver = resolvers.SlurmClusterResolver(port_base=port_base)
    else:
        resolver = resolvers.TFConfigClusterResolver()
    strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    task_type, task_id = resolver.task_type or "worker", resolver.task_id or 0
    return strategy, task_type, task_id


def is_chief(task_type, task_id, cluster_spec):
    """The chief writes the real files: task 'chief', else worker 0 when there is no chief."""
    return task_type == "chief" or (task_type == "worker" and task_id == 0 and "chief" not in cluster_spec)


def dataset_fn(x, y, global_batch, epoch, seed):
    """Per-worker input: same shuffle everywhere (seeded by epoch), then this worker's shard."""
    def fn(ctx):
        ds = tf.data.Dataset.from_tensor_slices((x, y))
        ds = ds.shuffle(len(x), seed=seed + epoch, reshuffle_each_iteration=False)
        ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
        return ds.batch(ctx.get_per_replica_batch_size(global_batch), drop_remainder=True)
    return fn


def make_train_step(strategy, model, optimizer, loss_fn, global_batch):
    """One synchronous step: each replica computes its gradients, MWMS all-reduces them."""
    def replica_step(x, y):
        with tf.GradientTape() as tape:
            per_example = loss_fn(y, model(x, training=True))
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))  # all-reduce happens here
        return loss, tf.reduce_mean(per_example)

    @tf.function
    def train_step(x, y):
        loss, local = strategy.run(replica_step, args=(x, y))
        global_loss = strategy.reduce("SUM", loss, axis=None)  # the same number on every worker
        return global_loss, strategy.experimental_local_results(local)

    return train_step


def backup_manager(checkpoint, backup_dir, chief):
    """What keras.callbacks.BackupAndRestore does, for a custom loop: the chief writes the backup,
    the others write a throw-away copy (saving may need every worker), everybody restores the chief's."""
    write_dir = backup_dir if chief else tempfile.mkdtemp(prefix="backup-not-chief-")
    return tf.train.CheckpointManager(checkpoint, directory=write_dir, max_to_keep=1), write_dir


def restore_or_start(checkpoint, backup_dir):
    """Restore the newest backup if there is one; return the number of epochs already done."""
    latest = tf.train.latest_checkpoint(backup_dir)
    if latest is None:
        return 0, None
    checkpoint.restore(latest).assert_existing_objects_matched()
    return int(checkpoint.epochs_done.numpy()), Path(latest).name


def checksum(model):
    """Sum of |weights|: equal on every worker iff the replicas stayed in sync."""
    return float(sum(float(abs(v.numpy()).sum()) for v in model.weights))


def run_fit(args, strategy, model, optimizer, data, say):
    """The obvious Keras 3 route. Today it dies in the first step (keras-team/keras#20585)."""
    with strategy.scope():
        model.compile(optimizer, "sparse_categorical_crossentropy", metrics=["accuracy"])
    say("route fit: Keras 3 model.fit under MultiWorkerMirroredStrategy")
    ds = tf.data.Dataset.from_tensor_slices((data.x_train, data.y_train)).batch(args.global_batch)
    model.fit(ds, epochs=args.epochs, verbose=2)
    say("fit finished")


def run_ctl(args, strategy, model, optimizer, data, say, chief, spec, tag):
    """Custom training loop with backups: resumes after the last finished epoch."""
    out = Path(args.out)
    with strategy.scope():
        optimizer.build(model.trainable_variables)  # create Adam's slots now, so a backup can fill them
        epochs_done = tf.Variable(0, dtype=tf.int64, trainable=False)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(reduction=None)
    train_step = make_train_step(strategy, model, optimizer, loss_fn, args.global_batch)
    workers = len(spec.get("chief", [])) + len(spec.get("worker", []))  # one input pipeline each
    steps = (len(data.x_train) // workers) // (args.global_batch // workers)  # equal on every worker

    backup_dir = str(Path(args.backup_dir) if args.backup_dir else out / "backup")
    ckpt = tf.train.Checkpoint(model=model, optimizer=optimizer, epochs_done=epochs_done)
    manager, write_dir = backup_manager(ckpt, backup_dir, chief)
    done, name = restore_or_start(ckpt, backup_dir)
    say(f"restored backup {name}: {done} epoch(s) already done, resuming" if name
        else "no backup found: starting from epoch 1")
    for epoch in range(done + 1, args.epochs + 1):
        started = time.time()
        it = iter(strategy.distribute_datasets_from_function(
            dataset_fn(data.x_train, data.y_train, args.global_batch, epoch, args.seed)))
        total, local = 0.0, 0.0
        for _ in range(steps):
            global_loss, local_losses = train_step(*next(it))
            total += float(global_loss)
            local += float(np.mean([float(v) for v in local_losses]))
        time.sleep(max(0.0, args.min_epoch_seconds - (time.time() - started)))  # 0 unless asked for
        epochs_done.assign(epoch)
        manager.save(checkpoint_number=epoch)  # every worker saves; only the chief's copy is kept
        if not chief:
            shutil.rmtree(write_dir, ignore_errors=True)
        row = {"epoch": epoch, "loss": total / steps, "local_loss": local / steps,
               "checksum": checksum(model), "steps": steps, "pid": os.getpid()}
        with open(out / f"history-{tag}.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        say(f"epoch {epoch}/{args.epochs} loss={row['loss']:.6f} (own shard: {row['local_loss']:.6f}) "
            f"weights checksum={row['checksum']:.6f} | backup saved")

    probs = np.asarray(model(data.x_test, training=False))
    accuracy = float(np.mean(np.argmax(probs, axis=1) == data.y_test))
    model_path = out / "model.keras" if chief else Path(tempfile.mkdtemp(prefix="model-not-chief-")) / "m.keras"
    model.save(model_path)  # every worker saves (it may need collectives); only the chief keeps it
    if chief:
        shutil.rmtree(backup_dir, ignore_errors=True)  # finished: drop the backup, like BackupAndRestore
    else:
        shutil.rmtree(model_path.parent, ignore_errors=True)
    result = {"task": tag, "chief": chief, "test_accuracy": accuracy, "checksum": checksum(model),
              "epochs": args.epochs, "resumed_after": done, "seconds": time.time() - STARTED,
              "model": str(model_path) if chief else None}
    (out / f"result-{tag}.json").write_text(json.dumps(result))
    say(f"done: test accuracy {accuracy:.4f}" + (f", model saved to {model_path}" if chief else ""))


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    strategy, task_type, task_id = make_strategy(args.port_base)
    spec = strategy.cluster_resolver.cluster_spec().as_dict()
    chief = is_chief(task_type, task_id, spec)

    def say(msg):
        print(f"[{task_type} {task_id}] {msg}", flush=True)

    say(f"pid {os.getpid()} | TF {tf.__version__}, Keras {keras.__version__} | cluster {spec} | "
        f"replicas in sync: {strategy.num_replicas_in_sync} | chief: {chief} | "
        f"up after {time.time() - STARTED:.1f} s")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    data = load_dataset(args.data, verbose=False)
    keras.utils.set_random_seed(args.seed)  # same initial weights on every worker
    with strategy.scope():
        model = small_cnn(data.input_shape, data.num_classes)
        optimizer = keras.optimizers.Adam(args.lr)
    if args.route == "fit":
        run_fit(args, strategy, model, optimizer, data, say)
    else:
        run_ctl(args, strategy, model, optimizer, data, say, chief, spec, f"{task_type}-{task_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
