"""Lesson 01's checkers explain wrong answers: each case asserts the sentence the learner reads.

tests/test_exercises.py runs every solution, the unattempted answer, answers of the wrong kind and the hints.
"""


import keras
import tensorflow as tf
from test_exercises import not_yet as _not_yet  # the shared checks
from test_exercises import notebook_snippet as _snippet

from helpers import exercises


def test_a_per_replica_value_is_named(replicas):
    strategy = exercises.practice_strategy(replicas)   # a test process keeps one collective strategy too
    per_replica = strategy.run(lambda: tf.constant([1.0]))
    ok, text = exercises.verdict("01.1", per_replica)
    assert not ok and "you passed a PerReplica value" in text and "experimental_local_results" in text, text


def _two_dense(first_units, place):
    from helpers.devices import ensure_devices

    a, b = ensure_devices(2)
    inputs = keras.Input((8,))
    with tf.device(a):
        layer1 = keras.layers.Dense(first_units, activation="relu")
    with tf.device(b):
        layer2 = keras.layers.Dense(3, activation="softmax")
    if place:  # call each layer inside its own block: built there
        with tf.device(a):
            hidden = layer1(inputs)
        with tf.device(b):
            outputs = layer2(hidden)
    else:      # the trap: created under tf.device, built outside it
        outputs = layer2(layer1(inputs))
    return keras.Model(inputs, outputs)


def test_01_1_the_lazy_build_trap(replicas):
    _not_yet("01.1", _two_dense(16, place=False), "both kernels are on")
    _not_yet("01.1", _two_dense(8, place=True), "expected Dense(16) then Dense(3), got Dense(8)")


def test_01_2_broken_snippet_keeps_adam_on_one_device(replicas):
    _not_yet("01.2", _snippet("01.2")["compile_split"], "all of Adam's slots ended up on",
             "fit creates them lazily")

    def forgot_return(model):
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")

    _not_yet("01.2", forgot_return, "it returned None (no `return model`?)")
