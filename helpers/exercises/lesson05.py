"""Exercises of 05_pickling_checkpoint_error."""

from __future__ import annotations

import copy
import types

import numpy as np

from . import describe, register


def _check_lambda(answer):
    import keras

    if not isinstance(answer, keras.layers.Lambda):  # a plain function: the layer's function, unwrapped
        return False, (f"you passed {describe(answer)}; this exercise wants the layer: your function "
                       "wrapped in keras.layers.Lambda(...)")
    captured = [c.cell_contents for c in (answer.function.__closure__ or ())]
    modules = [c.__name__ for c in captured if isinstance(c, types.ModuleType)]
    if modules:
        return False, (f"your function captures the module(s) {modules} in its closure (a local "
                       "`import` in the enclosing function): exactly multi_gpu_model's bug. Use a global "
                       "name, or import inside the function that runs.")
    try:
        copy.deepcopy(answer.get_config())
    except TypeError as exc:
        return False, f"copy.deepcopy(layer.get_config()) still fails: TypeError: {exc}"
    for rows in (8, 10):
        x = np.arange(rows * 3, dtype="float32").reshape(rows, 3)
        got = keras.ops.convert_to_numpy(answer(x))
        if got.shape != (rows // 2, 3) or not np.allclose(got, x[: rows // 2]):
            return False, (f"on a batch of {rows} rows it should return the first {rows // 2} rows, "
                           f"got an array of shape {got.shape}")
    return True, ("the config deep-copies (no module in the closure) and the layer returns the first half "
                  "of the batch, like tower 0's slice. Keras 2.2.0 fixed multi_gpu_model the same way.")


def _solve_lambda():
    import keras

    def first_half(t, parts):
        from keras import ops  # imported when the layer runs: a local name, nothing captured
        return t[: ops.shape(t)[0] // parts]

    return keras.layers.Lambda(first_half, arguments={"parts": 2})


def _check_checkpoint(answer):
    import keras

    if answer.monitor == "val_acc":
        return False, ("since Keras 2.3 metrics=['accuracy'] logs 'val_accuracy'; 'val_acc' is never in the "
                       "logs (mode='auto' raises ValueError, mode='max' warns and saves every epoch)")
    if answer.monitor != "val_accuracy":
        return False, f"monitor the validation accuracy logged by metrics=['accuracy'], not {answer.monitor!r}"
    if not answer.save_best_only:
        return False, "keep only the best model: save_best_only=True"
    if answer.save_freq != "epoch":
        return False, (f"save_freq={answer.save_freq!r} saves every {answer.save_freq} batches (the old "
                       "positional `period` lands here); checkpoint once per epoch with save_freq='epoch'")
    if answer.save_weights_only or not answer.filepath.endswith(".keras"):
        return False, "save the whole model (architecture, weights, optimizer) to a file ending in .keras"
    if answer.mode == "min":
        return False, "mode='min' would keep the *worst* accuracy; use 'max' or 'auto'"
    return True, ("best model by val_accuracy, whole model with optimizer state, checked once per epoch. "
                  "Under MirroredStrategy this plain callback is all you need.")


def _solve_checkpoint():
    import os
    import tempfile

    import keras

    path = os.path.join(tempfile.gettempdir(), "best.keras")
    return keras.callbacks.ModelCheckpoint(path, monitor="val_accuracy", save_best_only=True)


register("05.1", title="a Lambda whose config deep-copies", checker=_check_lambda, solution=_solve_lambda,
         expects=("keras.layers.Lambda", "function"), wants="a keras.layers.Lambda layer",
         hint="what ends up in the function's closure? Names the function looks up only when it runs "
              "are not captured, so they never reach the config.")
register("05.2", title="the blog's checkpoint, Keras 3 style", checker=_check_checkpoint,
         solution=_solve_checkpoint,
         expects="keras.callbacks.ModelCheckpoint", wants="a keras.callbacks.ModelCheckpoint instance",
         hint="what name does metrics=['accuracy'] log for validation in Keras 3, and which file "
              "extension saves the whole model?")
