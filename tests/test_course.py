"""helpers.course: the course map lesson 00 prints comes from package data, so it works without the notebooks."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

from helpers import course

ROOT = Path(__file__).resolve().parent.parent


def test_print_course_map_one_line_per_lesson_in_order(capsys):
    course.print_course_map()
    lines = capsys.readouterr().out.splitlines()
    rows = course.lessons()
    assert [ln[:2] for ln in lines] == [r["number"] for r in rows] == sorted(r["number"] for r in rows)
    assert all(r["title"] in ln and ln.endswith(r["summary"]) and "`" not in ln for r, ln in zip(rows, lines))


def test_the_map_works_where_only_the_package_is_installed(tmp_path):
    """As on Colab: the helpers without the repository (no notebooks/, no tools/), from another folder. (The real
    pip install from git, package data and all, runs lesson 00 in tests/test_bootstrap.py.)"""
    shutil.copytree(ROOT / "helpers", tmp_path / "site" / "helpers",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "elsewhere").mkdir()
    run = subprocess.run([sys.executable, "-I", "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                          "import helpers.course as c; print(c.__file__); c.print_course_map()",
                          str(tmp_path / "site")], cwd=tmp_path / "elsewhere", capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    first, *lines = run.stdout.splitlines()
    assert first.startswith(str(tmp_path / "site"))
    assert len(lines) == len(json.loads((ROOT / "helpers" / "course_map.json").read_text())) >= 12

