"""The 2018 script ported to Keras 3: MirroredStrategy on 2 replicas or more, checkpointed, resumable."""
import argparse
import json
import math
import os

import keras
import tensorflow as tf
from digits_job import EpochLine, build_model, load_data  # the data, the model, the checker's EPOCH line

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)               # train_2_replicas.run/ goes in here
p.add_argument("--epochs", type=int, default=3)
args = p.parse_args()
RUN = os.path.join(args.out, "train_2_replicas.run")  # every file of the job, in a folder marked as its own
MARK = os.path.join(RUN, ".made-by-train_2_replicas")
if os.path.isdir(RUN) and os.listdir(RUN) and not os.path.isdir(MARK):   # an empty folder is taken over
    raise SystemExit(f"{os.path.abspath(RUN)} was not made by this script: move or rename it, then run again")
os.makedirs(MARK, exist_ok=True)                     # the folder and its mark
gpus = tf.config.list_physical_devices("GPU")       # multi_gpu_model(model, gpus=2) is gone: the quick start's rule
if not gpus:                                         # no GPU: split the CPU in two
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
elif len(gpus) == 1:                                 # one GPU: split it in two
    half = tf.config.LogicalDeviceConfiguration(memory_limit=2048)
    tf.config.set_logical_device_configuration(gpus[0], [half, half])
strategy = tf.distribute.MirroredStrategy()          # 2+ GPUs: all of them
BATCH_SIZE = 32 * strategy.num_replicas_in_sync      # 32 rows per replica
LEARNING_RATE = 0.01 * strategy.num_replicas_in_sync  # linear scaling rule: N times the batch, N times the step

(x_train, y_train), (x_val, y_val) = load_data()
with strategy.scope():                               # variables (and BatchNorm's) mirrored on each replica
    model = build_model()
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=LEARNING_RATE, momentum=0.9),   # lr= is gone
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.optimizer.build(model.trainable_variables)  # its variables exist now: load_weights can fill them

def save(write, name):   # a temporary name, then os.replace (atomic): a kill leaves the old file or the new one
    write(os.path.join(RUN, "tmp-" + name))
    os.replace(os.path.join(RUN, "tmp-" + name), os.path.join(RUN, name))

class Checkpoints(keras.callbacks.Callback):        # lesson 05's job script: the best model, then the state
    best = 0.0
    def on_epoch_end(self, epoch, logs):
        if logs["val_accuracy"] > self.best:
            self.best = logs["val_accuracy"]
            save(self.model.save, "best.keras")
        save(self.model.save_weights, "state.weights.h5")   # weights and optimizer: its step count gives the epoch

checkpoints, best = Checkpoints(), os.path.join(RUN, "best.keras")
if os.path.exists(best):                             # a resumed run reads its best score back from best.keras
    checkpoints.best = keras.models.load_model(best).evaluate(x_val, y_val, verbose=0)[1]
if os.path.exists(os.path.join(RUN, "state.weights.h5")):   # and loads its state
    model.load_weights(os.path.join(RUN, "state.weights.h5"))
done = int(model.optimizer.iterations.numpy()) // math.ceil(len(x_train) / BATCH_SIZE)
print("SETUP", json.dumps({"global_batch": BATCH_SIZE, "checkpoint": best, "monitor": "val_accuracy",
                           "save_best_only": True}))
history = model.fit(x_train, y_train, batch_size=BATCH_SIZE, epochs=args.epochs, initial_epoch=done,
                    validation_data=(x_val, y_val), callbacks=[checkpoints, EpochLine()], verbose=0)
print("DONE", json.dumps({"epochs_run": len(history.history.get("loss", []))}), flush=True)
