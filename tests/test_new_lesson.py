"""A new lesson is two edits: its notebook (with its registry entry) and its exercise module; the rest is derived.

In a temporary copy of the repository, the test adds a throwaway lesson with the next free number (the numbering
rule wants no gap, so "lesson 99" is lesson 13 today), runs `make sync-notebooks` and `make lint`, and checks that
both pass and that only the two new files and the generated ones changed: the taught calls, the word budgets, the
JAX and Slurm lists, the exercises' giveaways and slow marks are read from those two files (CONTRIBUTING, "Adding a
lesson").
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TAUGHT = "keras.distribution.list_devices("

EXERCISES = '''"""Exercises of {name}: a throwaway lesson (tests/test_new_lesson.py)."""

from . import register


def _check(answer):
    devices = answer(4)
    return devices == 4, f"{{devices}} devices"


def _solve():
    def count(n):
        return n

    return count


register("{n}.1", title="count the devices", checker=_check, solution=_solve, expects="function", takes=1,
         wants="count(n) that returns n", hint="return what you are given.", giveaways=["return n"])
register("{n}.2", title="count them again", checker=_check, solution=_solve, expects="function", takes=1,
         wants="count(n) that returns n", hint="return what you are given.", giveaways=["return n"], slow=True)
'''


def _copy(dest: Path) -> None:
    """The working tree (tracked and untracked-but-not-ignored files), as a git repository with one commit."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.splitlines()
    for f in files:
        if (ROOT / f).is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, dest / f)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "the course"]):
        subprocess.run(git + cmd, cwd=dest, check=True, capture_output=True)


def _cell(kind: str, source: str) -> dict:
    cell = {"cell_type": kind, "metadata": {}, "source": source}
    return {**cell, "execution_count": None, "outputs": []} if kind == "code" else cell


def _fill(path: Path, number: str) -> None:
    """What an author writes into the template: the registry entry, a taught call, a Copy box, two exercises."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    nb["metadata"]["course"].update(
        summary="a throwaway lesson", kaggle="The lesson uses both GPUs.", dominates="nothing", words=300,
        taught=[TAUGHT], workshop=[{"session": "optional", "minutes": 5, "part": "", "notes": "a test's lesson"}])
    cells = nb["cells"]
    summary = next(i for i, c in enumerate(cells) if "".join(c["source"]).startswith("## Summary"))
    box = "## Copy this\n\n```python\nimport keras\n\nassert keras.distribution.list_devices()\n```\n"
    cells[summary:summary] = [_cell("markdown", "## The one section\n\nList the devices."),
                              _cell("code", f"devices = {TAUGHT})\nassert devices"),
                              _cell("markdown", box)]
    for k in (1, 2):
        heading = next(i for i, c in enumerate(cells) if "".join(c["source"]).startswith(f"## Exercise {k}"))
        cells.insert(heading + 1, _cell("code", f'answer = ...\nhelpers.exercises.check("{number}.{k}", answer)'))
    path.write_text(json.dumps(nb, indent=1) + "\n", encoding="utf-8")


@pytest.mark.slow   # a copy of the repository, make lint, two collections of the exercise tests: about a minute
@pytest.mark.one_stack(reason="what is derived from the two files does not depend on the stack's versions")
def test_a_new_lesson_needs_its_notebook_and_its_exercise_module_only(tmp_path):
    repo = tmp_path / "course"
    _copy(repo)
    number = f"{len(list((repo / 'notebooks').glob('[0-9][0-9]_*.ipynb'))):02d}"
    name = f"{number}_throwaway"
    budget_before = _course_budget(repo)

    # the two edits
    subprocess.run(["python3", "tools/nbtemplate.py", "new", f"notebooks/{name}.ipynb", "Throwaway"], cwd=repo,
                   check=True, capture_output=True)
    _fill(repo / "notebooks" / f"{name}.ipynb", number)
    (repo / "helpers" / "exercises" / f"lesson{number}.py").write_text(EXERCISES.format(name=name, n=number))

    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    lint_venv = f"LINT_VENV={ROOT / '_build' / 'lint-venv'}"     # ruff's own small venv, shared with the repo's
    for target in (["sync-notebooks"], ["lint", lint_venv]):
        done = subprocess.run(["make", "--no-print-directory", *target], cwd=repo, env=env, capture_output=True,
                              text=True, timeout=300, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, f"make {target[0]}:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}"

    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo, check=True,
                            capture_output=True, text=True).stdout.splitlines()
    added = sorted(line[3:] for line in status if line.startswith("??"))
    changed = sorted(line[3:] for line in status if not line.startswith("??"))
    assert added == [f"helpers/exercises/lesson{number}.py", f"notebooks/{name}.ipynb"], status
    sys.path.insert(0, str(repo / "tools"))
    try:
        import generate  # the copy's tools/generate.py: what make sync-notebooks writes
        generated = set(generate.outputs(repo))
    finally:
        sys.path.remove(str(repo / "tools"))
    assert set(changed) <= generated, f"edited besides the generated files: {set(changed) - generated}"
    assert _course_budget(repo) == budget_before + 300                 # the lesson brought its own budget

    # the derived lists pick it up: exercises (giveaways, slow), the copy-box lessons
    listed = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                             "tests/test_exercises.py", "tests/test_copy_boxes.py"], cwd=repo,
                            env={**env, "PYTHONPATH": str(repo)}, capture_output=True, text=True, timeout=300)
    assert f"test_hint_guides_without_the_answer[{number}.1]" in listed.stdout, listed.stdout[-2000:]
    assert f"test_copy_this_box_runs_without_helpers[{number}]" in listed.stdout, listed.stdout[-2000:]
    slow = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-m", "slow", "tests/test_exercises.py", "-k", "solution_is_correct"], cwd=repo,
                          env={**env, "PYTHONPATH": str(repo)}, capture_output=True, text=True, timeout=300)
    assert f"[{number}.2]" in slow.stdout and f"[{number}.1]" not in slow.stdout, slow.stdout[-2000:]


def _course_budget(repo: Path) -> int:
    done = subprocess.run(["python3", "tools/wordcount.py", "--json"], cwd=repo, check=True, capture_output=True,
                          text=True)
    return json.loads(done.stdout)["course_budget"]
