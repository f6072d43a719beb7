"""The import rule of the helpers package (see ``helpers/__init__.py``), checked two ways.

1. Statically (AST): in the modules of :data:`FRAMEWORK_FREE` (the setup chain a notebook runs
   before the Keras backend and the devices are fixed, and the launchers whose CLI and worker
   processes should not pay for TensorFlow's import) a framework (TensorFlow, Keras, JAX,
   matplotlib, ...) is imported only inside a function or method; the other modules may import
   one at the top. In every module everything else (standard library, numpy, sibling helpers
   modules) is imported only at the top. ``if TYPE_CHECKING:`` blocks may import anything.
2. Dynamically: a fresh interpreter imports every module of :data:`FRAMEWORK_FREE` and no
   framework is in ``sys.modules`` afterwards.

Each check is also run on a small counter-example, so that a checker that stopped seeing
violations would fail here instead of passing silently.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "helpers"
#: Not helpers modules: the 2017 scripts run by the capsule's Python 3.6, text transcripts, the
#: capstone's training scripts and the CUDA probe (run as their own processes, like the scripts lessons write).
EXCLUDED = ("capsule_scripts", "transcripts", "capstone_scripts", "scripts")
#: Modules that import no framework when imported: ``import helpers`` and ``setup_notebook`` (lesson 08
#: picks the backend after them, and CUDA_VISIBLE_DEVICES must be set before TensorFlow starts), and the
#: launchers. Modules used only after the Setup cells (placement, callbacks, ...) may import Keras at the top.
FRAMEWORK_FREE = ("helpers", "helpers.checks", "helpers.config", "helpers.course",
                  "helpers.devices", "helpers.errors", "helpers.gpus", "helpers.meshes", "helpers.models",
                  "helpers.notebook", "helpers.precision", "helpers.quiet", "helpers.subproc",
                  "helpers.versions", "helpers.cluster",
                  "helpers.resume", "helpers.exercises", "helpers.torch_backend", "helpers.timelimit",
                  "helpers.exercises.harness")
#: Top-level packages imported only inside the functions that use them.
FRAMEWORKS = frozenset({"tensorflow", "keras", "tf_keras", "jax", "jaxlib", "matplotlib", "sklearn",
                        "scipy", "torch", "keras_hub"})   # keras_hub imports keras and TensorFlow (lesson 11)


def module_files(package: Path = PACKAGE) -> list[Path]:
    """Every ``.py`` file of the package, without the excluded folders."""
    return sorted(p for p in package.rglob("*.py")
                  if not set(p.relative_to(package).parts[:-1]) & set(EXCLUDED))


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    return ["." * node.level + (node.module or "")]


def violations(source: str, filename: str = "<source>", framework_free: bool = True) -> list[str]:
    """``file:line: why`` for each import that breaks the rule in ``source`` (Python source text).

    ``framework_free=False``: a module used only after setup, which may import a framework at the top.
    """
    found = []

    def visit(node: ast.AST, in_function: bool, at_top: bool) -> None:
        header = at_top  # top-level imports count as "at the top" until the first other statement
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):
                continue  # annotations only: never runs
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for name in _imported(child):
                    top = name.split(".")[0]
                    where = f"{filename}:{child.lineno}"
                    if top in FRAMEWORKS and not in_function and framework_free:
                        found.append(f"{where}: framework import {name!r} outside a function "
                                     "(import it inside the function that uses it)")
                    elif top not in FRAMEWORKS and top != "__future__" and in_function:
                        found.append(f"{where}: {name!r} imported inside a function "
                                     "(import it at the top of the module)")
                    elif top not in FRAMEWORKS and not in_function and not header:
                        found.append(f"{where}: {name!r} imported below the top of the module "
                                     "(move it up to the other imports)")
                continue
            if at_top and not (isinstance(child, ast.Expr) and isinstance(child.value, ast.Constant)):
                header = False  # a statement other than an import or the docstring ends the top
            is_function = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            visit(child, in_function or is_function, False)

    visit(ast.parse(source, filename), False, True)
    return found


def test_every_helpers_module_follows_the_import_rule():
    files = module_files()
    assert len(files) > 30 and PACKAGE / "exercises" / "lesson01.py" in files  # the walk found the package
    free = {module_name(p) for p in files} & set(FRAMEWORK_FREE)
    assert free == set(FRAMEWORK_FREE), set(FRAMEWORK_FREE) - free    # every listed module exists
    found = [v for path in files
             for v in violations(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)),
                                 framework_free=module_name(path) in FRAMEWORK_FREE)]
    assert not found, "the import rule of helpers/__init__.py is broken:\n" + "\n".join(found)


@pytest.mark.parametrize("source, expected", [
    ("import tensorflow as tf\n", ["framework import 'tensorflow' outside a function"]),
    ("from keras import layers\n", ["framework import 'keras' outside a function"]),
    ("import matplotlib.pyplot as plt\n", ["framework import 'matplotlib.pyplot' outside a function"]),
    ("class Model:\n    import jax\n", ["framework import 'jax' outside a function"]),
    ("import os\nif os.name:\n    import torch\n", ["framework import 'torch' outside a function"]),
    ("def f():\n    import numpy as np\n", ["'numpy' imported inside a function"]),
    ("def f():\n    from . import devices\n", ["'.' imported inside a function"]),
    ("class C:\n    def m(self):\n        from helpers.gpus import resolve_visible\n",
     ["'helpers.gpus' imported inside a function"]),
    ("import sys\nX = 1\nimport os\n", ["'os' imported below the top of the module"]),
    ("import sys\nif sys.platform:\n    import ctypes\n", ["'ctypes' imported below the top of the module"]),
    # allowed:
    ("'''doc'''\nfrom __future__ import annotations\nimport os\nimport numpy as np\nfrom . import config\n", []),
    ("def f():\n    import tensorflow as tf\n    from keras import distribution as kd\n", []),
    ("class C:\n    def m(self):\n        import keras\n", []),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from matplotlib.axes import Axes\n", []),
    ("import typing\nif typing.TYPE_CHECKING:\n    import keras\n", []),
    ("SCRIPT = '''\nimport tensorflow as tf\n'''\n", []),  # Python source in a string is not an import
    ("import scipyx\nimport jaxtyping\n", []),  # only the frameworks' own top-level names count
])
def test_the_checker_sees_each_kind_of_violation(source, expected):
    found = violations(source, "m.py")
    assert len(found) == len(expected), found
    for line, want in zip(found, expected):
        assert line.startswith("m.py:") and want in line, (line, want)


def test_a_module_used_after_setup_may_import_a_framework_at_the_top_only():
    assert violations("import keras\nimport numpy as np\n", "m.py", framework_free=False) == []
    assert violations("import keras\n", "m.py", framework_free=True) != []
    found = violations("import keras\ndef f():\n    import os\n", "m.py", framework_free=False)
    assert len(found) == 1 and "'os' imported inside a function" in found[0]


# ---- dynamic: importing helpers starts no framework ---------------------------------------------

_PROBE = textwrap.dedent("""
    import importlib, json, sys
    frameworks, modules = json.loads(sys.argv[1]), json.loads(sys.argv[2])
    blame = {}
    for name in modules:
        module = importlib.import_module(name)
        for fw in frameworks:
            if fw in sys.modules and fw not in blame:
                blame[fw] = name
    print(json.dumps(blame))
""")


def frameworks_imported(modules: list[str], path: Path) -> dict[str, str]:
    """{framework: first module whose import brought it in}, importing ``modules`` in order in a fresh Python."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(path), os.environ.get("PYTHONPATH")])))
    run = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(sorted(FRAMEWORKS)), json.dumps(modules)],
                         cwd=path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_importing_the_setup_chain_and_the_launchers_imports_no_framework():
    blame = frameworks_imported(list(FRAMEWORK_FREE), ROOT)
    assert not blame, ("importing helpers modules imported frameworks (module that did it): "
                       f"{blame}; import them inside the functions that use them")


@pytest.mark.slow
def test_a_module_used_after_setup_defines_plain_classes_with_their_source():
    """callbacks imports Keras at the top: ParallelModelCheckpoint is a plain class, so ``??`` shows its source."""
    import inspect

    assert frameworks_imported(["helpers.callbacks"], ROOT).get("keras") == "helpers.callbacks"
    from helpers import callbacks

    assert inspect.getsource(callbacks.ParallelModelCheckpoint).startswith(
        "class ParallelModelCheckpoint(keras.callbacks.ModelCheckpoint):")


def test_the_probe_blames_the_module_that_imports_a_framework(tmp_path):
    (tmp_path / "torch.py").write_text("")  # a stand-in: only its name in sys.modules matters
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "clean.py").write_text("import json\n")
    (pkg / "heavy.py").write_text("import torch\n")
    (pkg / "later.py").write_text("from . import heavy\n")
    modules = [module_name(p, pkg) for p in module_files(pkg)]
    assert modules == ["pkg", "pkg.clean", "pkg.heavy", "pkg.later"]
    assert frameworks_imported(modules, tmp_path) == {"torch": "pkg.heavy"}
    assert frameworks_imported(["pkg", "pkg.clean"], tmp_path) == {}


# ---- a solution's imports moved to its module's top: show_solution prints them -----------------

def test_a_printed_solution_brings_the_imports_it_needs(capsys):
    from helpers import exercises

    exercises.show_solution("03.1")  # uses keras, tf and layers, imported at lesson03's top
    printed = capsys.readouterr().out.split(":\n\n", 1)[1].split("\nExercise 03.1")[0]
    assert printed.startswith("import keras\nimport tensorflow as tf\nfrom keras import layers\n\n"), printed
    namespace: dict = {}
    exec(printed, namespace)  # runs as printed, as if pasted into a fresh notebook cell
    assert callable(namespace["_solve_pipeline"])
    assert exercises.solution_imports(lambda: 42) == []  # nothing used, nothing printed


def test_a_relative_import_is_printed_with_its_absolute_module(tmp_path, monkeypatch):
    from helpers import exercises

    pkg = tmp_path / "course_pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "tools.py").write_text("def helper():\n    return 1\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "ex.py").write_text("from ..tools import helper\n\ndef solution():\n    return helper()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from course_pkg.sub import ex

    assert exercises.solution_imports(ex.solution) == ["from course_pkg.tools import helper"]
