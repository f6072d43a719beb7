"""Every notebook in notebooks/ follows the template: stripped, python3 kernel, own badges, numbering."""

import json
import re
from pathlib import Path

import nbtemplate as template  # maintainer code: tools/nbtemplate.py
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS and NOTEBOOKS[0].name == "00_start_here.ipynb"


def test_numbering_is_contiguous_and_unique():
    numbers = [int(template.check_name(str(p)).group(1)) for p in NOTEBOOKS]
    assert numbers == list(range(len(numbers))), numbers


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_follows_template(path):
    nb = json.loads(path.read_text())
    assert template.problems(nb, f"notebooks/{path.name}") == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_repo_writes_or_unsafe_loading(path):
    code = "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"]
                     if c["cell_type"] == "code")
    assert "enable_unsafe_deserialization(" not in code
    assert not re.search(r"safe_mode\s*=\s*False", code), "never safe_mode=False in code"
    assert "sys.path" not in code, "notebooks import helpers as an installed package"


@pytest.mark.parametrize("path", NOTEBOOKS[1:], ids=lambda p: p.name)
def test_lessons_have_two_exercises_with_checks(path):
    cells = json.loads(path.read_text())["cells"]
    headings = [ln for c in cells if c["cell_type"] == "markdown"
                for ln in "".join(c["source"]).splitlines() if re.match(r"## Exercise \d+", ln)]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    keys = re.findall(r'helpers\.exercises\.check\("(\d\d\.\d+)"', code)
    assert len(headings) >= 2 and len(set(keys)) >= 2, (headings, keys)
    assert all(k.startswith(path.name[:2] + ".") for k in keys)
