"""Lesson 04's checkers explain wrong answers: each case asserts the sentence the learner reads.

tests/test_exercises.py runs every solution, the unattempted answer, answers of the wrong kind and the hints.
"""


import keras
from keras import layers
from test_exercises import not_yet as _not_yet  # the shared checks

from helpers import exercises


def test_04_wrong_counts():
    truth = exercises.get("04.1").solution()
    _not_yet("04.1", truth - 1, "counts the towers only")
    _not_yet("04.1", 2 * truth, "count only the 'biased*' variables")
    _not_yet("04.1", truth + 7, f"{truth + 7} is not it")


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
