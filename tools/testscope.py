"""Which tests touch the stack (a framework, the course's helpers, the stack's own Python), read from their source.

Why: CI runs the test suite on two stacks (pinned, hosted). A test that touches neither TensorFlow, Keras, JAX,
PyTorch, the helpers nor the stack's interpreter (the course's tooling, the lint rules, the registry, the
generators, word counts, links, the website's builder) gives the same result on both, so the second stack's run
(``pytest --stack-only``, tools/pytest_course.py) leaves it out. Nobody keeps a list: a test module is
**stack-free** when everything it imports, directly or through the tools and test modules it imports, is the
standard library, pytest or a stack-free module of tools/ or tests/, and it never names ``sys.executable`` nor
runs a make target (a dry run, ``make -n``, is fine); a test
that uses a fixture of tests/conftest.py (the unit tests' stack set-up) touches the stack too. Anything else,
including a package this rule does not know, touches the stack: a new test runs on both stacks unless its source
shows that one is enough. Standard library only.

Usage: python tools/testscope.py [tests/test_x.py ...]   (prints each module's scope and why)
"""

from __future__ import annotations

import ast
import sys
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Folders whose modules a test imports by their bare name (the root conftest puts tools/ on sys.path).
LOCAL = (ROOT / "tools", ROOT / "tests")
#: Packages besides the standard library that a stack-free test may import: the test runner itself.
RUNNER = ("pytest", "_pytest")


def _imports(tree: ast.AST) -> list[str]:
    """The top-level names of every absolute import in ``tree``, in order (inside functions too)."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module.split(".")[0])
    return list(dict.fromkeys(names))


def _names_sys_executable(tree: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "executable" and isinstance(n.value, ast.Name)
               and n.value.id == "sys" for n in ast.walk(tree))


def _runs_make(tree: ast.AST) -> bool:
    """A command list ``["make", ...]`` that is not a dry run (``-n``): the Makefile's targets use the stack."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
            words = [e.value for e in node.elts if isinstance(e, ast.Constant)]
            if words and words[0] == "make" and "-n" not in words:
                return True
    return False


def _local(name: str, folders: tuple[Path, ...]) -> Path | None:
    return next((f / f"{name}.py" for f in folders if (f / f"{name}.py").is_file()), None)


@lru_cache(maxsize=None)
def why_stack(path: Path, folders: tuple[Path, ...] = LOCAL) -> str | None:
    """Why the module at ``path`` touches the stack ("imports keras", "starts the stack's Python
    (sys.executable)", "imports test_exercises, which imports keras"), or None when it is stack-free."""
    return _why(Path(path).resolve(), folders, ())


def _why(path: Path, folders: tuple[Path, ...], seen: tuple[Path, ...]) -> str | None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    if _names_sys_executable(tree):
        return "starts the stack's Python (sys.executable)"
    if _runs_make(tree):
        return "runs a make target (the stack's environment)"
    for name in _imports(tree):
        if name in sys.stdlib_module_names or name == "__future__" or name in RUNNER:
            continue
        local = _local(name, folders)
        if local is None:
            return f"imports {name}"
        if local.resolve() in seen or local.resolve() == path:
            continue
        inner = _why(local.resolve(), folders, seen + (path,))
        if inner:
            return f"imports {name}, which {inner}"
    return None


@lru_cache(maxsize=None)
def conftest_fixtures(conftest: Path = ROOT / "tests" / "conftest.py") -> frozenset[str]:
    """The fixtures tests/conftest.py defines: the unit tests' stack set-up (two logical devices, a fresh JAX)."""
    if not Path(conftest).is_file():
        return frozenset()
    tree = ast.parse(Path(conftest).read_text(encoding="utf-8"))
    return frozenset(node.name for node in tree.body if isinstance(node, ast.FunctionDef) and any(
        "fixture" in ast.unparse(d) for d in node.decorator_list))


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted((ROOT / "tests").glob("test_*.py"))
    for path in paths:
        why = why_stack(path.resolve())
        print(f"{path.name:36} {'stack-free' if why is None else 'stack: ' + why}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
