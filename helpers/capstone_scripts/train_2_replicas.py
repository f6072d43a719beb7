"""The same training on 2 replicas (MirroredStrategy), checkpointed and resumable: Keras 3."""
import argparse
import json
import os

import keras
import tensorflow as tf
from digits_job import EpochLine, build_model, load_data  # the data, the model, the checker's EPOCH line

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)               # best.keras and backup/ go here
p.add_argument("--epochs", type=int, default=3)
args = p.parse_args()
os.makedirs(args.out, exist_ok=True)


def replica_devices(n=2):
    """n devices to mirror over: n GPUs, one GPU split in n, or the CPU split in n."""
    gpus = tf.config.list_physical_devices("GPU")
    if len(gpus) == 1:
        tf.config.set_logical_device_configuration(
            gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=1024)] * n)
    elif not gpus:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * n)
    return [d.name for d in tf.config.list_logical_devices("GPU" if gpus else "CPU")][:n]


strategy = tf.distribute.MirroredStrategy(replica_devices(2))
BATCH_SIZE = 32 * strategy.num_replicas_in_sync          # 32 per replica: the global batch grows
LEARNING_RATE = 0.01 * strategy.num_replicas_in_sync     # linear scaling rule: lr grows with the batch

x, y = load_data()
with strategy.scope():                               # variables (and BatchNorm's) mirrored on each replica
    model = build_model(LEARNING_RATE)
checkpoint = keras.callbacks.ModelCheckpoint(os.path.join(args.out, "best.keras"), monitor="val_accuracy",
                                             save_best_only=True)                # save_freq="epoch"
backup = keras.callbacks.BackupAndRestore(os.path.join(args.out, "backup"))     # resume after a kill
print("SETUP", json.dumps({"global_batch": BATCH_SIZE, "checkpoint": checkpoint.filepath,
                           "monitor": checkpoint.monitor, "save_best_only": checkpoint.save_best_only}))
history = model.fit(x, y, batch_size=BATCH_SIZE, epochs=args.epochs, validation_split=0.2,
                    callbacks=[backup, checkpoint, EpochLine()], verbose=0)
print("DONE", json.dumps({"epochs_run": len(history.history["loss"])}), flush=True)
