"""Lessons 04 and 05: today's answer first, the job script is the Copy box, and that box keeps its best model
through a kill and a restart whose next epochs are worse.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import h5py
import killpoints
import nblint
import numpy as np
import pytest
import wordcount

from helpers.resume import TrainingRun

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
L04, L05 = NOTEBOOKS / "04_batchnorm_variable_error.ipynb", NOTEBOOKS / "05_pickling_checkpoint_error.ipynb"
ANSWER_WITHIN = 300          # prose words from the top of the lesson to the first code of today's answer


def _cells(path: Path) -> list[dict]:
    return [{"type": c["cell_type"], "source": "".join(c["source"])}
            for c in json.loads(path.read_text(encoding="utf-8"))["cells"]]


def words_before_answer(path: Path, mark: str) -> tuple[int, int]:
    """(prose words, cell index) up to the first code cell that writes ``mark`` once a cell opened
    ``strategy.scope()``: today's answer (04: synchronized BatchNorm, 05: a ModelCheckpoint)."""
    words, scoped = 0, False
    for index, cell in enumerate(_cells(path)):
        if cell["type"] == "markdown":
            words += wordcount.prose_words(cell["source"])
            continue
        scoped |= "strategy.scope()" in cell["source"]
        if scoped and mark in cell["source"]:
            return words, index
    raise AssertionError(f"{path.name}: no code cell writes {mark} under a strategy")


@pytest.mark.parametrize("path, mark", [(L04, "synchronized=True"),
                                        (L05, "keras.callbacks.ModelCheckpoint(")])
def test_todays_answer_comes_first_and_the_history_last(path, mark):
    words, index = words_before_answer(path, mark)
    assert words <= ANSWER_WITHIN, f"{path.name}: today's answer (cell {index}) comes after {words} words"
    headings = [(i, line) for i, c in enumerate(_cells(path)) if c["type"] == "markdown"
                for line in c["source"].splitlines() if line.startswith("## ")]
    history = next(i for i, line in headings if line == "## How we know")
    assert all(i < history for i, line in headings if line.startswith("## Exercise")), headings
    capsule = [i for i, c in enumerate(_cells(path)) if c["type"] == "code" and "capsule." in c["source"]]
    assert capsule and min(capsule) > history          # the time capsule is optional history, after the exercises


def box(path: Path) -> str:
    [(_, markdown)] = nblint.copy_boxes(json.loads(path.read_text(encoding="utf-8")))
    return nblint.box_code(markdown)


def test_lesson_05s_job_script_is_its_copy_box():
    [script] = [c["source"] for c in _cells(L05) if c["source"].startswith("%%writefile {scratch}/train.py\n")]
    assert script.split("\n", 1)[1] + "\n" == box(L05)


def _score(model_file: Path) -> float:
    import keras
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype("float32")
    predicted = np.argmax(keras.models.load_model(model_file).predict(x[1500:], verbose=0), axis=-1)
    return float(np.mean(predicted == y[1500:]))


def _zero_arrays(weights_h5: Path) -> None:
    """Zero every array in a weights file: the model's and the optimizer's (the step counter, a scalar, stays)."""
    def zero(_, item):
        if isinstance(item, h5py.Dataset) and item.ndim:
            item[...] = 0

    with h5py.File(weights_h5, "r+") as f:
        f.visititems(zero)


def _start(log: str) -> tuple[int, float]:
    """The job's start line: (epochs done before this run, best.keras's val_accuracy so far)."""
    found = re.findall(r"^start after epoch (\d+) of 3; best so far: val_accuracy ([0-9.]+)$", log, re.M)
    assert len(found) == 1, f"no start line:\n{log}"
    return int(found[0][0]), float(found[0][1])


@pytest.mark.slow
def test_lesson_05s_copy_box_survives_kills_mid_write_and_keeps_the_best(tmp_path):
    """The box alone, in a folder that holds a learner's files, four runs:

    1. killed right after best.keras of epoch 1 was renamed into place, before its state was written: the next
       run starts over, with best.keras's score as its best so far;
    2. killed halfway through writing its state at epoch 2 (after epoch 2's better model went into best.keras);
    3. killed halfway through writing best.keras, at its first save (epoch 2 or 3);
    4. resumed from a state whose model was zeroed: every resumed epoch scores lower, and best.keras keeps the
       best. After every kill the next run starts after the last epoch printed (or the one after it) and its
       best.keras scores at least the best printed; the learner's files are kept byte for byte.
    """
    script = tmp_path / "train.py"
    script.write_text(box(L05))
    job = tmp_path / "job"
    job.mkdir()
    mine = {"backup/notes.txt": b"my notes\n", "best.keras": b"my own model\n"}
    for name, data in mine.items():
        (job / name).parent.mkdir(exist_ok=True)
        (job / name).write_bytes(data)
    printed, starts = [], []
    for name, nth, how in [("best.keras", 1, "after"), ("state.weights.h5", 2, "mid"), ("best.keras", 1, "mid")]:
        with TrainingRun(killpoints.command(script, name, nth, how)[1:], job, env={"PYTHONPATH": ""}) as run:
            code = run.wait(timeout=300)
        log = run.log()
        where = f"while writing train.run/tmp-{name}" if how == "mid" else f"after renaming onto train.run/{name}"
        assert code == -9 and f"KILLED {where}" in log, (code, log)
        start, best = _start(log)
        last = max((k for k, _ in printed), default=0)
        assert last <= start <= last + 1, f"the last epoch printed was {last}; this run started after {start}"
        assert best >= max((v for _, v in printed), default=0.0) - 0.002, (best, printed, log)
        printed += killpoints.epochs(log)
        starts.append((start, best))
    assert starts[1][0] == 0 and starts[1][1] > 0.1, starts     # over again, best.keras of run 1 still the best
    before = _score(job / "train.run" / "best.keras")
    assert before >= max(v for _, v in printed) - 0.004, (before, printed)
    _zero_arrays(job / "train.run" / "state.weights.h5")          # the resumed run starts from zeroed weights
    with TrainingRun([str(script)], job, env={"PYTHONPATH": ""}) as last:
        assert last.wait(timeout=300) == 0, last.log()
    log = last.log()
    resumed = [v for _, v in killpoints.epochs(log)]
    start, best = _start(log)
    assert start >= max(k for k, _ in printed) and resumed, log
    # Every resumed epoch was worse by one validation row (of 297) or more, so an overwritten best.keras would
    # score lower than before: the zeroed model guesses one class (about 0.10).
    assert max(resumed) < before - 0.003, (resumed, before)
    assert _score(job / "train.run" / "best.keras") == before, log                # and best.keras kept the best
    assert "OK: best.keras reloads" in log
    assert {name: (job / name).read_bytes() for name in mine} == mine, "a learner's file changed"
    left = {p.name for p in (job / "train.run").iterdir()}       # and a temporary file cut by a kill, never read
    assert {".made-by-train.py", "best.keras", "state.weights.h5"} <= left <= {
        ".made-by-train.py", "best.keras", "state.weights.h5", "tmp-best.keras", "tmp-state.weights.h5"}, left
