"""Exercises 10.1 (plan a step that fits a per-device memory budget, checked by measurement) and 10.2 (find and
fix a schedule under gradient accumulation): a right, a wrong and an unattempted answer each, and the messages
a learner reads.

10.1's checker compiles the step the answer plans; in this (TensorFlow) test process it measures in one fresh
JAX subprocess per device count, for all the answers below at once (the answers travel as their source, so
they are module-level functions). Its budget follows the lesson's device count N (4 by default, 2 on a T4 x2).
"""

import json
from pathlib import Path

import keras
import pytest
from keras import distribution as kd
from test_exercises import not_yet

from helpers import exercises
from helpers.exercises import lesson10
from helpers.versions import at_least


def fsdp_all(devices):
    mesh = kd.DeviceMesh((len(devices),), ("batch",), devices)
    layout_map = kd.LayoutMap(mesh)
    layout_map[".*kernel"] = ("batch", None)
    return kd.ModelParallel(layout_map=layout_map, batch_dim_name="batch"), 1


def dp_all(devices):
    return kd.DataParallel(devices=devices), 1


def dp_accumulate(devices):
    return kd.DataParallel(devices=devices), 4


def fsdp_one(devices):                    # each answer travels alone, as its source: no shared helper
    mesh = kd.DeviceMesh((1,), ("batch",), devices[:1])
    layout_map = kd.LayoutMap(mesh)
    layout_map[".*kernel"] = ("batch", None)
    return kd.ModelParallel(layout_map=layout_map, batch_dim_name="batch"), 1


def fsdp_half(devices):
    mesh = kd.DeviceMesh((len(devices) // 2,), ("batch",), devices[:len(devices) // 2])
    layout_map = kd.LayoutMap(mesh)
    layout_map[".*kernel"] = ("batch", None)
    return kd.ModelParallel(layout_map=layout_map, batch_dim_name="batch"), 1


def fsdp_accumulate(devices):
    mesh = kd.DeviceMesh((len(devices),), ("batch",), devices)
    layout_map = kd.LayoutMap(mesh)
    layout_map[".*kernel"] = ("batch", None)
    return kd.ModelParallel(layout_map=layout_map, batch_dim_name="batch"), 4


def fsdp_partial_key(devices):            # 'kernel' matches no whole path: nothing is sharded
    mesh = kd.DeviceMesh((len(devices),), ("batch",), devices)
    layout_map = kd.LayoutMap(mesh)
    layout_map["kernel"] = ("batch", None)
    return kd.ModelParallel(layout_map=layout_map, batch_dim_name="batch"), 1


def fsdp_four(devices):                   # right on 4 devices only: the device count written in
    mesh = kd.DeviceMesh((4,), ("batch",), devices)
    layout_map = kd.LayoutMap(mesh)
    layout_map[".*kernel"] = ("batch", None)
    return kd.ModelParallel(layout_map=layout_map, batch_dim_name="batch"), 1


def no_tuple(devices):
    return kd.DataParallel(devices=devices)


def three_micro_batches(devices):
    return kd.DataParallel(devices=devices), 3


#: (answer, words) the checker gives, by the lesson's device count N.
WRONG = {
    4: [(dp_all, "every data-parallel replica holds all weights and Adam's two slots"),
        (dp_accumulate, "accumulation shrinks only the activations"),
        (fsdp_one, "a distribution over 1 device splits nothing"),
        (fsdp_half, "sharded over fewer devices")],
    2: [(dp_all, "every data-parallel replica holds all weights and Adam's two slots"),
        (dp_accumulate, "accumulation shrinks only the activations"),
        (fsdp_one, "a distribution over 1 device splits nothing"),
        (fsdp_accumulate, "accumulation adds a gradient accumulator")],
}
MALFORMED = [(no_tuple, "plan(devices) must return (distribution, k), it returned"),
             (three_micro_batches, "k=3: give a whole number of micro-batches that divides 256")]


@pytest.fixture(scope="module")
def measured():
    """Every answer measured once per device count, in one JAX subprocess each (the checkers then hit the cache)."""
    out = {}
    for n in (4, 2):
        answers = [fsdp_all, fsdp_partial_key, fsdp_four] + [a for a, _ in WRONG[n]] + [a for a, _ in MALFORMED]
        out[n] = dict(zip(answers, lesson10.facts(answers, n)))
    return out


@pytest.fixture(params=[4, 2], ids=["4 devices", "2 devices"])
def n_devices(request, monkeypatch):
    """The checker as lesson 10's kernel with N devices runs it (this test process has no JAX kernel)."""
    monkeypatch.setattr(lesson10, "devices_here", lambda: request.param)
    return request.param


@pytest.mark.slow
def test_10_1_measurements_make_the_point(measured, n_devices):
    m, n = measured[n_devices], n_devices
    dp, fsdp = m[dp_all], m[fsdp_all]
    assert dp["weights"] == dp["full_weights"] == m[fsdp_one]["weights"]   # replicas alone split nothing
    assert 0.875 * n < dp["weights"] / fsdp["weights"] <= n and 0.875 * n < dp["slots"] / fsdp["slots"] <= n
    budget = lesson10.budget_mib(n) * 2 ** 20
    assert fsdp["argument"] + fsdp["temp"] <= budget                            # the right answer fits...
    assert all(m[a]["argument"] + m[a]["temp"] > budget for a, _ in WRONG[n])   # ...and no wrong one does


@pytest.mark.slow
def test_10_1_right(measured, n_devices):
    ok, text = exercises.verdict("10.1", fsdp_all)
    assert ok and f"within {lesson10.budget_mib(n_devices)} MiB" in text and "MiB per device" in text, text


@pytest.mark.slow
@pytest.mark.parametrize("i", range(4))
def test_10_1_wrong_says_why(measured, n_devices, i):
    answer, words = WRONG[n_devices][i]
    not_yet("10.1", answer, words, "> budget")


@pytest.mark.slow
def test_10_1_a_plan_for_four_devices_only_fails_on_two(measured, monkeypatch):
    monkeypatch.setattr(lesson10, "devices_here", lambda: 4)
    not_yet("10.1", fsdp_four, "right on 4 devices, but on 2: your plan fails on 2 devices", "read len(devices)")


@pytest.mark.slow
def test_10_1_a_key_that_matches_nothing_is_named(measured, n_devices):
    if at_least("keras", "3.14"):         # a key must match the whole path: 'kernel' matches none
        not_yet("10.1", fsdp_partial_key, "your ModelParallel shards no kernel", "match the whole path")
    else:                                 # re.search: 'kernel' is found in every kernel's path (lesson 08's trap)
        assert exercises.verdict("10.1", fsdp_partial_key)[0]


@pytest.mark.slow
@pytest.mark.parametrize("i", range(len(MALFORMED)))
def test_10_1_malformed_plans_are_explained(measured, n_devices, i):
    answer, words = MALFORMED[i]
    not_yet("10.1", answer, f"your plan fails on {n_devices} devices", words)


def test_10_1_budget_is_known_for_the_lessons_device_counts():
    assert lesson10.budget_mib(4) == 28 and lesson10.budget_mib(2) > lesson10.budget_mib(4) > lesson10.budget_mib(8)
    with pytest.raises(ValueError, match="MULTIGPU_JAX_DEVICES=2 or 4"):
        lesson10.budget_mib(3)


@pytest.mark.parametrize("key", ["10.1", "10.2"])
def test_unattempted_prints_one_hint_line(key, capsys):
    assert exercises.check(key, ...) is None
    out = capsys.readouterr().out
    assert out == f"Exercise {key}: not attempted yet. Hint: {exercises.get(key).hint}\n"


# ---- 10.2 ---------------------------------------------------------------------------------------

def _notebook_make_optimizer():
    """The broken make_optimizer the notebook's exercise cell shows."""
    path = next((Path(__file__).resolve().parent.parent / "notebooks").glob("10_*.ipynb"))
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    cell = next("".join(c["source"]) for c in cells
                if c["cell_type"] == "code" and 'check("10.2", answer)' in "".join(c["source"]))
    scope = {"keras": keras}
    exec(cell.split("\nanswer = ...")[0], scope)  # noqa: S102 - the notebook's own snippet
    return scope["make_optimizer"]


def _schedule(decay, target, warmup, k=4):
    def make_optimizer():
        schedule = keras.optimizers.schedules.CosineDecay(0.0, decay_steps=decay, warmup_target=target,
                                                          warmup_steps=warmup)
        return keras.optimizers.Adam(schedule, gradient_accumulation_steps=k)
    return make_optimizer


def test_10_2_right():
    ok, text = exercises.verdict("10.2", lesson10._solve_schedule())
    assert ok and "every update gets its old learning rate" in text, text
    assert exercises.verdict("10.2", _schedule(4000, 1e-3, 400))[0]


def test_10_2_the_notebooks_version_has_three_faults():
    not_yet("10.2", _notebook_make_optimizer(), "the learning rate peaks at 0.004",
            "the warm-up ends after 25 updates, not 100", "the decay ends after 275 updates, not 1100")


@pytest.mark.parametrize("answer, words, absent", [
    (_schedule(1000, 1e-3, 100), "the warm-up ends after 25 updates", "peaks at"),      # the peak fixed only
    (_schedule(4000, 4e-3, 400), "the learning rate peaks at 0.004", "warm-up ends"),   # the steps fixed only
    (_schedule(1000, 1e-3, 400), "the decay ends after 350 updates, not 1100", "warm-up ends"),
    (_schedule(4000, 1e-3, 400, k=2), "gradient_accumulation_steps is 2", "peaks"),
])
def test_10_2_wrong_says_which_fault(answer, words, absent):
    text = not_yet("10.2", answer, words)
    assert absent not in text, text


def test_10_2_wrong_kind():
    not_yet("10.2", lambda: keras.optimizers.schedules.CosineDecay(0.0, 10), "must return a Keras optimizer")
