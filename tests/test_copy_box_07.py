"""Lesson 07's "Copy this" box as a worker: killed in the middle of writing a backup, it resumes after the last whole
one; it writes only into its own folder (the learner's files beside it are kept byte for byte, a folder of theirs in
its place is refused); with a "chief" task only the chief writes the backup (worker 0 beside it does not, and leaves
no throw-away copy behind) while both count two workers.

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
#: Kill the process in the middle of its second backup: the new files half written, TensorFlow's "checkpoint" file
#: not yet pointing at them (what a SIGKILL during ``manager.save()`` leaves), as a lost machine would.
KILL_DURING_SECOND_SAVE = """
import os, signal
from pathlib import Path
from tensorflow.python.checkpoint import checkpoint_management as cm
_record, _calls = cm.update_checkpoint_state_internal, []
def _die_mid_save(save_dir, model_checkpoint_path, *args, **kwargs):
    _calls.append(model_checkpoint_path)
    if len(_calls) == 3:       # 2 per save: the first of the second save, before it is recorded
        for f in Path(save_dir).glob(Path(model_checkpoint_path).name + ".*"):
            f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
        print("killed while saving", Path(model_checkpoint_path).name, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    return _record(save_dir, model_checkpoint_path, *args, **kwargs)
cm.update_checkpoint_state_internal = _die_mid_save
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


def _command(prelude: str = "", box: str = "box.py") -> list[str]:
    return [sys.executable, "-c", "import sys; sys.modules['helpers'] = None\n" + prelude +
            "\nexec(compile(open(sys.argv[1]).read(), 'box.py', 'exec'))", box]


def _learners_files(folder):
    (folder / "backup").mkdir(parents=True)
    (folder / "backup" / "notes.txt").write_text("my notes\n")
    (folder / "model.keras").write_bytes(b"PK\x03\x04 the learner's own model")
    return {p: p.read_bytes() for p in (folder / "backup" / "notes.txt", folder / "model.keras")}


@pytest.mark.slow   # reason: three TensorFlow processes in a row (killed, resumed, refused)
def test_a_box_killed_mid_backup_resumes_after_its_last_whole_one_and_keeps_the_learners_files(tmp_path):
    _box(tmp_path)
    learners = _learners_files(tmp_path)                 # a project with a backup/ and a model.keras of its own
    killed = subprocess.run(_command(KILL_DURING_SECOND_SAVE), cwd=tmp_path, env=_env(), capture_output=True,
                            text=True, timeout=240)
    assert killed.returncode == -9, killed.stdout + killed.stderr[-2000:]
    assert "killed while saving ckpt-2" in killed.stdout, killed.stdout
    assert (tmp_path / "mwms_run" / "backup" / "checkpoint").read_text().startswith('model_checkpoint_path: "ckpt-1"')

    again = subprocess.run(_command(), cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=240)
    out = again.stdout
    assert again.returncode == 0, out + again.stderr[-2000:]
    assert "epoch 1/3" not in out and "epoch 2/3" in out and "epoch 3/3" in out, out   # epoch 1 is not trained again
    assert "resumed after 1" in out, out
    assert all(path.read_bytes() == data for path, data in learners.items())           # byte for byte
    assert sorted(os.listdir(tmp_path)) == ["backup", "box.py", "model.keras", "mwms_run"]

    (tmp_path / "theirs" / "mwms_run").mkdir(parents=True)   # a folder of the learner's where the box's would be
    (tmp_path / "theirs" / "mwms_run" / "notes.txt").write_text("mine\n")
    refused = subprocess.run(_command(box="../box.py"), cwd=tmp_path / "theirs", env=_env(), capture_output=True, text=True,
                             timeout=240)
    print(refused.stderr)                                # TROUBLESHOOTING.md quotes its message
    assert refused.returncode == 1 and "holds files this job did not make" in refused.stderr, refused.stderr[-2000:]
    assert os.listdir(tmp_path / "theirs" / "mwms_run") == ["notes.txt"]


@pytest.mark.slow   # reason: two TensorFlow workers, one job
def test_with_a_chief_task_only_the_chief_writes_and_both_count_two_workers(tmp_path):
    _box(tmp_path)
    ports = cluster.free_ports(2)
    spec = {"chief": [f"127.0.0.1:{ports[0]}"], "worker": [f"127.0.0.1:{ports[1]}"]}
    (tmp_path / "tmp").mkdir()                           # the workers' temporary directory: nothing may stay there
    procs = {kind: subprocess.Popen(
        _command(), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=_env(TF_CONFIG=json.dumps({"cluster": spec, "task": {"type": kind, "index": 0}}),
                 TMPDIR=str(tmp_path / "tmp")))
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
    assert sorted(os.listdir(tmp_path / "mwms_run")) == ["backup", "mwms.job"]   # worker 0's throw-away copy: gone
    assert not os.listdir(tmp_path / "tmp")
