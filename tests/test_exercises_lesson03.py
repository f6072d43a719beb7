"""Lesson 03's checkers explain wrong answers (tests/test_exercises.py covers solutions, kinds, hints)."""


import keras
import pytest
from keras import layers
from test_exercises import not_yet as _not_yet  # the shared checks
from test_exercises import notebook_snippet as _snippet


@pytest.mark.parametrize("answer, words", [
    ({"multi_gpu_model": [4, 4, 2], "mirrored": [3, 3, 4]}, "swapped"),
    ({"multi_gpu_model": [4, 3, 3], "mirrored": [4, 4, 2]}, "remainder"),
    ({"multi_gpu_model": [3, 3, 4], "mirrored": [4, 3, 3]}, "ceil(10 / 3) = 4"),
    ({"multi_gpu_model": [3, 3, 3], "mirrored": [4, 4, 2]}, "all 10 rows"),
    ({"multi_gpu_model": [3, 3], "mirrored": [4, 4, 2]}, "list of 3 whole numbers"),
])
def test_03_1_wrong_answers(answer, words):
    _not_yet("03.1", answer, words)


def test_03_2_broken_snippet_and_half_fix(replicas):
    _not_yet("03.2", _snippet("03.2")["train_on_replicas"], "train_on_replicas(strategy, x, y) raised ValueError",
             "build and compile the model inside the strategy's scope")

    def half(strategy, x, y):
        with strategy.scope():
            model = keras.Sequential([keras.Input((64,)), layers.Dense(10, activation="softmax")])
            model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        model.fit(x, y, batch_size=16, epochs=1, verbose=0)
        return model

    _not_yet("03.2", half, "batch_size=16 is the global batch", "got 8 rows per step, not 16")
