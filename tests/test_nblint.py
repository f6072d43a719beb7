"""tools/nblint.py: the course passes every rule, and each rule catches what it forbids."""

import json
import subprocess
import sys
from pathlib import Path

import nblint
import pytest

LESSON = Path("notebooks/03_some_lesson.ipynb")


def _nb(*cells):
    """A notebook from ("code"|"markdown", source) pairs; a bare string is a code cell."""
    cells = [("code", c) if isinstance(c, str) else c for c in cells]
    return {"cells": [{"cell_type": t, "source": s, "metadata": {}, "outputs": []} for t, s in cells]}


def _rule(name):
    [rule] = [r for r in nblint.RULES if r.name == name]
    return rule.check


def test_the_course_passes_every_rule():
    assert nblint.lint(sorted(nblint.NOTEBOOKS.glob("*.ipynb"))) == []


def test_cli_lists_runs_and_fails(capsys, monkeypatch):
    assert nblint.main(["--list"]) == 0 and "copy-box" in capsys.readouterr().out
    assert nblint.main(["--rule", "scripts"]) == 0
    real = nblint.taught_calls
    monkeypatch.setattr(nblint, "taught_calls", lambda nb: real(nb) + ["a_call_no_lesson_writes("])
    assert nblint.main(["--rule", "taught-calls"]) == 1
    assert "03_from_multi_gpu_model_to_mirrored_strategy.ipynb: taught-calls:" in capsys.readouterr().out


def test_numbering():
    check = _rule("numbering")
    assert check([Path("notebooks/00_a.ipynb"), Path("notebooks/01_b.ipynb")]) == []
    assert check([Path("notebooks/00_a.ipynb"), Path("notebooks/02_b.ipynb")])
    with pytest.raises(ValueError, match="NN_snake_case"):
        check([Path("notebooks/0_a.ipynb")])


@pytest.mark.parametrize("code, words", [
    ("m = keras.models.load_model(p, safe_mode=False)", "unsafe loading"),
    ("keras.config.enable_unsafe_deserialization()", "unsafe loading"),
    ("import sys; sys.path.insert(0, '..')", "sys.path"),
    ("s._collective" + "_key_base = 100", "collective key"),
])
def test_hygiene(code, words):
    assert _rule("hygiene")(_nb("x = 1"), LESSON) == []
    [problem] = _rule("hygiene")(_nb(code), LESSON)
    assert words in problem


def test_exercises():
    check = _rule("exercises")
    good = _nb(("markdown", "## Exercise 1\n"), 'helpers.exercises.check("03.1", f)',
               ("markdown", "## Exercise 2\n"), 'helpers.exercises.check("03.2", g)')
    assert check(good, LESSON) == []
    assert "two or three of each" in check(_nb(("markdown", "## Exercise 1\n"), 'helpers.exercises.check("03.1", f)'),
                                  LESSON)[0]
    three = _nb(("markdown", "## Exercise 1\n"), 'helpers.exercises.check("03.1", f)',
                ("markdown", "## Exercise 2\n"), 'helpers.exercises.check("03.2", g)',
                ("markdown", "## Exercise 3\n"), 'helpers.exercises.check("03.3", h)')
    assert check(three, LESSON) == []
    four = _nb(*[(c["cell_type"], c["source"]) for c in three["cells"]],
               ("markdown", "## Exercise 4\n"), 'helpers.exercises.check("03.4", k)')
    assert "4 '## Exercise N' headings and 4 checked exercises: a lesson has two or three" in check(four, LESSON)[0]
    unchecked = _nb(("markdown", "## Exercise 1\n"), 'helpers.exercises.check("03.1", f)',
                    ("markdown", "## Exercise 2\n"), "answer = ...")
    assert "2 '## Exercise N' headings and 1 checked exercises" in check(unchecked, LESSON)[0]
    wrong = _nb(("markdown", "## Exercise 1\n"), 'helpers.exercises.check("03.1", f)',
                ("markdown", "## Exercise 2\n"), 'helpers.exercises.check("04.2", g)')
    assert check(wrong, LESSON) == ["exercise 04.2 is checked in lesson 03"]


def _entry(nb, **fields):
    """``nb`` with a registry entry: the real lesson 03's, changed by ``fields``."""
    [path] = nblint.NOTEBOOKS.glob("03_*.ipynb")
    entry = {**json.loads(path.read_text(encoding="utf-8"))["metadata"]["course"], **fields}
    return {**nb, "metadata": {"course": entry}}


def test_taught_calls():
    check = _rule("taught-calls")
    taught = ["strategy.scope()", ".fit("]
    assert check(_entry(_nb("with strategy.scope():\n    m = f()", "m.fit(x)"), taught=taught), LESSON) == []
    assert check(_entry(_nb("m = helpers.train_in_scope()", "m.fit(x)"), taught=taught), LESSON) == [
        "the lesson teaches strategy.scope() but no cell writes it"]
    assert "taught is empty" in check(_entry(_nb("x"), taught=[]), Path("notebooks/99_new.ipynb"))[0]
    assert check(_entry(_nb("x"), taught=[]), Path("notebooks/00_start_here.ipynb")) == []


def test_the_registry_flags_say_what_the_cells_do():
    check = _rule("registry")
    tf_lesson = _nb('REPLICAS = helpers.setup_notebook(devices=2)', '%%writefile job.sbatch\nsrun python t.py')
    assert check(_entry(tf_lesson, jax=False, slurm=["job.sbatch"]), LESSON) == []
    assert check(_entry(tf_lesson, jax=True, slurm=[]), LESSON) == [
        "metadata.course.jax is true, but setup_notebook's backend is 'tensorflow'"]
    jax_lesson = _nb('REPLICAS = helpers.setup_notebook(backend="jax")')
    assert check(_entry(jax_lesson, jax=True, slurm=[]), LESSON) == []
    assert check(_entry(jax_lesson, jax=False, slurm=["job.sbatch"]), LESSON) == [
        "metadata.course.jax is false, but setup_notebook's backend is 'jax'",
        "metadata.course.slurm names job.sbatch, which no %%writefile cell writes"]


BOX = "## Copy this\n\n```python\nimport keras\nassert keras.__version__\n```\n"


@pytest.mark.parametrize("cells, words", [
    ([("markdown", BOX), ("markdown", "## Summary")], None),
    ([("markdown", "## Summary")], "found 0"),
    ([("markdown", "## Summary"), ("markdown", BOX)], "before the Summary"),
    ([("markdown", BOX.replace("import keras", "import helpers")), ("markdown", "## Summary")], "helpers"),
    ([("markdown", BOX.replace("assert", "print(")), ("markdown", "## Summary")], "assert"),
    ([("markdown", "## Copy this\n\nno code"), ("markdown", "## Summary")], "found 0"),
])
def test_copy_box(cells, words):
    problems = _rule("copy-box")(_nb(*cells), LESSON)
    assert (problems == []) if words is None else (len(problems) == 1 and words in problems[0]), problems
    assert _rule("copy-box")(_nb(*cells), Path("notebooks/02_x.ipynb")) == []       # before 03: no box


@pytest.mark.parametrize("cell, words", [
    ("%%writefile x.py\nprint(1)\n", None),
    ("%%writefile -a x.py\nprint(1)\n", "appends"),
    ("%%writefile x.py\nfrom helpers import data\n", "helpers"),
    ("%%writefile x.py\n" + "x = 1\n" * 61, "lines"),
])
def test_scripts(cell, words):
    problems = _rule("scripts")(_nb(cell), LESSON)
    assert (problems == []) if words is None else (len(problems) == 1 and words in problems[0]), problems


KERNEL = "strategy = tf.distribute.MirroredStrategy(REPLICAS)"


@pytest.mark.parametrize("sources", [
    (KERNEL,),
    (KERNEL, "one = tf.distribute.MirroredStrategy(devices=REPLICAS[:1])\nalso = tf.distribute.MirroredStrategy([d])",
     "c = tf.distribute.MirroredStrategy(REPLICAS, cross_device_ops=tf.distribute.ReductionToOneDevice())",
     "for n in (1, 2):\n    s = tf.distribute.MirroredStrategy(REPLICAS, cross_device_ops=ReductionToOneDevice())",
     "%%writefile worker.py\nimport tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()",
     "w = tf.distribute.MultiWorkerMirroredStrategy()\n!echo hello"),
    ("%%writefile {SCRATCH}/child.py\ndef f(s):\n    return s\nif __name__ == '__main__':\n"
     "    s = tf.distribute.MirroredStrategy(devices.ensure_devices(4))",
     "child = load_script(SCRATCH / 'child.py')", KERNEL),
])
def test_collective_accepts_notebooks_that_follow_the_policy(sources):
    assert _rule("collective")(_nb(*sources), LESSON) == []


@pytest.mark.parametrize("sources", [
    (KERNEL, "again = tf.distribute.MirroredStrategy(devices=REPLICAS)"),          # two default strategies
    (KERNEL, "%%time\nagain = tf.distribute.MirroredStrategy(REPLICAS)"),           # hidden in a cell magic
    ("for n in (1, 2):\n    s = tf.distribute.MirroredStrategy(REPLICAS[:n])",),      # one per loop turn
    ("def make():\n    return tf.distribute.MirroredStrategy(REPLICAS)",),             # one per call
    ("s = tf.distribute.MirroredStrategy()", KERNEL),                                  # every GPU + REPLICAS
    (KERNEL, "c = tf.distribute.MirroredStrategy(REPLICAS, cross_device_ops=tf.distribute.NcclAllReduce())"),
    ("%%writefile {SCRATCH}/child.py\nimport tensorflow as tf\ndef measure(devs):\n"
     "    return tf.distribute.MirroredStrategy(devs)", "child = load_script(SCRATCH / 'child.py')"),
    ("%%writefile helper_mod.py\nimport tensorflow as tf\nS = tf.distribute.MirroredStrategy(['/gpu:0', '/gpu:1'])",
     "import helper_mod", KERNEL),
])
def test_collective_catches_notebooks_that_break_the_policy(sources):
    [problem] = _rule("collective")(_nb(*sources), LESSON)
    assert "ReductionToOneDevice" in problem


def _stream(text, name="stderr"):
    return {"output_type": "stream", "name": name, "text": text}


def _result(text):
    return {"output_type": "execute_result", "data": {"text/plain": text}}


def test_output_noise():
    clean = [_stream("replicas: 2\n", "stdout"), _result("{'loss': 0.1}"), _stream("Falsetto\n", "stdout"),
             _stream("what TensorFlow said:\n  E0000 failed call to cuInit: UNKNOWN ERROR (303)\n", "stdout")]
    assert nblint.output_problems(clean, driver=False) == []
    noisy = [_stream("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"),
             _stream("E0000 cuda_platform.cc:52] failed call to cuInit: UNKNOWN ERROR (303)\n"),
             _result("False"), _result("None"), _result("<function f.<locals>.make_model(strategy)>")]
    problems = nblint.output_problems(noisy, driver=False)
    assert len(problems) == 5 and "absl::InitializeLog" in problems[0] and "Out[...]: False" in problems[2]
    assert nblint.output_problems([_stream("E0000 failed call to cuInit: CUDA_ERROR_NO_DEVICE\n")], driver=True) == []
    nb = _nb("x")
    nb["cells"][0]["outputs"] = [_result("None")]
    assert _rule("output-noise")(nb, LESSON) == ["cell 0: " + nblint.output_problems([_result("None")])[0]]


def test_words(tmp_path):
    import json

    (tmp_path / "00_a.ipynb").write_text(json.dumps(_nb(("markdown", "word " * 2601),
                                                        "with strategy.scope():\n    m = f()\nm.fit(x)")))
    problems = _rule("words")([tmp_path / "00_a.ipynb"])
    assert problems[0].startswith("00: 2601 words (budget 2600)")
    assert problems[-1].startswith("first multi-replica fit after 2601 words")


def test_format(tmp_path):
    import nbtemplate

    nb = nbtemplate.new_notebook("notebooks/03_some_lesson.ipynb", "Some lesson", learn="Things.")
    path = tmp_path / "03_some_lesson.ipynb"
    nbtemplate.write(path, nb)
    assert _rule("format")(nb, path) == []
    path.write_text(json.dumps(nb, indent=2))                       # a hand-written dump: another format
    [problem] = _rule("format")(nb, path)
    assert "not in the one notebook format" in problem and "make sync-notebooks" in problem


def test_registry():
    import nbtemplate

    nb = nbtemplate.new_notebook("notebooks/03_some_lesson.ipynb", "Some lesson")
    problems = _rule("registry")(nb, LESSON)                       # the template leaves TODOs to fill in
    assert problems and all("must be one line of real text" in p or "taught must be" in p for p in problems), problems
    nb["metadata"]["course"].update(summary="s", kaggle="k", dominates="d", taught=["strategy.scope("])
    nb["metadata"]["course"]["workshop"][0]["notes"] = "n"
    assert _rule("registry")(nb, LESSON) == []
    del nb["metadata"]["course"]
    assert "no metadata.course entry" in _rule("registry")(nb, LESSON)[0]


def test_the_learner_path_budgets_fail_lint(tmp_path):
    machinery = ("import helpers\nREPLICAS = helpers.setup_notebook()", "helpers.bench.run()",
                 "helpers.cluster.launch()", "helpers.memory_report.table()")
    (tmp_path / "03_some_lesson.ipynb").write_text(json.dumps(_nb("x = 1", *machinery)))
    [rule] = [r for r in nblint.RULES if r.name == "learner-path"]
    problems = nblint.lint([tmp_path / "03_some_lesson.ipynb"], [rule])
    assert any("3 of 3 visible code cells drive course machinery" in p for p in problems), problems


def test_magics_become_plain_python_without_ipython():
    source = "%time y = f()\nx = !ls\nif x:\n    !echo hi\nSplitModel??\nz = 1"
    assert nblint.as_python(source) == "pass\nx = None\nif x:\n    pass\npass\nz = 1"


def test_lint_needs_only_the_standard_library():
    """`make lint` runs nblint with any Python 3, without the course's environment: -S -I, no site-packages."""
    tool = Path(nblint.__file__)
    listed = subprocess.run([sys.executable, "-S", "-I", str(tool), "--list"], capture_output=True, text=True,
                            timeout=60)
    assert listed.returncode == 0 and "learner-path" in listed.stdout, listed.stderr
    full = subprocess.run([sys.executable, "-S", "-I", str(tool)], capture_output=True, text=True, timeout=120)
    assert full.returncode in (0, 1) and "nblint: " in full.stdout, full.stderr[-2000:]
    assert "Error" not in full.stderr, full.stderr[-2000:]
