"""Lesson 00's checkers explain wrong answers, 00.2's ("make this model train on 2 replicas") on 2 replicas.

tests/test_exercises.py covers the solutions, the unattempted answers, answers of the wrong kind and the hints.
Here 00.1's wrong batch sizes and learning rates, and the learner's code of 00.2 run on the checker's two replicas.
"""

import json
from pathlib import Path

import keras
import pytest

from helpers import exercises

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "00_start_here.ipynb"


def _not_yet(answer, *phrases, key="00.2"):
    ok, text = exercises.verdict(key, answer)
    assert not ok and text.startswith(f"Exercise {key} - not yet: "), text
    assert "could not check" not in text, text
    for phrase in phrases:
        assert phrase in text, (phrase, text)
    assert text.endswith(f"\n  Hint: {exercises.get(key).hint}"), text


def _model():
    return keras.Sequential([keras.Input((64,)), keras.layers.Dense(10, activation="softmax")])


def test_the_start_code_unchanged_trains_on_one_device(replicas):
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    cell = next("".join(c["source"]) for c in cells
                if c["cell_type"] == "code" and 'helpers.exercises.check("00.2", answer)' in "".join(c["source"]))
    start, rest = cell.split("\nanswer = ...")
    assert rest.startswith("  # your code here: answer = train")
    scope = {"keras": keras}
    exec(start, scope)  # noqa: S102 - the notebook's own snippet
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
    ok, text = exercises.verdict("00.2", exercises.get("00.2").solution())
    assert ok and "each step took 64 rows: 32 on each replica" in text, text


@pytest.mark.parametrize("answer, words", [
    (lambda s: (32, 1e-3 * s.num_replicas_in_sync ** 0.5), "the global batch is 32, not 64: 32 is one replica's rows"),
    (lambda s: (64, 1e-3 * s.num_replicas_in_sync ** 0.5), "with 1 replicas the global batch is 64, not 32: is the "
                                                           "replica count written in?"),
    (lambda s: (32 * s.num_replicas_in_sync, 1e-3 * s.num_replicas_in_sync), "learning rate is 0.002, not "
                                                                             "0.00141421: Adam's rate grows like the"),
    (lambda s: (32 * s.num_replicas_in_sync, 1e-3), "rate is 0.001, not 0.00141421: the rate must grow"),
    (lambda s: (32 * s.num_replicas_in_sync, 1e-3 * 2 ** 0.5), "with 1 replicas the learning rate is 0.00141421, "
                                                               "not 0.001: is the replica count written in?"),
    (lambda s: 32 * s.num_replicas_in_sync, "batch_and_lr returned the number 64: return two numbers"),
])
def test_00_1_wrong_batch_or_rate(answer, words, replicas):
    _not_yet(answer, words, key="00.1")


def test_00_1_counting_this_workers_devices_is_wrong_on_two_workers(replicas):
    """worker_devices lists one worker's devices: right under MirroredStrategy, wrong under MultiWorkerMirrored."""
    def batch_and_lr(strategy):
        n = len(strategy.extended.worker_devices)
        return 32 * n, 1e-3 * n ** 0.5

    _not_yet(batch_and_lr, "with 2 workers of 4 devices each (8 replicas in sync) the global batch is 128, not 256: "
             "worker_devices lists only this worker's devices", key="00.1")


def test_00_1_an_endless_loop_is_stopped_and_named(replicas):
    def batch_and_lr(strategy):
        while True:
            pass

    ok, text = exercises.verdict("00.1", batch_and_lr, time_limit=1)
    assert not ok and "no verdict within 1 s" in text and "your code was running batch_and_lr, line " in text, text
    assert "`while True:`" in text, text


@pytest.mark.parametrize("batch, words", [
    ("64", "with 2 replicas the global batch is '64' (str), not 64: fit's batch_size takes a whole number"),
    (64.0, "with 2 replicas the global batch is 64.0 (float), not 64"),
])
def test_00_1_a_batch_that_is_not_an_int_is_shown_as_it_is(batch, words, replicas):
    """Not "the global batch is 64, not 64": the repr shows the type; a float batch_size breaks fit."""
    _not_yet(lambda s: (batch if s.num_replicas_in_sync == 2 else 32 * s.num_replicas_in_sync,
                        1e-3 * s.num_replicas_in_sync ** 0.5), words, key="00.1")


def test_00_1_answers_learned_by_heart_or_lying_about_themselves_fail(replicas):
    calls = iter([(64, 1e-3 * 2 ** 0.5), (32, 1e-3), (256, 1e-3 * 8 ** 0.5)] + [(256, 1e-3 * 8 ** 0.5)] * 2)
    _not_yet(lambda s: next(calls), "replicas the global batch is 256, not", key="00.1")   # a 4th count, drawn anew

    class Equal(int):                                      # == anything: the plain int is compared instead
        def __eq__(self, other):
            return True

        def __ne__(self, other):
            return False

    _not_yet(lambda s: (Equal(1), 1e-3 * s.num_replicas_in_sync ** 0.5), "the global batch is 1, not 64", key="00.1")
