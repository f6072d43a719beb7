"""Exercises of 06_scaling_and_performance."""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf

from .. import devices
from ..input_pipeline import CallCounter, make_pipeline
from . import describe, practice_strategy, register, take


# 06.1 ------------------------------------------------------------------------------------------
def _check_pipeline(answer):
    x = np.arange(40, dtype="float32").reshape(10, 4)
    y = np.arange(10, dtype="int64")
    counter = CallCounter()
    fixed = answer(make_pipeline(x, y, batch_size=4, counter=counter))
    if not isinstance(fixed, tf.data.Dataset):
        return False, f"fix(dataset) must return the improved tf.data.Dataset; it returned {describe(fixed)}"
    epochs = [[(xb.numpy(), yb.numpy()) for xb, yb in take(fixed, 3)] for _ in range(3)]   # 3 batches: 1 more read
    if any(len(e) > 3 for e in epochs):
        return False, ("an epoch of 10 rows in batches of 4 gave more than 3 batches: the dataset never ends "
                       "(a repeat()?). Keep one pass over the data: fit repeats it every epoch")
    got_y = [np.concatenate([yb for _, yb in e]) if e else np.array([]) for e in epochs]
    if not all(np.array_equal(g, y) for g in got_y):
        return False, "the data changed: keep every sample, in order (no shuffle, no repeat, no filter)"
    if counter.calls != 3:
        return False, (f"the slow map ran {counter.calls} times in 3 epochs of 3 batches; if its results "
                       "were kept after the first epoch it would run once per batch (3 times) in total")
    if "Prefetch" not in type(fixed).__name__:
        return False, (f"the cache works, but the last step is {type(fixed).__name__}: end with the step "
                       "that prepares batch k+1 while batch k trains")
    return True, ("cache() after the expensive map does the work once; prefetch() last overlaps "
                  "preparing the next batch with training the current one.")


def _solve_pipeline():
    def fix(dataset):
        return dataset.cache().prefetch(tf.data.AUTOTUNE)

    return fix


register("06.1", title="fix the slow input pipeline", checker=_check_pipeline, solution=_solve_pipeline,
         expects="function", takes=1, wants="a function fix(dataset) that returns a tf.data.Dataset",
         hint="section 4 uses two dataset methods: one keeps what the first epoch computed, the other "
              "works ahead while the model trains. Their order matters.",
         giveaways=["cache()", "prefetch(", "AUTOTUNE"])


# 06.2 ------------------------------------------------------------------------------------------
def _check_fixed_prepare(answer):
    strategy = practice_strategy(devices.configured_devices())  # REPLICAS, else 2 devices
    n = strategy.num_replicas_in_sync
    x = np.random.default_rng(0).random((256, 4)).astype("float32")
    y = np.arange(256, dtype="int64") % 10
    try:
        out = answer(x, y, strategy)
        left = keras.mixed_precision.global_policy().name
    finally:
        keras.mixed_precision.set_global_policy("float32")  # whatever the answer did, the kernel is clean
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        return False, f"prepare(x, y, strategy) returned {describe(out)}; it should return (dataset, model)"
    ds, model = out
    if not isinstance(ds, tf.data.Dataset) or not isinstance(model, keras.Model) or model.optimizer is None:
        return False, "prepare must return (dataset, compiled model), like the code it fixes"
    if left != "float32":
        return False, (f"the global policy is still {left!r} after prepare returned: every model built "
                       "later in the kernel would use it. Reset it once the model is built, even after an error.")
    if not model.dtype_policy.name.startswith("mixed"):
        return False, (f"the model computes in {model.dtype_policy.name}: keep mixed precision for this "
                       "model (set the policy before building it), just do not leave it set")
    steps = -(-len(x) // (32 * n))                         # batches in an epoch; one more is read
    epochs = [[(xb.numpy(), yb.numpy()) for xb, yb in take(ds, steps)] for _ in range(2)]
    if not epochs[0]:
        return False, "the dataset is empty: one epoch must hold every sample once"
    if int(epochs[0][0][1].shape[0]) != 32 * n:
        return False, (f"the first batch has {epochs[0][0][1].shape[0]} samples; the global batch is "
                       f"{32 * n} (32 per replica on {n} replicas)")
    lr, want = float(keras.ops.convert_to_numpy(model.optimizer.learning_rate)), 0.01 * n
    if not math.isclose(lr, want, rel_tol=1e-5):
        if n > 1 and math.isclose(lr, want * n, rel_tol=1e-5):
            return False, (f"learning rate {lr:g} on {n} replicas is scaled twice: global_batch / base_batch "
                           f"already is the factor {n}, multiplying by num_replicas_in_sync again is too much")
        if n > 1 and math.isclose(lr, 0.01, rel_tol=1e-5):
            return False, f"learning rate {lr:g}: the global batch grew {n}x, the linear rule scales the rate too"
        return False, f"learning rate {lr:g}, expected {want:g} (linear rule: 0.01 x global batch / 32)"
    xs = [np.concatenate([xb for xb, _ in e]) for e in epochs]
    if len(epochs[0]) > steps or not np.array_equal(np.sort(np.concatenate([yb for _, yb in epochs[0]])), np.sort(y)):
        return False, "one epoch must hold every sample once (no repeat(), no filter)"
    if xs[0].shape == xs[1].shape and np.allclose(xs[0], xs[1]):
        return False, ("both epochs saw the same noise: the cache stored the augmented samples, so the random "
                       "augmentation ran only once. Cache what is expensive and fixed, then augment.")
    step = ds                                    # walk the tf.data steps back from the last one
    while step is not None and "Cache" not in type(step).__name__:
        step = getattr(step, "_input_dataset", None)
    if step is None:
        return False, "keep the cache (reading the data is the expensive part in real life), just move it"
    return True, ("three traps fixed: the rate is scaled once (global batch / recipe batch), the random "
                  "augmentation runs after the cache so every epoch sees new noise, and the global policy "
                  "is reset after the model is built.")


def _solve_fixed_prepare():
    noise = tf.random.Generator.from_seed(1)

    def augment(x, y):
        return x + noise.normal(tf.shape(x), stddev=0.1), y

    def prepare(x, y, strategy, per_replica=32, base_lr=0.01, base_batch=32):
        global_batch = per_replica * strategy.num_replicas_in_sync
        lr = base_lr * global_batch / base_batch                  # scaled once
        ds = (tf.data.Dataset.from_tensor_slices((x, y)).cache().map(augment)   # cache, then augment
              .batch(global_batch).prefetch(tf.data.AUTOTUNE))
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
        try:
            with strategy.scope():
                model = keras.Sequential([keras.Input(x.shape[1:]), keras.layers.Dense(10, activation="softmax")])
                model.compile(optimizer=keras.optimizers.SGD(lr), loss="sparse_categorical_crossentropy")
        finally:
            keras.mixed_precision.set_global_policy("float32")    # reset, even after an error
        return ds, model

    return prepare


register("06.2", title="find and fix three traps", checker=_check_fixed_prepare,
         solution=_solve_fixed_prepare, expects="function", takes=3,
         wants="a function prepare(x, y, strategy) that returns (dataset, model), its traps fixed",
         hint="check the learning rate's factor, what each epoch of data looks like after the cache, and "
              "what the global policy is once prepare has returned.",
         giveaways=["0.02", 'set_global_policy("float32")', "cache().map", "finally"])
