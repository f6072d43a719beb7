"""tools/run_each_twice.py: a cell that breaks when run twice in a row fails the notebook; a listed refusal does not."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
import run_each_twice as ret  # tools/run_each_twice.py

ROOT = Path(__file__).resolve().parent.parent


def _notebook(tmp_path: Path, sources: list[str]) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    for i, c in enumerate(nb.cells):
        c.id = f"c{i}"
    path = tmp_path / "00_t.ipynb"
    nbformat.write(nb, path)
    return path


def test_rerun_safe_notebook_passes(tmp_path):
    path = _notebook(tmp_path, ["x = 1", "x += 1", "assert x == 2"])   # x += 1 twice gives 3 ...
    with pytest.raises(RuntimeError, match="cell 2"):
        ret.run_notebook(path, cell_timeout=60, refusals={})
    path = _notebook(tmp_path, ["x = 1", "y = x + 1", "assert y == 2"])
    secs, notes = ret.run_notebook(path, cell_timeout=60, refusals={})
    assert secs > 0 and notes == []


def test_listed_refusal_reruns_from_the_named_cell(tmp_path):
    path = _notebook(tmp_path, [
        "n = 0",
        "n += 1",
        "if n != 1:\n    raise RuntimeError('the cell above ran twice: re-run from the cell n = 0')",
    ])
    listed = {"00_t.ipynb": [ret.Refusal("c2", "re-run from the cell n = 0", "c0")]}
    secs, notes = ret.run_notebook(path, cell_timeout=60, refusals=listed)
    assert notes == ["cell 2 refused as listed; re-ran from cell 0"]
    wrong = {"00_t.ipynb": [ret.Refusal("c2", "another message", "c0")]}
    with pytest.raises(RuntimeError, match="cell 2"):
        ret.run_notebook(path, cell_timeout=60, refusals=wrong)


def test_run_all_twice_reruns_the_whole_notebook_in_one_kernel(tmp_path):
    """Each cell twice in a row passes here; the second "Run All" meets the file the last cell wrote."""
    path = _notebook(tmp_path, ["import os", "assert not os.path.exists('done')", "open('done', 'w').close()"])
    assert ret.run_notebook(path, cell_timeout=60, refusals={})[1] == []
    with pytest.raises(RuntimeError, match="cell 1 .*run 2"):
        ret.run_notebook(path, cell_timeout=60, refusals={}, all_twice=True)


def test_dead_kernel_is_reported(tmp_path):
    path = _notebook(tmp_path, ["import os; os._exit(1)"])
    with pytest.raises(RuntimeError, match="kernel died|cell 0"):
        ret.run_notebook(path, cell_timeout=60, refusals={})


def test_bad_timeout(tmp_path):
    with pytest.raises(ValueError, match="cell_timeout"):
        ret.run_notebook(_notebook(tmp_path, ["1"]), cell_timeout=0)
