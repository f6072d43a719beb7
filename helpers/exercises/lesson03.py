"""Exercises of 03_from_multi_gpu_model_to_mirrored_strategy."""

from __future__ import annotations

from . import KINDS, describe, register

# ---- 03.1: batch size and learning rate when moving from 1 GPU to 8 --------------------------------


def _check_batch_lr(answer):
    if set(answer) != {"batch_size", "learning_rate"}:
        return False, ("expected exactly the keys 'batch_size' and 'learning_rate', "
                       f"got {sorted(map(repr, answer))}")
    batch, lr = answer["batch_size"], answer["learning_rate"]
    if not KINDS["int"][1](batch):
        return False, f"batch_size must be a whole number, you gave {describe(batch)}"
    if not KINDS["number"][1](lr):
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
    from helpers.strategy import global_batch_size, scale_learning_rate

    batch = global_batch_size(per_replica=32, num_replicas=8)
    return {"batch_size": batch, "learning_rate": scale_learning_rate(0.01, 32, batch, rule="linear")}


register("03.1", title="global batch and learning rate on 8 GPUs", checker=_check_batch_lr,
         solution=_solve_batch_lr, expects="dict", wants='a dict {"batch_size": ..., "learning_rate": ...}',
         hint="is the batch_size you pass to fit the batch of one GPU or of all of them? And for which "
              "batch was the learning rate tuned? (helpers.strategy has the arithmetic.)")

# ---- 03.2: create and compile in the scope ---------------------------------------------------------


def _check_make_model(answer):
    import numpy as np
    import tensorflow as tf

    from helpers.legacy import replica_devices
    from helpers.strategy import check_distributed

    # ReductionToOneDevice: with the default (collective) all-reduce on CPU replicas, a second
    # MirroredStrategy in the same process reuses the first one's collective keys, and training a
    # model of another shape aborts every collective op in the kernel ("Shape mismatch in the
    # collective instance ..."). This check must never break the learner's kernel.
    strategy = tf.distribute.MirroredStrategy(replica_devices(),
                                              cross_device_ops=tf.distribute.ReductionToOneDevice())
    model = answer(strategy)
    if not hasattr(model, "distribute_strategy"):
        return False, (f"make_model(strategy) must return a Keras model, it returned {describe(model)}"
                       + (": does it end with `return model`?" if model is None else ""))
    try:
        report = check_distributed(model, strategy)
    except AssertionError as err:
        return False, str(err)
    if tuple(model.input_shape[1:]) != (8, 8, 1) or tuple(model.output_shape[1:]) != (10,):
        return False, (f"the model maps {model.input_shape} to {model.output_shape}; "
                       "expected 8x8x1 digits in and 10 class probabilities out")
    x = np.zeros((8, 8, 8, 1), "float32")
    y = np.arange(8) % 10
    try:
        model.fit(x, y, batch_size=4, epochs=1, verbose=0)  # outside the scope, as in the lesson
    except Exception as err:  # noqa: BLE001 - report any training failure as the reason
        return False, f"the model is distributed, but fit failed: {type(err).__name__}: {err}"[:500]
    return True, (f"created and compiled inside strategy.scope(): {report['replicas']} replicas, "
                  f"{report['variable_class']} weights, and fit works outside the scope")


def _solve_make_model():
    def make_model(strategy):
        import keras

        from helpers.models import small_cnn

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
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool)
                                                for v in value):
        return list(value)
    return None


def _check_split(answer):
    from helpers.legacy import slice_sizes
    from helpers.strategy import replica_split

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
    from helpers.legacy import slice_sizes
    from helpers.strategy import replica_split

    return {"multi_gpu_model": slice_sizes(10, 3), "mirrored": replica_split(10, 3)}


register("03.3", title="two ways to split an uneven batch", checker=_check_split, solution=_solve_split,
         expects="dict", wants='a dict {"multi_gpu_model": [3 ints], "mirrored": [3 ints]}',
         hint="one of the two rounds the slice size down and leaves the remainder to one device, the "
              "other rounds it up; sections 2 and 7 show which is which.")
