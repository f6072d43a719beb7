"""Train a small BatchNorm CNN on the 8x8 digits: one device, written Keras 2 style (2017/18)."""
import argparse
import json
import os

import keras
from digits_job import EpochLine, build_model, load_data  # the data, the model, the checker's EPOCH line

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)               # checkpoint (and later a backup folder) go here
p.add_argument("--epochs", type=int, default=3)
args = p.parse_args()
os.makedirs(args.out, exist_ok=True)

BATCH_SIZE = 32
LEARNING_RATE = 0.01

x, y = load_data()
model = build_model(LEARNING_RATE)
checkpoint = keras.callbacks.ModelCheckpoint(os.path.join(args.out, "best.h5"), monitor="val_acc",
                                             save_best_only=True, period=1)
print("SETUP", json.dumps({"global_batch": BATCH_SIZE, "checkpoint": checkpoint.filepath,
                           "monitor": checkpoint.monitor, "save_best_only": checkpoint.save_best_only}))
history = model.fit(x, y, batch_size=BATCH_SIZE, epochs=args.epochs, validation_split=0.2,
                    callbacks=[checkpoint, EpochLine()], verbose=0)
print("DONE", json.dumps({"epochs_run": len(history.history["loss"])}), flush=True)
