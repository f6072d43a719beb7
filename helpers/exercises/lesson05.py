"""Exercises of 05_pickling_checkpoint_error."""

from __future__ import annotations

import copy
import types

import keras
import numpy as np

from . import describe, register

# ---- 05.1: a Lambda layer whose config deep-copies (the pickling error's fix) ------------------------


def _check_lambda(answer):
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
    def first_half(t, parts):
        from keras import ops  # imported when the layer runs: a local name, nothing captured
        return t[: ops.shape(t)[0] // parts]

    return keras.layers.Lambda(first_half, arguments={"parts": 2})


register("05.1", title="a Lambda whose config deep-copies", checker=_check_lambda, solution=_solve_lambda,
         expects=("keras.layers.Lambda", "function"), wants="a keras.layers.Lambda layer",
         hint="what ends up in the function's closure? Names the function looks up only when it runs "
              "are not captured, so they never reach the config.")
