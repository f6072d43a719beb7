"""The resumable jobs write only into a folder of their own, marked as theirs (issue 39, item 3): the quick start,
lesson 05's job script and the capstone's solution.

Fast, without TensorFlow: the lines of each script that make its folder (from ``RUN`` to
``os.makedirs(MARK, exist_ok=True)``) run in a temporary folder, against what a learner may have there. The runs
of the whole scripts (tests/test_quickstart.py, tests/test_lessons_04_05.py) check the rest: nothing written
outside the folder, a learner's files kept byte for byte.
"""

import json
import os
import types
from pathlib import Path

import pytest

from helpers.exercises import capstone

ROOT = Path(__file__).resolve().parent.parent


def _lesson_05_job() -> str:
    cells = json.loads((ROOT / "notebooks" / "05_pickling_checkpoint_error.ipynb").read_text(encoding="utf-8"))
    [body] = ["".join(c["source"]).split("\n", 1)[1] for c in cells["cells"]
              if "".join(c["source"]).startswith("%%writefile {scratch}/train.py\n")]
    return body


#: name: (script source, its folder and its mark, relative to where it runs, and the words of its refusal)
JOBS = {
    "quick start": ((ROOT / "quickstart" / "train_2gpus.py").read_text(encoding="utf-8"),
                    "train_2gpus.run", ".made-by-train_2gpus", "was not made by this script"),
    "lesson 05's job": (_lesson_05_job(), "train.run", ".made-by-train.py", "was not made by train.py"),
    "capstone solution": (capstone.SOLUTION.read_text(encoding="utf-8"), "out/train_2_replicas.run",
                          ".made-by-train_2_replicas", "was not made by this script"),
}


def _folder_block(source: str) -> str:
    """The script's lines from the one that names its folder to the one that makes it with its mark."""
    lines = source.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("RUN"))
    last = next(i for i, line in enumerate(lines) if line.startswith("os.makedirs(MARK, exist_ok=True)"))
    return "\n".join(lines[first:last + 1]) + "\n"


def _make_folder(source: str, where: Path) -> None:
    """Run the script's folder block with ``where`` as the working folder (``--out out`` for the capstone)."""
    cwd = os.getcwd()
    os.chdir(where)
    try:
        exec(_folder_block(source), {"os": os, "args": types.SimpleNamespace(out="out")})  # noqa: S102
    finally:
        os.chdir(cwd)


def _snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None for p in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("job", JOBS)
def test_a_new_folder_gets_its_mark(job, tmp_path):
    source, run, mark, _ = JOBS[job]
    (tmp_path / "out").mkdir()                           # the capstone's --out (the checker makes it)
    _make_folder(source, tmp_path)
    assert sorted(p.name for p in (tmp_path / run).iterdir()) == [mark] and (tmp_path / run / mark).is_dir()
    (tmp_path / run / "best.keras").write_bytes(b"the job's own")
    _make_folder(source, tmp_path)                       # the next run: its own folder, its files untouched
    assert (tmp_path / run / "best.keras").read_bytes() == b"the job's own"


@pytest.mark.parametrize("job", JOBS)
def test_an_empty_folder_is_taken_over(job, tmp_path):
    """A kill between making the folder and its mark leaves an empty folder: the next run goes on."""
    source, run, mark, _ = JOBS[job]
    (tmp_path / run).mkdir(parents=True)
    _make_folder(source, tmp_path)
    assert (tmp_path / run / mark).is_dir()


@pytest.mark.parametrize("job", JOBS)
def test_a_folder_it_did_not_make_stops_it_untouched(job, tmp_path):
    source, run, mark, refusal = JOBS[job]
    (tmp_path / run / "backup").mkdir(parents=True)
    (tmp_path / run / "backup" / "notes.txt").write_bytes(b"my notes\n")
    (tmp_path / run / "best.keras").write_bytes(b"my model\n")
    before = _snapshot(tmp_path)
    with pytest.raises(SystemExit) as stopped:
        _make_folder(source, tmp_path)
    assert str(stopped.value) == (f"{tmp_path / run} {refusal}: move or rename it, then run again"), stopped.value
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("job", JOBS)
def test_a_file_of_that_name_stops_it_untouched(job, tmp_path):
    source, run, _, _ = JOBS[job]
    (tmp_path / run).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / run).write_bytes(b"a file, not a folder\n")
    before = _snapshot(tmp_path)
    with pytest.raises(OSError):                         # FileExistsError or NotADirectoryError: Python's words
        _make_folder(source, tmp_path)
    assert _snapshot(tmp_path) == before
