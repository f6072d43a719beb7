"""Exercises of 06_scaling_and_performance."""

from __future__ import annotations

import math

from . import register

# 06.1 ------------------------------------------------------------------------------------------
_EFF_CASES = (  # (samples/s, one-device samples/s on the same global batch, replicas) -> efficiency
    ((200.0, 100.0, 2), 1.0),
    ((300.0, 100.0, 4), 0.75),
    ((90.0, 100.0, 2), 0.45),
    ((1000.0, 1000.0, 1), 1.0),
)


def _check_efficiency(answer):
    if not callable(answer):
        return False, ("give a function efficiency(samples_per_s, one_device_samples_per_s, replicas); "
                       f"you gave a {type(answer).__name__}")
    for args, want in _EFF_CASES:
        got = answer(*args)
        if not isinstance(got, (int, float)) or not math.isclose(got, want, rel_tol=1e-6):
            sps, base, n = args
            hint = ""
            if isinstance(got, (int, float)) and math.isclose(got, sps / base, rel_tol=1e-6):
                hint = " - that is the speed-up; efficiency divides it by the number of replicas"
            return False, (f"efficiency({sps}, {base}, {n}) returned {got!r}, expected {want} "
                           f"(speed-up {sps / base:.2f}x on {n} replica(s)){hint}")
    return True, ("efficiency = (samples/s / one device's samples/s) / replicas: 1.0 means every "
                  "replica pulls its full weight; on devices that share one chip, expect 1/replicas at best.")


def _solve_efficiency():
    def efficiency(samples_per_s, one_device_samples_per_s, replicas):
        speed_up = samples_per_s / one_device_samples_per_s
        return speed_up / replicas

    return efficiency


register("06.1", title="scaling efficiency", checker=_check_efficiency, solution=_solve_efficiency,
         hint="speed-up = samples/s divided by the one-device samples/s; then divide by the replicas")


# 06.2 ------------------------------------------------------------------------------------------
_BASE_LR, _PER_REPLICA = 0.01, 32  # a one-GPU recipe: batch 32, learning rate 0.01


def _check_lr(answer):
    if not callable(answer):
        return False, f"give a function lr_for(replicas); you gave a {type(answer).__name__}"
    from helpers.strategy import global_batch_size, scale_learning_rate

    for n in (1, 2, 4, 8):
        want = scale_learning_rate(_BASE_LR, _PER_REPLICA, global_batch_size(_PER_REPLICA, n))
        got = answer(n)
        if not isinstance(got, (int, float)) or not math.isclose(got, want, rel_tol=1e-6):
            if isinstance(got, (int, float)) and math.isclose(got, _BASE_LR, rel_tol=1e-6):
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
         solution=_solve_lr, hint="global batch = 32 * replicas; lr = 0.01 * global batch / 32")


# 06.3 ------------------------------------------------------------------------------------------
def _check_pipeline(answer):
    if not callable(answer):
        return False, f"give a function fix(dataset) -> dataset; you gave a {type(answer).__name__}"
    import numpy as np

    from helpers.input_pipeline import CallCounter, make_pipeline

    x = np.arange(40, dtype="float32").reshape(10, 4)
    y = np.arange(10, dtype="int64")
    counter = CallCounter()
    fixed = answer(make_pipeline(x, y, batch_size=4, counter=counter))
    if fixed is None or not hasattr(fixed, "element_spec"):
        return False, "fix(dataset) must return the improved tf.data.Dataset"
    epochs = [[(xb.numpy(), yb.numpy()) for xb, yb in fixed] for _ in range(3)]
    got_y = [np.concatenate([yb for _, yb in e]) if e else np.array([]) for e in epochs]
    if not all(np.array_equal(g, y) for g in got_y):
        return False, "the data changed: keep every sample, in order (no shuffle, no repeat, no filter)"
    if counter.calls != 3:
        return False, (f"the slow map ran {counter.calls} times in 3 epochs of 3 batches; with .cache() "
                       "after it, it runs once per batch (3 times) in total")
    if "Prefetch" not in type(fixed).__name__:
        return False, (f"the cache works, but the last step is {type(fixed).__name__}: end with "
                       ".prefetch(tf.data.AUTOTUNE) so batch k+1 is prepared while batch k trains")
    return True, ("cache() after the expensive map does the work once; prefetch() last overlaps "
                  "preparing the next batch with training the current one.")


def _solve_pipeline():
    import tensorflow as tf

    def fix(dataset):
        return dataset.cache().prefetch(tf.data.AUTOTUNE)

    return fix


register("06.3", title="fix the slow input pipeline", checker=_check_pipeline, solution=_solve_pipeline,
         hint="dataset.cache() then .prefetch(tf.data.AUTOTUNE)")
