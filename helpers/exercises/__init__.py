"""Exercises: self-checks that explain, and solutions kept out of the way.

Why: an exercise is only useful if the learner can tell whether they got it
right *and why not*.  Each lesson registers its exercises in a module of this
package (``helpers/exercises/lesson01.py`` ...)::

    register("01.1", title="...", checker=_check, solution=_solve, hint="...",
             expects="list", wants="a list with one list of numbers per replica")

* ``expects`` declares the *kind* of answer (see :data:`KINDS`; a tuple allows
  several).  The framework checks it before the checker runs, so a value
  where a function was asked for (or the reverse), a class instead of an
  instance, or ``None`` from a function that forgot ``return`` gets one
  targeted sentence saying what was passed and what is wanted, instead of an
  exception from deep inside the checker.  ``takes=N`` also checks that a
  function answer accepts N positional arguments.
* ``checker(answer) -> (ok: bool, message: str)``: the message says what is
  right or wrong, never just "False".  It only sees answers of the right kind.
* ``solution() -> answer``: a working solution; the tests run every solution
  through :func:`verdict` so solutions cannot rot.
* ``hint``: a nudge in the right direction that never spells out the answer.

In a notebook::

    answer = ...                       # your code
    helpers.exercises.check("01.1", answer)
    # helpers.exercises.show_solution("01.1")   # uncomment to reveal

:func:`check` and :func:`show_solution` only print (they return ``None``, so
Jupyter shows no stray ``False``); :func:`verdict` returns ``(ok, text)``
for code and tests that need the verdict.
"""

from __future__ import annotations

import ast
import dis
import functools
import importlib
import inspect
import numbers
import pkgutil
import re
import textwrap
from dataclasses import dataclass
from typing import Any, Callable, Union

from ..checks import is_int

Checker = Callable[[Any], "tuple[bool, str]"]


def framework_class(dotted: str) -> type:
    """The class at ``dotted`` (``"keras.Model"``), importing its top package now (an answer's expected kind)."""
    top, *parts = dotted.split(".")
    obj = importlib.import_module(top)
    for part in parts:
        obj = getattr(obj, part)
    if not isinstance(obj, type):
        raise ValueError(f"{dotted!r} is not a class")
    return obj


def _is_function(value: Any) -> bool:
    """A function the learner wrote: def, lambda, method, partial or tf.function.

    Not any callable: Keras layers and models are callable too, and passing
    ``make_model(strategy)`` (a model) where ``make_model`` is wanted must be caught.
    """
    return (inspect.isroutine(value) or isinstance(value, functools.partial)
            or (callable(value) and hasattr(value, "python_function")))  # tf.function


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)  # numpy ints too


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


#: Answer kinds ``register(expects=...)`` understands: name -> (words for the learner, test).
#: A dotted name such as ``"keras.Model"`` is also a kind: an instance of that class.
KINDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "function": ("a function", _is_function),
    "dict": ("a dict", lambda v: isinstance(v, dict)),
    "str": ("a string", lambda v: isinstance(v, str)),
    "int": ("a whole number", _is_int),
    "number": ("a number", _is_number),
    "list": ("a list", lambda v: isinstance(v, (list, tuple))),
    "class": ("a class", inspect.isclass),
}


def _check_kind_name(kind: str) -> None:
    if kind not in KINDS and not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", kind):
        raise ValueError(f"unknown answer kind {kind!r}; use one of {sorted(KINDS)} or a dotted class "
                         "name such as 'keras.Model'")


def _kind_words(kind: str) -> str:
    return KINDS[kind][0] if kind in KINDS else f"a {kind}"


def _matches(kind: str, value: Any) -> bool:
    if kind in KINDS:
        return KINDS[kind][1](value)
    return isinstance(value, framework_class(kind))


def describe(value: Any) -> str:
    """A few words saying what ``value`` is, for messages: "the function make_model", "a dict with keys ['a']"."""
    if value is None:
        return "None"
    if value is Ellipsis:
        return "... (nothing yet)"
    if inspect.isclass(value):
        return f"the class {value.__qualname__} itself (not an instance)"
    if _is_function(value):
        name = getattr(value, "__name__", None) or getattr(getattr(value, "func", None), "__name__", "?")
        return "a lambda function" if name == "<lambda>" else f"the function {name}"
    if isinstance(value, bool):
        return f"the boolean {value}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {shown!r}"
    if _is_number(value):
        return f"the number {value}"
    if isinstance(value, dict):
        keys = sorted(map(repr, value))
        return f"a dict with keys [{', '.join(keys[:6])}{', ...' if len(keys) > 6 else ''}]"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)} item(s)"
    cls = type(value)
    name = cls.__name__
    if name == "PerReplica":
        return ("a PerReplica value (one tensor per replica; strategy.experimental_local_results "
                "gives them as a tuple)")
    if hasattr(value, "element_spec"):
        return f"a tf.data dataset ({name})"
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"an array or tensor of shape {tuple(value.shape)}"
    top = cls.__module__.split(".")[0]
    if top in ("keras", "tf_keras"):
        bases = {c.__name__ for c in cls.__mro__}
        what = "model" if "Model" in bases else "layer" if "Layer" in bases else "object"
        return f"a Keras {what} ({name})"
    if top == "tensorflow":
        return f"a TensorFlow {name} object"
    return f"an object of type {name}"


def _does_nothing(fn: Callable) -> bool:
    """True for a function whose body only returns None: ``def f(x): ...``, ``pass``, a docstring, ``lambda: None``."""
    code = getattr(inspect.unwrap(getattr(fn, "python_function", fn)), "__code__", None)
    if code is None:
        return False
    ops = [(i.opname, i.argval) for i in dis.get_instructions(code)
           if i.opname not in ("RESUME", "NOP", "CACHE", "COPY_FREE_VARS", "MAKE_CELL")]
    return ops in ([("RETURN_CONST", None)], [("LOAD_CONST", None), ("RETURN_VALUE", None)])


def _positional_capacity(fn: Callable) -> "tuple[int, float] | None":
    """(required, maximum) positional arguments of ``fn``; None if Python cannot tell."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())
    required = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
                   for p in params)
    most: float = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        most = float("inf")
    return required, most


@dataclass(frozen=True)
class Exercise:
    key: str
    title: str
    checker: Checker
    solution: Callable[[], Any]
    hint: str = ""
    expects: tuple = ()
    wants: str = ""
    takes: Union[int, None] = None

    def shape_problem(self, answer: Any) -> Union[str, None]:
        """A sentence if ``answer`` is the wrong kind of thing for this exercise, else None."""
        wants = self.wants or " or ".join(_kind_words(k) for k in self.expects)
        if self.expects and not any(_matches(k, answer) for k in self.expects):
            given = describe(answer)
            if answer is None:
                return (f"you passed None; this exercise wants {wants}. (A function without `return` "
                        "gives None.)")
            if self.expects[0] == "function":
                named = re.search(r"function (\w+)\(", wants)
                name = named.group(1) if named else "my_function"
                extra = (f" Give the function itself (answer = {name}), not the result of calling it."
                         if not inspect.isclass(answer) else "")
                return f"you passed {given}, but this exercise wants {wants}.{extra}"
            if _is_function(answer):
                return (f"you passed {given}, but this exercise wants {wants}. If your function computes "
                        "the answer, call it and give the result.")
            if "class" in self.expects and not inspect.isclass(answer):
                return (f"you passed {given}; this exercise wants {wants}. Give the class itself "
                        f"(answer = {type(answer).__name__}), not an instance of it.")
            if inspect.isclass(answer):
                return f"you passed {given}; this exercise wants {wants}: create one, {answer.__name__}(...)."
            return f"you passed {given}; this exercise wants {wants}."
        if self.takes is not None and _is_function(answer):
            capacity = _positional_capacity(answer)
            if capacity and not capacity[0] <= self.takes <= capacity[1]:
                required, most = capacity
                accepts = (f"{required}" if required == most else
                           f"{required} or more" if most == float("inf") else f"{required} to {int(most)}")
                return (f"your function accepts {accepts} positional argument(s), but it is called "
                        f"with {self.takes}: this exercise wants {wants}.")
        if self.expects and self.expects[0] == "function" and _does_nothing(answer):
            return (f"your function does nothing yet (its body only returns None); this exercise wants "
                    f"{wants}.")
        return None


REGISTRY: dict[str, Exercise] = {}


def register(key: str, *, title: str, checker: Checker, solution: Callable[[], Any], hint: str = "",
             expects: Union[str, tuple, list] = (), wants: str = "",
             takes: Union[int, None] = None) -> Exercise:
    """Register an exercise under ``key`` (``"NN.M"``: lesson number, exercise number).

    Args:
        expects: the kind(s) of answer: names in :data:`KINDS` or dotted class names.
        wants: the answer described for the learner ("a function lr_for(replicas)"); default from ``expects``.
        takes: for a function answer, how many positional arguments it is called with.
    """
    if not re.fullmatch(r"\d\d\.\d+", key):
        raise ValueError(f"exercise key must look like '01.2', got {key!r}")
    if not callable(checker) or not callable(solution):
        raise ValueError("checker and solution must be callables")
    kinds = (expects,) if isinstance(expects, str) else tuple(expects)
    for kind in kinds:
        _check_kind_name(kind)
    if takes is not None and (not is_int(takes) or takes < 0 or "function" not in kinds):
        raise ValueError(f"takes must be a whole number >= 0 and needs expects='function', got {takes!r}")
    ex = Exercise(key, title, checker, solution, hint, kinds, wants, takes)
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


def verdict(key: str, answer: Any) -> "tuple[bool, str]":
    """``(ok, text)`` for ``answer`` to exercise ``key``: the verdict and exactly what :func:`check` prints.

    Never raises for a wrong answer: an answer left as ``...`` is "not attempted"
    (one line with the hint), one of the wrong kind gets a sentence naming what was
    passed and what is wanted, and a checker that fails on a strange answer is
    reported as a wrong answer with the reason.
    """
    ex = get(key)
    if answer is Ellipsis:
        hint = f" Hint: {ex.hint}" if ex.hint else ""
        return False, f"Exercise {key}: not attempted yet.{hint}"
    try:
        problem = ex.shape_problem(answer)
        ok, message = (False, problem) if problem is not None else ex.checker(answer)
    except Exception as exc:  # a malformed answer is a wrong answer, with the reason
        problem, ok, message = None, False, f"could not check this answer ({type(exc).__name__}: {exc})"
    text = f"Exercise {key} - {'correct' if ok else 'not yet'}: {message}"
    if not ok and ex.hint and problem is None:  # a wrong kind of answer gets the targeted sentence only
        text += f"\n  Hint: {ex.hint}"
    return bool(ok), text


def check(key: str, answer: Any) -> None:
    """Print whether ``answer`` to exercise ``key`` is right, and why; returns None (nothing to display).

    Use :func:`verdict` to get the verdict as a value.
    """
    print(verdict(key, answer)[1])


def _global_names(code) -> set[str]:
    """The global names a code object (and the functions and classes defined in it) reads."""
    names = {i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _global_names(const)
    return names


def solution_imports(fn: Callable) -> list[str]:
    """The import lines of ``fn``'s module that bind names ``fn`` uses, with absolute module names.

    Why: by the import rule (:mod:`helpers`) a lesson module imports numpy, the standard
    library and other helpers modules once at its top, so a solution's own source does not
    show them; :func:`show_solution` prints these lines above it, and the printed solution
    runs as it stands when pasted into a notebook.
    """
    code, module = getattr(fn, "__code__", None), inspect.getmodule(fn)
    try:
        tree = ast.parse(inspect.getsource(module))
    except (TypeError, OSError, SyntaxError):
        return []
    used = _global_names(code) if code is not None else set()
    package = (module.__package__ or "").split(".")
    lines = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names = [a for a in node.names if (a.asname or a.name.split(".")[0]) in used]
            if names:
                lines.append(ast.unparse(ast.Import(names=names)))
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            names = [a for a in node.names if (a.asname or a.name) in used]
            base = node.module or ""
            if node.level:  # from ..devices import x -> from helpers.devices import x
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            if names:
                lines.append(ast.unparse(ast.ImportFrom(module=base, names=names, level=0)))
    return lines


def show_solution(key: str) -> None:
    """Print the solution's source code (with the imports it needs), then run it and print its check; returns None."""
    ex = get(key)
    print(f"Solution to exercise {key} ({ex.title}):\n")
    script = getattr(ex.solution, "script", None)  # an exercise answered with a script file shows that file
    if script is not None:
        with open(script) as f:
            print(f.read())
    else:
        imports = solution_imports(ex.solution)
        if imports:
            print("\n".join(imports) + "\n")
        print(textwrap.dedent(inspect.getsource(ex.solution)))
    check(key, ex.solution())
