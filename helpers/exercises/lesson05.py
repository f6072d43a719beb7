"""Exercises of 05_pickling_checkpoint_error."""

from __future__ import annotations

import copy
import os
import tempfile
import types
from pathlib import Path

import keras
import numpy as np

from ..callbacks import count_saves
from . import describe, model_problem, practice_strategy, quiet_tf, register


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


def _check_checkpoint(answer):
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

# ---- 05.3: resume training from a checkpoint under the strategy ------------------------------------

ROWS_05_3, BATCH_05_3 = 64, 16


def _check_resume(answer):
    strategy = practice_strategy()
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(ROWS_05_3, 8)).astype("float32"), np.arange(ROWS_05_3) % 3
    steps = ROWS_05_3 // BATCH_05_3
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
                   f"{steps}: load the compiled model and fit one epoch with batch_size={BATCH_05_3}")


def _solve_resume():
    def resume(path, strategy, x, y):
        with strategy.scope():                        # mirrored variables, optimizer state included
            model = keras.models.load_model(path)      # compiled: no compile() that would reset Adam
        model.fit(x, y, batch_size=16, initial_epoch=1, epochs=2, verbose=0)
        return model

    return resume


register("05.3", title="resume training under the strategy", checker=_check_resume, solution=_solve_resume,
         expects="function", takes=4, wants="a function resume(path, strategy, x, y) that returns the model",
         hint="where must the model be loaded to get one copy per replica, and what would a new compile() "
              "do to the step counter the file holds?")

# ---- 05.4: find and fix - the blog's checkpoint class ---------------------------------------------

def _check_blog_class(answer):
    if not issubclass(answer, keras.callbacks.Callback):
        return False, f"{answer.__name__} must still be a Keras callback (a ModelCheckpoint subclass)"
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(64, 8)).astype("float32"), np.arange(64) % 3
    template = keras.Sequential([keras.Input((8,)), keras.layers.Dense(3, activation="softmax")])
    parallel = keras.Sequential([template])           # stands in for the parallel model around the template
    parallel.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "template.keras")
        callback = answer(template, path)           # the blog's defaults: monitor val_loss
        with count_saves(template) as saves, quiet_tf():
            parallel.fit(x, y, batch_size=16, epochs=2, validation_split=0.25, callbacks=[callback], verbose=0)
        saved = keras.models.load_model(path) if Path(path).exists() else None
    if saves["save"] > 2:
        return False, (f"{saves['save']} saves in 2 epochs of 3 batches: the positional `period` still lands in "
                       "Keras 3's 7th parameter, save_freq, so it saves every batch. Pass the arguments "
                       "by keyword and drop period")
    if saves["save"] == 0 or saved is None:
        return False, ("the template was never saved: set_model must hand the template (self.single_model) "
                       "to ModelCheckpoint")
    return True, (f"{saves['save']} saves in 2 epochs (once per epoch), each of the template: keywords keep "
                  "every argument in its slot whatever Keras inserts between them")


def _solve_blog_class():
    class BlogParallelModelCheckpoint(keras.callbacks.ModelCheckpoint):
        def __init__(self, model, filepath, monitor='val_loss', verbose=0,
                     save_best_only=False, save_weights_only=False, mode='auto'):
            self.single_model = model
            super().__init__(filepath, monitor=monitor, verbose=verbose, save_best_only=save_best_only,
                             save_weights_only=save_weights_only, mode=mode)   # save_freq='epoch'

        def set_model(self, model):
            super().set_model(self.single_model)

    return BlogParallelModelCheckpoint


register("05.4", title="find and fix: the blog's checkpoint class", checker=_check_blog_class,
         solution=_solve_blog_class, expects="class", wants="your fixed class BlogParallelModelCheckpoint",
         hint="compare the positional arguments of the super().__init__ call with the parameters of "
              "Keras 3's ModelCheckpoint, one by one.")
