"""Lesson 07's job (the files its %%writefile cells write): a kill at any moment, during a write too, loses at most
the epoch in progress; the job never writes into a folder it did not make; no worker outlives the job.

The fast tests load the notebook's ``mwms_lib.py`` here and kill at each write point in-process (a ``Killed``
exception raised where a SIGKILL would land, through TensorFlow's real ``CheckpointManager``). The slow ones run
``mwms_train.py`` as processes SIGKILLed at chosen writes (the points are instrumented by this test only, through
``INJECT``), then run it again, as the chaos check and a cluster scheduler do.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import nblint
import pytest

from helpers import cluster, subproc

NOTEBOOK = nblint.NOTEBOOKS / "07_multi_worker_and_fault_tolerance.ipynb"
FILES = nblint.written_files(json.loads(NOTEBOOK.read_text(encoding="utf-8")))


class Killed(BaseException):
    """Where a SIGKILL would land: not an Exception, so no ``except Exception`` on the way cleans anything up."""


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> Path:
    """A folder holding the lesson's files, as its %%writefile cells write them."""
    folder = tmp_path_factory.mktemp("lesson07")
    for name, text in FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def lib(job):
    return subproc.load_script(job / "mwms_lib.py")


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------- the job's folder: claim

def test_claim_makes_a_new_folder_its_own_and_adopts_an_empty_one(lib, tmp_path):
    lib.claim(tmp_path / "new" / "run1")
    assert sorted(os.listdir(tmp_path / "new" / "run1")) == ["mwms.job"]
    (tmp_path / "empty").mkdir()                 # also what a kill between mkdir and the mark leaves
    lib.claim(tmp_path / "empty")
    assert os.listdir(tmp_path / "empty") == ["mwms.job"]


def test_claim_accepts_its_own_folder_and_a_peer_that_claimed_it_first(lib, tmp_path):
    lib.claim(tmp_path)                                          # the other worker, a moment earlier
    (tmp_path / "backup-worker-1").mkdir()
    (tmp_path / "history-worker-1.jsonl").write_text('{"epoch": 1}\n')
    before = _snapshot(tmp_path)
    lib.claim(tmp_path)                                          # this worker, or the same job run again
    assert _snapshot(tmp_path) == before


def test_claim_refuses_a_learners_folder_and_keeps_it_byte_for_byte(lib, tmp_path):
    (tmp_path / "backup").mkdir()
    (tmp_path / "backup" / "notes.txt").write_text("my notes\n")
    (tmp_path / "model.keras").write_bytes(b"PK\x03\x04 the learner's own model")
    before = _snapshot(tmp_path)
    with pytest.raises(SystemExit) as refused:
        lib.claim(tmp_path)
    print(refused.value)                                         # TROUBLESHOOTING.md quotes it
    assert str(refused.value) == (f"{tmp_path} holds files that mwms_train.py did not make: pass --out a new or "
                                  "empty folder")
    assert _snapshot(tmp_path) == before and sorted(os.listdir(tmp_path)) == ["backup", "model.keras"]


# --------------------------------------------------------------------------- the job's files: replace

def test_a_kill_during_replace_leaves_the_old_file_and_the_next_replace_wins(lib, tmp_path):
    target = tmp_path / "model.keras"
    target.write_bytes(b"the previous model")

    def half_then_killed(tmp):
        tmp.write_bytes(b"half of the ne")
        raise Killed

    with pytest.raises(Killed):
        lib.replace(target, half_then_killed)
    assert target.read_bytes() == b"the previous model"          # whole, loadable: the kill cost only this write
    lib.replace(target, lambda tmp: tmp.write_bytes(b"the new model"))
    assert target.read_bytes() == b"the new model" and sorted(os.listdir(tmp_path)) == ["model.keras"]


# --------------------------------------------------------------------------- TensorFlow's CheckpointManager

def _manager(folder: Path, value: float = 0.0):
    """A fresh process's view: new objects, the same folder (as the job builds them, with an epoch counter)."""
    import tensorflow as tf

    ckpt = tf.train.Checkpoint(w=tf.Variable(value), epochs_done=tf.Variable(0, dtype=tf.int64))
    return ckpt, tf.train.CheckpointManager(ckpt, str(folder), max_to_keep=1)


def _resume(folder: Path) -> tuple[int, float]:
    """What the job does after a restart: restore the latest backup -> (epochs done, weight)."""
    import tensorflow as tf

    ckpt, _ = _manager(folder, -1.0)
    if latest := tf.train.latest_checkpoint(str(folder)):
        ckpt.restore(latest).assert_existing_objects_matched()
    return int(ckpt.epochs_done.numpy()), float(ckpt.w.numpy())


def _train_and_save(folder: Path, epochs: range) -> None:
    ckpt, manager = _manager(folder)
    ckpt.w.assign(float(epochs.start - 1))
    for epoch in epochs:
        ckpt.w.assign(float(epoch))
        ckpt.epochs_done.assign(epoch)
        manager.save(checkpoint_number=epoch)


def _kill_at(monkeypatch, name: str, on_call):
    """Raise Killed the first time ``checkpoint_management.<name>`` runs in the second save (epoch 2)."""
    from tensorflow.python.checkpoint import checkpoint_management as cm

    real, seen = getattr(cm, name), {"saves": 0, "calls": 0}
    real_save = cm.CheckpointManager.save

    def save(self, *args, **kwargs):
        seen.update(saves=seen["saves"] + 1, calls=0)
        return real_save(self, *args, **kwargs)

    def wrapped(*args, **kwargs):
        seen["calls"] += 1
        if seen["saves"] == 2 and seen["calls"] == 1:
            on_call(real, *args, **kwargs)
            raise Killed
        return real(*args, **kwargs)

    monkeypatch.setattr(cm.CheckpointManager, "save", save)
    monkeypatch.setattr(cm, name, wrapped)


def _half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def _files_written_not_recorded(real, save_dir, model_checkpoint_path, *args, **kwargs):
    """Called once the new checkpoint's files exist, before TensorFlow records them: leave them as a kill during
    their write would (half of each file, and the temporary folder TensorFlow writes them in first)."""
    prefix = Path(save_dir) / Path(model_checkpoint_path).name
    for f in Path(save_dir).glob(prefix.name + ".*"):
        _half(f)
    (Path(f"{prefix}_temp")).mkdir(exist_ok=True)
    (Path(f"{prefix}_temp") / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"half")


def _record_half_written(real, save_dir, *args, **kwargs):
    """The state file is written to a temporary name first (file_io.atomic_write_string_to_file): leave that."""
    (Path(save_dir) / "checkpoint.tmp0123456789abcdef").write_text('model_checkpoint_path: "ckpt-')


def _sweep_half_done(real, filespec):
    """The state already names the new checkpoint; the old one's index is gone, its data not yet."""
    real(filespec)


@pytest.mark.parametrize("where, name, on_call, restored", [
    ("writing the new checkpoint's files", "update_checkpoint_state_internal", _files_written_not_recorded, 1),
    ("recording it in the 'checkpoint' file", "update_checkpoint_state_internal", _record_half_written, 1),
    ("deleting the previous checkpoint", "_delete_file_if_exists", _sweep_half_done, 2),
])
def test_a_kill_during_manager_save_loses_at_most_that_epoch(tmp_path, monkeypatch, where, name, on_call, restored):
    _kill_at(monkeypatch, name, on_call)
    with pytest.raises(Killed):
        _train_and_save(tmp_path, range(1, 4))                   # killed in epoch 2's save, at `where`
    monkeypatch.undo()
    assert _resume(tmp_path) == (restored, float(restored))      # the last whole backup: epoch 1, or 2 if recorded
    _train_and_save(tmp_path, range(restored + 1, 4))            # the same command again: it goes on and ends
    assert _resume(tmp_path) == (3, 3.0)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("checkpoint.tmp")) == [
        "checkpoint", "ckpt-3.data-00000-of-00001", "ckpt-3.index"]   # the resumed run swept what the kill left


# --------------------------------------------------------------------------- the job itself, killed for real

#: Test-only instrumentation: run mwms_train.py (argv[1:]) and SIGKILL this process at KILL_AT=point:n (the n-th
#: time the point is reached in this process), leaving what a kill in the middle of that write leaves.
INJECT = r'''
import os, runpy, shutil, signal, sys
from pathlib import Path
point, _, nth = os.environ.get("KILL_AT", "none:0").partition(":")
seen = {}
def hit(name):
    seen[name] = seen.get(name, 0) + 1
    return name == point and seen[name] == int(nth)
def die(what):
    print(f"KILLED at {point}:{nth}: {what}", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
def half(path):
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[:len(data) // 2])
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[1])))
import mwms_lib
real_replace = mwms_lib.replace
def replace(path, write):                    # KILL_AT=replace-history:2: half of the temporary file written
    if hit("replace-" + path.name.split("-")[0].split(".")[0]):
        write(tmp := path.with_name("tmp-" + path.name))
        half(tmp)
        die(f"half of {tmp.name} written")
    return real_replace(path, write)
mwms_lib.replace = replace
from tensorflow.python.checkpoint import checkpoint_management as cm
real_save, real_state = cm.CheckpointManager.save, cm.update_checkpoint_state_internal
def save(self, *args, **kwargs):
    seen["in-save"] = 0
    hit("save")
    return real_save(self, *args, **kwargs)
def state(save_dir, model_checkpoint_path, *args, **kwargs):   # KILL_AT=save:2: the 2nd save's files half written
    seen["in-save"] += 1
    if point == "save" and seen["save"] == int(nth) and seen["in-save"] == 1:
        prefix = Path(save_dir) / Path(model_checkpoint_path).name
        for f in Path(save_dir).glob(prefix.name + ".*"):
            half(f)
        die(f"{prefix.name} half written, not recorded")
    return real_state(save_dir, model_checkpoint_path, *args, **kwargs)
cm.CheckpointManager.save, cm.update_checkpoint_state_internal = save, state
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
'''


def _env(tmp_path: Path, **extra) -> dict:
    env = {k: v for k, v in subproc.child_env().items() if k not in ("TF_CONFIG", "PYTHONPATH")}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env.update(TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="-1", TMPDIR=str(tmp_path / "tmp"), **extra)
    return env


def _start(job: Path, tmp_path: Path, out: Path, kill_at: str = "none:0", **env) -> subprocess.Popen:
    (tmp_path / "inject.py").write_text(INJECT)
    return subprocess.Popen([sys.executable, str(tmp_path / "inject.py"), str(job / "mwms_train.py"), "--epochs", "3",
                             "--out", str(out)], env=_env(tmp_path, KILL_AT=kill_at, **env), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _left_in(tmp: Path) -> list[str]:
    """What the runs left in their temporary directory, but TensorFlow's autograph modules: autograph removes them
    at exit, which neither a SIGKILL nor the script's final os._exit runs (a few kB per traced function)."""
    return sorted(p.name for p in tmp.iterdir() if not p.name.startswith("__autograph_generated_file"))


def _history(out: Path, name: str = "worker-0") -> list[dict]:
    return [json.loads(line) for line in (out / f"history-{name}.jsonl").read_text().splitlines()]


@pytest.mark.slow   # reason: three TensorFlow processes in a row (about 10 s each)
def test_a_job_killed_mid_write_resumes_and_loses_at_most_the_epoch_in_progress(job, tmp_path):
    out, runs = tmp_path / "run", []
    for kill_at in ("save:2", "replace-model:1", "none:0"):     # mid-backup of epoch 2, mid-model, then to the end
        proc = _start(job, tmp_path, out, kill_at)
        runs.append((proc.communicate(timeout=300)[0], proc.returncode, proc.pid))
    (first, rc1, pid1), (second, rc2, pid2), (third, rc3, _) = runs
    assert rc1 == rc2 == -signal.SIGKILL and rc3 == 0, runs
    assert "KILLED at save:2: ckpt-2 half written" in first and "epoch 1/3" in first, first
    assert "restored ckpt-1: 1 epoch(s) done" in second and "epoch 2/3" in second, second   # lost: epoch 2 only
    assert "KILLED at replace-model:1: half of tmp-model.keras written" in second, second
    assert "restored ckpt-3: 3 epoch(s) done" in third and not re.search(r"epoch \d/3 loss", third), third
    rows = _history(out)
    assert [r["epoch"] for r in rows] == [1, 2, 3]                  # none lost, none twice: the half run's line dropped
    assert [r["pid"] for r in rows] == [pid1, pid2, pid2]
    import keras
    import numpy as np

    model = keras.models.load_model(out / "model.keras")            # whole: the half-written copy never replaced it
    assert float(sum(np.abs(v).sum() for v in model.get_weights())) == pytest.approx(rows[-1]["checksum"], rel=1e-6)
    assert json.loads((out / "result-worker-0.json").read_text())["resumed_after"] == 3
    assert sorted(os.listdir(out)) == ["backup", "history-worker-0.jsonl", "model.keras", "mwms.job",
                                       "result-worker-0.json"]       # no temporary file left
    assert (out / "backup" / "checkpoint").read_text().startswith('model_checkpoint_path: "ckpt-3"')
    assert _left_in(tmp_path / "tmp") == []                          # nothing of the job's in the temporary directory


@pytest.mark.slow   # reason: two 2-worker runs of TensorFlow, and the chief's wait for the dead worker (~10-30 s)
def test_when_a_worker_dies_the_other_ends_by_itself_and_the_rerun_finishes(job, tmp_path):
    out, ports = tmp_path / "run", cluster.free_ports(2)
    spec = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    tf_config = [cluster.tf_config(spec, "worker", i) for i in range(2)]

    def both(kills=("none:0", "none:0")):
        return [_start(job, tmp_path, out, kill, TF_CONFIG=tf_config[i]) for i, kill in enumerate(kills)]

    procs = both(("none:0", "replace-history:2"))   # worker 1 dies writing its line of epoch 2; no launcher here
    try:
        worker1 = procs[1].communicate(timeout=300)[0]
        died = time.time()
        chief = procs[0].communicate(timeout=180)[0]                 # TensorFlow ends it: no heartbeats from worker 1
        waited = time.time() - died
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert procs[1].returncode == -signal.SIGKILL and "KILLED at replace-history:2" in worker1, worker1
    assert procs[0].returncode not in (0, None) and waited < 150, (waited, chief[-3000:])
    assert "UnavailableError" in chief, chief[-3000:]

    procs = both()                                                   # the same command again, on both
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert not any(subproc.pid_alive(p.pid) for p in procs)          # no process left over
    chief, worker1 = ({r["epoch"]: r["checksum"] for r in _history(out, name)} for name in ("worker-0", "worker-1"))
    assert list(chief) == [1, 2, 3]                                  # the chief's log: every epoch, once
    assert list(worker1) in ([1, 2, 3], [1, 3])     # worker 1's misses epoch 2 if the chief backed it up before dying
    assert all(worker1[e] == chief[e] for e in worker1)              # one model; its half-written line never counted
    assert sorted(os.listdir(out)) == ["backup", "history-worker-0.jsonl", "history-worker-1.jsonl", "model.keras",
                                       "mwms.job", "result-worker-0.json", "result-worker-1.json"]
    assert _left_in(tmp_path / "tmp") == []                          # worker 1's throw-away copy was not in /tmp
