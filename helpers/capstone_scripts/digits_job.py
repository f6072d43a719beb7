"""What both capstone scripts share: the digits split, the model and the EpochLine the checker reads.

capstone.starter() copies this file next to the given script, so `from digits_job import ...` works there.
"""
import json
import os

import keras
from sklearn.datasets import load_digits

TRAIN_ROWS = 1437                                     # of load_digits' 1797: the rest validates


def load_data():
    """((x_train, y_train), (x_val, y_val)): the 8x8 digits as images of shape (8, 8, 1)."""
    digits = load_digits()
    x, y = (digits.images[..., None] / 16.0).astype("float32"), digits.target
    return (x[:TRAIN_ROWS], y[:TRAIN_ROWS]), (x[TRAIN_ROWS:], y[TRAIN_ROWS:])


def build_model():
    """A small BatchNorm CNN, not compiled yet; the same initial weights in every run."""
    keras.utils.set_random_seed(0)
    return keras.Sequential([
        keras.Input((8, 8, 1)),
        keras.layers.Conv2D(16, 3, padding="same", use_bias=False),
        keras.layers.BatchNormalization(),
        keras.layers.Activation("relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(10, activation="softmax"),
    ])


class EpochLine(keras.callbacks.Callback):          # one machine-readable line per finished epoch
    def on_epoch_end(self, epoch, logs=None):
        opt, value = self.model.optimizer, keras.ops.convert_to_numpy
        print("EPOCH", json.dumps({
            "epoch": epoch + 1, "pid": os.getpid(), "steps": int(value(opt.iterations)),
            "replicas": self.model.distribute_strategy.num_replicas_in_sync,
            "learning_rate": float(value(opt.learning_rate)), "val_accuracy": float(logs["val_accuracy"])}),
            flush=True)
