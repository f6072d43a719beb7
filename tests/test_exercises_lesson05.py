"""Lesson 05's checkers explain wrong answers: each case asserts the sentence the learner reads.

tests/test_exercises.py runs every solution, the unattempted answer, answers of the wrong kind and the hints.
"""

import os
import tempfile

import keras
import pytest
from test_exercises import not_yet as _not_yet  # the shared checks
from test_exercises import notebook_snippet as _snippet


def _lambda_capturing_a_module():
    import numpy as local_np  # a module captured by the closure below: multi_gpu_model's bug

    return keras.layers.Lambda(lambda t: t[: local_np.shape(t)[0] // 2])


def test_05_1_wrong_lambdas():
    _not_yet("05.1", _lambda_capturing_a_module(), "captures the module(s) ['numpy'] in its closure")
    _not_yet("05.1", keras.layers.Lambda(lambda t: t), "it should return the first 4 rows")


@pytest.mark.parametrize("kwargs, words", [
    ({"monitor": "val_acc", "save_best_only": True}, "'val_acc' is never in the logs"),
    ({"monitor": "val_loss", "save_best_only": True}, "not 'val_loss'"),
    ({"monitor": "val_accuracy"}, "save_best_only=True"),
    ({"monitor": "val_accuracy", "save_best_only": True, "save_freq": 5}, "saves every 5 batches"),
    ({"monitor": "val_accuracy", "save_best_only": True, "mode": "min"}, "the *worst* accuracy"),
])
def test_05_2_wrong_checkpoints(kwargs, words):
    path = os.path.join(tempfile.gettempdir(), "best.keras")
    _not_yet("05.2", keras.callbacks.ModelCheckpoint(path, **kwargs), words)


def test_05_2_weights_only():
    path = os.path.join(tempfile.gettempdir(), "best.weights.h5")
    _not_yet("05.2", keras.callbacks.ModelCheckpoint(path, monitor="val_accuracy", save_best_only=True,
                                                   save_weights_only=True), "save the whole model")


def test_05_3_outside_scope_and_recompile(replicas):
    def outside(path, strategy, x, y):
        model = keras.models.load_model(path)
        model.fit(x, y, batch_size=16, epochs=1, verbose=0)
        return model

    _not_yet("05.3", outside, "call load_model inside the scope")

    def recompiled(path, strategy, x, y):
        with strategy.scope():
            model = keras.models.load_model(path)
            model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        model.fit(x, y, batch_size=16, epochs=1, verbose=0)
        return model

    _not_yet("05.3", recompiled, "the optimizer is at step 4", "step counter restarted")


def test_05_4_broken_class_saves_every_batch():
    _not_yet("05.4", _snippet("05.4")["BlogParallelModelCheckpoint"], "6 saves in 2 epochs",
             "save_freq")

    class NoTemplate(keras.callbacks.ModelCheckpoint):
        def __init__(self, model, filepath, monitor="val_loss"):
            super().__init__(filepath, monitor=monitor)

    _not_yet("05.4", NoTemplate, "the template was never saved", "self.single_model")
