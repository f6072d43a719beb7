"""Lesson 02's checkers explain wrong answers: each case asserts the sentence the learner reads.

tests/test_exercises.py runs every solution, the unattempted answer, answers of the wrong kind and the hints.
"""

import os

import pytest
from test_exercises import not_yet as _not_yet  # the shared checks
from test_exercises import notebook_snippet as _snippet


@pytest.mark.parametrize("key, answer, words", [
    ("02.1", "0,1", "the two freest GPUs are not these"),
    ("02.1", "3", "selects 1 GPU(s); pick exactly two"),
    ("02.1", "3,,5", "empty"),
    ("02.2", {5: "/GPU:5", 3: "/GPU:3", 0: "/GPU:0"}, "does not keep nvidia-smi's numbers"),
    ("02.2", {5: "/GPU:2", 3: "/GPU:1", 0: "/GPU:0"}, "the order of the list decides"),
    ("02.2", {1: "/GPU:0", 2: "/GPU:1", 3: "/GPU:2"}, "the three listed GPUs 5, 3 and 0"),
])
def test_02_values(key, answer, words, replicas):
    _not_yet(key, answer, words)


def test_02_3_broken_snippet_changes_this_process():
    before = dict(os.environ)
    _not_yet("02.3", _snippet("02.3")["child_env"], "changed this process's own environment")
    assert dict(os.environ) == before                 # the checker restored it


def test_02_3_half_fixes():
    _not_yet("02.3", lambda s: dict(os.environ, CUDA_VISIBLE_DEVICES=s.replace(" ", ""),
                                    CUDA_DEVICE_ORDER="PCI_BUS_ID"), "entry 2 is empty", "CUDA would stop")
    _not_yet("02.3", lambda s: dict(os.environ, CUDA_VISIBLE_DEVICES=",".join(
        e.strip() for e in s.split(",") if e.strip())), "CUDA_DEVICE_ORDER")
    _not_yet("02.3", lambda s: {"CUDA_VISIBLE_DEVICES": "3,5", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
             "keep the rest of the environment")
