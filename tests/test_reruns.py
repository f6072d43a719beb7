"""Re-runs (tools/pytest_course.py's NB_RERUN, run by `make rerun-each` and make test on the pinned stack): a cell
that breaks when run twice fails the notebook, "Run All" twice finds what each cell twice cannot, and the first runs
stay the plain run (their outputs are the ones kept)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.one_stack(reason="each cell runs twice on the pinned stack only (the Makefile's TEST_RERUN)")


ROOT = Path(__file__).resolve().parent.parent
CONFTEST = f"import sys\nsys.path.insert(0, {str(ROOT / 'tools')!r})\npytest_plugins = ['pytest_course']\n"


def _notebook(folder: Path, name: str, sources: list[str]) -> str:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    for i, c in enumerate(nb.cells):
        c.id = f"c{i}"
    nbformat.write(nb, folder / name)
    return name


def _run(folder: Path, names: list[str], all_twice: bool = False, **env) -> str:
    """The course's nbval run of ``names`` with the re-runs (what `make rerun-each` runs)."""
    (folder / "conftest.py").write_text(CONFTEST)
    cmd = [sys.executable, "-m", "pytest", *names, "--nbval-lax", "--nbval-current-env", "--nbval-cell-timeout=60",
           "-p", "no:cacheprovider", "-q"]
    run_env = {**os.environ, "NB_RERUN": "all" if all_twice else "each", "PYTHONHASHSEED": "0", "NB_BUDGET_S": "600"}
    done = subprocess.run(cmd, cwd=folder, env={**run_env, **env}, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    return done.stdout + done.stderr


@pytest.mark.slow
def test_each_cell_twice(tmp_path):
    names = [_notebook(tmp_path, "00_safe.ipynb", ["x = 1", "y = x + 1", "assert y == 2"]),
             _notebook(tmp_path, "01_counts.ipynb", ["x = 1", "x += 1", "assert x == 2"]),   # x += 1 twice: 3
             _notebook(tmp_path, "02_second.ipynb", ["import os, tempfile\nd = tempfile.mkdtemp()",
                                                     "os.mkdir(os.path.join(d, 'x'))"]),
             _notebook(tmp_path, "03_counter.ipynb", ["import itertools\nc = globals().get('c') or itertools.count()",
                                                      "print('run', next(c))"])]
    out = _run(tmp_path, names, NB_EXECUTED_DIR=str(tmp_path / "copies"))
    failed = sorted(line.split("::")[0].split()[-1] for line in out.splitlines() if line.startswith("FAILED "))
    assert failed == ["01_counts.ipynb", "02_second.ipynb"], out[-3000:]
    assert "FAILED 01_counts.ipynb::Cell 2" in out                      # the cell after the one that counted
    assert "Cell 1: run twice in a row (Shift+Enter twice), the second run fails" in out
    copy = json.loads((tmp_path / "copies" / "03_counter.ipynb").read_text())
    assert "".join(copy["cells"][1]["outputs"][0]["text"]) == "run 0\n"   # the first run's output is kept
    assert "re-runs (NB_RERUN=each)" in out


@pytest.mark.slow
def test_run_all_twice_finds_what_each_cell_twice_cannot(tmp_path):
    name = _notebook(tmp_path, "00_t.ipynb", ["import os", "assert not os.path.exists('done')",
                                              "open('done', 'w').close()"])   # the kernel's own temporary folder
    assert "3 passed" in _run(tmp_path, [name])
    out = _run(tmp_path, [name], all_twice=True)
    assert "Cell 1: Run All a second time in the same kernel, this cell fails" in out, out[-3000:]

