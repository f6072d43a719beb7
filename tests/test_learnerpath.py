"""The learner's-path rule (tools/learnerpath.py): what counts as course machinery, collapsed or optional."""

from __future__ import annotations

import json

import learnerpath  # tools/learnerpath.py

SETUP = [("code", "# Setup 1/2\nimport os"), ("code", "import helpers\nREPLICAS = helpers.setup_notebook(devices=2)")]


def _lesson(tmp_path, cells, name="03_x.ipynb"):
    def cell(kind, source, hidden=False):
        meta = {"jupyter": {"source_hidden": True}, "tags": ["hide-input"]} if hidden else {}
        return {"cell_type": kind, "source": source, "metadata": meta}
    path = tmp_path / name
    path.write_text(json.dumps({"cells": [cell(*c) for c in SETUP + cells]}))
    return path


def test_learner_interfaces_do_not_count_and_machinery_does(tmp_path):
    path = _lesson(tmp_path, [
        ("code", "import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()"),
        ("code", "with helpers.expect_error(ValueError, match='x'):\n    f()"),
        ("code", "n = helpers.config.pick(quick=1, full=2)\nhelpers.exercises.check('03.1', n)"),
        ("code", "from helpers import bench\nreport = bench.run()"),
        ("code", "print(report)"),                   # made by a helper: still the course's machinery
        ("code", "s = tf.distribute.MirroredStrategy(REPLICAS)"),   # the Setup's devices: machinery
    ])
    fig = learnerpath.lesson_figures(path)
    assert (fig["cells"], fig["visible"], fig["machinery"]) == (6, 6, 3)
    assert [i for i, _ in fig["machinery_cells"]] == [5, 6, 7]
    assert fig["visible_lines"] == 10


def test_collapsed_and_how_we_know_cells_leave_the_path(tmp_path):
    path = _lesson(tmp_path, [
        ("code", "helpers.bench.run()", True),                 # collapsed: runs, but folded
        ("markdown", "## Summary"),
        ("code", "x = 1"),
        ("markdown", "## How we know\n\nThe proofs."),
        ("code", "helpers.cluster.run()"),
        ("markdown", "### A subsection stays optional"),
        ("code", "helpers.cluster.run()"),
        ("markdown", "## Exercise 1"),
        ("code", "helpers.gpus.sample()"),                     # back on the path
    ])
    fig = learnerpath.lesson_figures(path)
    assert (fig["collapsed"], fig["optional"], fig["visible"], fig["machinery"]) == (1, 2, 2, 1)


def test_a_collapsed_cell_needs_both_marks(tmp_path):
    path = _lesson(tmp_path, [("code", "helpers.bench.run()")])
    nb = json.loads(path.read_text())
    nb["cells"][-1]["metadata"] = {"jupyter": {"source_hidden": True}}      # JupyterLab folds it, the site not
    path.write_text(json.dumps(nb))
    assert learnerpath.lesson_figures(path)["collapsed"] == 0


def test_budgets_are_reported(tmp_path):
    path = _lesson(tmp_path, [("code", "helpers.bench.run()", True)] + [("code", "helpers.bench.run()")] * 2)
    over = learnerpath.report([path])["over_budget"]
    assert any("drive course machinery" in line for line in over)
    assert any("collapsed" in line for line in over)
    clean = _lesson(tmp_path, [("code", "import keras")] * 3, name="04_y.ipynb")
    assert learnerpath.report([clean])["over_budget"] == []


def test_visible_lines_have_a_course_and_a_lesson_budget(tmp_path):
    long_cell = "\n".join(f"x{i} = {i}" for i in range(learnerpath.LESSON_VISIBLE_LINES + 1))
    over = learnerpath.report([_lesson(tmp_path, [("code", long_cell)])])["over_budget"]
    assert over == [f"03: {learnerpath.LESSON_VISIBLE_LINES + 1} visible code lines (budget 200)"]
    budget = learnerpath.VISIBLE_LINES
    per, extra = divmod(budget, 12)                   # 00-11 together exactly at the budget; 12 apart
    paths = [_lesson(tmp_path, [("code", "\n".join(f"y{i} = {i}" for i in range(per + (n < extra))))],
                     name=f"{n:02d}_l.ipynb") for n in range(13)]
    assert learnerpath.report(paths)["over_budget"] == []
    paths[11] = _lesson(tmp_path, [("code", "\n".join(f"y{i} = {i}" for i in range(per + 1)))], name="11_l.ipynb")
    assert learnerpath.report(paths)["over_budget"] == [f"lessons 00-11: {budget + 1:,d} visible code lines "
                                                        f"(budget {budget:,d})"]


def test_plumbing_launches_parses_or_only_checks():
    """The rule's three kinds, and look-alikes that are not plumbing."""
    cases = {
        "import subprocess\nrun = subprocess.run(['nvidia-smi'], capture_output=True)": ["launches"],
        "from subprocess import Popen as P\np = P(['python', 'w.py'])": ["launches"],
        "job = helpers.cluster.run(['w.py'], n_workers=2)": ["launches"],
        "!nvidia-smi -L": ["launches"],
        "%%bash\ntorchrun --nproc_per_node=2 train.py": ["launches"],
        "hlo = step.lower(x).compile().as_text()\nops = re.findall(r'all-reduce', hlo)": ["parses"],
        "last = log.splitlines()[-1]\nprint(last)": ["parses"],
        "reports = [json.loads(p.read_text()) for p in files]": ["parses"],
        "assert a == b\nnp.testing.assert_allclose(x, y)\nfor v in vs:\n    assert v > 0": ["only checks"],
        "out = subprocess.run(cmd).stdout\nassert 'ok' in out.splitlines()": ["launches", "parses"],
        # not plumbing:
        "result = strategy.run(step, args=(x,))": [],             # a replica step, not a process
        "%%writefile x.py\nimport subprocess\nsubprocess.run(['ls'])": [],   # a script the lesson writes
        "hist = model.fit(x, y, verbose=2)\nassert hist.history['loss'][-1] < 1": [],   # computes: learner code
        "print(x)\nassert x": [],                                  # shows something
        "if 'ok' in text:\n    print('fine')": [],
    }
    for source, why in cases.items():
        assert learnerpath.plumbing(source, learnerpath._python(source)) == why, source


def test_plumbing_is_its_own_column_of_visible_cells(tmp_path):
    path = _lesson(tmp_path, [
        ("code", "import subprocess\nsubprocess.run(['ls'])"),               # visible: counted
        ("code", "assert 1 + 1 == 2"),                                       # visible: counted
        ("code", "subprocess.run(['ls'])", True),                            # collapsed: off the path
        ("code", "x = helpers.subproc.run_python('print(1)')"),             # machinery too: both columns
        ("markdown", "## How we know"),
        ("code", "assert 2 + 2 == 4"),                                       # optional: off the path
    ])
    fig = learnerpath.lesson_figures(path)
    assert (fig["visible"], fig["plumbing"], fig["machinery"]) == (3, 3, 1)
    assert [i for i, _ in fig["plumbing_cells"]] == [2, 3, 5]
    rep = learnerpath.report([path])
    assert rep["total"]["plumbing"] == 3 and rep["over_budget"] == []      # a column, not a budget
    assert "| launch, parse, only check |" in learnerpath.table(rep) and "| 3 (100%) |" in learnerpath.table(rep)
