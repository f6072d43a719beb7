"""Lesson 02's checkers explain wrong answers: each case asserts the sentence the learner reads.

tests/test_exercises.py runs every solution, the unattempted answer, answers of the wrong kind and the hints.
"""

import os

import pytest
from test_exercises import not_yet as _not_yet  # the shared checks
from test_exercises import notebook_snippet as _snippet


@pytest.mark.parametrize("answer, words", [
    ("0,1", "the two freest GPUs are not these"),
    ("3", "selects 1 GPU(s); pick exactly two"),
    ("3,,5", "empty"),
])
def test_02_1_values(answer, words):
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
