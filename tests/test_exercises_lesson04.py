"""Lesson 04's checkers explain wrong answers: each case asserts the sentence the learner reads.

tests/test_exercises.py runs every solution, the unattempted answer, answers of the wrong kind and the hints.
"""


import keras
from keras import layers
from test_exercises import not_yet as _not_yet  # the shared checks
from test_exercises import notebook_snippet

from helpers import exercises


def test_04_1_the_lessons_broken_drift_check(replicas):
    """The notebook's replica_gap, unchanged: it reads replica 0's copy twice and never sees drift."""
    broken = notebook_snippet("04.1")["replica_gap"]
    _not_yet("04.1", broken, "it returned 0, but the copies differ by", "gives one copy, replica 0's here")


def test_04_1_other_wrong_gaps(replicas):
    _not_yet("04.1", lambda model, strategy: 1.0, "it returned 1, but the copies differ by")
    _not_yet("04.1", lambda model, strategy: "wide", "must return a number, it returned the string 'wide'")
    right = exercises.get("04.1").solution()
    _not_yet("04.1", lambda model, strategy: right(model, strategy) or 0.5, "with synchronized=True the copies are equal")
    from helpers.batchnorm import replica_gaps

    def uses_the_key(model, strategy):
        return max(replica_gaps(model, strategy).values())

    _not_yet("04.1", uses_the_key, "not with helpers.batchnorm")


def test_04_2_unsynchronized_bn(replicas):
    def make_bn_model(strategy):
        with strategy.scope():
            model = keras.Sequential([keras.Input((4,)), layers.BatchNormalization(), layers.Dense(1)])
            model.compile(optimizer="sgd", loss="mse")
        return model

    _not_yet("04.2", make_bn_model, "the replicas' moving_mean differ")

    def no_bn(strategy):
        with strategy.scope():
            model = keras.Sequential([keras.Input((4,)), layers.Dense(1)])
            model.compile(optimizer="sgd", loss="mse")
        return model

    _not_yet("04.2", no_bn, "no BatchNormalization layer")


def _bn_model():
    return keras.Sequential([keras.Input((4,)), layers.BatchNormalization(synchronized=True), layers.Dense(1)])


def _built_outside(strategy):
    model = _bn_model()
    with strategy.scope():
        model.compile(optimizer="adam", loss="mse")
    return model


def _compiled_outside(strategy):
    with strategy.scope():
        model = _bn_model()
    model.compile(optimizer="adam", loss="mse")
    return model


def test_04_2_a_model_made_outside_the_scope(replicas):
    _not_yet("04.2", _built_outside, "create it inside")
    _not_yet("04.2", _compiled_outside, "optimizer was created outside")
