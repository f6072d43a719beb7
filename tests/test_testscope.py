"""tools/testscope.py: which tests touch the stack, read from their source (CI's second stack runs only those)."""

from __future__ import annotations

from pathlib import Path

import pytest
import testscope  # tools/testscope.py

ROOT = Path(__file__).resolve().parent.parent


def _why(tmp_path: Path, source: str, **others: str) -> str | None:
    """The verdict on a test module ``source`` whose folder also holds the modules ``others`` (name: source)."""
    folder = tmp_path / "tests"
    folder.mkdir(exist_ok=True)
    for name, text in others.items():
        (folder / f"{name}.py").write_text(text)
    (folder / "test_x.py").write_text(source)
    return testscope._why((folder / "test_x.py").resolve(), (folder,), ())


@pytest.mark.parametrize("source, why", [
    ("import json\nimport pytest\nfrom pathlib import Path\n", None),
    ("from __future__ import annotations\nimport re\n", None),
    ("import keras\n", "imports keras"),
    ("def test_x():\n    from helpers import meshes\n", "imports helpers"),         # inside a test, too
    ("import numpy as np\n", "imports numpy"),
    ("import somepackage_this_rule_does_not_know\n", "imports somepackage_this_rule_does_not_know"),
    ("import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'pass'])\n",
     "starts the stack's Python (sys.executable)"),
    ("import subprocess\nsubprocess.run(['make', 'lab'])\n", "runs a make target (the stack's environment)"),
    ("import subprocess\nsubprocess.run(['make', '-n', 'test'])\n", None),                 # a dry run
])
def test_a_module_touches_the_stack_by_what_it_imports_and_starts(tmp_path, source, why):
    assert _why(tmp_path, source) == why


def test_a_local_module_is_followed(tmp_path):
    assert _why(tmp_path, "import mytool\n", mytool="import json\n") is None
    assert _why(tmp_path, "import mytool\n", mytool="import tensorflow\n") == "imports mytool, which imports tensorflow"
    assert _why(tmp_path, "import a\n", a="import b\n", b="import a\n") is None               # a cycle ends


def test_the_real_suite_is_classified_as_expected():
    tests = ROOT / "tests"
    for name in ("test_registry", "test_word_budget", "test_troubleshooting", "test_testscope"):
        assert testscope.why_stack((tests / f"{name}.py").resolve()) is None, name
    assert testscope.why_stack((tests / "test_keras2_script.py").resolve()) == "imports keras"
    assert "sys.executable" in testscope.why_stack((tests / "test_bootstrap.py").resolve())
    assert testscope.why_stack((tests / "test_exercises_lesson02.py").resolve()).startswith("imports test_exercises")
    assert {"replicas", "fresh_jax_choice"} <= testscope.conftest_fixtures()


def test_the_plugin_marks_and_leaves_out(request):
    """This very test is stack-free: the plugin did not mark it; a conftest fixture would make it a stack test."""
    pytest_course = request.config.pluginmanager.get_plugin("pytest_course")   # tools/pytest_course.py, loaded
    assert request.node.get_closest_marker("stack") is None
    assert pytest_course.why_stack(request.node) is None

    class Item:
        fspath = ROOT / "tests" / "test_registry.py"
        fixturenames = ("tmp_path", "replicas")

    assert pytest_course.why_stack(Item()) == "uses a fixture of tests/conftest.py (the unit tests' stack set-up)"
    Item.fspath = ROOT / "notebooks" / "00_start_here.ipynb"
    assert pytest_course.why_stack(Item()) == "a notebook"
