"""Lesson 05's capstone (exercise 05.2): port a Keras 2 multi-GPU script of 2018 to Keras 3 on 2 replicas.

The learner ports ``train_keras2.py`` (``helpers/capstone_scripts/``: ``multi_gpu_model``, ``fit_generator``,
``lr=``, ``ModelCheckpoint(..., period=1)`` on ``val_acc`` into ``.h5``) into a file. The checker runs that file
twice in fresh processes (:class:`helpers.resume.TrainingRun`): killed with ``SIGKILL`` after epoch 1, then the same
command, which must resume. Between the two it zeroes the model's weights in the backup, so the epochs after the
restart are worse than the best before the kill: the best model (a ``.keras`` file anywhere in ``--out``) must
still hold that best. It reads the script's
``SETUP``, ``EPOCH`` (from the given ``EpochLine``, which reads the live model, so the steps prove the global batch)
and ``DONE`` lines. A file of comments only (the stub) launches nothing.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib.util
import json
import math
import shutil
import tempfile
from pathlib import Path

import h5py
import numpy as np

from ..resume import TrainingRun
from ..subproc import error_summary, temp_dir
from . import register

SCRIPTS = Path(__file__).resolve().parent.parent / "capstone_scripts"
GIVEN = SCRIPTS / "train_keras2.py"
SOLUTION = SCRIPTS / "train_2_replicas.py"
SHARED = SCRIPTS / "digits_job.py"             # the data, the model and EpochLine: both scripts import it

REPLICAS = 2                                   # at least (MirroredStrategy() on 4 GPUs: 4)
BASE_BATCH, BASE_LR = 32, 0.01                 # per device, as the given script was tuned on one GPU
EPOCHS, KILL_AFTER = 3, 1                      # the checker's runs: --epochs 3, killed after epoch 1
TRAIN_ROWS = 1437                              # digits_job.load_data's training rows
RUN_TIMEOUT = 240.0                            # seconds per run, TensorFlow's start included

#: What Keras 3 says to a Keras 2 line of the given script, and the port that fixes it.
KERAS2 = {
    "cannot import name 'multi_gpu_model'": "multi_gpu_model is gone from Keras 3: make a tf.distribute."
    "MirroredStrategy() (devices as in the quick start), build and compile the model inside its scope() and "
    "train that model",
    "has no attribute 'fit_generator'": "fit_generator is gone: model.fit takes the arrays (or a generator "
    "with steps_per_epoch) itself",
    "not recognized: {'lr'": "Keras 3's optimizers take learning_rate=, not lr=",
    "unexpected keyword argument 'period'": "Keras 3's ModelCheckpoint has no `period` (Keras 2's period=N became "
    "save_freq, 'epoch' or a number of batches): the default save_freq='epoch' checks once per epoch, so drop "
    "the argument",
}


def starter(folder: str | Path, script: Path = GIVEN) -> Path:
    """Copy ``script`` (default: the given single-GPU one) and the module it imports into ``folder``; its path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SHARED, folder / SHARED.name)
    return Path(shutil.copyfile(script, folder / script.name))


def _lines(log: str, tag: str) -> list[dict]:
    rows = []
    for line in log.splitlines():
        if line.startswith(tag + " "):
            with contextlib.suppress(json.JSONDecodeError):
                rows.append(json.loads(line[len(tag) + 1:]))
    return rows


@functools.cache
def _validation() -> tuple:
    """digits_job.load_data()'s validation arrays, read from the course's copy of digits_job.py."""
    spec = importlib.util.spec_from_file_location("capstone_digits_job", SHARED)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.load_data()[1]


def _score(path: str) -> float | None:
    """The validation accuracy of the model saved at ``path``; None when there is no such file."""
    if not Path(path).is_file():
        return None
    import keras

    x_val, y_val = _validation()
    predicted = np.argmax(keras.models.load_model(path).predict(x_val, verbose=0), axis=-1)
    return float(np.mean(predicted == y_val))


def _worsen_backups(out: Path) -> int:
    """Zero every array in every ``*.weights.h5`` under ``out`` (the weights and the optimizer's slots; the step
    counter, a scalar, stays): the given model resumed from them cannot learn, so it scores far below the best
    epoch before the kill. A file h5py cannot open (a temporary file cut by a kill, never resumed from) is left
    alone. How many files it changed."""
    def zero(name, item):
        if isinstance(item, h5py.Dataset) and item.ndim:
            item[...] = 0

    changed = 0
    for path in sorted(out.rglob("*.weights.h5")):
        try:
            with h5py.File(path, "r+") as f:
                f.visititems(zero)
        except OSError:
            continue
        changed += 1
    return changed


def _setup_problems(setup: dict, out: Path) -> list[str]:
    """What the SETUP line says is wrong: checkpoint monitor, best-only, file format and place."""
    problems = []
    monitor = setup.get("monitor")
    if monitor == "val_acc":
        problems.append("the checkpoint monitors 'val_acc', Keras 2.2's name: since Keras 2.3 "
                        "metrics=['accuracy'] logs 'val_accuracy' (with 'val_acc' Keras 3 raises ValueError "
                        "at the first epoch end, mode='auto' cannot tell max from min)")
    elif monitor != "val_accuracy":
        problems.append(f"the checkpoint monitors {monitor!r}: keep the best validation accuracy, "
                        "monitor='val_accuracy'")
    if setup.get("save_best_only") is not True:
        problems.append("the checkpoint keeps every epoch's model: save_best_only=True keeps only the best")
    path = str(setup.get("checkpoint", ""))
    if not path.endswith(".keras"):
        problems.append(f"the checkpoint file is {Path(path).name!r}: save the whole model in Keras 3's "
                        "native format, a file ending in .keras")
    elif not Path(path).resolve().is_relative_to(out.resolve()):
        problems.append(f"the checkpoint {path} is not inside the --out folder ({out})")
    return problems


def _batch_and_lr_problems(setup: dict, epoch: dict) -> list[str]:
    """Replicas, global batch (printed, and proved by the steps of epoch 1) and learning rate."""
    problems = []
    replicas = epoch.get("replicas")
    if not isinstance(replicas, int) or replicas < REPLICAS:
        problems.append(f"the model trains on {replicas} replica(s): build and compile it inside "
                        f"tf.distribute.MirroredStrategy(devices).scope() over {REPLICAS} devices (with no "
                        "GPU, split the CPU in 2 first with tf.config.set_logical_device_configuration)")
        return problems                                   # batch and rate are judged per replica count
    batch, want_batch = setup.get("global_batch"), BASE_BATCH * replicas
    if batch != want_batch:
        per = f"{batch / replicas:g}" if isinstance(batch, (int, float)) else "?"
        problems.append(f"the global batch is {batch}, {per} per replica: keep {BASE_BATCH} per replica, "
                        f"a global batch of {BASE_BATCH} x num_replicas_in_sync = {want_batch}")
    steps = epoch.get("steps")
    if isinstance(batch, int) and batch > 0 and steps not in (TRAIN_ROWS // batch, math.ceil(TRAIN_ROWS / batch)):
        problems.append(f"fit ran {steps} steps in epoch 1, but {TRAIN_ROWS} training rows in batches of "
                        f"{batch} (the printed global_batch) make {math.ceil(TRAIN_ROWS / batch)}: pass "
                        "the global batch to fit(batch_size=...)")
    lr, want_lr = epoch.get("learning_rate"), BASE_LR * replicas
    if not isinstance(lr, (int, float)):
        problems.append("no learning rate in the EPOCH line: keep the given EpochLine callback")
    elif not math.isclose(lr, want_lr, rel_tol=1e-5):
        left = " (left at the one-device rate)" if math.isclose(lr, BASE_LR, rel_tol=1e-5) else ""
        problems.append(f"the learning rate is {lr:.3g}{left}: by the linear scaling rule a {replicas}x larger "
                        f"global batch takes a {replicas}x larger step, {BASE_LR} x num_replicas_in_sync = "
                        f"{want_lr:g}")
    return problems


def _failed(what: str, job: TrainingRun, problems: list[str]) -> tuple[bool, str]:
    log = job.log(raw=True)
    problems = problems + [fix for message, fix in KERAS2.items() if message in log]
    reason = error_summary(log) or f"exit code {job.returncode}, no Python error in its log"
    return False, "; ".join(problems + [f"{what} failed: {reason}"])


def _check(answer):
    script = Path(answer)
    if not script.is_file():
        return False, f"there is no file {script}: run the %%writefile cell first"
    source = script.read_text()
    try:
        if not ast.parse(source).body:               # only comments so far (the stub): nothing to run
            return False, ("not attempted yet: the file holds only comments. Paste the given script into "
                           "the %%writefile cell and port it; nothing was run")
    except SyntaxError as err:
        return False, f"your script is not valid Python: line {err.lineno}: {err.msg}"
    with tempfile.TemporaryDirectory(prefix="capstone-") as folder:
        out = Path(folder) / "out"
        command = [str(script), "--out", str(out), "--epochs", str(EPOCHS)]
        with TrainingRun(command, out) as first:     # killed (SIGKILL) once it logged epoch 1
            reached = first.wait_for(f'EPOCH {{"epoch": {KILL_AFTER},', RUN_TIMEOUT)
            first.kill()
        log = first.log(raw=True)
        setups = _lines(log, "SETUP")
        setup = setups[0] if setups else {}
        problems = _setup_problems(setup, out) if setups else []
        if not reached:
            return _failed("the first run", first, problems)
        if not setups:
            problems.append("no SETUP line: keep the given script's print('SETUP', ...) before fit")
        epoch1 = _lines(log, "EPOCH")[0]
        problems += _batch_and_lr_problems(setup, epoch1)
        if _lines(log, "DONE"):
            return False, "; ".join(problems + ["the first run finished before it could be killed: check again"])
        try:
            before = _score(setup.get("checkpoint", ""))
        except Exception as exc:  # noqa: BLE001 - any failure to reload is the learner's to see
            return False, "; ".join(problems + [f"keras.models.load_model could not reload the checkpoint: "
                                                f"{type(exc).__name__}: {exc}"])
        worsened = _worsen_backups(out)
        with TrainingRun(command, out) as second:    # the same command: it must resume
            code = second.wait(timeout=RUN_TIMEOUT)
        if code != 0:
            return _failed("the second run (the same command after the kill)", second, problems)
        killed = [r["epoch"] for r in _lines(log, "EPOCH")]
        resumed = _lines(second.log(raw=True), "EPOCH")
        if not resumed:
            problems.append("the second run printed no EPOCH line: keep EpochLine() in fit's callbacks")
        elif resumed[0]["epoch"] == 1:
            problems.append(f"after the kill the second run started over at epoch 1 (the first had finished "
                            f"{killed}): resume from a state saved at each epoch's end, before EpochLine, in a "
                            "folder inside --out: keras.callbacks.BackupAndRestore(<folder>, double_checkpoint="
                            "True), or lesson 05's job script, whose state file survives a kill during its write")
        elif resumed[0]["epoch"] > killed[-1] + 1:
            problems.append(f"the second run began at epoch {resumed[0]['epoch']}, after the last epoch the "
                            f"first finished ({killed[-1]}): an epoch was skipped")
        elif resumed[0]["steps"] != resumed[0]["epoch"] * epoch1["steps"]:
            problems.append(f"the second run's step counter is {resumed[0]['steps']} after epoch "
                            f"{resumed[0]['epoch']}: the optimizer state was not restored")
        elif not worsened:
            problems.append("the first run left no backup (*.weights.h5) in the --out folder: give "
                            "BackupAndRestore a folder inside --out")
        elif before is None:
            problems.append(f"after the kill there was no {Path(setup['checkpoint']).name} although epoch 1 had "
                            "ended: keep EpochLine() last in fit's callbacks, after the checkpoint")
        if not problems:
            try:
                after = _score(setup["checkpoint"])
            except Exception as exc:  # noqa: BLE001 - any failure to reload is the learner's to see
                return False, f"keras.models.load_model could not reload the checkpoint: {type(exc).__name__}: {exc}"
            worse = max(r["val_accuracy"] for r in resumed)
            if after is None or after < before - 1e-6:
                problems.append(
                    f"{Path(setup['checkpoint']).name} lost the best model: it scored val_accuracy {before:.3f} "
                    f"before the kill, {after if after is None else round(after, 3)} after the restart. The checker "
                    f"zeroed the weights in your backup, so the resumed epochs were worse ({worse:.3f} at best); a "
                    "restarted process makes a new ModelCheckpoint whose best score is empty, and BackupAndRestore "
                    "does not restore it, so the first epoch after the restart overwrote the file. Give the "
                    "resumed run's ModelCheckpoint the score of the file you have: initial_value_threshold=... "
                    "(lesson 05's job script reads it back from best.keras the same way)")
    if problems:
        return False, "; ".join(problems)
    replicas = epoch1["replicas"]
    return True, (f"{replicas} replicas, a global batch of {BASE_BATCH * replicas} ({epoch1['steps']} steps per "
                  f"epoch) and a learning rate of {BASE_LR * replicas:g} (linear scaling); killed after epoch "
                  f"{killed[-1]}, the same command resumed at epoch {resumed[0]['epoch']} with the optimizer's "
                  f"step counter intact; {Path(setup['checkpoint']).name} kept the best model (val_accuracy "
                  f"{before:.3f}) through resumed epochs that scored {worse:.3f} at best")


def _solve():
    return starter(temp_dir("capstone-solution-"), SOLUTION)   # removed at exit


_solve.script = SOLUTION      # show_solution prints this file, the helper-free ported script

register("05.2", title="capstone: port a 2018 multi-GPU script to Keras 3", checker=_check, solution=_solve,
         expects=("str", "pathlib.PurePath"), wants="the path of your ported script (a str or Path)",
         time_limit=2 * RUN_TIMEOUT + 120,            # two training runs, each ended by its own timeout first
         hint="port each Keras 2 line to today's form, keep the batch each replica saw, and ask what a restarted "
              "process finds on disk, and what it forgets.",
         giveaways=["BackupAndRestore", "val_accuracy", "0.02", "64", "num_replicas_in_sync", "MirroredStrategy",
                    "initial_value_threshold"], slow=True)
