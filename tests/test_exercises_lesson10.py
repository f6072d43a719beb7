"""Exercises 10.1 (fit a model into a per-device memory budget, checked by measurement) and 10.2 (classify
trace events): a right, a wrong and an unattempted answer each, and the messages a learner reads.

10.1's checker compiles the step the answer describes; in this (TensorFlow) test process it measures in one
fresh JAX subprocess with 4 host devices, for all the configurations below at once.
"""

import pytest

from helpers import exercises
from helpers.exercises import lesson10

RIGHT = {"replicas": 4, "shard_weights": True, "gradient_accumulation_steps": 1}
WRONG = [
    ({"replicas": 4, "shard_weights": False, "gradient_accumulation_steps": 1},
     "every data-parallel replica holds all weights and Adam's two slots"),
    ({"replicas": 4, "shard_weights": False, "gradient_accumulation_steps": 4},
     "accumulation shrinks only the activations"),
    ({"replicas": 1, "shard_weights": True, "gradient_accumulation_steps": 1}, "sharding over 1 device splits nothing"),
    ({"replicas": 2, "shard_weights": True, "gradient_accumulation_steps": 1}, "sharded over fewer devices"),
]


@pytest.fixture(scope="module")
def measured():
    configs = [(a["replicas"], a["shard_weights"], a["gradient_accumulation_steps"]) for a in [RIGHT] + [w for w, _ in WRONG]]
    return lesson10.measure_all(configs)


def test_10_1_measurements_make_the_point(measured):
    dp = measured[(4, False, 1)]
    fsdp = measured[(4, True, 1)]
    assert dp["weights"] == measured[(1, True, 1)]["weights"]               # replicas alone split nothing
    assert 3.5 < dp["weights"] / fsdp["weights"] <= 4 and 3.5 < dp["slots"] / fsdp["slots"] <= 4
    budget = lesson10.BUDGET_MIB * 2 ** 20
    assert fsdp["argument"] + fsdp["temp"] <= budget < dp["argument"] + dp["temp"]


def test_10_1_right(measured):
    ok, text = exercises.verdict("10.1", RIGHT)
    assert ok and "within 28 MiB" in text and "MiB per device" in text, text


@pytest.mark.parametrize("answer, words", WRONG)
def test_10_1_wrong_says_why(measured, answer, words):
    ok, text = exercises.verdict("10.1", answer)
    assert not ok and words in text and "> budget" in text, text
    assert text.endswith("Hint: " + exercises.get("10.1").hint)


@pytest.mark.parametrize("answer, words", [
    ({"replicas": 4, "shard_weights": True}, "missing ['gradient_accumulation_steps']"),
    ({"replicas": 3, "shard_weights": True, "gradient_accumulation_steps": 1}, "use 1, 2 or 4"),
    ({"replicas": 4, "shard_weights": "yes", "gradient_accumulation_steps": 1}, "give True or False"),
    ({"replicas": 4, "shard_weights": True, "gradient_accumulation_steps": 0}, "a whole number >= 1"),
    ({"replicas": 4, "shard_weights": True, "gradient_accumulation_steps": 128}, "does not divide evenly"),
])
def test_10_1_malformed_answers_are_explained_without_measuring(answer, words):
    ok, text = exercises.verdict("10.1", answer)
    assert not ok and words in text, text


@pytest.mark.parametrize("key", ["10.1", "10.2"])
def test_unattempted_prints_one_hint_line(key, capsys):
    assert exercises.check(key, ...) is None
    out = capsys.readouterr().out
    assert out == f"Exercise {key}: not attempted yet. Hint: {exercises.get(key).hint}\n"


def test_10_2_right():
    ok, text = exercises.verdict("10.2", lesson10._solve_kind())
    assert ok and f"all {len(lesson10.CASES_10_2)} events right" in text, text


def _counts_wrappers(name, thread):
    if name == "input":
        return "input"
    return "communication" if name.startswith("all-") else "compute"


def _no_threads(name):
    return "input"


@pytest.mark.parametrize("answer, words", [
    (_counts_wrappers, "kind('ThunkExecutor::Execute (wait for completion)'"),
    (lambda name, thread: "compute", "events misclassified"),
])
def test_10_2_wrong(answer, words):
    ok, text = exercises.verdict("10.2", answer)
    assert not ok and words in text, text


def test_10_2_wrong_signature():
    ok, text = exercises.verdict("10.2", _no_threads)
    assert not ok and "accepts 1 positional argument(s), but it is called with 2" in text, text
