"""The "Copy this" box that ends lessons 03-11 runs as it stands, in a fresh process that has no course helpers.

A box is the markdown cell whose first line is ``## Copy this``; it holds exactly one fenced ```python block, the
lesson's takeaway code, which ends with asserts on its own result. A learner pastes it into a project, so it may
not lean on ``helpers`` or on the notebook's variables: here ``import helpers`` fails, and the cwd is empty.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEADING = "## Copy this"
LESSONS = [f"{n:02d}" for n in range(3, 12)]   # 03-10 by the house style; 11 has one too
_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
#: helpers cannot be imported, whatever is installed: the box must stand on its own.
_NO_HELPERS = "import sys; sys.modules['helpers'] = None; __file__ = 'box.py'; exec(compile(open('box.py').read(), 'box.py', 'exec'))"


def boxes(path: Path) -> list[tuple[int, str]]:
    """(cell index, markdown) of every "Copy this" cell of a notebook."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [(i, "".join(c["source"])) for i, c in enumerate(cells)
            if c["cell_type"] == "markdown" and "".join(c["source"]).split("\n", 1)[0].strip() == HEADING]


def box_code(markdown: str) -> str:
    """The one python block of a box; ValueError when there is none or more than one."""
    found = _BLOCK.findall(markdown)
    if len(found) != 1:
        raise ValueError(f"a 'Copy this' box holds exactly one ```python block, found {len(found)}")
    return found[0]


def _notebook(number: str) -> Path:
    [path] = sorted((ROOT / "notebooks").glob(f"{number}_*.ipynb"))
    return path


def test_box_code_finds_exactly_one_block():
    assert box_code("## Copy this\n\nText.\n\n```python\nx = 1\n```\n") == "x = 1\n"
    with pytest.raises(ValueError, match="found 0"):
        box_code("## Copy this\n\nno code")
    with pytest.raises(ValueError, match="found 2"):
        box_code("```python\na\n```\n```python\nb\n```")


@pytest.mark.parametrize("number", LESSONS)
def test_lesson_ends_with_one_copy_this_box_before_its_summary(number):
    path = _notebook(number)
    found = boxes(path)
    assert len(found) == 1, f"{path.name}: expected one '{HEADING}' markdown cell, found {len(found)}"
    index, markdown = found[0]
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    summary = [i for i, c in enumerate(cells)
               if c["cell_type"] == "markdown" and "".join(c["source"]).startswith("## Summary")]
    assert summary and index < summary[0], f"{path.name}: the box comes before the Summary"
    code = box_code(markdown)
    assert "helpers" not in code, f"{path.name}: the box must not use the course helpers"
    assert re.search(r"^\s*assert ", code, re.M), f"{path.name}: the box checks its own result with assert"


@pytest.mark.parametrize("number", LESSONS)
def test_copy_this_box_runs_without_helpers(number, tmp_path):
    path = _notebook(number)
    [(_, markdown)] = boxes(path)
    (tmp_path / "box.py").write_text(box_code(markdown), encoding="utf-8")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MULTIGPU_", "KERAS_BACKEND", "XLA_FLAGS", "JAX_PLATFORMS"))}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([sys.executable, "-c", _NO_HELPERS], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, f"{path.name}'s box failed:\n{proc.stdout[-1500:]}\n{proc.stderr[-3000:]}"
