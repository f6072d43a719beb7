"""Measured timings: the workshop table is the rendering of docs/timings.json and covers every notebook;
the quick-mode budgets of tools/pytest_course.py fail a run over twice the budget.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_course as root_conftest  # tools/pytest_course.py (the root conftest loads it)
import timings  # tools/timings.py

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = timings.notebook_names()


# ---- the committed table and data --------------------------------------------------------------

def test_workshop_table_is_the_rendering_of_the_data():
    guide = (ROOT / "docs" / "workshop.md").read_text()
    assert timings.table_block(guide) == timings.render(timings.load(), NOTEBOOKS), \
        "docs/workshop.md's timing table is stale: run `python tools/timings.py render`"


def test_timing_data_covers_every_notebook():
    """Every notebook in notebooks/ (new lessons included) needs measured 2-core and 1-core data."""
    found = timings.problems(timings.load(), NOTEBOOKS)
    assert not found, "docs/timings.json:\n" + "\n".join(found)


# ---- rendering and checking, on made-up data ---------------------------------------------------

STACK = {"tensorflow": "2.21.0", "keras": "3.15.1", "jax": "0.10.2"}


def _data(names, peak=700.0):
    def run(**kw):
        return dict(date="2026-01-02", machine="test box", python="3.11.7", packages=dict(STACK), **kw)
    return {"lessons": {n: {"title": f"Title {n[:2]}", "dominates": f"work {n[:2]}"} for n in names},
            "two_core": run(command="make notebooks", notebooks={n: {"seconds": 20.4} for n in names}),
            "one_core": run(command="tools/memcheck.py --one-core",
                             notebooks={n: {"seconds": 30.6, "peak_mib": peak, "peak_procs": 2} for n in names})}


def test_render_rows_totals_and_caption():
    names = ["00_a.ipynb", "01_b.ipynb", "02_c.ipynb"]
    block = timings.render(_data(names), names)
    lines = block.splitlines()
    assert lines[0] == timings.BEGIN and lines[-1] == timings.END
    assert "| 00 Title 00 | 20 s | 31 s | 700 MiB | work 00 |" in lines
    assert "| **all three** | **61 s** | **92 s** | **at most 700 MiB** | |" in lines
    assert "Measured on test box, 2026-01-02; TensorFlow 2.21.0, Keras 3.15.1, JAX 0.10.2, Python 3.11.7." in block
    many = [f"{i:02d}_x.ipynb" for i in range(8)]
    assert "| **all eight** | **about 3 minutes** | **about 4 minutes** |" in timings.render(_data(many), many)


def test_a_new_lesson_needs_a_row_and_data():
    names = ["00_a.ipynb", "01_b.ipynb"]
    data = _data(names)
    assert timings.problems(data, names) == []
    with_new = names + ["09_when_it_goes_wrong.ipynb"]
    block = timings.render(data, with_new)
    assert "| 09 When it goes wrong | not measured | not measured | not measured |  |" in block
    assert "| **all three** | not all measured yet |" in block
    found = timings.problems(data, with_new)
    assert len(found) == 3 and all("09_when_it_goes_wrong.ipynb" in f for f in found)
    assert "no title" in found[2]
    # ...and data for a notebook that was removed is stale
    assert timings.problems(data, names[:1]) == [
        "2-core `make notebooks` times for notebooks that no longer exist: 01_b.ipynb",
        "one-core memcheck for notebooks that no longer exist: 01_b.ipynb"]


def test_problems_mixed_stacks_and_memory_over_binder():
    names = ["00_a.ipynb"]
    data = _data(names, peak=2100.0)
    data["one_core"]["packages"]["keras"] = "3.13.2"
    found = timings.problems(data, names)
    assert any("different stacks" in f for f in found)
    assert "00_a.ipynb: peak 2100 MiB is over Binder's 2048 MiB" in found


def test_replace_block_and_missing_markers():
    guide = f"intro\n{timings.BEGIN}\nold\n{timings.END}\noutro\n"
    new = f"{timings.BEGIN}\nnew\n{timings.END}"
    assert timings.replace_block(guide, new) == f"intro\n{new}\noutro\n"
    with pytest.raises(ValueError, match="has no"):
        timings.table_block("no markers here")


def _nb_times(**over):
    raw = {"mode": "quick", "python": "3.11.7", "packages": dict(STACK), "cpus": 2,
           "notebooks": {"00_a.ipynb": {"seconds": 12.3, "budget_s": 45.0, "verdict": "ok"}}}
    raw.update(over)
    return raw


def _memcheck(**over):
    raw = {"date": "2026-01-03T10:00:00Z", "mode": "quick", "python": "3.11.7", "packages": dict(STACK),
           "one_core": True, "notebooks": {"00_a.ipynb": {"peak_mib": 800.5, "peak_procs": 3, "seconds": 40.2,
                                                           "ok": True, "error": "", "samples": 200}}}
    raw.update(over)
    return raw


def test_record_both_runs():
    data = timings.record_tests({}, _nb_times(), "box", date="2026-01-03")
    data = timings.record_memcheck(data, _memcheck(), "box")
    assert data["two_core"]["notebooks"] == {"00_a.ipynb": {"seconds": 12.3}}
    assert data["two_core"]["date"] == "2026-01-03" and data["two_core"]["command"] == "make notebooks"
    assert data["one_core"]["notebooks"] == {"00_a.ipynb": {"seconds": 40.2, "peak_mib": 800.5, "peak_procs": 3}}
    assert data["one_core"]["date"] == "2026-01-03" and data["one_core"]["machine"] == "box"


def test_record_refuses_runs_that_do_not_belong_in_the_table():
    with pytest.raises(ValueError, match="full"):
        timings.record_tests({}, _nb_times(mode="full"), "box")
    failed = _nb_times(notebooks={"00_a.ipynb": {"seconds": 99.0, "verdict": "FAILED: over 2x budget"}})
    with pytest.raises(ValueError, match="failed in this run.*00_a"):
        timings.record_tests({}, failed, "box")
    with pytest.raises(ValueError, match="--one-core"):
        timings.record_memcheck({}, _memcheck(one_core=False), "box")
    bad = _memcheck(notebooks={"00_a.ipynb": {"peak_mib": 1.0, "peak_procs": 1, "seconds": 1.0, "ok": False}})
    with pytest.raises(ValueError, match="failed in this run"):
        timings.record_memcheck({}, bad, "box")


def test_check_command_fails_on_a_stale_table(tmp_path, monkeypatch):
    names = ["00_a.ipynb"]
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / names[0]).write_text("{}")
    data_path, guide_path = tmp_path / "timings.json", tmp_path / "workshop.md"
    timings.save(_data(names), data_path)
    guide_path.write_text(f"# guide\n{timings.BEGIN}\n{timings.END}\n")
    monkeypatch.setattr(timings, "ROOT", tmp_path)
    monkeypatch.setattr(timings, "DATA", data_path)
    monkeypatch.setattr(timings, "GUIDE", guide_path)
    assert timings.main(["check"]) == 1                     # the empty block is not the rendering
    assert timings.main(["render"]) == 0
    assert timings.main(["check"]) == 0
    assert "| 00 Title 00 | 20 s | 31 s | 700 MiB | work 00 |" in guide_path.read_text()
    timings.main(["record", "--tests", str(_write(tmp_path / "t.json", _nb_times(
        notebooks={"00_a.ipynb": {"seconds": 50.0, "verdict": "over budget"}}))), "--machine", "box"])
    assert timings.main(["check"]) == 1                     # new data, old table


def _write(path, obj):
    path.write_text(json.dumps(obj))
    return path


# ---- budgets (tools/pytest_course.py) -----------------------------------------------------------------

def test_every_notebook_has_the_same_quick_budget_and_none_in_full_mode():
    assert root_conftest.BUDGET_S == float(os.environ.get("NB_BUDGET_S", "45"))
    assert {root_conftest.budget(f"notebooks/{n}", "quick") for n in NOTEBOOKS} == {root_conftest.BUDGET_S}
    assert root_conftest.budget("notebooks/07_x.ipynb", "full") is None


def test_verdicts():
    v = root_conftest.verdict
    assert v(30, 45) == "ok" and v(45, 45) == "ok"
    assert v(45.1, 45) == "over budget" and v(90, 45) == "over budget"
    assert v(90.1, 45) == "FAILED: over 2x budget"
    assert v(10, 45, failed=True) == "FAILED"
    assert v(1000, None) == "ok"                            # full mode: no budget
    with pytest.raises(ValueError, match="secs must be >= 0"):
        v(-1, 45)
    times = {"notebooks/00_a.ipynb": 50.0, "notebooks/01_b.ipynb": 91.0, "notebooks/02_c.ipynb": 10.0}
    assert root_conftest.budget_failures(times, "quick") == ["notebooks/01_b.ipynb"]
    assert root_conftest.budget_failures(times, "full") == []
    record = root_conftest.times_record(times, {"notebooks/02_c.ipynb"}, "quick")
    assert record["notebooks"]["01_b.ipynb"] == {"seconds": 91.0, "budget_s": 45.0,
                                                 "verdict": "FAILED: over 2x budget"}
    assert record["notebooks"]["02_c.ipynb"]["verdict"] == "FAILED"
    assert record["mode"] == "quick" and "tensorflow" in record["packages"]


# Fake notebooks for a real pytest session under the root conftest.py: each *.ipynb file is one item
# that sleeps for the number of seconds written in it.
FAKE_NOTEBOOKS = '''

class _FakeNotebook(pytest.File):
    def collect(self):
        yield _FakeCell.from_parent(self, name="Cell 0")


class _FakeCell(pytest.Item):
    def runtest(self):
        import time
        time.sleep(float(self.path.read_text()))


def pytest_collect_file(file_path, parent):
    if file_path.suffix == ".ipynb":
        return _FakeNotebook.from_parent(parent, path=file_path)
'''


def _session(tmp_path, files, **env):
    (tmp_path / "conftest.py").write_text(f"import sys\nimport pytest\nsys.path.insert(0, {str(ROOT / 'tools')!r})\n"
                                          f"pytest_plugins = ['pytest_course']\n{FAKE_NOTEBOOKS}")
    for name, secs in files.items():
        (tmp_path / name).write_text(str(secs))
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *files],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                          env={**os.environ, "NB_BUDGET_S": "1", "MULTIGPU_MODE": "quick", **env})


@pytest.mark.slow
def test_a_notebook_over_twice_its_budget_fails_the_run(tmp_path):
    out = tmp_path / "out" / "times.json"
    result = _session(tmp_path, {"00_fast.ipynb": 0, "01_slow.ipynb": 1.4, "02_slower.ipynb": 2.4},
                      NB_TIMES_JSON=str(out))
    assert result.returncode == 1, result.stdout
    assert "3 passed" in result.stdout                      # every cell passed: the time alone fails it
    assert "FAILED: over 2x the 1 s budget: 02_slower.ipynb" in result.stdout
    lines = {ln.split()[0]: ln for ln in result.stdout.splitlines() if ".ipynb " in ln}
    assert lines["00_fast.ipynb"].endswith(" ok") and lines["01_slow.ipynb"].endswith(" over budget")
    assert lines["02_slower.ipynb"].endswith("FAILED: over 2x budget")
    written = json.loads(out.read_text())["notebooks"]
    assert written["01_slow.ipynb"]["verdict"] == "over budget"
    assert written["02_slower.ipynb"]["seconds"] >= 2.4


@pytest.mark.slow
def test_over_budget_alone_passes_and_full_mode_has_no_budget(tmp_path):
    result = _session(tmp_path, {"00_fast.ipynb": 0, "01_slow.ipynb": 1.4})
    assert result.returncode == 0, result.stdout
    assert "over budget" in result.stdout and "FAILED" not in result.stdout
    result = _session(tmp_path, {"02_slower.ipynb": 2.4}, MULTIGPU_MODE="full")
    assert result.returncode == 0, result.stdout
    assert "no budget in full mode" in result.stdout
