"""Lesson 05's capstone (05.2): port a Keras 2 multi-GPU script of 2018 to Keras 3 on 2 replicas.

The checker launches the learner's script in fresh processes (killed after epoch 1, its backup's model weights
zeroed, then the same command again). Its wrong answers are the solution with one or more faults put back, so
every message is tied to its fault. tests/test_exercises.py runs the unattempted answer, wrong kinds and the hint.
"""

import ast
import json
import subprocess
import sys
import time
from pathlib import Path

import keras
import numpy as np
import pytest

from helpers import exercises
from helpers.exercises import capstone

#: The wrong-answer cases run on one stack: a wrong answer fails for its logic, whatever the versions; on the
#: other stacks the solution (tests/test_exercises.py) and the lesson run.
WRONG_ANSWERS = pytest.mark.one_stack(reason="wrong answers fail for their logic, whatever the versions")

CAPSTONE = "05.2"
SOLUTION_SOURCE = capstone.SOLUTION.read_text()
#: A right answer of another kind, the one lesson 05's section 2 starts from: ModelCheckpoint with the best score
#: read back into initial_value_threshold, and BackupAndRestore. The checker's contract (a kill after epoch 1)
#: accepts it; the course's own solution also survives a kill during a write (lesson 05, tests/test_lessons_04_05).
KERAS_CALLBACKS_ANSWER = '''"""The 2018 script ported to Keras 3: MirroredStrategy on 2 replicas or more, checkpointed, resumable."""
import argparse
import json
import os

import keras
import tensorflow as tf
from digits_job import EpochLine, build_model, load_data  # the data, the model, the checker's EPOCH line

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)               # best.keras and backup/ go here
p.add_argument("--epochs", type=int, default=3)
args = p.parse_args()
os.makedirs(args.out, exist_ok=True)

gpus = tf.config.list_physical_devices("GPU")       # multi_gpu_model(model, gpus=2) is gone: the quick start's rule
if not gpus:                                         # no GPU: split the CPU in two
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
elif len(gpus) == 1:                                 # one GPU: split it in two
    half = tf.config.LogicalDeviceConfiguration(memory_limit=2048)
    tf.config.set_logical_device_configuration(gpus[0], [half, half])
strategy = tf.distribute.MirroredStrategy()          # 2+ GPUs: all of them
print("replicas:", strategy.extended.worker_devices)
BATCH_SIZE = 32 * strategy.num_replicas_in_sync      # 32 rows per replica
LEARNING_RATE = 0.01 * strategy.num_replicas_in_sync  # linear scaling rule: N times the batch, N times the step

(x_train, y_train), (x_val, y_val) = load_data()
with strategy.scope():                               # variables (and BatchNorm's) mirrored on each replica
    model = build_model()
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=LEARNING_RATE, momentum=0.9),   # lr= is gone
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
best, backup = os.path.join(args.out, "best.keras"), os.path.join(args.out, "backup")
# BackupAndRestore does not keep ModelCheckpoint's best score, so a resumed run reads it back from best.keras.
resuming = os.path.isdir(backup) and os.path.exists(best)
best_so_far = keras.models.load_model(best).evaluate(x_val, y_val, verbose=0)[1] if resuming else None
checkpoint = keras.callbacks.ModelCheckpoint(best, monitor="val_accuracy", save_best_only=True,
                                             initial_value_threshold=best_so_far)
print("SETUP", json.dumps({"global_batch": BATCH_SIZE, "checkpoint": checkpoint.filepath,
                           "monitor": checkpoint.monitor, "save_best_only": checkpoint.save_best_only}))
history = model.fit(x_train, y_train, batch_size=BATCH_SIZE, epochs=args.epochs, validation_data=(x_val, y_val),
                    callbacks=[checkpoint, keras.callbacks.BackupAndRestore(backup), EpochLine()], verbose=0)
print("DONE", json.dumps({"epochs_run": len(history.history["loss"])}), flush=True)
'''


def _variant(tmp_path, *replacements, source=SOLUTION_SOURCE):
    """The solution (or ``source``) with each (old, new) replacement applied once (each must match), next to its
    module."""
    for old, new in replacements:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    path = capstone.starter(tmp_path, capstone.SOLUTION)
    path.write_text(source)
    return path


def _capstone_not_yet(answer, *phrases, absent=()):
    ok, text = exercises.verdict(CAPSTONE, answer)
    assert not ok and text.startswith(f"Exercise {CAPSTONE} - not yet: "), text
    for phrase in phrases:
        assert phrase in text, (phrase, text)
    for phrase in absent:
        assert phrase not in text, (phrase, text)
    return text


def test_capstone_registered_as_lessons_last_exercise():
    ex = exercises.get(CAPSTONE)
    assert ex.checker is capstone._check and ex.title.startswith("capstone")
    assert CAPSTONE == max((k for k in exercises.all_keys() if k.startswith("05.")), key=lambda k: int(k[3:]))


@pytest.mark.parametrize("path", [capstone.GIVEN, capstone.SOLUTION, capstone.SHARED])
def test_capstone_scripts_are_short_and_helper_free(path):
    source = path.read_text()
    imported = {alias.name.split(".")[0] for node in ast.walk(ast.parse(source))
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {(node.module or "").split(".")[0] for node in ast.walk(ast.parse(source))
                 if isinstance(node, ast.ImportFrom)}
    assert "helpers" not in imported
    assert len(source.splitlines()) <= 60                             # the course's rule for a script


def test_the_given_script_is_written_the_keras_2_way():
    source = capstone.GIVEN.read_text()
    for idiom in ("from keras.utils import multi_gpu_model", "multi_gpu_model(model, gpus=GPUS)", ".fit_generator(",
                  "SGD(lr=LEARNING_RATE", 'monitor="val_acc"', "period=1", '"best.h5"', "BATCH_SIZE = 32 * GPUS",
                  "LEARNING_RATE = 0.01"):
        assert idiom in source, idiom


def test_each_keras_2_line_has_its_message_and_its_fix():
    """The KERAS2 table's messages are what Keras 3 says to the given script's lines (both stacks)."""
    said = []
    for line in ("from keras.utils import multi_gpu_model", "keras.Sequential().fit_generator",
                 "keras.optimizers.SGD(lr=0.01)", "keras.callbacks.ModelCheckpoint('best.h5', period=1)"):
        with pytest.raises((ImportError, AttributeError, ValueError, TypeError)) as caught:
            exec(line, {"keras": keras})  # noqa: S102 - one Keras 2 line
        said.append(f"{caught.type.__name__}: {caught.value}")
        print(said[-1])
    assert [next(m for m in capstone.KERAS2 if m in text) for text in said] == list(capstone.KERAS2)

    class Log:                                  # what _failed reads of a finished run
        returncode = 1

        @staticmethod
        def log(raw=False):
            return "Traceback (most recent call last):\n" + said[0] + "\n"

    ok, text = capstone._failed("the first run", Log, [])
    assert not ok and text.startswith("multi_gpu_model is gone from Keras 3: make a tf.distribute.MirroredStrategy()")
    assert text.endswith("the first run failed: " + said[0]), text


@pytest.mark.slow
def test_capstone_given_script_stops_at_the_first_keras_2_line(tmp_path):
    """The "before": on Keras 3 the 2018 script stops at its import of multi_gpu_model."""
    given = capstone.starter(tmp_path / "given")
    assert given.read_text() == capstone.GIVEN.read_text()
    assert capstone.starter(tmp_path / "given") == given                 # a second call: the same file
    proc = subprocess.run([sys.executable, str(given), "--out", str(tmp_path / "out"), "--epochs", "1"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: cannot import name 'multi_gpu_model' from 'keras.utils'"), proc.stderr
    assert "SETUP" not in proc.stdout


def _notebook_stub():
    """What lesson 05's %%writefile cell holds before the learner starts: comments only."""
    cells = json.loads((Path(__file__).resolve().parent.parent / "notebooks" / "05_pickling_checkpoint_error.ipynb")
                       .read_text(encoding="utf-8"))["cells"]
    cell = next("".join(c["source"]) for c in cells if "".join(c["source"]).startswith("%%writefile {PORTED}"))
    return cell.split("\n", 1)[1]


def test_capstone_unattempted_launches_nothing(tmp_path, monkeypatch):
    def no_launch(*args, **kwargs):
        raise AssertionError("the checker launched a process for an unattempted exercise")

    monkeypatch.setattr(capstone, "TrainingRun", no_launch)
    stub = tmp_path / "train_2_replicas.py"
    stub.write_text(_notebook_stub())
    start = time.monotonic()
    text = _capstone_not_yet(stub, "not attempted yet", "nothing was run")
    assert time.monotonic() - start < 1
    hint = exercises.get(CAPSTONE).hint
    assert exercises.verdict(CAPSTONE, ...) == (False, f"Exercise {CAPSTONE}: not attempted yet. Hint: {hint}")
    _capstone_not_yet(tmp_path / "missing.py", "run the %%writefile cell first")
    stub.write_text("def broken(:\n")
    _capstone_not_yet(stub, "not valid Python: line 1")
    assert "Hint" in text


@pytest.mark.slow
def test_capstone_solution_passes_resumes_and_keeps_the_best():
    start = time.monotonic()
    ok, text = exercises.verdict(CAPSTONE, exercises.get(CAPSTONE).solution())
    print(f"checker run time for the right answer: {time.monotonic() - start:.1f} s")
    assert ok, text
    for phrase in ("2 replicas", "global batch of 64", "learning rate of 0.02 (linear scaling)",
                   "resumed at epoch 2", "best.keras kept the best model"):
        assert phrase in text, (phrase, text)


def test_the_solution_follows_lesson_05s_job_script():
    """Its own marked folder inside --out, atomic saves, one state file, the epoch from the optimizer's steps."""
    for idiom in ('os.path.join(args.out, "train_2_replicas.run")', "os.replace(", "os.makedirs(MARK, exist_ok=True)",
                  "model.optimizer.build(model.trainable_variables)", 'save(self.model.save, "best.keras")',
                  'save(self.model.save_weights, "state.weights.h5")', "initial_epoch=done",
                  "callbacks=[checkpoints, EpochLine()]"):
        assert idiom in SOLUTION_SOURCE, idiom
    for gone in ("BackupAndRestore", "ModelCheckpoint"):      # they write in place: a kill mid-write strands them
        assert gone not in SOLUTION_SOURCE, gone


@WRONG_ANSWERS
@pytest.mark.slow
def test_capstone_a_keras_callbacks_answer_passes(tmp_path):
    """ModelCheckpoint + initial_value_threshold + BackupAndRestore, as a learner may port it: accepted."""
    ok, text = exercises.verdict(CAPSTONE, _variant(tmp_path, source=KERAS_CALLBACKS_ANSWER))
    assert ok, text
    assert "resumed at epoch 2" in text and "best.keras kept the best model" in text, text


@WRONG_ANSWERS
@pytest.mark.slow
def test_capstone_batch_rate_and_resume_left_alone(tmp_path):
    """Global batch left at 32, learning rate left at 0.01, fit not told the epochs done: three messages."""
    answer = _variant(tmp_path,
                      ("BATCH_SIZE = 32 * strategy.num_replicas_in_sync", "BATCH_SIZE = 32"),
                      ("LEARNING_RATE = 0.01 * strategy.num_replicas_in_sync", "LEARNING_RATE = 0.01"),
                      ("epochs=args.epochs, initial_epoch=done,", "epochs=args.epochs,"))
    text = _capstone_not_yet(answer,
                             "the global batch is 32, 16 per replica", "32 x num_replicas_in_sync = 64",
                             "the learning rate is 0.01 (left at the one-device rate)", "linear scaling rule",
                             "started over at epoch 1", "BackupAndRestore",
                             absent=("replica(s): build", "monitor", "steps in epoch 1", "failed", "lost the best"))
    assert text.count("; ") == 2, text                       # one message per problem


@WRONG_ANSWERS
@pytest.mark.slow
def test_capstone_best_model_lost_after_the_restart(tmp_path):
    """ModelCheckpoint without initial_value_threshold (lesson 05's trap): the first (worse) epoch after the
    restart overwrites best.keras."""
    answer = _variant(tmp_path, ("initial_value_threshold=best_so_far", "initial_value_threshold=None"),
                      source=KERAS_CALLBACKS_ANSWER)
    _capstone_not_yet(answer, "best.keras lost the best model", "zeroed the weights in your backup",
                      "initial_value_threshold=", absent=("started over", "global batch is", "learning rate is"))


@WRONG_ANSWERS
@pytest.mark.slow
def test_capstone_old_monitor_name(tmp_path):
    answer = _variant(tmp_path, ('monitor="val_accuracy"', 'monitor="val_acc"'), source=KERAS_CALLBACKS_ANSWER)
    _capstone_not_yet(answer, "monitors 'val_acc'", "'val_accuracy'", "the first run failed: ValueError",
                      absent=("global batch is", "learning rate is", "started over"))


@WRONG_ANSWERS
@pytest.mark.slow
def test_capstone_the_given_script_as_answer():
    """Handing in the unported script: the checker names the Keras 3 form of its first failing line."""
    _capstone_not_yet(capstone.GIVEN, "multi_gpu_model is gone from Keras 3", "the first run failed: ImportError",
                      "cannot import name 'multi_gpu_model'")


def test_capstone_show_solution_prints_the_script(monkeypatch, capsys):
    monkeypatch.setattr(exercises, "check", lambda key, answer: print(f"checked {Path(answer).name}"))
    exercises.show_solution(CAPSTONE)
    out = capsys.readouterr().out
    assert SOLUTION_SOURCE in out and "import helpers" not in out
    assert out.rstrip().endswith("checked train_2_replicas.py")


def test_capstone_each_problem_has_its_message(tmp_path):
    """The checker's judgements on SETUP and EPOCH lines, without launching anything."""
    out = tmp_path / "out"
    good = {"global_batch": 64, "checkpoint": str(out / "best.keras"), "monitor": "val_accuracy",
            "save_best_only": True}
    assert capstone._setup_problems(good, out) == []
    wrong = dict(good, checkpoint=str(out / "best.h5"), monitor="val_loss", save_best_only=False)
    text = "; ".join(capstone._setup_problems(wrong, out))
    assert "'best.h5'" in text and "ending in .keras" in text and "monitors 'val_loss'" in text
    assert "save_best_only=True" in text
    assert "not inside the --out folder" in capstone._setup_problems(dict(good, checkpoint="/elsewhere/b.keras"), out)[0]
    assert capstone._setup_problems(dict(good, checkpoint=str(out / "job.run" / "best.keras")), out) == []
    epoch = {"replicas": 2, "steps": 23, "learning_rate": 0.02}
    assert capstone._batch_and_lr_problems(good, epoch) == []
    assert capstone._batch_and_lr_problems(good, dict(epoch, steps=22)) == []     # a generator's full batches only
    four = {"replicas": 4, "steps": 12, "learning_rate": 0.04}       # MirroredStrategy() on 4 GPUs
    assert capstone._batch_and_lr_problems(dict(good, global_batch=128), four) == []
    [one] = capstone._batch_and_lr_problems(good, dict(epoch, replicas=1))
    assert "trains on 1 replica(s)" in one and "set_logical_device_configuration" in one
    [steps] = capstone._batch_and_lr_problems(good, dict(epoch, steps=45))
    assert "fit ran 45 steps in epoch 1" in steps and "make 23" in steps
    [lr] = capstone._batch_and_lr_problems(good, dict(epoch, learning_rate=0.04))
    assert "the learning rate is 0.04:" in lr and "0.01 x num_replicas_in_sync = 0.02" in lr


def test_worsen_backups_zeroes_weights_and_slots_but_not_the_step_counter(tmp_path):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9), loss="mse")
    model.fit(np.ones((8, 3)), np.ones((8, 2)), batch_size=4, verbose=0)          # 2 steps: momenta are non-zero
    (tmp_path / "backup").mkdir()
    model.save_weights(tmp_path / "backup" / "latest.weights.h5")
    assert capstone._worsen_backups(tmp_path) == 1 and capstone._worsen_backups(tmp_path / "backup" / "none") == 0
    (tmp_path / "backup" / "tmp-state.weights.h5").write_bytes(b"half a file")   # cut by a kill: left alone
    assert capstone._worsen_backups(tmp_path) == 1
    model.load_weights(tmp_path / "backup" / "latest.weights.h5")
    assert all(not w.any() for w in model.get_weights()) and int(model.optimizer.iterations) == 2
    assert all(not keras.ops.convert_to_numpy(v).any() for v in model.optimizer.variables if len(v.shape))
