"""Lesson 00's exercise 00.2 ("make this model train on 2 replicas") explains wrong answers.

tests/test_exercises.py covers the solution, the unattempted answer, answers of the wrong kind and the hint;
tests/test_exercises_wrong.py covers 00.1. Here the learner's code runs on the checker's two replicas.
"""

import json
from pathlib import Path

import keras
import pytest

from helpers import exercises
from helpers.exercises import lesson00

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "00_start_here.ipynb"


def _not_yet(answer, *phrases):
    ok, text = exercises.verdict("00.2", answer)
    assert not ok and text.startswith("Exercise 00.2 - not yet: "), text
    assert "could not check" not in text, text
    for phrase in phrases:
        assert phrase in text, (phrase, text)
    assert text.endswith(f"\n  Hint: {exercises.get('00.2').hint}"), text


def _model():
    return keras.Sequential([keras.Input((64,)), keras.layers.Dense(10, activation="softmax")])


def test_the_notebook_shows_the_start_code_the_tests_run():
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    cell = next("".join(c["source"]) for c in cells
                if c["cell_type"] == "code" and 'helpers.exercises.check("00.2", answer)' in "".join(c["source"]))
    assert cell.startswith(lesson00.START_00_2)
    assert "answer = ...  # your code here: answer = train" in cell


def test_the_start_code_unchanged_trains_on_one_device(replicas):
    scope = {"keras": keras}
    exec(lesson00.START_00_2, scope)  # noqa: S102 - the notebook's own snippet
    _not_yet(scope["train"], "_DefaultDistributionStrategy with 1 replica(s)", "with strategy.scope():")


def test_global_batch_of_32_is_16_rows_per_replica(replicas):
    def train(strategy, x, y):
        with strategy.scope():
            model = _model()
            model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        model.fit(x, y, batch_size=32, epochs=2, verbose=0)
        return model

    _not_yet(train, "16 steps for 2 epoch(s) of 256 rows", "batch_size=32 is the global batch",
             "each replica got 16 rows per step, not 32")


def test_other_batch_sizes_and_no_training(replicas):
    def train(strategy, x, y, batch=128, fit=True):
        with strategy.scope():
            model = _model()
            model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        if fit:
            model.fit(x, y, batch_size=batch, epochs=1, verbose=0)
        return model

    _not_yet(lambda s, x, y: train(s, x, y, batch=128), "128 rows per step",
             "32 rows on each of 2 replicas is 64 rows per step")
    _not_yet(lambda s, x, y: train(s, x, y, fit=False), "never trained", "Call fit")


def test_compile_outside_the_scope(replicas):
    def train(strategy, x, y):
        with strategy.scope():
            model = _model()
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        model.fit(x, y, batch_size=64, epochs=1, verbose=0)
        return model

    _not_yet(train, "compile ran outside the scope", "Mixing different tf.distribute.Strategy objects")


def test_a_new_strategy_of_its_own(replicas):
    import tensorflow as tf

    def train(strategy, x, y):
        mine = tf.distribute.MirroredStrategy(replicas, cross_device_ops=tf.distribute.ReductionToOneDevice())
        with mine.scope():
            model = _model()
            model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        model.fit(x, y, batch_size=64, epochs=1, verbose=0)
        return model

    _not_yet(train, "not to the given strategy", "Use the strategy train receives, not a new one")


def _forgot_return(strategy, x, y):
    with strategy.scope():
        _model()


@pytest.mark.parametrize("answer, words", [
    (_forgot_return, "it returned None"),
    (lambda s, x, y: 1 / 0, "raised ZeroDivisionError"),
])
def test_no_model_or_an_error(answer, words, replicas):
    _not_yet(answer, words)


def test_the_solution_is_correct_and_says_why(replicas):
    ok, text = exercises.verdict("00.2", lesson00._solve_train())
    assert ok and "each step took 64 rows: 32 on each replica" in text, text
