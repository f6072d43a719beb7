"""The registry (tools/registry.py) and what is generated from it (tools/generate.py, `make sync-notebooks`).

The real files must be fresh; on a made-up course the generators pick up any number of lessons, put the clock times
of each session together from its blocks' minutes, and list optional blocks outside the sessions.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import generate  # tools/generate.py
import pytest
import registry  # tools/registry.py

ROOT = Path(__file__).resolve().parent.parent


def test_the_generated_files_are_fresh():
    stale = generate.stale()
    assert not stale, f"stale, run `make sync-notebooks`: {', '.join(stale)}"


def test_every_lesson_has_a_complete_entry_numbered_from_00():
    lessons = registry.load()
    assert [ls.number for ls in lessons] == [f"{i:02d}" for i in range(len(lessons))] and len(lessons) >= 12
    assert all(ls.workshop and "pinned" in ls.stacks for ls in lessons)
    assert [ls.number for ls in lessons if ls.jax][:3] == ["08", "10", "11"]
    assert {ls.number for ls in lessons if ls.slurm} >= {"07", "08", "12"}


GOOD = {"title": "T", "summary": "s", "kaggle": "k", "words": 1000, "dominates": "d",
        "workshop": [{"session": 1, "minutes": 10, "part": "", "notes": "n"}],
        "taught": ["strategy.scope("], "stacks": ["pinned", "hosted"], "jax": False, "slurm": []}


@pytest.mark.parametrize("edit, words", [
    (lambda e: e.pop("kaggle"), "no 'kaggle'"),
    (lambda e: e.update(extra=1), "unknown field 'extra'"),
    (lambda e: e.update(title="TODO"), "real text"),
    (lambda e: e.update(summary="two\nlines"), "real text"),
    (lambda e: e.update(words=3000), "from 1 to 2,600"),
    (lambda e: e.update(words=True), "from 1 to 2,600"),
    (lambda e: e.update(workshop=[]), "at least one block"),
    (lambda e: e["workshop"][0].update(session=3), "1, 2 or 'optional'"),
    (lambda e: e["workshop"][0].update(minutes=0), "whole number > 0"),
    (lambda e: e["workshop"][0].pop("part"), "exactly the fields"),
    (lambda e: e.pop("taught"), "no 'taught'"),
    (lambda e: e.update(taught=["TODO"]), "taught must be a list of distinct strings"),
    (lambda e: e.update(taught="fit("), "taught must be a list of distinct strings"),
    (lambda e: e.update(stacks=[]), "stacks must name at least one"),
    (lambda e: e.update(stacks=["colab"]), "stacks may name only pinned, hosted, kaggle, latest, nightly"),
    (lambda e: e.update(jax="yes"), "jax must be true or false"),
    (lambda e: e.update(slurm=["a.sbatch", "a.sbatch"]), "slurm must be a list of distinct strings"),
])
def test_an_incomplete_entry_is_refused(edit, words):
    entry = json.loads(json.dumps(GOOD))
    assert registry.entry_problems(entry) == []
    edit(entry)
    problems = registry.entry_problems(entry)
    assert any(words in p for p in problems), problems
    assert registry.entry_problems(None) == ["the notebook has no metadata.course entry (see tools/registry.py for "
                                             "its fields)"]


def _course(tmp_path: Path, blocks: dict[str, list]) -> Path:
    """A made-up repository: the real README, CONTRIBUTING, guide and data, and one notebook per entry."""
    root = tmp_path / "repo"
    for rel in ("README.md", "CONTRIBUTING.md", "docs/workshop.md", "docs/timings.json", "requirements-kaggle.txt"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, root / rel)
    (root / "notebooks").mkdir()
    (root / "helpers").mkdir()
    import nbtemplate  # tools/nbtemplate.py

    for name, workshop in blocks.items():
        nb = nbtemplate.new_notebook(f"notebooks/{name}", f"Title {name[:2]}", learn="x")
        nb["metadata"]["course"].update(summary=f"what {name[:2]} teaches", kaggle="Both GPUs.", taught=["fit("],
                                        dominates=f"work {name[:2]}", workshop=[
                                            {"session": s, "minutes": m, "part": p, "notes": f"notes {name[:2]}"}
                                            for s, m, p in workshop])
        nbtemplate.write(root / "notebooks" / name, nb)
    return root


def test_sessions_tables_follow_the_blocks_and_optional_blocks_stay_outside(tmp_path):
    root = _course(tmp_path, {
        "00_a.ipynb": [(1, 10, "the quick start"), (1, 20, "the rest")],
        "01_b.ipynb": [(1, 30, "")],
        "02_c.ipynb": [(1, 40, "(sections 1-2)"), (2, 45, "(the rest)")],
        "03_d.ipynb": [(2, 50, "")],
        "12_new.ipynb": [("optional", 30, "")],
    })
    assert generate.main(["--root", str(root)]) == 0
    assert generate.main(["--root", str(root), "--check"]) == 0 and generate.stale(root) == []
    guide = (root / "docs/workshop.md").read_text()
    session1 = guide.split("<!-- session1:begin")[1].split("<!-- session1:end")[0]
    assert "## Session 1 (3 hours): lessons 00 to 02" in session1     # a 3-hour slot: 5 + 10 + 20 + 30 + 10 + 40 + 5
    rows = [ln for ln in session1.splitlines() if ln.startswith(("| 0:", "| 1:", "| 2:"))]
    assert rows == [
        "| 0:00-0:05 | welcome, launch | " + generate.WELCOME[1] + " |",
        "| 0:05-0:15 | **00 Title 00**: the quick start | notes 00 |",
        "| 0:15-0:35 | **00 Title 00**: the rest | notes 00 |",
        "| 0:35-0:45 | break | |",                                    # 01 would end past half of 100 minutes
        "| 0:45-1:15 | **01 Title 01** | notes 01 |",
        "| 1:15-1:55 | **02 Title 02** (sections 1-2) | notes 02 |",
        "| 1:55-2:55 | slack | " + generate.SLACK[1] + " |",          # what the 120 minutes leave of 180
        "| 2:55-3:00 | wrap-up | homework: the remaining exercises |"]
    session2 = guide.split("<!-- session2:begin")[1].split("<!-- session2:end")[0]
    assert "## Session 2 (about 2 hours): lessons 02 to 03" in session2   # 45 + 10 + 50 + 5 = 110 minutes
    assert "| 0:45-0:55 | break | |" in session2 and "12" not in session2
    optional = guide.split("<!-- optional:begin")[1].split("<!-- optional:end")[0]
    assert "| 30 | **12 Title 12** | notes 12 |" in optional
    assert "lessons 00 to 02; **session 2 (about 2 hours)**: lessons 02 to 03; optional: lesson 12." in guide
    assert "| 12 Title 12 | not measured | not measured | not measured | work 12 |" in guide   # timing table
    words = sum(generate.wordcount.prose_words("".join(c["source"])) for c in json.loads(
        (root / "notebooks/12_new.ipynb").read_text())["cells"] if c["cell_type"] == "markdown")
    assert f"| 12 Title 12 | {words} | 1 min |" in guide.split("<!-- reading:begin")[1] and 10 < words < 180
    readme = (root / "README.md").read_text()
    assert "| 12 | [Title 12](notebooks/12_new.ipynb) | what 12 teaches |" in readme
    assert json.loads((root / "helpers/course_map.json").read_text())[-1] == {
        "number": "12", "notebook": "12_new.ipynb", "title": "Title 12", "summary": "what 12 teaches"}
    nb = json.loads((root / "notebooks/12_new.ipynb").read_text())
    assert "GPU T4 x2** before running. Both GPUs.\n" in "".join(nb["cells"][0]["source"])


def test_session_1_keeps_15_minutes_of_its_3_hours_unplanned(tmp_path, capsys):
    """165 minutes of rows leave exactly 15; one minute more stops the generator, saying what to shorten."""
    fits = {"00_a.ipynb": [(1, 70, "")], "01_b.ipynb": [(1, 75, "")]}     # 5 + 70 + 10 + 75 + 5 = 165
    root = _course(tmp_path / "fits", fits)
    assert generate.main(["--root", str(root)]) == 0
    assert "| 2:40-2:55 | slack |" in (root / "docs/workshop.md").read_text()
    root = _course(tmp_path / "full", {**fits, "01_b.ipynb": [(1, 76, "")]})
    assert generate.main(["--root", str(root)]) == 1
    assert "session 1's blocks and fixed rows take 166 of its 180 minutes: leave at least 15" in capsys.readouterr().err


def test_a_stale_file_is_named_and_sync_fixes_it(tmp_path, capsys):
    root = _course(tmp_path, {"00_a.ipynb": [(1, 10, "")]})
    assert generate.main(["--root", str(root)]) == 0
    path = root / "notebooks/00_a.ipynb"
    nb = json.loads(path.read_text())
    nb["metadata"]["course"]["summary"] = "a new summary"
    path.write_text(json.dumps(nb, indent=2))                        # and in another format
    capsys.readouterr()
    assert generate.main(["--root", str(root), "--check"]) == 1
    out = capsys.readouterr().out
    assert "README.md is stale" in out and "helpers/course_map.json is stale" in out and "00_a.ipynb is stale" in out
    assert generate.main(["--root", str(root)]) == 0 and generate.stale(root) == []
    assert "a new summary" in (root / "README.md").read_text()


def test_an_incomplete_entry_stops_the_generator_with_what_to_fill_in(tmp_path, capsys):
    root = _course(tmp_path, {"00_a.ipynb": [(1, 10, "")]})
    path = root / "notebooks/00_a.ipynb"
    nb = json.loads(path.read_text())
    nb["metadata"]["course"]["kaggle"] = "TODO"
    path.write_text(json.dumps(nb))
    assert generate.main(["--root", str(root)]) == 1
    assert "00_a.ipynb: metadata.course.kaggle must be one line of real text" in capsys.readouterr().err


def test_markers_are_required(tmp_path):
    with pytest.raises(ValueError, match="needs one pair of markers"):
        generate.replace_block("no markers", "lessons", "x", "README.md")


@pytest.mark.parametrize("minutes, words", [(30, "30 minutes"), (60, "1 hour"), (180, "3 hours"),
                                            (205, "about 3.5 hours"), (110, "about 2 hours")])
def test_durations(minutes, words):
    assert generate.duration(minutes) == words
