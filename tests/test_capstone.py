"""Lesson 05's capstone (exercise 05.5): the given script, the checker's verdicts, the solution.

The checker runs the learner's script end to end in fresh processes (killed after epoch 1, then
the same command again), so each test here that launches costs one or two TensorFlow start-ups.
Wrong answers are the solution with one or more faults put back, so every message is tied to
its fault and nothing else is reported.
"""

import ast
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import exercises
from helpers.exercises import capstone

KEY = "05.5"
SOLUTION_SOURCE = capstone.SOLUTION.read_text()


def _variant(tmp_path, *replacements, name="train_2_replicas.py"):
    """The solution with each (old, new) replacement applied once; each must match."""
    source = SOLUTION_SOURCE
    for old, new in replacements:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    path = tmp_path / name
    path.write_text(source)
    return path


def _not_yet(answer, *phrases, absent=()):
    ok, text = exercises.verdict(KEY, answer)
    assert not ok and text.startswith(f"Exercise {KEY} - not yet: "), text
    for phrase in phrases:
        assert phrase in text, (phrase, text)
    for phrase in absent:
        assert phrase not in text, (phrase, text)
    return text


def test_registered_as_lessons_last_exercise():
    ex = exercises.get(KEY)
    assert ex.checker is capstone._check and ex.title.startswith("capstone")
    assert KEY == max((k for k in exercises.all_keys() if k.startswith("05.")), key=lambda k: int(k[3:]))


@pytest.mark.parametrize("path", [capstone.GIVEN, capstone.SOLUTION])
def test_scripts_are_short_and_helper_free(path):
    source = path.read_text()
    imported = {alias.name.split(".")[0] for node in ast.walk(ast.parse(source))
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {(node.module or "").split(".")[0] for node in ast.walk(ast.parse(source))
                 if isinstance(node, ast.ImportFrom)}
    assert "helpers" not in imported
    assert len(source.splitlines()) <= (60 if path == capstone.GIVEN else 75)


def test_given_script_stops_at_the_checkpoints_period(tmp_path):
    """The "before": on Keras 3 the 2017 script runs up to ModelCheckpoint(..., period=1) and stops there."""
    given = capstone.starter(tmp_path / "given")
    assert given.read_text() == capstone.GIVEN.read_text()
    assert capstone.starter(tmp_path / "given") == given                 # a second call: the same file
    source = given.read_text()
    assert 'monitor="val_acc"' in source and "period=1" in source and '"best.h5"' in source
    assert "BATCH_SIZE = 32" in source and "LEARNING_RATE = 0.01" in source and "BatchNormalization" in source
    proc = subprocess.run([sys.executable, str(given), "--out", str(tmp_path / "out"), "--epochs", "1"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("TypeError:") and "unexpected keyword argument 'period'" in last, proc.stderr
    assert "keras.callbacks.ModelCheckpoint(" in proc.stderr and "SETUP" not in proc.stdout


def test_unattempted_launches_nothing(tmp_path, monkeypatch):
    def no_launch(*args, **kwargs):
        raise AssertionError("the checker launched a process for an unattempted exercise")

    monkeypatch.setattr(capstone, "TrainingRun", no_launch)
    stub = tmp_path / "train_2_replicas.py"
    stub.write_text(capstone.STUB)
    start = time.monotonic()
    text = _not_yet(stub, "not attempted yet", "nothing was run")
    assert time.monotonic() - start < 1
    assert exercises.verdict(KEY, ...) == (False, f"Exercise {KEY}: not attempted yet. Hint: {exercises.get(KEY).hint}")
    _not_yet(tmp_path / "missing.py", "run the %%writefile cell first")
    stub.write_text("def broken(:\n")
    _not_yet(stub, "not valid Python: line 1")
    assert "Hint" in text


def test_solution_passes_and_resumes():
    start = time.monotonic()
    ok, text = exercises.verdict(KEY, exercises.get(KEY).solution())
    print(f"checker run time for the right answer: {time.monotonic() - start:.1f} s")
    assert ok, text
    for phrase in ("2 replicas", "global batch of 64", "learning rate of 0.02 (linear scaling)",
                   "reloads from best.keras", "resumed at epoch 2"):
        assert phrase in text, (phrase, text)


def test_batch_rate_and_resume_left_alone(tmp_path):
    """Global batch left at 32, learning rate left at 0.01, no BackupAndRestore: three messages."""
    answer = _variant(tmp_path,
                      ("BATCH_SIZE = 32 * strategy.num_replicas_in_sync", "BATCH_SIZE = 32"),
                      ("LEARNING_RATE = 0.01 * strategy.num_replicas_in_sync", "LEARNING_RATE = 0.01"),
                      ("callbacks=[backup, checkpoint, EpochLine()]", "callbacks=[checkpoint, EpochLine()]"))
    text = _not_yet(answer,
                    "the global batch is 32, 16 per replica", "32 x num_replicas_in_sync = 64",
                    "the learning rate is 0.01 (left at the one-device rate)", "linear scaling rule",
                    "started over at epoch 1", "BackupAndRestore",
                    absent=("replica(s): build", "monitor", "steps in epoch 1", "failed"))
    assert text.count("; ") == 2, text                       # one message per problem


def test_old_monitor_name(tmp_path):
    answer = _variant(tmp_path, ('monitor="val_accuracy"', 'monitor="val_acc"'))
    _not_yet(answer, "monitors 'val_acc'", "'val_accuracy'", "the first run failed: ValueError",
             absent=("global batch is", "learning rate is", "started over"))


def test_the_given_script_as_answer(tmp_path):
    """Handing in the unported script: the checker explains `period`, then names the failure."""
    _not_yet(capstone.GIVEN, "ModelCheckpoint has no `period`", "save_freq='epoch'",
             "the first run failed: TypeError", "unexpected keyword argument 'period'")


def test_show_solution_prints_the_script(monkeypatch, capsys):
    monkeypatch.setattr(exercises, "check", lambda key, answer: print(f"checked {Path(answer).name}"))
    exercises.show_solution(KEY)
    out = capsys.readouterr().out
    assert SOLUTION_SOURCE in out and "import helpers" not in out
    assert out.rstrip().endswith("checked train_2_replicas.py")


def test_each_problem_has_its_message(tmp_path):
    """The checker's judgements on SETUP and EPOCH lines, without launching anything."""
    out = tmp_path / "out"
    good = {"global_batch": 64, "checkpoint": str(out / "best.keras"), "monitor": "val_accuracy",
            "save_best_only": True}
    assert capstone._setup_problems(good, out) == []
    wrong = dict(good, checkpoint=str(out / "best.h5"), monitor="val_loss", save_best_only=False)
    text = "; ".join(capstone._setup_problems(wrong, out))
    assert "'best.h5'" in text and "ending in .keras" in text and "monitors 'val_loss'" in text
    assert "save_best_only=True" in text
    assert "not in the --out folder" in capstone._setup_problems(dict(good, checkpoint="/elsewhere/b.keras"), out)[0]
    epoch = {"replicas": 2, "steps": 23, "learning_rate": 0.02}
    assert capstone._batch_and_lr_problems(good, epoch) == []
    four = {"replicas": 4, "steps": 12, "learning_rate": 0.04}       # MirroredStrategy() on 4 GPUs
    assert capstone._batch_and_lr_problems(dict(good, global_batch=128), four) == []
    [one] = capstone._batch_and_lr_problems(good, dict(epoch, replicas=1))
    assert "trains on 1 replica(s)" in one and "set_logical_device_configuration" in one
    [steps] = capstone._batch_and_lr_problems(good, dict(epoch, steps=45))
    assert "fit ran 45 steps in epoch 1" in steps and "make 23" in steps
    [lr] = capstone._batch_and_lr_problems(good, dict(epoch, learning_rate=0.04))
    assert "the learning rate is 0.04:" in lr and "0.01 x num_replicas_in_sync = 0.02" in lr
