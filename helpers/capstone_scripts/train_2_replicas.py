"""The same training on 2 replicas (MirroredStrategy), checkpointed and resumable: Keras 3."""
import argparse
import json
import os

import keras
import tensorflow as tf
from sklearn.datasets import load_digits

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

digits = load_digits()
x, y = (digits.images[..., None] / 16.0).astype("float32"), digits.target     # (1797, 8, 8, 1)


def build_model():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([
        keras.Input((8, 8, 1)),
        keras.layers.Conv2D(16, 3, padding="same", use_bias=False),
        keras.layers.BatchNormalization(),
        keras.layers.Activation("relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(10, activation="softmax"),
    ])
    model.compile(optimizer=keras.optimizers.SGD(LEARNING_RATE, momentum=0.9),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


class EpochLine(keras.callbacks.Callback):          # one machine-readable line per finished epoch
    def on_epoch_end(self, epoch, logs=None):
        opt, value = self.model.optimizer, keras.ops.convert_to_numpy
        print("EPOCH", json.dumps({
            "epoch": epoch + 1, "pid": os.getpid(), "steps": int(value(opt.iterations)),
            "replicas": self.model.distribute_strategy.num_replicas_in_sync,
            "learning_rate": float(value(opt.learning_rate)), "val_accuracy": float(logs["val_accuracy"])}),
            flush=True)


with strategy.scope():                               # variables (and BatchNorm's) mirrored on each replica
    model = build_model()
checkpoint = keras.callbacks.ModelCheckpoint(os.path.join(args.out, "best.keras"), monitor="val_accuracy",
                                             save_best_only=True)                # save_freq="epoch"
backup = keras.callbacks.BackupAndRestore(os.path.join(args.out, "backup"))     # resume after a kill
print("SETUP", json.dumps({"global_batch": BATCH_SIZE, "checkpoint": checkpoint.filepath,
                           "monitor": checkpoint.monitor, "save_best_only": checkpoint.save_best_only}))
history = model.fit(x, y, batch_size=BATCH_SIZE, epochs=args.epochs, validation_split=0.2,
                    callbacks=[backup, checkpoint, EpochLine()], verbose=0)
print("DONE", json.dumps({"epochs_run": len(history.history["loss"])}), flush=True)
