"""Lesson 09's broken-script exercises: the solution, an unattempted answer and typical wrong fixes.

Each checker runs the answer on two replicas (the lesson's devices), so every test here trains for real.
"""

import pytest

from helpers import exercises


def _verdict(key, answer):
    ok, text = exercises.verdict(key, answer)
    assert text.startswith(f"Exercise {key} - {'correct' if ok else 'not yet'}: "), text
    return ok, text


# ---- 09.1: the loss of a custom step ------------------------------------------------------------

def _per_example(labels, predictions):
    import tensorflow as tf

    return tf.reduce_mean(tf.square(labels - predictions), axis=-1)


def _reduce_mean(labels, predictions, global_batch_size):          # the broken original
    import tensorflow as tf

    return tf.reduce_mean(_per_example(labels, predictions))


def _keras_loss(labels, predictions, global_batch_size):           # right on even splits only
    import keras

    return keras.losses.MeanSquaredError()(labels, predictions)


def _keras_loss_divided_again(labels, predictions, global_batch_size):
    import keras
    import tensorflow as tf

    n = tf.distribute.get_strategy().num_replicas_in_sync
    return keras.losses.MeanSquaredError()(labels, predictions) / n


def _no_global_batch(labels, predictions, global_batch_size):      # compute_average_loss, local size
    import tensorflow as tf

    return tf.nn.compute_average_loss(_per_example(labels, predictions))


def _per_row(labels, predictions, global_batch_size):               # not a scalar
    return _per_example(labels, predictions)


def _forgot_return(labels, predictions, global_batch_size):       # computes, but returns nothing
    import tensorflow as tf

    tf.nn.compute_average_loss(_per_example(labels, predictions), global_batch_size=global_batch_size)


def _sum_over_global(labels, predictions, global_batch_size):       # another right answer
    import tensorflow as tf

    return tf.reduce_sum(_per_example(labels, predictions)) / global_batch_size


def test_09_1_solution_and_unattempted(replicas):
    assert _verdict("09.1", exercises.get("09.1").solution())[0]
    assert _verdict("09.1", _sum_over_global)[0]
    ok, text = exercises.verdict("09.1", ...)
    assert not ok and text.startswith("Exercise 09.1: not attempted yet. Hint: ") and "\n" not in text


@pytest.mark.parametrize("answer, words", [
    (_reduce_mean, "about 2x one device's"),
    (_keras_loss_divided_again, "about 1/2 of one device's"),
    (_keras_loss, "right on an even split, wrong on this 3 + 2 batch"),
    (_no_global_batch, "its OWN row count"),
    (_per_row, "one number per replica"),
    (_forgot_return, "returned None"),
    (lambda labels, predictions, global_batch_size: 1.0, "a TensorFlow scalar"),
])
def test_09_1_wrong_fixes_are_explained(answer, words, replicas):
    ok, text = _verdict("09.1", answer)
    assert not ok and words in text, text


# ---- 09.2: a metric that disagrees across replicas ----------------------------------------------

def _rows_seen(aggregation):
    import keras
    import tensorflow as tf

    class RowsSeen(keras.metrics.Metric):
        def __init__(self, name="rows_seen", **kwargs):
            super().__init__(name=name, **kwargs)
            self.rows = self.add_variable(shape=(), initializer="zeros", aggregation=aggregation, name="rows")

        def update_state(self, y_true, y_pred, sample_weight=None):
            self.rows.assign_add(tf.cast(tf.shape(y_true)[0], self.dtype))

        def result(self):
            return self.rows

    return RowsSeen


def test_09_2_solution_and_unattempted(replicas):
    assert _verdict("09.2", exercises.get("09.2").solution())[0]
    assert _verdict("09.2", _rows_seen("sum"))[0]
    ok, text = exercises.verdict("09.2", ...)
    assert not ok and text.startswith("Exercise 09.2: not attempted yet. Hint: ") and "\n" not in text


@pytest.mark.parametrize("aggregation", ["mean", "only_first_replica"])
def test_09_2_wrong_aggregation_is_explained(aggregation, replicas):
    ok, text = _verdict("09.2", _rows_seen(aggregation))
    assert not ok and "fit trained on 12" in text and "aggregation" in text, text


def test_09_2_none_aggregation_and_wrong_kinds(replicas):
    ok, text = _verdict("09.2", _rows_seen("none"))
    assert not ok and "could not check this answer" in text and "VariableAggregation" in text, text
    ok, text = _verdict("09.2", _rows_seen("sum")())
    assert not ok and "Give the class itself (answer = RowsSeen)" in text, text
    ok, text = _verdict("09.2", dict)
    assert not ok and "not a keras.metrics.Metric subclass" in text, text


# ---- answers that ignore their input: the checkers vary it -----------------------------------------------

def _five_written_in(labels, predictions, global_batch_size):     # right for the first batch of 5 rows only
    import tensorflow as tf

    return tf.reduce_sum(_per_example(labels, predictions)) / 5


def test_09_1_a_batch_size_written_in_fails_on_the_second_batch(replicas):
    ok, text = _verdict("09.1", _five_written_in)
    assert not ok and "(on 5 rows it was right: is a batch size written in instead of global_batch_size?)" in text, text


def _constant_metric():
    import keras
    import tensorflow as tf

    class RowsSeen(keras.metrics.Metric):                          # says 12 whatever it saw
        def __init__(self, name="rows_seen", **kwargs):
            super().__init__(name=name, **kwargs)

        def update_state(self, y_true, y_pred, sample_weight=None):
            pass

        def result(self):
            return tf.constant(12.0)

    return RowsSeen


@pytest.mark.parametrize("second", [18, 24, 30])
def test_09_2_a_constant_result_fails_on_the_second_row_count(replicas, second, monkeypatch):
    """Whichever second count the check draws: 24 rows on 2 replicas is 12 a replica, and the message is still the
    constant's, not the per-replica reading's."""
    from helpers.exercises import lesson09

    assert second in lesson09.MORE_ROWS_09_2
    monkeypatch.setattr(lesson09.RANDOM, "choice", lambda options: second)
    ok, text = _verdict("09.2", _constant_metric())
    assert not ok and f"the metric says 12 rows, but fit trained on {second} rows" in text, text
    assert "(on 12 rows it said 12: does result() count?)" in text, text
