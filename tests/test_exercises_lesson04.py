"""Lesson 04's checkers explain wrong answers: each case asserts the sentence the learner reads.

tests/test_exercises.py runs every solution, the unattempted answer, answers of the wrong kind and the hints.
"""

import json
import os
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf
from keras import layers

from helpers import exercises

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "04_batchnorm_variable_error.ipynb"


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


def test_04_wrong_counts_and_means():
    truth = exercises.get("04.1").solution()
    _not_yet("04.1", truth - 1, "counts the towers only")
    _not_yet("04.1", 2 * truth, "count only the 'biased*' variables")
    _not_yet("04.1", truth + 7, f"{truth + 7} is not it")
    _not_yet("04.2", {"unsynced": 2.0, "synced": 2.0}, "did you pass synchronized=False?")
    _not_yet("04.2", {"unsynced": 1.0, "synced": 1.0}, "synced should be the mean of both replicas' batches")
    _not_yet("04.2", {"unsynced": "one", "synced": 2.0}, "the values must be numbers")
    _not_yet("04.2", {"unsynced": 1.0}, 'expected exactly the keys "unsynced" and "synced"')


def test_04_3_unsynchronized_bn(replicas):
    def make_bn_model(strategy):
        with strategy.scope():
            model = keras.Sequential([keras.Input((4,)), layers.BatchNormalization(), layers.Dense(1)])
            model.compile(optimizer="sgd", loss="mse")
        return model

    _not_yet("04.3", make_bn_model, "the replicas' moving_mean differ")

    def no_bn(strategy):
        with strategy.scope():
            model = keras.Sequential([keras.Input((4,)), layers.Dense(1)])
            model.compile(optimizer="sgd", loss="mse")
        return model

    _not_yet("04.3", no_bn, "no BatchNormalization layer")


def test_04_4_broken_snippet_reads_replica_0(replicas):
    _not_yet("04.4", _snippet("04.4")["replica_gap"], "it returned 0, but the copies differ by 5",
             "replica 0's here")
    from helpers.batchnorm import replica_gaps

    _not_yet("04.4", lambda model, strategy: max(replica_gaps(model, strategy).values()),
             "not with helpers.batchnorm")
