"""Exercises of 03_from_multi_gpu_model_to_mirrored_strategy."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf
from keras import layers

from . import RANDOM, error_line, practice_strategy, quiet_tf, register

# ---- 03.1: the per-replica tf.data pipeline (the 2018 script's datagen.flow) ------------------------------------

ROWS_03_1 = 200


def _images_03_1() -> "tuple[np.ndarray, np.ndarray]":
    """16x16 images whose channel 0 is 1 on the left half (a flip shows) and channel 1 is the label / ROWS."""
    x = np.zeros((ROWS_03_1, 16, 16, 2), "float32")
    x[:, :, :8, 0] = 1.0
    x[..., 1] = (np.arange(ROWS_03_1) / ROWS_03_1)[:, None, None]
    return x, np.arange(ROWS_03_1)


def _check_pipeline(answer):
    strategy = practice_strategy()
    x, y = _images_03_1()
    try:
        with quiet_tf():
            ds = answer(x, y, strategy)
            if not isinstance(ds, tf.data.Dataset):
                return False, f"train_pipeline must return a tf.data.Dataset, it returned {type(ds).__name__}"
            steps = ROWS_03_1 // 64                 # full global batches of 64 in an epoch; one more is read
            epochs = [[(strategy.experimental_local_results(images), strategy.experimental_local_results(labels))
                       for images, labels in strategy.experimental_distribute_dataset(ds.take(steps + 1))]
                      for _ in range(2)]
    except Exception as exc:  # the learner's code: any failure is a wrong answer, with its first line
        return False, f"train_pipeline(x, y, strategy) raised {error_line(exc, 160)}"
    rows = [[int(t.shape[0]) for t in images] for images, _ in epochs[0]]
    if len(epochs[0]) > steps and all(r == [32, 32] for r in rows):
        return False, (f"an epoch of {ROWS_03_1} rows gave more than {steps} full steps of 64: the dataset goes on "
                       "(a repeat()?); keep one pass over the data per epoch, fit repeats it")
    if any(r != [32, 32] for r in rows):
        return False, (f"the replicas got {rows} rows per step: 32 rows on each of the 2 replicas is a global "
                       "batch of 64, and only full batches (the last one must not be smaller)")
    images = np.concatenate([t.numpy() for step, _ in epochs[0] for t in step])
    labels = [np.concatenate([t.numpy() for _, step in epoch for t in step]) for epoch in epochs]
    if not np.allclose(images[..., 1].max(axis=(1, 2)), labels[0] / ROWS_03_1, atol=1e-3):
        return False, "images and labels no longer match: shuffle and augment (x, y) pairs, and only the images"
    if (labels[0] == np.sort(labels[0])).all() or (labels[0] == labels[1]).all():
        return False, "the rows come in the same order every epoch: shuffle the dataset (before batching)"
    left, right = images[:, :, :8, 0].mean(axis=(1, 2)), images[:, :, 8:, 0].mean(axis=(1, 2))
    flipped = float((right > left).mean())
    if not 0.2 < flipped < 0.8:
        return False, f"{flipped:.0%} of the images are flipped left-right: flip about half of them at random"
    moved = float(np.mean([abs(a - b) > 0.02 and abs(a - 1 + b) > 0.02 for a, b in zip(left, right)]))
    if moved < 0.2:
        return False, "the images are flipped but never shifted: add a random translation of up to 10 %"
    if "Prefetch" not in type(ds).__name__:
        return False, "the pipeline's last step should prefetch, so the next batch is ready while the replicas compute"
    return True, ("each replica got 32 rows per step, about half of them flipped and most shifted, in a new order "
                  "every epoch, with the next batch prefetched")


def _solve_pipeline():
    def train_pipeline(x, y, strategy):
        augment = keras.Sequential([layers.RandomTranslation(0.1, 0.1), layers.RandomFlip("horizontal")])
        return (tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x))
                .batch(32 * strategy.num_replicas_in_sync, drop_remainder=True)   # the global batch
                .map(lambda images, labels: (augment(images, training=True), labels),
                     num_parallel_calls=tf.data.AUTOTUNE)
                .prefetch(tf.data.AUTOTUNE))

    return train_pipeline


register("03.1", title="write the per-replica tf.data pipeline", checker=_check_pipeline, solution=_solve_pipeline,
         expects="function", takes=3, wants="a function train_pipeline(x, y, strategy) that returns a tf.data.Dataset",
         hint="section 8's port builds this pipeline for the ResNet: which batch size does the strategy split, "
              "which layers replace ImageDataGenerator, and where do they run?",
         giveaways=["drop_remainder", "RandomFlip", "RandomTranslation", "prefetch", "AUTOTUNE", "32 *", "64"])


# ---- 03.2: find and fix - the schedule that overwrites ReduceLROnPlateau ------------------------------------------

def _rates_at_epoch_start(schedule, epochs: int = 5, start: "float | None" = None) -> list[float]:
    """Fit on the practice strategy with LearningRateScheduler(schedule) and a plateau that halves after every
    epoch (min_delta=10: no epoch but the first counts as progress); the rate at the start of each epoch.
    ``start``: the optimizer's first rate (default: 1e-3 scaled for the replicas, as the lesson's script)."""
    strategy = practice_strategy()
    start = 1e-3 * strategy.num_replicas_in_sync ** 0.5 if start is None else start
    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), layers.Dense(2, activation="softmax")])
        model.compile(optimizer=keras.optimizers.Adam(start), loss="sparse_categorical_crossentropy")
    seen: list = []
    x, y = np.random.default_rng(0).random((64, 4), dtype="float32"), np.arange(64) % 2
    model.fit(x, y, batch_size=64, epochs=epochs, verbose=0, callbacks=[
        keras.callbacks.LearningRateScheduler(schedule),
        keras.callbacks.ReduceLROnPlateau(monitor="loss", factor=0.5, patience=0, min_delta=10.0),
        keras.callbacks.LambdaCallback(on_epoch_begin=lambda e, logs: seen.append(model.optimizer.learning_rate.numpy()))])
    return [float(r) for r in seen]


def _wanted(start: float) -> list[float]:
    """The rates a right schedule gives from ``start``: cuts after epochs 1, 2, 3, and x0.1 at epoch 2."""
    return [start, start, start / 20, start / 40, start / 80]


def _check_schedule(answer):
    start = 1e-3 * 2 ** 0.5                                          # the scaled rate of 2 replicas
    want = _wanted(start)
    try:
        with quiet_tf():
            seen = _rates_at_epoch_start(answer)
    except Exception as exc:  # the learner's code: any failure is a wrong answer, with its first line
        return False, f"fit with LearningRateScheduler(lr_schedule) raised {error_line(exc, 160)}"
    shown = ", ".join(f"{r:.3g}" for r in seen)
    if np.allclose(seen, want, rtol=1e-4):
        other = RANDOM.choice((3e-4, 5e-4, 2e-3, 3e-3, 5e-3))      # a second fit from another rate: the schedule
        try:                                                          # must follow lr, not know the rates by heart
            with quiet_tf():
                again = _rates_at_epoch_start(answer, start=other)
        except Exception as exc:  # the learner's code: any failure is a wrong answer, with its first line
            return False, f"fit with LearningRateScheduler(lr_schedule) raised {error_line(exc, 160)}"
        if not np.allclose(again, _wanted(other), rtol=1e-4):
            return False, (f"from a first rate of {other:g} the rates were {', '.join(f'{r:.3g}' for r in again)}, "
                           f"expected {', '.join(f'{r:.3g}' for r in _wanted(other))}: the schedule must compute "
                           "the next rate from the lr Keras passes it, not know the rates by heart")
        return True, (f"the rate at each epoch's start: {shown}. The scaled start and every plateau cut stay, "
                      "and the rate drops 10x at epoch 2 (from another first rate too)")
    if np.isclose(seen[0], 1e-3, rtol=1e-4):
        return False, (f"the rates were {shown}: epoch 0 starts at 0.001, so the schedule overwrote the rate scaled "
                       f"for 2 replicas ({start:.3g}), and it overwrites each cut too")
    if np.allclose(seen[2:], [start / 2, start / 4, start / 8], rtol=1e-4):
        return False, f"the rates were {shown}: the plateau's cuts stay, but the 10x drop at epoch 2 is missing"
    return False, f"the rates were {shown}, expected " + ", ".join(f"{r:.3g}" for r in want)


def _solve_schedule():
    def lr_schedule(epoch, lr):       # Keras passes the current rate: change it only at the milestone
        return lr * 0.1 if epoch == 2 else lr

    return lr_schedule


register("03.2", title="find and fix: the schedule that overwrites ReduceLROnPlateau", checker=_check_schedule,
         solution=_solve_schedule, expects="function",
         wants="a function lr_schedule(epoch, lr) (or lr_schedule(epoch)) that returns the learning rate",
         hint="LearningRateScheduler can hand your schedule the rate the optimizer has now; compute the next rate "
              "from it instead of from the epoch alone.",
         giveaways=["epoch, lr", "lr * 0.1", "return lr", "multiply"])
