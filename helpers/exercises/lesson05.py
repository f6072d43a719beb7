"""Exercises of 05_pickling_checkpoint_error."""

from __future__ import annotations

import tempfile
from pathlib import Path

import keras
import numpy as np

from ..callbacks import count_saves
from . import error_line, quiet_tf, register

# ---- 05.1: find and fix - the blog's checkpoint class, whose positional `period` saves every batch --------------


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
        try:
            callback = answer(template, path)          # the blog's defaults: monitor val_loss, every epoch
            with count_saves(template) as saves, quiet_tf():
                parallel.fit(x, y, batch_size=16, epochs=2, validation_split=0.25, callbacks=[callback], verbose=0)
        except Exception as exc:  # noqa: BLE001 - the learner's class failing is the answer's fault
            return False, f"{answer.__name__}(template, 'template.keras') failed to train 2 epochs: {error_line(exc)}"
        saved = Path(path).exists()
    if saves["save"] > 2:
        return False, (f"{saves['save']} saves in 2 epochs of 3 batches: the positional `period` still lands in "
                       "Keras 3's 7th parameter, save_freq, so it saves every batch. Pass the arguments by keyword "
                       "and drop period")
    if saves["save"] == 0 or not saved:
        return False, ("the template was never saved: set_model must hand the template (self.single_model) to "
                       "ModelCheckpoint")
    return True, (f"{saves['save']} saves in 2 epochs (once per epoch), each of the template: keywords keep every "
                  "argument in its slot, whatever Keras inserts between them")


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


register("05.1", title="find and fix: the blog's checkpoint class", checker=_check_blog_class,
         solution=_solve_blog_class, expects="class", wants="your fixed class BlogParallelModelCheckpoint",
         hint="compare the positional arguments of the super().__init__ call with the parameters of Keras 3's "
              "ModelCheckpoint, one by one.",
         giveaways=["save_freq", "monitor=monitor", "by keyword"])
