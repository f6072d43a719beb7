"""Exercises of 05_pickling_checkpoint_error."""

from __future__ import annotations

import copy
import tempfile
import types
from pathlib import Path

import keras
import numpy as np

from . import describe, model_problem, practice_strategy, quiet_tf, register

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

# ---- 05.2: resume training from a checkpoint under the strategy ------------------------------------

ROWS_05_2, BATCH_05_2 = 64, 16


def _check_resume(answer):
    strategy = practice_strategy()
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(ROWS_05_2, 8)).astype("float32"), np.arange(ROWS_05_2) % 3
    steps = ROWS_05_2 // BATCH_05_2
    with strategy.scope():
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                                  keras.layers.Dense(3, activation="softmax")])
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        # the state after one epoch, without spending a fit on it: Adam built, its step counter at 4
        model.optimizer.build(model.trainable_variables)
    model.optimizer.iterations.assign(steps)
    with tempfile.TemporaryDirectory() as folder, quiet_tf():
        path = str(Path(folder) / "last.keras")
        model.save(path)
        resumed = answer(path, strategy, x, y)
    problem = model_problem(resumed, strategy, "resume")
    if problem is not None:
        return False, problem + (" (for a file: call load_model inside the scope)" if hasattr(resumed, "fit") else "")
    done = int(keras.ops.convert_to_numpy(resumed.optimizer.iterations))
    if done == 2 * steps:
        return True, (f"loaded inside the scope (mirrored variables), and the optimizer went on from step "
                      f"{steps} to {done}: Adam's step counter and moments came back from the file")
    if done == steps:
        return False, (f"the optimizer is at step {done}: either it did not train one more epoch, or a fresh "
                       "compile threw away the optimizer state the file holds (its step counter restarted)")
    if done == 0:
        return False, "the optimizer never stepped: train one more epoch with fit"
    return False, (f"the optimizer is at step {done}; the file holds {steps} steps and one more epoch adds "
                   f"{steps}: load the compiled model and fit one epoch with batch_size={BATCH_05_2}")


def _solve_resume():
    def resume(path, strategy, x, y):
        with strategy.scope():                        # mirrored variables, optimizer state included
            model = keras.models.load_model(path)      # compiled: no compile() that would reset Adam
        model.fit(x, y, batch_size=16, initial_epoch=1, epochs=2, verbose=0)
        return model

    return resume


register("05.2", title="resume training under the strategy", checker=_check_resume, solution=_solve_resume,
         expects="function", takes=4, wants="a function resume(path, strategy, x, y) that returns the model",
         hint="where must the model be loaded to get one copy per replica, and what would a new compile() "
              "do to the step counter the file holds?")
