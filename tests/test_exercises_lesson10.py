"""Exercises 10.1 (fit a model into a per-device memory budget, checked by measurement) and 10.2 (classify
trace events): a right, a wrong and an unattempted answer each, and the messages a learner reads.

10.1's checker compiles the step the answer describes; in this (TensorFlow) test process it measures in one
fresh JAX subprocess with 4 host devices, for all the configurations below at once.  Its budget and its
choices follow the lesson's device count N (4 by default, 2 on a T4 x2): both are checked.
"""

import pytest

from helpers import exercises
from helpers.exercises import lesson10


def _answer(replicas, shard, accum):
    return {"replicas": replicas, "shard_weights": shard, "gradient_accumulation_steps": accum}


#: The lesson's device counts N (4 by default, 2 on a T4 x2 or with MULTIGPU_JAX_DEVICES=2): the right answer
#: shards over all N devices; each wrong one, and the reason the checker gives.
RIGHT = {4: _answer(4, True, 1), 2: _answer(2, True, 1)}
WRONG = {
    4: [(_answer(4, False, 1), "every data-parallel replica holds all weights and Adam's two slots"),
        (_answer(4, False, 4), "accumulation shrinks only the activations"),
        (_answer(1, True, 1), "sharding over 1 device splits nothing"),
        (_answer(2, True, 1), "sharded over fewer devices")],
    2: [(_answer(2, False, 1), "every data-parallel replica holds all weights and Adam's two slots"),
        (_answer(2, False, 4), "accumulation shrinks only the activations"),
        (_answer(1, True, 1), "sharding over 1 device splits nothing"),
        (_answer(2, True, 4), "accumulation adds a gradient accumulator")],
}


def _key(answer):
    return answer["replicas"], answer["shard_weights"], answer["gradient_accumulation_steps"]


@pytest.fixture(scope="module")
def measured():
    answers = list(RIGHT.values()) + [w for wrong in WRONG.values() for w, _ in wrong]
    return lesson10.measure_all([_key(a) for a in answers])


@pytest.fixture(params=[4, 2], ids=["4 devices", "2 devices"])
def n_devices(request, monkeypatch):
    """The checker as lesson 10's kernel with N devices runs it (this test process has no JAX kernel)."""
    monkeypatch.setattr(lesson10, "devices_here", lambda: request.param)
    return request.param


@pytest.mark.slow
def test_10_1_measurements_make_the_point(measured, n_devices):
    n = n_devices
    dp = measured[(n, False, 1)]
    fsdp = measured[(n, True, 1)]
    assert dp["weights"] == measured[(1, True, 1)]["weights"]               # replicas alone split nothing
    assert 0.875 * n < dp["weights"] / fsdp["weights"] <= n and 0.875 * n < dp["slots"] / fsdp["slots"] <= n
    budget = lesson10.budget_mib(n) * 2 ** 20
    total = {key: m["argument"] + m["temp"] for key, m in measured.items()}
    assert total[(n, True, 1)] <= budget                                    # the right answer fits...
    assert all(total[_key(w)] > budget for w, _ in WRONG[n])               # ...and no wrong one does


def test_10_1_right(measured, n_devices):
    ok, text = exercises.verdict("10.1", RIGHT[n_devices])
    assert ok and f"within {lesson10.budget_mib(n_devices)} MiB" in text and "MiB per device" in text, text
    assert lesson10._solve_budget() == RIGHT[n_devices]


@pytest.mark.parametrize("i", range(4))
def test_10_1_wrong_says_why(measured, n_devices, i):
    answer, words = WRONG[n_devices][i]
    ok, text = exercises.verdict("10.1", answer)
    assert not ok and words in text and "> budget" in text, text
    assert text.endswith("Hint: " + exercises.get("10.1").hint)


def test_10_1_budget_is_known_for_the_lessons_device_counts():
    assert lesson10.budget_mib(4) == 28 and lesson10.budget_mib(2) > lesson10.budget_mib(4) > lesson10.budget_mib(8)
    with pytest.raises(ValueError, match="MULTIGPU_JAX_DEVICES=2 or 4"):
        lesson10.budget_mib(3)


def test_10_1_replicas_follow_the_kernels_devices(monkeypatch):
    monkeypatch.setattr(lesson10, "devices_here", lambda: 2)
    ok, text = exercises.verdict("10.1", _answer(4, True, 1))
    assert not ok and "use 1 or 2 (this kernel has 2 devices)" in text, text


@pytest.mark.parametrize("answer, words", [
    ({"replicas": 4, "shard_weights": True}, "missing ['gradient_accumulation_steps']"),
    ({"replicas": 3, "shard_weights": True, "gradient_accumulation_steps": 1}, "use 1, 2 or 4 (this kernel has 4 devices)"),
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
