"""Lesson 07's "Copy this" box as a worker: a restart resumes after the last epoch backed up, and with a "chief" task
only the chief writes the backup (worker 0 beside it does not) while both count two workers.

tests/test_copy_boxes.py runs the box once, as a one-worker job; these run it the way a cluster does: killed and
started again in the same folder, and as two processes of one job. Each run is a fresh process without helpers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import nblint
import pytest

from helpers import cluster

NOTEBOOK = nblint.NOTEBOOKS / "07_multi_worker_and_fault_tolerance.ipynb"
#: Kill the process right after the first backup is written: a lost machine, at the worst moment for the loop.
KILL_AFTER_FIRST_SAVE = """
import os, signal, tensorflow as tf
_save = tf.train.CheckpointManager.save
def _save_then_die(self, *args, **kwargs):
    path = _save(self, *args, **kwargs)
    print("killed after saving", path, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
tf.train.CheckpointManager.save = _save_then_die
"""


def _box(tmp_path):
    [(_, markdown)] = nblint.copy_boxes(json.loads(NOTEBOOK.read_text(encoding="utf-8")))
    (tmp_path / "box.py").write_text(nblint.box_code(markdown), encoding="utf-8")


def _env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MULTIGPU_", "KERAS_BACKEND", "TF_CONFIG", "XLA_FLAGS", "JAX_PLATFORMS"))}
    env.pop("PYTHONPATH", None)
    env.update(TF_CPP_MIN_LOG_LEVEL="2", **extra)
    return env


def _command(prelude: str = "") -> list[str]:
    return [sys.executable, "-c", "import sys; sys.modules['helpers'] = None\n" + prelude +
            "\nexec(compile(open('box.py').read(), 'box.py', 'exec'))"]


@pytest.mark.slow
def test_a_killed_box_resumes_after_its_last_backup(tmp_path):
    _box(tmp_path)
    killed = subprocess.run(_command(KILL_AFTER_FIRST_SAVE), cwd=tmp_path, env=_env(), capture_output=True,
                            text=True, timeout=240)
    assert killed.returncode == -9, killed.stdout + killed.stderr[-2000:]
    assert "killed after saving" in killed.stdout and (tmp_path / "backup" / "checkpoint").exists()

    again = subprocess.run(_command(), cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=240)
    out = again.stdout
    assert again.returncode == 0, out + again.stderr[-2000:]
    assert "epoch 1/3" not in out and "epoch 2/3" in out and "epoch 3/3" in out, out   # epoch 1 is not trained again
    assert "resumed after 1" in out, out
    assert not (tmp_path / "backup").exists()                                           # finished: removed


@pytest.mark.slow
def test_with_a_chief_task_only_the_chief_writes_and_both_count_two_workers(tmp_path):
    _box(tmp_path)
    ports = cluster.free_ports(2)
    spec = {"chief": [f"127.0.0.1:{ports[0]}"], "worker": [f"127.0.0.1:{ports[1]}"]}
    procs = {kind: subprocess.Popen(
        _command(), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=_env(TF_CONFIG=json.dumps({"cluster": spec, "task": {"type": kind, "index": 0}})))
        for kind in ("chief", "worker")}
    try:
        outs = {kind: p.communicate(timeout=240)[0] for kind, p in procs.items()}
    finally:
        for p in procs.values():
            p.kill()
    assert all(p.returncode == 0 for p in procs.values()), outs
    assert "chief 0 of 2 workers" in outs["chief"] and "writes files: True" in outs["chief"], outs["chief"]
    assert "worker 0 of 2 workers" in outs["worker"] and "writes files: False" in outs["worker"], outs["worker"]
    losses = [[ln for ln in out.splitlines() if ln.startswith("epoch ")] for out in outs.values()]
    assert losses[0] == losses[1] and len(losses[0]) == 3, losses          # one job: the same all-reduced losses
