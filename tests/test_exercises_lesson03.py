"""Lesson 03's checkers explain wrong answers (tests/test_exercises.py covers solutions, kinds, hints)."""

import json
import os
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import layers

from helpers import exercises

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "03_from_multi_gpu_model_to_mirrored_strategy.ipynb"


def _check(key, answer):
    ok, text = exercises.verdict(key, answer)
    assert text.startswith(f"Exercise {key} - {'correct' if ok else 'not yet'}: ")
    return ok, text


@pytest.mark.parametrize("answer, words", [
    ({"batch_size": 32, "learning_rate": 0.08}, "per-replica batch"),
    ({"batch_size": 4, "learning_rate": 0.08}, "each GPU would get 4 rows"),
    ({"batch_size": 256, "learning_rate": 0.01}, "still the one tuned for batch 32"),
    ({"batch_size": 256, "learning_rate": 0.02}, "not the linear rule"),
    ({"batch_size": 64, "learning_rate": 0.02}, "each of the 8 GPUs gets 32?"),
    ({"batch_size": 256.0, "learning_rate": 0.08}, "whole number"),
    ({"batch": 256}, "exactly the keys"),
])
def test_03_1_wrong_answers(answer, words):
    ok, message = _check("03.1", answer)
    assert not ok and words in message


def _built_outside(strategy):

    from helpers.models import small_cnn

    model = small_cnn((8, 8, 1), 10, width=8)
    with strategy.scope():
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


def _compiled_outside(strategy):
    from helpers.models import small_cnn

    with strategy.scope():
        model = small_cnn((8, 8, 1), 10, width=8)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


def _wrong_shape(strategy):
    from helpers.models import small_mlp

    with strategy.scope():
        model = small_mlp(64, 10)
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


@pytest.mark.parametrize("make_model, words", [
    (_built_outside, "create it inside"),
    (_compiled_outside, "optimizer was created outside"),
    (_wrong_shape, "expected 8x8x1 digits"),
    (lambda strategy: None, "your function does nothing yet (its body only returns None)"),
    (lambda strategy: strategy.scope() and None, "it returned None: does it end with `return model`?"),
    ("make_model", "you passed the string 'make_model', but this exercise wants a function make_model(strategy)"),
    (lambda: None, "accepts 0 positional argument(s), but it is called with 1"),
])
def test_03_2_wrong_answers(replicas, make_model, words):
    ok, message = _check("03.2", make_model)
    assert not ok and words in message, message


@pytest.mark.parametrize("answer, words", [
    ({"multi_gpu_model": [4, 4, 2], "mirrored": [3, 3, 4]}, "swapped"),
    ({"multi_gpu_model": [4, 3, 3], "mirrored": [4, 4, 2]}, "remainder"),
    ({"multi_gpu_model": [3, 3, 4], "mirrored": [4, 3, 3]}, "ceil(10 / 3) = 4"),
    ({"multi_gpu_model": [3, 3, 3], "mirrored": [4, 4, 2]}, "all 10 rows"),
    ({"multi_gpu_model": [3, 3], "mirrored": [4, 4, 2]}, "list of 3 whole numbers"),
])
def test_03_3_wrong_answers(answer, words):
    ok, message = _check("03.3", answer)
    assert not ok and words in message, message


def _not_yet(key, answer, *phrases, hint=True):
    """A wrong answer: 'not yet', each phrase, then the hint unless the framework judged its kind (hint=False)."""
    ok, text = exercises.verdict(key, answer)
    assert not ok and text.startswith(f"Exercise {key} - not yet: "), text
    assert "could not check" not in text, text
    for phrase in phrases:
        assert phrase in text, (phrase, text)
    assert text.endswith(f"\n  Hint: {exercises.get(key).hint}") == hint, text
    return text


def _snippet(key, **names):
    """Run the code the notebook's exercise cell shows above `answer = ...`, unchanged; the names it defines."""
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    cell = next("".join(c["source"]) for c in cells
                if c["cell_type"] == "code" and f'check("{key}", answer)' in "".join(c["source"]))
    scope = {"keras": keras, "layers": keras.layers, "np": np, "os": os, "tf": tf, **names}
    exec(cell.split("\nanswer = ...")[0], scope)  # noqa: S102 - the notebook's own snippet
    return scope


def test_03_4_per_replica_batch_as_global(replicas):
    def fit_per_replica(strategy, model, x, y, per_replica_batch):
        return model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(per_replica_batch), verbose=0)

    _not_yet("03.4", fit_per_replica, "each replica got 4 rows per step, not 8")

    def two_epochs(strategy, model, x, y, per_replica_batch):
        ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(per_replica_batch * 2)
        return model.fit(ds, epochs=2, verbose=0)

    _not_yet("03.4", two_epochs, "train for exactly one epoch")


def test_03_5_broken_snippet_and_half_fix(replicas):
    _not_yet("03.5", _snippet("03.5")["train_on_replicas"], "it still fails",
             "created outside the scope")

    def half(strategy, x, y):
        with strategy.scope():
            model = keras.Sequential([keras.Input((64,)), layers.Dense(10, activation="softmax")])
            model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        model.fit(x, y, batch_size=16, epochs=1, verbose=0)
        return model

    _not_yet("03.5", half, "batch_size=16 is the global batch", "not the 16 the comment promises")
