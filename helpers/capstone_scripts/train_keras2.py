"""Train a small CNN on the 8x8 digits on 2 GPUs, written the Keras 2 way (2018): multi_gpu_model, fit_generator."""
import argparse
import json
import os

from digits_job import EpochLine, build_model, load_data  # the data, the model, the checker's EPOCH line
from keras.callbacks import ModelCheckpoint
from keras.optimizers import SGD
from keras.utils import multi_gpu_model

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)               # the checkpoint (and later a backup folder) go here
p.add_argument("--epochs", type=int, default=3)
args = p.parse_args()
os.makedirs(args.out, exist_ok=True)

GPUS = 2
BATCH_SIZE = 32 * GPUS             # multi_gpu_model splits every batch: 32 rows per GPU
LEARNING_RATE = 0.01               # tuned on one GPU, with batches of 32
(x_train, y_train), (x_val, y_val) = load_data()


def batches(x, y, batch_size):     # Keras 2 trained on Python generators that loop forever
    while True:
        for start in range(0, len(x) - batch_size + 1, batch_size):
            yield x[start:start + batch_size], y[start:start + batch_size]


model = build_model()
parallel_model = multi_gpu_model(model, gpus=GPUS)
parallel_model.compile(optimizer=SGD(lr=LEARNING_RATE, momentum=0.9), loss="sparse_categorical_crossentropy",
                       metrics=["accuracy"])
checkpoint = ModelCheckpoint(os.path.join(args.out, "best.h5"), monitor="val_acc", save_best_only=True, period=1)
print("SETUP", json.dumps({"global_batch": BATCH_SIZE, "checkpoint": checkpoint.filepath,
                           "monitor": checkpoint.monitor, "save_best_only": checkpoint.save_best_only}))
history = parallel_model.fit_generator(batches(x_train, y_train, BATCH_SIZE),
                                       steps_per_epoch=len(x_train) // BATCH_SIZE, epochs=args.epochs,
                                       validation_data=(x_val, y_val), callbacks=[checkpoint, EpochLine()], verbose=0)
print("DONE", json.dumps({"epochs_run": len(history.history["loss"])}), flush=True)
