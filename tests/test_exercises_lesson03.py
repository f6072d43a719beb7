"""Lesson 03's checkers explain wrong answers (tests/test_exercises.py covers solutions, kinds, hints)."""


import keras
import pytest
from keras import layers
from test_exercises import not_yet as _not_yet  # the shared checks
from test_exercises import notebook_snippet as _snippet

from helpers import exercises


def _check(key, answer):
    ok, text = exercises.verdict(key, answer)
    assert text.startswith(f"Exercise {key} - {'correct' if ok else 'not yet'}: ")
    return ok, text


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
def test_03_1_wrong_answers(replicas, make_model, words):
    ok, message = _check("03.1", make_model)
    assert not ok and words in message, message


@pytest.mark.parametrize("answer, words", [
    ({"multi_gpu_model": [4, 4, 2], "mirrored": [3, 3, 4]}, "swapped"),
    ({"multi_gpu_model": [4, 3, 3], "mirrored": [4, 4, 2]}, "remainder"),
    ({"multi_gpu_model": [3, 3, 4], "mirrored": [4, 3, 3]}, "ceil(10 / 3) = 4"),
    ({"multi_gpu_model": [3, 3, 3], "mirrored": [4, 4, 2]}, "all 10 rows"),
    ({"multi_gpu_model": [3, 3], "mirrored": [4, 4, 2]}, "list of 3 whole numbers"),
])
def test_03_2_wrong_answers(answer, words):
    ok, message = _check("03.2", answer)
    assert not ok and words in message, message


def test_03_3_broken_snippet_and_half_fix(replicas):
    _not_yet("03.3", _snippet("03.3")["train_on_replicas"], "train_on_replicas(strategy, x, y) raised ValueError",
             "build and compile the model inside the strategy's scope")

    def half(strategy, x, y):
        with strategy.scope():
            model = keras.Sequential([keras.Input((64,)), layers.Dense(10, activation="softmax")])
            model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        model.fit(x, y, batch_size=16, epochs=1, verbose=0)
        return model

    _not_yet("03.3", half, "batch_size=16 is the global batch", "got 8 rows per step, not 16")
