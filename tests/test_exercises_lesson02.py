"""Lesson 02's checkers explain wrong answers: each case asserts the sentence the learner reads.

tests/test_exercises.py runs every solution, the unattempted answer, answers of the wrong kind and the hints.
"""

import os

import pytest
from test_exercises import not_yet as _not_yet  # the shared checks
from test_exercises import notebook_snippet as _snippet

from helpers import exercises


def _freest(pick, order="PCI_BUS_ID"):
    """A freest_two answer that ranks the GPUs by ``pick(used, total)``, biggest first."""
    def freest_two(smi_csv):
        rows = [[f.strip() for f in line.split(",")] for line in smi_csv.strip().splitlines()[1:]]
        score = {int(r[0]): pick(int(r[4].split()[0]), int(r[5].split()[0])) for r in rows}
        two = sorted(sorted(score, key=score.get, reverse=True)[:2])
        return {"CUDA_VISIBLE_DEVICES": ",".join(map(str, two)), **({"CUDA_DEVICE_ORDER": order} if order else {})}
    return freest_two


def test_02_1_the_least_used_gpus_are_not_the_freest():
    _not_yet("02.1", _freest(lambda used, total: -used), "CUDA_VISIBLE_DEVICES='1,3', but the two with the most free "
             "memory", "'0,2'")


def test_02_1_order_and_numbering():
    _not_yet("02.1", _freest(lambda used, total: total - used, order=None), "also set CUDA_DEVICE_ORDER")

    def freest_first(smi_csv):
        two = _freest(lambda used, total: total - used)(smi_csv)
        return {**two, "CUDA_VISIBLE_DEVICES": ",".join(two["CUDA_VISIBLE_DEVICES"].split(",")[::-1])}

    _not_yet("02.1", freest_first, "you chose the right GPUs, '5,3'; list them lower index first")
    ok, text = exercises.verdict("02.1", _freest(lambda used, total: total - used))
    assert ok, text


@pytest.mark.parametrize("answer, words", [
    (lambda text: "3,5", "returned the string '3,5'; return a dict"),
    (lambda text: {"CUDA_VISIBLE_DEVICES": (3, 5)}, "environment values are strings"),
])
def test_02_1_values_instead_of_the_settings(answer, words):
    _not_yet("02.1", answer, words)


def test_02_2_broken_snippet_changes_this_process():
    before = dict(os.environ)
    _not_yet("02.2", _snippet("02.2")["child_env"], "changed this process's own environment")
    assert dict(os.environ) == before                 # the checker restored it


def test_02_2_half_fixes():
    _not_yet("02.2", lambda s: dict(os.environ, CUDA_VISIBLE_DEVICES=s.replace(" ", ""),
                                    CUDA_DEVICE_ORDER="PCI_BUS_ID"), "entry 2 is empty", "CUDA would stop")
    _not_yet("02.2", lambda s: dict(os.environ, CUDA_VISIBLE_DEVICES=",".join(
        e.strip() for e in s.split(",") if e.strip())), "CUDA_DEVICE_ORDER")
    _not_yet("02.2", lambda s: {"CUDA_VISIBLE_DEVICES": "3,5", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
             "keep the rest of the environment")


# ---- answers that lie about themselves or know the machines by heart -------------------------------------

class _AlwaysEqual(str):
    """A string that says it equals anything."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = str.__hash__


def test_02_1_a_string_whose_eq_is_always_true_fails():
    _not_yet("02.1", lambda text: {"CUDA_VISIBLE_DEVICES": _AlwaysEqual("0,1"),
                                   "CUDA_DEVICE_ORDER": _AlwaysEqual("x")}, "CUDA_VISIBLE_DEVICES='0,1', but the two")


def test_02_1_machines_learned_by_heart_fail_on_a_new_one():
    from helpers.exercises import lesson02

    known = {text: lesson02._solve_freest()(text) for text in lesson02._MACHINES}
    _not_yet("02.1", lambda text: known.get(text), "freest_two returned None; return a dict")
    rows = lesson02.parse_nvidia_smi_csv(lesson02.random_machine())
    assert 2 <= len(rows) <= 8 and len({r.memory_free_mib for r in rows}) == len(rows)


def test_02_2_selections_learned_by_heart_fail_on_a_new_one():
    known = {"3,5": "3,5", " 3, 5": "3,5", "3,,5": "3,5", "5,3": "5,3", "2": "2"}
    _not_yet("02.2", lambda s: dict(os.environ, CUDA_VISIBLE_DEVICES=known.get(s, "0"), CUDA_DEVICE_ORDER="PCI_BUS_ID"),
             "the user asked for")
