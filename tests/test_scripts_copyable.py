"""Scripts a lesson writes with %%writefile can be copied into a project as they are, and survive a re-run.

- No ``%%writefile -a``: running an appending cell twice writes its part twice (issue 21), so each file is written
  by one cell, which a re-run rewrites to the same bytes.
- A written script imports nothing from the course's ``helpers`` (a launcher in helpers may start it).
- At most three cells write the files of one lesson's script, each at most about 50 lines (60 at the most).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
MAX_LINES = 60
_IMPORTS_HELPERS = re.compile(r"^\s*(import helpers|from helpers[ .])", re.M)


def writefile_cells(path: Path) -> list[tuple[int, str, str]]:
    """(cell index, magic line, body) of every %%writefile cell."""
    out = []
    for i, c in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        src = "".join(c["source"])
        if c["cell_type"] == "code" and src.startswith("%%writefile"):
            magic, _, body = src.partition("\n")
            out.append((i, magic, body))
    return out


def problems(cells: list[tuple[int, str, str]]) -> list[str]:
    """What breaks the rules above, one line per problem."""
    found = []
    for i, magic, body in cells:
        if re.match(r"%%writefile\s+(-a|--append)\b", magic):
            found.append(f"cell {i}: %%writefile -a appends again on every re-run; write the file in one cell")
        if _IMPORTS_HELPERS.search(body):
            found.append(f"cell {i}: the script imports the course helpers; a learner cannot copy it")
        if len(body.splitlines()) > MAX_LINES:
            found.append(f"cell {i}: {len(body.splitlines())} lines; split the script into files of <= {MAX_LINES}")
    return found


def test_problems_catches_each_rule():
    assert problems([(1, "%%writefile x.py", "print(1)\n")]) == []
    assert "appends" in problems([(2, "%%writefile -a x.py", "print(1)\n")])[0]
    assert "helpers" in problems([(3, "%%writefile x.py", "from helpers import data\n")])[0]
    assert "lines" in problems([(4, "%%writefile x.py", "x = 1\n" * 61)])[0]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_lesson_scripts_are_copyable_and_rerun_safe(path):
    assert problems(writefile_cells(path)) == []
