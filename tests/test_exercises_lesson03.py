"""Lesson 03's checkers explain wrong answers (tests/test_exercises.py covers solutions, kinds, hints)."""

import keras
import pytest
import tensorflow as tf
from keras import layers
from test_exercises import not_yet as _not_yet  # the shared checks
from test_exercises import notebook_snippet as _snippet


def _pipeline(batch=64, drop=True, shuffle=True, flip=True, shift=True, prefetch=True, pairs=True, repeat=False):
    """03.1's solution with one thing changed (each keyword undoes one requirement)."""
    def train_pipeline(x, y, strategy):
        steps = ([layers.RandomTranslation(0.1, 0.1)] if shift else []) + ([layers.RandomFlip("horizontal")] if flip
                                                                             else [])
        augment = keras.Sequential(steps or [layers.Identity()])
        ds = tf.data.Dataset.from_tensor_slices((x, y))
        if not pairs:
            ds = tf.data.Dataset.zip(tf.data.Dataset.from_tensor_slices(x).shuffle(len(x)),
                                     tf.data.Dataset.from_tensor_slices(y))
        ds = (ds.shuffle(len(x)) if shuffle else ds).batch(batch, drop_remainder=drop)
        ds = ds.repeat() if repeat else ds
        ds = ds.map(lambda images, labels: (augment(images, training=True), labels))
        return ds.prefetch(tf.data.AUTOTUNE) if prefetch else ds

    return train_pipeline


@pytest.mark.parametrize("changes, words", [
    ({"batch": 32}, "the replicas got [[16, 16], [16, 16]"),
    ({"drop": False}, "[4, 4]]"),
    ({"pairs": False}, "images and labels no longer match"),
    ({"shuffle": False}, "the same order every epoch"),
    ({"flip": False}, "0% of the images are flipped"),
    ({"shift": False}, "flipped but never shifted"),
    ({"prefetch": False}, "the pipeline's last step should prefetch"),
    ({"repeat": True}, "gave more than 3 full steps of 64: the dataset goes on (a repeat()?)"),
])
def test_03_1_each_requirement_has_its_message(changes, words, replicas):
    _not_yet("03.1", _pipeline(**changes), words)


def test_03_1_a_list_or_an_error(replicas):
    _not_yet("03.1", lambda x, y, strategy: [x, y], "must return a tf.data.Dataset, it returned list")
    _not_yet("03.1", lambda x, y, strategy: tf.data.Dataset.from_tensor_slices((x, y)).batch(0),
             "train_pipeline(x, y, strategy) raised")


def test_03_2_the_lessons_snippet_overwrites_the_scaled_rate(replicas):
    _not_yet("03.2", _snippet("03.2")["lr_schedule"], "epoch 0 starts at 0.001", "overwrote the rate scaled")


@pytest.mark.parametrize("schedule, words", [
    (lambda epoch, lr: lr, "the 10x drop at epoch 2 is missing"),
    (lambda epoch, lr: lr * 0.1 if epoch >= 2 else lr, "expected 0.00141, 0.00141, 7.07e-05"),
    (lambda epoch: 1e-3 * 2 ** 0.5 * (0.1 if epoch >= 2 else 1), "expected"),
])
def test_03_2_wrong_fixes(schedule, words, replicas):
    _not_yet("03.2", schedule, words)


def test_03_2_a_schedule_that_fails(replicas):
    _not_yet("03.2", lambda epoch, lr: "fast", "fit with LearningRateScheduler(lr_schedule) raised")


def test_03_2_the_rates_learned_by_heart_fail_from_another_first_rate(replicas):
    """The bug the exercise teaches, ignoring lr: five hard-coded rates pass one fit, not a second from another rate."""
    start = 1e-3 * 2 ** 0.5
    rates = [start, start, start / 20, start / 40, start / 80]
    _not_yet("03.2", lambda epoch, lr: rates[epoch], "from a first rate of", "not know the rates by heart")
