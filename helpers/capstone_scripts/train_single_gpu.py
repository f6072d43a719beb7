"""Train a small BatchNorm CNN on the 8x8 digits: one device, written Keras 2 style (2017/18)."""
import argparse
import json
import os

import keras
from sklearn.datasets import load_digits

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)               # checkpoint (and later a backup folder) go here
p.add_argument("--epochs", type=int, default=3)
args = p.parse_args()
os.makedirs(args.out, exist_ok=True)

BATCH_SIZE = 32
LEARNING_RATE = 0.01

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


model = build_model()
checkpoint = keras.callbacks.ModelCheckpoint(os.path.join(args.out, "best.h5"), monitor="val_acc",
                                             save_best_only=True, period=1)
print("SETUP", json.dumps({"global_batch": BATCH_SIZE, "checkpoint": checkpoint.filepath,
                           "monitor": checkpoint.monitor, "save_best_only": checkpoint.save_best_only}))
history = model.fit(x, y, batch_size=BATCH_SIZE, epochs=args.epochs, validation_split=0.2,
                    callbacks=[checkpoint, EpochLine()], verbose=0)
print("DONE", json.dumps({"epochs_run": len(history.history["loss"])}), flush=True)
