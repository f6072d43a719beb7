"""What both capstone scripts share: the digits, the model and the EpochLine the checker reads.

capstone.starter() copies this file next to the given script, so `from digits_job import ...` works there.
"""
import json
import os

import keras
from sklearn.datasets import load_digits


def load_data():
    digits = load_digits()
    return (digits.images[..., None] / 16.0).astype("float32"), digits.target     # (1797, 8, 8, 1)


def build_model(learning_rate):
    """A small BatchNorm CNN, compiled with SGD at ``learning_rate``."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([
        keras.Input((8, 8, 1)),
        keras.layers.Conv2D(16, 3, padding="same", use_bias=False),
        keras.layers.BatchNormalization(),
        keras.layers.Activation("relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(10, activation="softmax"),
    ])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate, momentum=0.9),
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
