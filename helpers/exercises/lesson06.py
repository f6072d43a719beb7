"""Exercises of 06_scaling_and_performance."""

from __future__ import annotations

import math

from . import KINDS, describe, register

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
        if not KINDS["number"][1](got):
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
    from helpers.strategy import global_batch_size, scale_learning_rate

    for n in (1, 2, 4, 8):
        want = scale_learning_rate(_BASE_LR, _PER_REPLICA, global_batch_size(_PER_REPLICA, n))
        got = answer(n)
        if not KINDS["number"][1](got):
            return False, f"lr_for({n}) returned {describe(got)}; it should return a number"
        if not math.isclose(got, want, rel_tol=1e-6):
            if math.isclose(got, _BASE_LR, rel_tol=1e-6):
                return False, (f"lr_for({n}) returned the one-GPU rate {got}: the global batch is "
                               f"{_PER_REPLICA * n} on {n} replicas, so the linear rule scales the rate too")
            return False, f"lr_for({n}) returned {got!r}, expected {want:g} (linear scaling rule)"
    return True, ("linear scaling: 1 -> 0.01, 8 replicas -> 0.08, because the global batch grew 8x "
                  "(for very large batches add a warm-up, as Goyal et al. 2017 did).")


def _solve_lr():
    from helpers.strategy import global_batch_size, scale_learning_rate

    def lr_for(replicas):
        return scale_learning_rate(0.01, 32, global_batch_size(32, replicas))

    return lr_for


register("06.2", title="scale the learning rate with the replicas", checker=_check_lr,
         solution=_solve_lr, expects="function", takes=1,
         wants="a function lr_for(replicas) -> learning rate",
         hint="how big is the global batch on that many replicas, and by what factor did it grow "
              "from the recipe's batch? Section 2 says what the linear rule does with that factor.")


# 06.3 ------------------------------------------------------------------------------------------
def _check_pipeline(answer):
    import numpy as np

    from helpers.input_pipeline import CallCounter, make_pipeline

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
    import tensorflow as tf

    def fix(dataset):
        return dataset.cache().prefetch(tf.data.AUTOTUNE)

    return fix


register("06.3", title="fix the slow input pipeline", checker=_check_pipeline, solution=_solve_pipeline,
         expects="function", takes=1, wants="a function fix(dataset) that returns a tf.data.Dataset",
         hint="section 4 uses two dataset methods: one keeps what the first epoch computed, the other "
              "works ahead while the model trains. Their order matters.")
