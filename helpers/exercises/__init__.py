"""Exercises: self-checks that explain, and solutions kept out of the way.

Why: an exercise is only useful if the learner can tell whether they got it
right *and why not*.  Each lesson registers its exercises in a module of this
package (``helpers/exercises/lesson01.py`` ...)::

    register("01.1", title="...", checker=_check, solution=_solve, hint="...")

* ``checker(answer) -> (ok: bool, message: str)``: the message says what is
  right or wrong, never just "False".
* ``solution() -> answer``: a working solution; ``tests/test_exercises.py``
  runs every solution through its checker so solutions cannot rot.

In a notebook::

    answer = ...                       # your code
    helpers.exercises.check("01.1", answer)
    # helpers.exercises.show_solution("01.1")   # uncomment to reveal
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import textwrap
from dataclasses import dataclass
from typing import Any, Callable

Checker = Callable[[Any], "tuple[bool, str]"]


@dataclass(frozen=True)
class Exercise:
    key: str
    title: str
    checker: Checker
    solution: Callable[[], Any]
    hint: str = ""


REGISTRY: dict[str, Exercise] = {}


def register(key: str, *, title: str, checker: Checker, solution: Callable[[], Any],
             hint: str = "") -> Exercise:
    """Register an exercise under ``key`` (``"NN.M"``: lesson number, exercise number)."""
    if not re.fullmatch(r"\d\d\.\d+", key):
        raise ValueError(f"exercise key must look like '01.2', got {key!r}")
    if not callable(checker) or not callable(solution):
        raise ValueError("checker and solution must be callables")
    ex = Exercise(key, title, checker, solution, hint)
    REGISTRY[key] = ex
    return ex


def _load_all() -> None:
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")


def get(key: str) -> Exercise:
    """The registered exercise ``key``; ``ValueError`` names the known keys if absent."""
    if key not in REGISTRY:
        _load_all()
    if key not in REGISTRY:
        raise ValueError(f"no exercise {key!r}; known: {', '.join(sorted(REGISTRY)) or 'none'}")
    return REGISTRY[key]


def all_keys() -> list[str]:
    """Every registered exercise key, sorted."""
    _load_all()
    return sorted(REGISTRY)


def check(key: str, answer: Any) -> bool:
    """Check ``answer`` for exercise ``key``, print why it is right or wrong, return the verdict.

    An answer left as ``...`` (Ellipsis) is reported as not attempted; this never
    raises for a wrong answer, so "Run All" always reaches the end.
    """
    ex = get(key)
    if answer is Ellipsis:
        print(f"Exercise {key} ({ex.title}): not attempted yet."
              + (f" Hint: {ex.hint}" if ex.hint else "")
              + f"\n  To reveal a solution: helpers.exercises.show_solution({key!r})")
        return False
    try:
        ok, message = ex.checker(answer)
    except Exception as exc:  # a malformed answer is a wrong answer, with the reason
        ok, message = False, f"could not check this answer ({type(exc).__name__}: {exc})"
    mark = "correct" if ok else "not yet"
    print(f"Exercise {key} - {mark}: {message}")
    if not ok and ex.hint:
        print(f"  Hint: {ex.hint}")
    return bool(ok)


def show_solution(key: str) -> Any:
    """Print the solution's source code, run it, check it, and return its answer."""
    ex = get(key)
    print(f"Solution to exercise {key} ({ex.title}):\n")
    print(textwrap.dedent(inspect.getsource(ex.solution)))
    answer = ex.solution()
    check(key, answer)
    return answer
