"""The 2018 script ported to Keras 3: MirroredStrategy on 2 replicas or more, checkpointed, resumable."""
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

gpus = tf.config.list_physical_devices("GPU")       # multi_gpu_model(model, gpus=2) is gone: the quick start's rule
if not gpus:                                         # no GPU: split the CPU in two
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
elif len(gpus) == 1:                                 # one GPU: split it in two
    half = tf.config.LogicalDeviceConfiguration(memory_limit=2048)
    tf.config.set_logical_device_configuration(gpus[0], [half, half])
strategy = tf.distribute.MirroredStrategy()          # 2+ GPUs: all of them
print("replicas:", strategy.extended.worker_devices)
BATCH_SIZE = 32 * strategy.num_replicas_in_sync      # 32 rows per replica
LEARNING_RATE = 0.01 * strategy.num_replicas_in_sync  # linear scaling rule: N times the batch, N times the step

(x_train, y_train), (x_val, y_val) = load_data()
with strategy.scope():                               # variables (and BatchNorm's) mirrored on each replica
    model = build_model()
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=LEARNING_RATE, momentum=0.9),   # lr= is gone
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
best, backup = os.path.join(args.out, "best.keras"), os.path.join(args.out, "backup")
# BackupAndRestore does not keep ModelCheckpoint's best score, so a resumed run reads it back from best.keras.
resuming = os.path.isdir(backup) and os.path.exists(best)
best_so_far = keras.models.load_model(best).evaluate(x_val, y_val, verbose=0)[1] if resuming else None
checkpoint = keras.callbacks.ModelCheckpoint(best, monitor="val_accuracy", save_best_only=True,
                                             initial_value_threshold=best_so_far)
print("SETUP", json.dumps({"global_batch": BATCH_SIZE, "checkpoint": checkpoint.filepath,
                           "monitor": checkpoint.monitor, "save_best_only": checkpoint.save_best_only}))
history = model.fit(x_train, y_train, batch_size=BATCH_SIZE, epochs=args.epochs, validation_data=(x_val, y_val),
                    callbacks=[checkpoint, keras.callbacks.BackupAndRestore(backup), EpochLine()], verbose=0)
print("DONE", json.dumps({"epochs_run": len(history.history["loss"])}), flush=True)
