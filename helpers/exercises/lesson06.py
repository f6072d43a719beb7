"""Exercises of 06_scaling_and_performance."""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf

from .. import devices
from ..input_pipeline import CallCounter, make_pipeline
from ..replica_checks import global_batch_size, scale_learning_rate
from . import describe, is_number, practice_strategy, register

# 06.1 ------------------------------------------------------------------------------------------
_EFF_CASES = (  # (samples/s, one-device samples/s on the same global batch, replicas) -> efficiency
    ((200.0, 100.0, 2), 1.0),
    ((300.0, 100.0, 4), 0.75),
    ((90.0, 100.0, 2), 0.45),
    ((1000.0, 1000.0, 1), 1.0),
)


def _check_efficiency(answer):
    for args, want in _EFF_CASES:
        got = answer(*args)
        sps, base, n = args
        if not is_number(got):
            return False, f"efficiency({sps}, {base}, {n}) returned {describe(got)}; it should return a number"
        if not math.isclose(got, want, rel_tol=1e-6):
            hint = ""
            if math.isclose(got, sps / base, rel_tol=1e-6):
                hint = " - that is the speed-up; efficiency divides it by the number of replicas"
            return False, (f"efficiency({sps}, {base}, {n}) returned {got!r}, expected {want} "
                           f"(speed-up {sps / base:.2f}x on {n} replica(s)){hint}")
    return True, ("efficiency = (samples/s / one device's samples/s) / replicas: 1.0 means every "
                  "replica pulls its full weight. Devices that share one chip add no compute, so expect "
                  "about 1/replicas there (a little more when one device left cores idle).")


def _solve_efficiency():
    def efficiency(samples_per_s, one_device_samples_per_s, replicas):
        speed_up = samples_per_s / one_device_samples_per_s
        return speed_up / replicas

    return efficiency


register("06.1", title="scaling efficiency", checker=_check_efficiency, solution=_solve_efficiency,
         expects="function", takes=3,
         wants="a function efficiency(samples_per_s, one_device_samples_per_s, replicas) -> number",
         hint="'The promise' at the top defines the speed-up first and the efficiency from it; 1.0 "
              "means every replica pulls its full weight.")


# 06.2 ------------------------------------------------------------------------------------------
_BASE_LR, _PER_REPLICA = 0.01, 32  # a one-GPU recipe: batch 32, learning rate 0.01


def _check_lr(answer):
    for n in (1, 2, 4, 8):
        want = scale_learning_rate(_BASE_LR, _PER_REPLICA, global_batch_size(_PER_REPLICA, n))
        got = answer(n)
        if not is_number(got):
            return False, f"lr_for({n}) returned {describe(got)}; it should return a number"
        if not math.isclose(got, want, rel_tol=1e-6):
            if math.isclose(got, _BASE_LR, rel_tol=1e-6):
                return False, (f"lr_for({n}) returned the one-GPU rate {got}: the global batch is "
                               f"{_PER_REPLICA * n} on {n} replicas, so the linear rule scales the rate too")
            return False, f"lr_for({n}) returned {got!r}, expected {want:g} (linear scaling rule)"
    return True, ("linear scaling: 1 -> 0.01, 8 replicas -> 0.08, because the global batch grew 8x "
                  "(for very large batches add a warm-up, as Goyal et al. 2017 did).")


def _solve_lr():
    def lr_for(replicas):
        global_batch = 32 * replicas         # 32 rows per replica
        return 0.01 * global_batch / 32      # linear rule: the rate grows with the global batch

    return lr_for


register("06.2", title="scale the learning rate with the replicas", checker=_check_lr,
         solution=_solve_lr, expects="function", takes=1,
         wants="a function lr_for(replicas) -> learning rate",
         hint="how big is the global batch on that many replicas, and by what factor did it grow "
              "from the recipe's batch? Section 2 says what the linear rule does with that factor.")


# 06.3 ------------------------------------------------------------------------------------------
def _check_pipeline(answer):
    x = np.arange(40, dtype="float32").reshape(10, 4)
    y = np.arange(10, dtype="int64")
    counter = CallCounter()
    fixed = answer(make_pipeline(x, y, batch_size=4, counter=counter))
    if not hasattr(fixed, "element_spec"):
        return False, f"fix(dataset) must return the improved tf.data.Dataset; it returned {describe(fixed)}"
    epochs = [[(xb.numpy(), yb.numpy()) for xb, yb in fixed] for _ in range(3)]
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


register("06.3", title="fix the slow input pipeline", checker=_check_pipeline, solution=_solve_pipeline,
         expects="function", takes=1, wants="a function fix(dataset) that returns a tf.data.Dataset",
         hint="section 4 uses two dataset methods: one keeps what the first epoch computed, the other "
              "works ahead while the model trains. Their order matters.")


# helpers shared by 06.4 and 06.5 ---------------------------------------------------------------
def _steps(dataset) -> list[str]:
    """The tf.data steps of ``dataset``, last first: ["Prefetch", "Batch", "Cache", "Map", "TensorSlice"]."""
    out, ds = [], dataset
    while ds is not None and len(out) < 50:
        out.append(type(ds).__name__.strip("_").replace("Dataset", "").replace("Parallel", ""))
        ds = getattr(ds, "_input_dataset", None)
    return out


# 06.4 ------------------------------------------------------------------------------------------
def _check_make_dataset(answer):
    strategy = practice_strategy(devices.configured_devices())  # REPLICAS, else 2 devices
    n = strategy.num_replicas_in_sync
    x = np.arange(96 * 3, dtype="float32").reshape(96, 3)
    y = np.arange(96, dtype="int64")
    for per_replica in (4, 8):
        ds = answer(x, y, per_replica, strategy)
        call = f"make_dataset(x, y, {per_replica}, strategy)"
        if not hasattr(ds, "element_spec"):
            return False, f"{call} returned {describe(ds)}; it should return a tf.data.Dataset"
        if "Distributed" in type(ds).__name__:
            return False, (f"{call} returned a {type(ds).__name__}: return the tf.data.Dataset itself, "
                           "fit (or experimental_distribute_dataset) splits it among the replicas")
        epoch = [yb.numpy() for _, yb in ds]
        if not epoch or epoch[0].ndim != 1:
            return False, f"{call} gives unbatched samples: batch them (fit takes the dataset's batches as they are)"
        got = np.sort(np.concatenate(epoch))
        if not np.array_equal(got, y):
            return False, (f"one epoch of {call} holds {len(got)} samples, not the {len(y)} given, each once: "
                           "no repeat, no filter, no drop_remainder here")
        dist = strategy.experimental_distribute_dataset(ds)
        local = [int(t.shape[0]) for t in strategy.experimental_local_results(next(iter(dist))[1])]
        if local != [per_replica] * n:
            size = int(epoch[0].shape[0])
            why = (" - that is the batch of ONE replica; MirroredStrategy splits each batch among the "
                   f"{n} replicas" if size == per_replica and n > 1 else "")
            return False, (f"{call}: the first batch has {size} samples, so the {n} replicas got {local} "
                           f"instead of {per_replica} each{why}")
        steps = _steps(ds)
        if "Cache" not in steps:
            return False, f"{call} has no cache step: every epoch would prepare the data again ({steps})"
        if steps[0] != "Prefetch":
            return False, (f"the last step of {call} is {steps[0]}: end with the step that prepares the "
                           "next batch while the current one trains")
    return True, (f"on {n} replicas each replica gets per_replica samples because the batch is "
                  "per_replica * strategy.num_replicas_in_sync; cache() keeps the prepared data, "
                  "prefetch() last overlaps input and training.")


def _solve_make_dataset():
    def make_dataset(x, y, per_replica, strategy):
        global_batch = per_replica * strategy.num_replicas_in_sync
        ds = tf.data.Dataset.from_tensor_slices((x, y)).cache()
        return ds.batch(global_batch).prefetch(tf.data.AUTOTUNE)

    return make_dataset


register("06.4", title="a pipeline for MirroredStrategy", checker=_check_make_dataset,
         solution=_solve_make_dataset, expects="function", takes=4,
         wants="a function make_dataset(x, y, per_replica, strategy) that returns a tf.data.Dataset",
         hint="fit under a strategy splits each batch it receives among the replicas, so the batch you "
              "build is not per_replica; the strategy knows how many replicas there are.")


# 06.5 ------------------------------------------------------------------------------------------
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
    if not hasattr(ds, "element_spec") or getattr(model, "optimizer", None) is None:
        return False, "prepare must return (dataset, compiled model), like the code it fixes"
    if left != "float32":
        return False, (f"the global policy is still {left!r} after prepare returned: every model built "
                       "later in the kernel would use it. Reset it once the model is built, even after an error.")
    if not model.dtype_policy.name.startswith("mixed"):
        return False, (f"the model computes in {model.dtype_policy.name}: keep mixed precision for this "
                       "model (set the policy before building it), just do not leave it set")
    epochs = [[(xb.numpy(), yb.numpy()) for xb, yb in ds] for _ in range(2)]
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
    if not np.array_equal(np.sort(np.concatenate([yb for _, yb in epochs[0]])), np.sort(y)):
        return False, "one epoch must hold every sample once"
    if xs[0].shape == xs[1].shape and np.allclose(xs[0], xs[1]):
        return False, ("both epochs saw the same noise: the cache stored the augmented samples, so the random "
                       "augmentation ran only once. Cache what is expensive and fixed, then augment.")
    if "Cache" not in _steps(ds):
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


register("06.5", title="find and fix three traps", checker=_check_fixed_prepare,
         solution=_solve_fixed_prepare, expects="function", takes=3,
         wants="a function prepare(x, y, strategy) that returns (dataset, model), its traps fixed",
         hint="check the learning rate's factor, what each epoch of data looks like after the cache, and "
              "what the global policy is once prepare has returned.")
