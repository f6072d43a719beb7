"""Exercises of 03_from_multi_gpu_model_to_mirrored_strategy."""

from __future__ import annotations

import math
import warnings

import keras
import numpy as np
import tensorflow as tf
from keras import layers

from ..checks import is_int
from ..legacy import replica_devices, slice_sizes
from ..models import small_cnn
from ..replica_checks import check_distributed, replica_split
from . import KINDS, describe, error_line, is_number, model_problem, practice_strategy, quiet_tf, register

# ---- 03.1: batch size and learning rate when moving from 1 GPU to 8 --------------------------------


def _check_batch_lr(answer):
    if set(answer) != {"batch_size", "learning_rate"}:
        return False, ("expected exactly the keys 'batch_size' and 'learning_rate', "
                       f"got {sorted(map(repr, answer))}")
    batch, lr = answer["batch_size"], answer["learning_rate"]
    if not KINDS["int"][1](batch):
        return False, f"batch_size must be a whole number, you gave {describe(batch)}"
    if not is_number(lr):
        return False, f"learning_rate must be a number, you gave {describe(lr)}"
    if batch == 32:
        return False, ("32 is the per-replica batch. Under MirroredStrategy fit(batch_size=...) is the "
                       "global batch, split over the 8 replicas")
    if batch == 4:
        return False, "4 would be 32 rows split 8 ways: each GPU would get 4 rows, not 32"
    if batch != 256:
        return False, f"batch_size={batch}: how many rows does one step need if each of the 8 GPUs gets 32?"
    if abs(lr - 0.01) < 1e-12:
        return False, ("batch 256 is right, but the learning rate is still the one tuned for batch 32: "
                       "8 times fewer steps per epoch, each with the same step size, learns slower")
    if abs(lr - 0.08) > 1e-9:
        return False, (f"batch 256 is right; learning_rate={lr} is not the linear rule: the rate grows "
                       "by the same factor as the batch did")
    return True, ("fit(batch_size=256) gives each of the 8 GPUs 32 rows per step, and the linear rule "
                  "scales the rate by the same factor 8: 0.01 -> 0.08 (with a few epochs of warm-up "
                  "in real runs)")


def _solve_batch_lr():
    batch = 32 * 8                           # per replica x replicas: the global batch fit() takes
    return {"batch_size": batch, "learning_rate": 0.01 * batch / 32}   # linear rule: lr grows with the batch


register("03.1", title="global batch and learning rate on 8 GPUs", checker=_check_batch_lr,
         solution=_solve_batch_lr, expects="dict", wants='a dict {"batch_size": ..., "learning_rate": ...}',
         hint="is the batch_size you pass to fit the batch of one GPU or of all of them? And for which "
              "batch was the learning rate tuned? (helpers.replica_checks has the arithmetic.)")

# ---- 03.2: create and compile in the scope ---------------------------------------------------------


def _check_make_model(answer):
    strategy = practice_strategy(replica_devices())
    model = answer(strategy)
    problem = model_problem(model, strategy, "make_model(strategy)")
    if problem is not None:
        return False, problem
    report = check_distributed(model, strategy)
    if tuple(model.input_shape[1:]) != (8, 8, 1) or tuple(model.output_shape[1:]) != (10,):
        return False, (f"the model maps {model.input_shape} to {model.output_shape}; "
                       "expected 8x8x1 digits in and 10 class probabilities out")
    x = np.zeros((8, 8, 8, 1), "float32")
    y = np.arange(8) % 10
    try:
        model.fit(x, y, batch_size=4, epochs=1, verbose=0)  # outside the scope, as in the lesson
    except Exception as err:  # noqa: BLE001 - report any training failure as the reason
        return False, f"the model is distributed, but fit failed: {error_line(err, 440)}"
    return True, (f"created and compiled inside strategy.scope(): {report['replicas']} replicas, "
                  f"{report['variable_class']} weights, and fit works outside the scope")


def _solve_make_model():
    def make_model(strategy):
        import keras

        with strategy.scope():
            model = small_cnn((8, 8, 1), 10, width=8)
            model.compile(optimizer=keras.optimizers.Adam(), loss="sparse_categorical_crossentropy",
                          metrics=["accuracy"])
        return model

    return make_model


register("03.2", title="create and compile in the scope", checker=_check_make_model,
         solution=_solve_make_model, expects="function", takes=1,
         wants="a function make_model(strategy) that returns a compiled Keras model",
         hint="which steps create variables? The layers' weights are one; what else does training "
              "keep in variables?")

# ---- 03.3: two ways to split an uneven batch -------------------------------------------------------


def _as_sizes(value):
    return list(value) if isinstance(value, (list, tuple)) and all(map(is_int, value)) else None


def _check_split(answer):
    if set(answer) != {"multi_gpu_model", "mirrored"}:
        return False, ("expected exactly the keys 'multi_gpu_model' and 'mirrored', each a list of 3 ints; "
                       f"got {sorted(map(repr, answer))}")
    legacy, mirrored = _as_sizes(answer["multi_gpu_model"]), _as_sizes(answer["mirrored"])
    if legacy is None or mirrored is None or len(legacy) != 3 or len(mirrored) != 3:
        return False, "each value must be a list of 3 whole numbers: rows for device 0, 1 and 2"
    if sum(legacy) != 10 or sum(mirrored) != 10:
        return False, f"each split must hand out all 10 rows; yours sum to {sum(legacy)} and {sum(mirrored)}"
    want_legacy, want_mirrored = slice_sizes(10, 3), replica_split(10, 3)
    if legacy == want_mirrored and mirrored == want_legacy:
        return False, "the two answers are swapped: which one gives the remainder to the last device?"
    if legacy != want_legacy:
        return False, (f"multi_gpu_model {legacy}: it gave every tower 10 // 3 = 3 rows and the last "
                       "tower also took the remainder")
    if mirrored != want_mirrored:
        return False, (f"mirrored {mirrored}: MirroredStrategy gives ceil(10 / 3) = 4 rows to each replica "
                       "in turn until the rows run out")
    return True, (f"multi_gpu_model: {legacy} (floor, remainder to the last tower); MirroredStrategy: "
                  f"{mirrored} (ceil, the last replica gets what is left). Both train on all 10 rows")


def _solve_split():
    return {"multi_gpu_model": slice_sizes(10, 3), "mirrored": replica_split(10, 3)}


register("03.3", title="two ways to split an uneven batch", checker=_check_split, solution=_solve_split,
         expects="dict", wants='a dict {"multi_gpu_model": [3 ints], "mirrored": [3 ints]}',
         hint="one of the two rounds the slice size down and leaves the remainder to one device, the "
              "other rounds it up; sections 2 and 7 show which is which.")

# ---- 03.4: a tf.data pipeline for a per-replica batch ----------------------------------------------

ROWS_03_4 = 64


def _counting_model(strategy):
    """A compiled model whose layer counts, per replica, the rows and batches it saw during fit."""
    with strategy.scope():
        counters = {name: tf.Variable(0, dtype=tf.int64, trainable=False,
                                      synchronization=tf.VariableSynchronization.ON_READ,
                                      aggregation=tf.VariableAggregation.SUM) for name in ("rows", "batches")}

        class RowsSeen(keras.layers.Layer):
            def call(self, x):
                if not tf.distribute.in_cross_replica_context():   # only real steps, not the symbolic build
                    counters["rows"].assign_add(tf.cast(tf.shape(x)[0], tf.int64))
                    counters["batches"].assign_add(1)
                return x

        model = keras.Sequential([keras.Input((4,)), RowsSeen(), keras.layers.Dense(3, activation="softmax")])
        model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")

    def per_replica(name):
        return [int(v.numpy()) for v in strategy.experimental_local_results(counters[name])]

    return model, per_replica


def _check_fit_per_replica(answer):
    strategy = practice_strategy()
    n_rep = strategy.num_replicas_in_sync
    model, seen = _counting_model(strategy)
    x = np.random.default_rng(3).normal(size=(ROWS_03_4, 4)).astype("float32")
    y = np.arange(ROWS_03_4) % 3
    per_replica_batch = 8
    with quiet_tf(), warnings.catch_warnings():
        # Keras >= 3.15 warns that fit's default shuffle=True is ignored for a dataset, passed or not
        warnings.filterwarnings("ignore", message=r"`shuffle=True` was passed")
        answer(strategy, model, x, y, per_replica_batch)
    rows, batches = seen("rows"), seen("batches")
    if not any(batches):
        return False, "the model did not train: call model.fit(...) on your dataset inside the function"
    if min(batches) == 0:
        return False, f"only some replicas trained (batches per replica: {batches}); use the model's strategy"
    got = [r / b for r, b in zip(rows, batches)]
    if sum(rows) != ROWS_03_4:
        epochs = sum(rows) / ROWS_03_4
        return False, (f"the replicas saw {sum(rows)} rows in all, the data has {ROWS_03_4}: train for exactly "
                       f"one epoch (saw {epochs:g} epochs' worth)")
    if got == [per_replica_batch / n_rep] * n_rep:
        return False, (f"each replica got {got[0]:g} rows per step, not {per_replica_batch}: fit treats the "
                       "dataset's batch as the global batch and splits it over the replicas. Batch by "
                       "per-replica batch x strategy.num_replicas_in_sync")
    if got != [float(per_replica_batch)] * n_rep:
        return False, f"rows per step on each replica: {got}; want {per_replica_batch} on every replica"
    return True, (f"global batch {per_replica_batch} x {n_rep} = {per_replica_batch * n_rep}: each of the "
                  f"{n_rep} replicas trained {batches[0]} steps of {per_replica_batch} rows, "
                  f"{rows[0]} rows each")


def _solve_fit_per_replica():
    def fit_per_replica(strategy, model, x, y, per_replica_batch):
        global_batch = per_replica_batch * strategy.num_replicas_in_sync   # fit splits this over replicas
        dataset = (tf.data.Dataset.from_tensor_slices((x, y))
                   .shuffle(len(x), seed=0).batch(global_batch).prefetch(tf.data.AUTOTUNE))
        return model.fit(dataset, epochs=1, verbose=0)

    return fit_per_replica


register("03.4", title="a tf.data pipeline for a per-replica batch", checker=_check_fit_per_replica,
         solution=_solve_fit_per_replica, expects="function", takes=5,
         wants="a function fit_per_replica(strategy, model, x, y, per_replica_batch)",
         hint="is the batch of a dataset handed to fit the batch of one replica or of all of them? The "
              "strategy knows how many replicas there are.")

# ---- 03.5: find and fix - training on two replicas --------------------------------------------------

def _check_train_on_replicas(answer):
    strategy = practice_strategy()
    n = 96
    x = np.random.default_rng(5).normal(size=(n, 64)).astype("float32")
    y = np.arange(n) % 10
    try:
        with quiet_tf():
            model = answer(strategy, x, y)
    except (RuntimeError, ValueError) as exc:
        return False, f"it still fails: {error_line(exc, 160)}. Which variables were created outside the scope?"
    problem = model_problem(model, strategy, "train_on_replicas")
    if problem is not None:
        return False, problem
    steps = int(model.optimizer.iterations.numpy())
    want = math.ceil(n / (16 * strategy.num_replicas_in_sync))
    if steps == math.ceil(n / 16):
        return False, (f"{steps} steps for {n} rows: batch_size=16 is the global batch, so each replica got "
                       f"{16 // strategy.num_replicas_in_sync} rows, not the 16 the comment promises")
    if steps != want:
        return False, f"{steps} optimizer steps; one epoch of {n} rows with 16 rows per replica takes {want}"
    return True, (f"model and optimizer are mirrored, and one epoch took {steps} steps of "
                  f"{16 * strategy.num_replicas_in_sync} rows: 16 on each of the "
                  f"{strategy.num_replicas_in_sync} replicas")


def _solve_train_on_replicas():
    def train_on_replicas(strategy, x, y):
        with strategy.scope():                       # the weights are variables too: create them here
            model = keras.Sequential([keras.Input((64,)), layers.Dense(32, activation="relu"),
                                      layers.Dense(10, activation="softmax")])
            model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        batch = 16 * strategy.num_replicas_in_sync   # fit's batch_size is the global batch
        model.fit(x, y, batch_size=batch, epochs=1, verbose=0)
        return model

    return train_on_replicas


register("03.5", title="find and fix: training on two replicas", checker=_check_train_on_replicas,
         solution=_solve_train_on_replicas, expects="function", takes=3,
         wants="a function train_on_replicas(strategy, x, y): your fixed version",
         hint="two bugs: which variables are created before the `with`? And does fit's batch_size count "
              "the rows of one replica or of all?")
