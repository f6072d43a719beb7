"""Lesson 05's capstone (exercise 05.2): port a single-GPU training script to 2 replicas.

The learner ports ``train_single_gpu.py`` (``helpers/capstone_scripts/``, a Keras 2 style script that stops on
Keras 3 at ``period``) into a file. The checker runs that file twice in fresh processes
(:class:`helpers.resume.TrainingRun`): killed with ``SIGKILL`` after epoch 1, then the same command, which must
resume. It reads the script's ``SETUP``, ``EPOCH`` (from the given ``EpochLine``, which reads the live model, so
the steps prove the global batch) and ``DONE`` lines. A file of comments only (the stub) launches nothing.
"""

from __future__ import annotations

import ast
import contextlib
import json
import math
import shutil
import tempfile
import time
from pathlib import Path

from ..resume import TrainingRun
from ..subproc import error_summary
from . import register

SCRIPTS = Path(__file__).resolve().parent.parent / "capstone_scripts"
GIVEN = SCRIPTS / "train_single_gpu.py"
SOLUTION = SCRIPTS / "train_2_replicas.py"
SHARED = SCRIPTS / "digits_job.py"             # the data, the model and EpochLine: both scripts import it

REPLICAS = 2                                   # at least (MirroredStrategy() on 4 GPUs: 4)
BASE_BATCH, BASE_LR = 32, 0.01                 # the given script's, for one device
EPOCHS, KILL_AFTER = 3, 1                      # the checker's runs: --epochs 3, killed after epoch 1
TRAIN_ROWS = 1437                              # load_digits' 1797 rows, validation_split=0.2 keeps 80 %
RUN_TIMEOUT = 240.0                            # seconds per run, TensorFlow's start included


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


def _wait_for_epoch(job: TrainingRun, epoch: int, timeout: float) -> bool:
    """Poll the job's log until it printed ``EPOCH`` ``epoch`` (True) or exited (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        exited = job.returncode is not None          # before reading: a line printed before exiting is seen
        if any(r.get("epoch") == epoch for r in _lines(job.log(raw=True), "EPOCH")):
            return True
        if exited:
            return False
        time.sleep(0.02)
    job.stop()
    raise TimeoutError(f"no EPOCH {epoch} line within {timeout:g} s")


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
    elif Path(path).resolve().parent != out.resolve():
        problems.append(f"the checkpoint {path} is not in the --out folder ({out})")
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
    if isinstance(batch, int) and batch > 0 and steps != math.ceil(TRAIN_ROWS / batch):
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
    if "unexpected keyword argument 'period'" in log:
        problems = problems + ["Keras 3's ModelCheckpoint has no `period` (Keras 2's period=N became "
                               "save_freq, 'epoch' or a number of batches): the default save_freq='epoch' "
                               "checks once per epoch, so drop the argument"]
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
            reached = _wait_for_epoch(first, KILL_AFTER, RUN_TIMEOUT)
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
                            f"{killed}): add keras.callbacks.BackupAndRestore(<a folder in --out>) to fit's "
                            "callbacks, before EpochLine, so each epoch's backup is on disk before its line")
        elif resumed[0]["epoch"] > killed[-1] + 1:
            problems.append(f"the second run began at epoch {resumed[0]['epoch']}, after the last epoch the "
                            f"first finished ({killed[-1]}): an epoch was skipped")
        elif resumed[0]["steps"] != resumed[0]["epoch"] * epoch1["steps"]:
            problems.append(f"the second run's step counter is {resumed[0]['steps']} after epoch "
                            f"{resumed[0]['epoch']}: the optimizer state was not restored")
        if not problems:
            try:
                import keras

                keras.models.load_model(setup["checkpoint"])
            except Exception as exc:  # noqa: BLE001 - any failure to reload is the learner's to see
                problems.append(f"keras.models.load_model could not reload the checkpoint: "
                                f"{type(exc).__name__}: {exc}")
    if problems:
        return False, "; ".join(problems)
    replicas = epoch1["replicas"]
    return True, (f"{replicas} replicas, a global batch of {BASE_BATCH * replicas} ({epoch1['steps']} steps per "
                  f"epoch) and a learning rate of {BASE_LR * replicas:g} (linear scaling); the best model by "
                  f"val_accuracy reloads from {Path(setup['checkpoint']).name}; killed after epoch "
                  f"{killed[-1]}, the same command resumed at epoch {resumed[0]['epoch']} with the optimizer's "
                  "step counter intact")


def _solve():
    return starter(tempfile.mkdtemp(prefix="capstone-solution-"), SOLUTION)


_solve.script = SOLUTION      # show_solution prints this file, the helper-free ported script

register("05.2", title="capstone: port a single-GPU script to 2 replicas", checker=_check, solution=_solve,
         expects=("str", "pathlib.PurePath"), wants="the path of your ported script (a str or Path)",
         hint="compare what each replica sees with the single-GPU run: its batch, the step size that batch "
              "deserves, and what a restarted process can find on disk.")
