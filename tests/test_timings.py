"""Measured timings: docs/timings.json covers every notebook and renders the workshop table (tools/generate.py
writes it; tests/test_registry.py fails when it is stale); the quick-mode budgets of tools/pytest_course.py fail a
run over twice the budget; the plugin starts kernels as a learner's and leaves executed copies.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_course as root_conftest  # tools/pytest_course.py (the root conftest loads it)
import registry  # tools/registry.py
import timings  # tools/timings.py

pytestmark = pytest.mark.one_stack(reason="the plugin's timing logic; every lesson's time is checked on both stacks")


ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = timings.notebook_names()


# ---- the committed table and data --------------------------------------------------------------

def test_timing_data_covers_every_notebook():
    """Every notebook in notebooks/ (new lessons included) needs measured 2-core and 1-core data."""
    found = timings.problems(timings.load(), NOTEBOOKS)
    assert not found, "docs/timings.json:\n" + "\n".join(found)


# ---- rendering and checking, on made-up data ---------------------------------------------------

STACK = {"tensorflow": "2.21.0", "keras": "3.15.1", "jax": "0.10.2"}


def _lessons(names):
    return [registry.Lesson(number=n[:2], path=f"notebooks/{n}", title=f"Title {n[:2]}", summary="s", kaggle="k",
                            words=100, dominates=f"work {n[:2]}", workshop=()) for n in names]


def _data(names, peak=700.0):
    def run(**kw):
        return dict(date="2026-01-02", machine="test box", python="3.11.7", packages=dict(STACK), **kw)
    return {"two_core": run(command="make notebooks", notebooks={n: {"seconds": 20.4} for n in names}),
            "one_core": run(command="tools/memcheck.py --one-core",
                             notebooks={n: {"seconds": 30.6, "peak_mib": peak, "peak_procs": 2} for n in names})}


def test_render_rows_totals_and_caption():
    names = ["00_a.ipynb", "01_b.ipynb", "02_c.ipynb"]
    block = timings.render(_data(names), _lessons(names))
    lines = block.splitlines()
    assert "| 00 Title 00 | 20 s | 31 s | 700 MiB | work 00 |" in lines
    assert "| **all three** | **61 s** | **92 s** | **at most 700 MiB** | |" in lines
    assert "Measured on test box, 2026-01-02; TensorFlow 2.21.0, Keras 3.15.1, JAX 0.10.2, Python 3.11.7." in block
    many = [f"{i:02d}_x.ipynb" for i in range(8)]
    assert "| **all eight** | **about 3 minutes** | **about 4 minutes** |" in timings.render(_data(many), _lessons(many))


def test_a_new_lesson_needs_a_row_and_data():
    names = ["00_a.ipynb", "01_b.ipynb"]
    data = _data(names)
    assert timings.problems(data, names) == []
    with_new = names + ["09_when_it_goes_wrong.ipynb"]
    block = timings.render(data, _lessons(with_new))
    assert "| 09 Title 09 | not measured | not measured | not measured | work 09 |" in block
    assert "| **all three** | not all measured yet |" in block
    found = timings.problems(data, with_new)
    assert len(found) == 2 and all("09_when_it_goes_wrong.ipynb" in f for f in found)
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


def test_one_lesson_is_added_to_the_recorded_runs():
    """`make timings LESSON=NN`: the new lesson's times join the others', on the same stack only."""
    data = timings.record_tests({}, _nb_times(), "box", date="2026-01-03")
    data = timings.record_memcheck(data, _memcheck(), "box")
    new = {"01_b.ipynb": {"seconds": 20.0, "budget_s": 45.0, "verdict": "ok"}}
    data = timings.record_tests(data, _nb_times(notebooks=new), "other box", date="2026-02-01", merge=True)
    mem = {"01_b.ipynb": {"peak_mib": 900.0, "peak_procs": 2, "seconds": 33.0, "ok": True}}
    data = timings.record_memcheck(data, _memcheck(notebooks=mem, date="2026-02-01T10:00:00Z"), "x", merge=True)
    assert data["two_core"]["notebooks"] == {"00_a.ipynb": {"seconds": 12.3},
                                             "01_b.ipynb": {"seconds": 20.0, "date": "2026-02-01"}}
    assert data["two_core"]["machine"] == "box" and data["two_core"]["date"] == "2026-01-03"
    assert data["one_core"]["notebooks"]["01_b.ipynb"]["peak_mib"] == 900.0
    assert timings.problems(data, ["00_a.ipynb", "01_b.ipynb"]) == []
    other = _nb_times(notebooks=new, packages={**STACK, "keras": "3.13.2"})
    with pytest.raises(ValueError, match="re-measure every lesson"):
        timings.record_tests(data, other, "box", merge=True)
    with pytest.raises(ValueError, match="no earlier two_core run"):
        timings.record_tests({}, _nb_times(), "box", merge=True)


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


def test_check_command_fails_when_a_notebook_has_no_data(tmp_path, monkeypatch):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "00_a.ipynb").write_text("{}")
    data_path = tmp_path / "timings.json"
    timings.save(_data(["00_a.ipynb"]), data_path)
    monkeypatch.setattr(timings, "ROOT", tmp_path)
    monkeypatch.setattr(timings, "DATA", data_path)
    assert timings.main(["check"]) == 0
    (tmp_path / "notebooks" / "01_b.ipynb").write_text("{}")     # a new lesson, not measured yet
    assert timings.main(["check"]) == 1
    timings.main(["record", "--tests", str(_write(tmp_path / "t.json", _nb_times(
        notebooks={n: {"seconds": 5.0, "verdict": "ok"} for n in ("00_a.ipynb", "01_b.ipynb")}))), "--machine", "box"])
    assert timings.load(data_path)["two_core"]["notebooks"]["01_b.ipynb"] == {"seconds": 5.0}


def _write(path, obj):
    path.write_text(json.dumps(obj))
    return path


# ---- budgets (tools/pytest_course.py) -----------------------------------------------------------------

def test_every_notebook_has_the_same_quick_budget_and_none_in_full_mode():
    assert root_conftest.BUDGET_S == float(os.environ.get("NB_BUDGET_S", "40"))
    assert {root_conftest.budget(f"notebooks/{n}", "quick") for n in NOTEBOOKS} == {root_conftest.BUDGET_S}
    assert root_conftest.budget("notebooks/07_x.ipynb", "full") is None


def test_verdicts():
    v = root_conftest.verdict
    assert v(30, 45) == "ok" and v(45, 45) == "ok"
    assert v(45.1, 45) == "over budget" and v(90, 45) == "over budget"
    assert v(90.1, 45) == "FAILED: over 2x budget"
    assert v(10, 45, failed=True) == "FAILED"
    assert v(1000, None) == "ok"                            # full mode: no budget
    with pytest.raises(ValueError, match="secs and cpu must be >= 0"):
        v(-1, 45)
    # cores shared (--shared-cores): over 2x in wall time fails only when over 2x in CPU seconds too
    assert v(90.1, 45, cpu=90.5) == "FAILED: over 2x budget" and v(30, 45, cpu=200) == "ok"
    assert v(90.1, 45, cpu=90) == "over budget (over 2x in wall time only, 90 CPU seconds: the cores were shared)"
    assert v(90.1, 45, failed=True, cpu=1) == "FAILED"
    with pytest.raises(ValueError, match="secs and cpu must be >= 0"):
        v(1, 45, cpu=-1)
    times = {"notebooks/00_a.ipynb": 50.0, "notebooks/01_b.ipynb": 91.0, "notebooks/02_c.ipynb": 10.0}
    assert root_conftest.budget_failures(times, "quick") == ["notebooks/01_b.ipynb"]
    assert root_conftest.budget_failures(times, "full") == []
    busy, waited = {"notebooks/01_b.ipynb": 85.0}, {"notebooks/01_b.ipynb": 30.0}
    assert root_conftest.budget_failures(times, "quick", busy) == ["notebooks/01_b.ipynb"]
    assert root_conftest.budget_failures(times, "quick", waited) == []
    record = root_conftest.times_record(times, {"notebooks/02_c.ipynb"}, "quick")
    assert record["notebooks"]["01_b.ipynb"] == {"seconds": 91.0, "budget_s": root_conftest.BUDGET_S,
                                                 "cpu_seconds": None, "verdict": "FAILED: over 2x budget"}
    shared = root_conftest.times_record(times, set(), "quick", waited, judged=True)["notebooks"]["01_b.ipynb"]
    assert shared["cpu_seconds"] == 30.0 and shared["verdict"].startswith("over budget (over 2x in wall time only")
    assert root_conftest.times_record(times, set(), "quick", waited)["notebooks"]["01_b.ipynb"]["verdict"] == \
        "FAILED: over 2x budget"                            # measured, but not judged: the session had the cores
    assert record["notebooks"]["02_c.ipynb"]["verdict"] == "FAILED"
    assert record["mode"] == "quick" and "tensorflow" in record["packages"]


# Fake notebooks for a real pytest session under the root conftest.py: each *.ipynb file is one item
# that sleeps for the number of seconds written in it.
FAKE_NOTEBOOKS = '''

class _FakeNotebook(pytest.File):
    def collect(self):
        yield _FakeCell.from_parent(self, name="Cell 0")


class _FakeCell(pytest.Item):
    def runtest(self):      # 2.4: waits 2.4 s; {"cpu": 2.4}: computes for 2.4 CPU seconds
        import json
        import time
        secs = json.loads(self.path.read_text())
        if isinstance(secs, dict):
            start = time.process_time()
            while time.process_time() - start < secs["cpu"]:
                pass
        else:
            time.sleep(secs)


def pytest_collect_file(file_path, parent):
    if file_path.suffix == ".ipynb":
        return _FakeNotebook.from_parent(parent, path=file_path)
'''


def _session(tmp_path, files, **env):
    (tmp_path / "conftest.py").write_text(f"import sys\nimport pytest\nsys.path.insert(0, {str(ROOT / 'tools')!r})\n"
                                          f"pytest_plugins = ['pytest_course']\n{FAKE_NOTEBOOKS}")
    for name, secs in files.items():    # JSON, as tools/pytest_course.py reads a notebook's registry entry
        (tmp_path / name).write_text(json.dumps(secs))
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


@pytest.mark.slow
def test_with_shared_cores_a_notebook_that_waited_passes_and_one_that_computed_fails(tmp_path):
    """--shared-cores (CI's lesson sessions, beside others): over twice the budget in wall time fails only with
    the CPU seconds over twice too. A notebook that waits 2.4 s has the wall time of one slowed by a shared core:
    it passes there, and fails alone, where waiting is the lesson's own slowness."""
    out = tmp_path / "times.json"
    files = {"00_waits.ipynb": 2.4, "01_computes.ipynb": {"cpu": 2.4}}
    shared = _session(tmp_path, files, NB_TIMES_JSON=str(out), PYTEST_ADDOPTS="--shared-cores")
    assert shared.returncode == 1, shared.stdout
    assert "FAILED: over 2x the 1 s budget in wall time and in CPU seconds: 01_computes.ipynb" in shared.stdout
    lines = {ln.split()[0]: ln for ln in shared.stdout.splitlines() if ".ipynb " in ln}
    assert "over budget (over 2x in wall time only, 0 CPU seconds" in lines["00_waits.ipynb"], shared.stdout
    assert lines["01_computes.ipynb"].endswith("FAILED: over 2x budget")
    written = json.loads(out.read_text())["notebooks"]
    assert written["00_waits.ipynb"]["cpu_seconds"] < 0.5 <= 2.3 < written["01_computes.ipynb"]["cpu_seconds"]
    alone = _session(tmp_path, {"00_waits.ipynb": 2.4})
    assert alone.returncode == 1 and "FAILED: over 2x the 1 s budget: 00_waits.ipynb" in alone.stdout, alone.stdout


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="/proc (Linux) is where the CPU seconds are read")
def test_process_cpu_seconds_counts_threads_and_the_children_waited_for():
    me = os.getpid()
    start = root_conftest.process_cpu_seconds(me)
    subprocess.run([sys.executable, "-c", "import time\nt = time.process_time()\n"
                    "while time.process_time() - t < 1.0: pass"], check=True, timeout=60)
    assert root_conftest.process_cpu_seconds(me) - start >= 0.9          # the child's second, once waited for
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert root_conftest.process_cpu_seconds(gone.pid) is None
    with pytest.raises(ValueError, match="pid must be a positive process id"):
        root_conftest.process_cpu_seconds(0)


# ---- a learner's kernel and the executed copies (tools/pytest_course.py), through real nbval -----------------

@pytest.mark.slow
def test_kernels_start_as_a_learners_and_passing_notebooks_leave_executed_copies(tmp_path):
    """A unit test sets MPLBACKEND=Agg in the session (as tests/conftest.py does): the notebook's kernel must not
    see it, so its figure is drawn into the copy; a setting the session started with (MULTIGPU_JAX_DEVICES=2, as
    make test STACK=hosted gives it) reaches the kernel though the unit tests drop it; a failing notebook leaves no
    copy, and removes an older one; the notebook's CPU seconds are its kernel's, with the children it waited for."""
    import nbformat
    import nbtemplate  # tools/nbtemplate.py

    (tmp_path / "conftest.py").write_text(f"import sys\nsys.path.insert(0, {str(ROOT / 'tools')!r})\n"
                                          "pytest_plugins = ['pytest_course']\n")
    (tmp_path / "test_sets_env.py").write_text("import os\nos.environ['MPLBACKEND'] = 'Agg'\n"
                                               "os.environ.pop('MULTIGPU_JAX_DEVICES')\n\n"
                                               "def test_nothing():\n    pass\n")
    good = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# A lesson"),
        nbformat.v4.new_code_cell("import os\nprint('backend:', os.environ.get('MPLBACKEND'), "
                                  "os.environ.get('MULTIGPU_JAX_DEVICES'))"),
        nbformat.v4.new_code_cell("import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()"),
        nbformat.v4.new_code_cell("import subprocess, sys, time\nt = time.process_time()\n"     # the kernel's CPU
                                  "while time.process_time() - t < 1.0: pass\n"                 # and its child's
                                  "subprocess.run([sys.executable, '-c', 'import time\\nt = time.process_time()"
                                  "\\nwhile time.process_time() - t < 1.0: pass'], check=True)")])
    bad = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("assert False, 'this lesson fails'")])
    nbformat.write(good, tmp_path / "00_good.ipynb")
    nbformat.write(bad, tmp_path / "01_bad.ipynb")
    copies = tmp_path / "executed"
    copies.mkdir()
    (copies / "01_bad.ipynb").write_text("an old copy")
    env = {k: v for k, v in os.environ.items() if k not in ("MPLBACKEND", "PYTEST_ADDOPTS")}
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_sets_env.py",
                             "00_good.ipynb", "01_bad.ipynb", "--nbval-lax", "--nbval-current-env"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
                            env={**env, "NB_EXECUTED_DIR": str(copies), "MULTIGPU_JAX_DEVICES": "2",
                                 "NB_BUDGET_S": "600", "NB_TIMES_JSON": str(tmp_path / "times.json")})
    assert result.returncode == 1 and "1 failed" in result.stdout, result.stdout[-3000:]
    assert sorted(p.name for p in copies.iterdir()) == ["00_good.ipynb"]
    text = (copies / "00_good.ipynb").read_text()
    assert nbtemplate.format_problems(text) == []
    cells = [c for c in json.loads(text)["cells"] if c["cell_type"] == "code"]
    assert [c["execution_count"] for c in cells] == [1, 2, 3]
    cpu = json.loads((tmp_path / "times.json").read_text())["notebooks"]["00_good.ipynb"]["cpu_seconds"]
    assert cpu >= 1.9, f"the kernel's CPU seconds (its own and its child's, 2 s in all): {cpu}"
    said = "".join(cells[0]["outputs"][0]["text"])
    assert said.startswith("backend: ") and "Agg" not in said and said.endswith(" 2\n"), said
    assert any("image/png" in o.get("data", {}) for o in cells[1]["outputs"])
