"""Keras 3 ``model.fit`` with ``keras.callbacks.BackupAndRestore`` under ``MirroredStrategy`` (lesson 07).

One process, one machine, two replica devices (two GPUs, one GPU split in two,
or two logical CPUs: whatever :func:`helpers.devices.ensure_devices` gives).
Here ``fit`` works, unlike under MultiWorkerMirroredStrategy, so this script
shows the callback itself surviving a real ``SIGKILL``: start it, kill it
mid-way, start the **same command** again, and it continues after the last
backup.  :mod:`helpers.resume` starts, watches and kills it.

Files in ``--out`` (the backup folder defaults to ``<out>/backup``):

* ``epochs.jsonl`` - one line per *finished* epoch, ``{"epoch", "loss", "pid"}``,
  appended by every run (flushed and fsynced, so a kill cannot lose a line that
  was written);
* ``result.json`` and ``final.weights.npz`` - written only by a run that finished.

Deterministic on purpose: seeded weights, ``shuffle=False``, no dropout and
op determinism, so a resumed run can be compared with an uninterrupted one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["KERAS_BACKEND"] = "tensorflow"  # MirroredStrategy is TensorFlow's

EPOCH_LOG = "epochs.jsonl"
RESULT = "result.json"
WEIGHTS = "final.weights.npz"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="folder for the epoch log, the result and the final weights")
    p.add_argument("--backup-dir", default=None, help="BackupAndRestore's folder (default: <out>/backup)")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--examples", type=int, default=512, help="training examples used (0: all)")
    p.add_argument("--batch", type=int, default=32, help="global batch, both replicas together")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--min-epoch-seconds", type=float, default=0.0,
                   help="wait until an epoch has lasted this long before its backup (gives a lesson time "
                        "to kill the run mid-way, however fast the machine)")
    args = p.parse_args(argv)
    if args.epochs < 1 or args.examples < 0 or args.batch < 2 or args.lr <= 0 or args.min_epoch_seconds < 0:
        p.error("need --epochs >= 1, --examples >= 0, --batch >= 2, --lr > 0 and --min-epoch-seconds >= 0")
    return args


def make_epoch_floor(seconds):
    """A callback that makes every epoch last at least ``seconds`` (wall clock; the numbers do not change).

    Listed before ``BackupAndRestore``, it waits before the backup is written, so a
    kill that lands during the wait hits an epoch that is not backed up yet.
    """
    import time

    import keras

    class EpochFloor(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.started = time.monotonic()

        def on_epoch_end(self, epoch, logs=None):
            time.sleep(max(0.0, seconds - (time.monotonic() - self.started)))

    return EpochFloor()


def make_epoch_log(path):
    """A callback that appends one line per finished epoch to ``path`` (flush + fsync)."""
    import keras

    class EpochLog(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if not hasattr(self, "first"):       # fit starts after the restored epoch, if any
                self.first = epoch + 1
                print(f"pid {os.getpid()}: epochs {epoch + 1}..{self.params['epochs']}"
                      + (f" (restored the backup of epoch {epoch})" if epoch else " (no backup found)"), flush=True)

        def on_epoch_end(self, epoch, logs=None):
            row = {"epoch": epoch + 1, "loss": float(logs["loss"]), "pid": os.getpid()}
            with open(path, "a") as f:
                f.write(json.dumps(row) + "\n")
                f.flush()
                os.fsync(f.fileno())
            print(f"epoch {row['epoch']}/{self.params['epochs']} loss {row['loss']:.6f} - backup written",
                  flush=True)

    return EpochLog()


def train(args, devices):
    """Build and compile under MirroredStrategy, then ``fit`` with BackupAndRestore."""
    import keras
    import tensorflow as tf
    from helpers.data import load_digits
    from helpers.models import small_mlp

    keras.utils.set_random_seed(args.seed)         # same initial weights in every run
    tf.config.experimental.enable_op_determinism()  # same sums on GPUs too
    data = load_digits()
    n = args.examples or len(data.x_train)
    x, y = data.x_train[:n].reshape(n, -1), data.y_train[:n]
    strategy = tf.distribute.MirroredStrategy(devices)
    with strategy.scope():
        model = small_mlp(input_dim=x.shape[1], num_classes=data.num_classes)
        model.compile(optimizer=keras.optimizers.Adam(args.lr), loss="sparse_categorical_crossentropy")
    callbacks = [
        make_epoch_floor(args.min_epoch_seconds),          # an epoch lasts >= this long (0: no wait)
        keras.callbacks.BackupAndRestore(args.backup_dir),  # then the backup of the finished epoch ...
        make_epoch_log(Path(args.out) / EPOCH_LOG),        # ... so this line appears after the backup
    ]
    history = model.fit(x, y, batch_size=args.batch, epochs=args.epochs, shuffle=False,
                        callbacks=callbacks, verbose=0)
    return model, history, strategy


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    args.backup_dir = args.backup_dir or str(out / "backup")
    from helpers.devices import ensure_devices
    import numpy as np

    devices = ensure_devices(2)
    model, history, strategy = train(args, devices)
    weights = model.get_weights()
    np.savez(out / WEIGHTS, *weights)
    result = {"pid": os.getpid(), "replicas": strategy.num_replicas_in_sync, "devices": devices,
              "epochs_run": len(history.history["loss"]), "final_loss": float(history.history["loss"][-1]),
              "backup_left": os.path.exists(args.backup_dir)}
    (out / RESULT).write_text(json.dumps(result))
    print(f"finished: {result['epochs_run']} epoch(s) in this run on {result['replicas']} replicas; "
          f"backup folder {'still there' if result['backup_left'] else 'deleted'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
