"""Lesson 09's "Copy this" box, preflight.py, catches a broken stack and names the check that failed.

tests/test_copy_boxes.py shows it passes on the course's stacks. Here a fresh process breaks Keras the way old
releases were broken before the box runs (TROUBLESHOOTING.md, "Keras versions that break multi-replica training"):
the preflight must exit non-zero and say which of its checks failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import nblint
import pytest

NOTEBOOK = nblint.NOTEBOOKS / "09_when_it_goes_wrong.ipynb"
BROKEN = {
    # Keras 3.5-3.7: each replica's loss is not divided by the replica count, so the all-reduce sums N means.
    "summed": ("import keras.src.losses.loss as loss_module\n"
               "loss_module.scale_loss_for_distribution = lambda value: value",
               ["FAIL the update (weights after one step)"]),
    # metric variables read from one replica instead of summed over all: what the metric check catches. (The real
    # 3.7-3.9 metric bugs did not show in one step on the CPU: Keras 3.8.0 and 3.9.2 pass; the box says so.)
    "one replica's metric": ("import keras.src.metrics.metric as metric_module\n"
                             "add = metric_module.Metric.add_variable\n"
                             "metric_module.Metric.add_variable = lambda self, shape, initializer, dtype=None, "
                             "aggregation='sum', name=None: add(self, shape, initializer, dtype, "
                             "'only_first_replica', name)",
                             ["FAIL the metric fit reports (mae)", "ok   the update (weights after one step)"]),
}


def _run(tmp_path, prelude: str = "") -> subprocess.CompletedProcess:
    [(_, markdown)] = nblint.copy_boxes(json.loads(NOTEBOOK.read_text(encoding="utf-8")))
    (tmp_path / "preflight.py").write_text(nblint.box_code(markdown), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MULTIGPU_", "KERAS_BACKEND", "XLA_FLAGS"))}
    env.pop("PYTHONPATH", None)
    code = (f"import sys; sys.modules['helpers'] = None\n{prelude}\n"
            "exec(compile(open('preflight.py').read(), 'preflight.py', 'exec'))")
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=240)


@pytest.mark.slow
@pytest.mark.parametrize("case", list(BROKEN))
def test_preflight_fails_on_a_broken_stack_and_names_the_check(tmp_path, case):
    prelude, expected = BROKEN[case]
    proc = _run(tmp_path, prelude)
    assert proc.returncode != 0, proc.stdout
    for line in expected:
        assert line in proc.stdout, proc.stdout
    assert "AssertionError: on 2 replicas this stack trains differently from one device" in proc.stderr, proc.stderr
    assert "preflight passed" not in proc.stdout


def test_the_box_says_which_rows_of_the_table_it_covers():
    """Measured with Keras 3.4.1, 3.7.0, 3.8.0 and 3.9.2 on TensorFlow 2.21 (the CPU split in two): the first two
    fail the preflight, the last two pass, with and without an Embedding. The box must not promise the whole table:
    its docstring names the rows it catches and the two it does not, and those rows are in the table."""
    [(_, markdown)] = nblint.copy_boxes(json.loads(NOTEBOOK.read_text(encoding="utf-8")))
    docstring = nblint.box_code(markdown).split('"""')[1]
    covered, not_covered = docstring.split("not the", 1)
    assert "3.0-3.4" in covered and "3.5-3.7" in covered, docstring
    assert "metric row of 3.7-3.9" in not_covered and "sparse-gradient row" in not_covered, docstring
    table = (nblint.ROOT / "TROUBLESHOOTING.md").read_text(encoding="utf-8")
    rows = [line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| 3.") or
            line.startswith("| up to")]
    assert {"3.0-3.4", "3.5-3.7", "3.7-3.9", "up to 3.9"} <= set(rows), rows
    assert "IndexedSlices" in table and "Embedding" in table
