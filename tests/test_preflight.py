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
    # metric variables read from one replica instead of summed over all (the metric bugs fixed in Keras 3.10).
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
