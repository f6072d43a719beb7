"""Exercises: self-checks that say what is wrong, and solutions kept out of the way.

Each lesson module registers its exercises::

    register("01.1", title="...", checker=_check, solution=_solve, hint="...", expects="list", wants="...",
             giveaways=["words the hint must not contain"], slow=False)

The framework checks the *kind* of answer (``expects``, see :data:`KINDS`; ``takes=N`` for a function's
arguments) before ``checker(answer) -> (ok, message)`` runs, so a wrong kind gets one targeted sentence.
``solution()`` returns a working answer (the tests run every one). In a notebook: ``check("01.1", answer)``
prints the verdict, ``show_solution("01.1")`` the solution; :func:`verdict` returns ``(ok, text)``.

Every check has a time limit (``register(..., time_limit=...)``, :data:`TIME_LIMIT_S` unless told): an answer that
never returns is stopped (:mod:`helpers.timelimit`) and the verdict says which line of it was running. Checkers
treat the answer as untrusted: they read datasets with ``take(n + 1)``, turn returned values into plain ``int``,
``float`` and ``str`` (:func:`as_int`, :func:`as_float`, :func:`as_str`) before comparing them, and vary their
inputs between calls where a wrong answer could ignore them.
"""

from __future__ import annotations

import ast
import contextlib
import dis
import functools
import importlib
import importlib.util
import inspect
import json
import numbers
import pkgutil
import random
import re
import sys
import textwrap
from dataclasses import dataclass
from typing import Any, Callable, Union

from ..checks import is_int, positive_number
from ..devices import ensure_devices
from ..replica_checks import check_distributed
from ..subproc import run_python
from ..timelimit import TimeLimitExceeded
from ..timelimit import time_limit as time_limit_of

Checker = Callable[[Any], "tuple[bool, str]"]
#: Seconds a check may run unless its exercise says otherwise: the slowest in-kernel check takes about 15 s on a
#: loaded 2-core machine (a cold TensorFlow trace included); the ones that start processes set their own.
TIME_LIMIT_S = 120.0
#: Seconds for a check that measures in a fresh JAX process (lessons 08, 10, 11): its start and compile included.
JAX_TIME_LIMIT_S = 600.0
#: The checkers' own random numbers (the inputs they vary between calls): never the learner's seeded stream.
RANDOM = random.SystemRandom()


def framework_class(dotted: str) -> type:
    """The class at ``dotted`` (``"keras.Model"``), importing its top package now (an answer's expected kind)."""
    obj = pkgutil.resolve_name(dotted)
    if not isinstance(obj, type):
        raise ValueError(f"{dotted!r} is not a class")
    return obj


def _is_function(value: Any) -> bool:
    """A def, lambda, method, partial or tf.function: not any callable (a Keras model is callable too)."""
    return (inspect.isroutine(value) or isinstance(value, functools.partial)
            or (callable(value) and hasattr(value, "python_function")))  # tf.function


def is_number(value: Any) -> bool:
    """A real number that is not a bool (numpy numbers too)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


#: Answer kinds ``register(expects=...)`` understands: name -> (words for the learner, test).
#: A dotted name such as ``"keras.Model"`` is also a kind: an instance of that class.
KINDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "function": ("a function", _is_function),
    "dict": ("a dict", lambda v: isinstance(v, dict)),
    "str": ("a string", lambda v: isinstance(v, str)),
    "int": ("a whole number", lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool)),
    "list": ("a list", lambda v: isinstance(v, (list, tuple))),
    "class": ("a class", inspect.isclass),
}


def _kind(kind: str) -> "tuple[str, Callable[[Any], bool]]":
    """(words for the learner, test) of an answer kind: a name in :data:`KINDS` or a dotted class name."""
    if kind in KINDS:
        return KINDS[kind]
    return f"a {kind}", lambda value: isinstance(value, framework_class(kind))


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
    if is_number(value):
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
    if top == "keras":
        bases = {c.__name__ for c in cls.__mro__}
        what = "model" if "Model" in bases else "layer" if "Layer" in bases else "object"
        return f"a Keras {what} ({name})"
    if top == "tensorflow":
        return f"a TensorFlow {name} object"
    return f"an object of type {name}"


def _does_nothing(fn: Callable) -> bool:
    """True for a function whose body only returns None: ``...``, ``pass``, a docstring, ``lambda: None``."""
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
    params = sig.parameters.values()
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
    return sum(p.default is p.empty for p in positional), float("inf") if varargs else len(positional)


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
    giveaways: tuple = ()
    slow: bool = False
    time_limit: float = TIME_LIMIT_S

    def shape_problem(self, answer: Any) -> Union[str, None]:
        """A sentence if ``answer`` is the wrong kind of thing for this exercise, else None."""
        wants = self.wants or " or ".join(_kind(k)[0] for k in self.expects)
        if self.expects and not any(_kind(k)[1](answer) for k in self.expects):
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
             takes: Union[int, None] = None, giveaways: Union[tuple, list] = (), slow: bool = False,
             time_limit: float = TIME_LIMIT_S) -> Exercise:
    """Register exercise ``key`` (``"NN.M"``); ``expects``: kind(s) of answer (:data:`KINDS` or dotted class
    names), ``wants``: the answer in words for the learner (for a function, "a function " is written in front
    when it does not begin so: ``wants="train(strategy, x, y)"``), ``takes``: a function answer's positional
    arguments, ``giveaways``: words the hint must not contain (they would give the answer away; a test checks),
    ``slow``: its checker starts processes (workers, a JAX subprocess, training runs), so the tests mark it slow
    (a test fails when a checker not marked slow takes as long), ``time_limit``: seconds the check may run (a
    checker that starts processes needs more than their timeouts)."""
    if not re.fullmatch(r"\d\d\.\d+", key):
        raise ValueError(f"exercise key must look like '01.2', got {key!r}")
    if not callable(checker) or not callable(solution):
        raise ValueError("checker and solution must be callables")
    kinds = (expects,) if isinstance(expects, str) else tuple(expects)
    for kind in kinds:
        if kind not in KINDS and not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", kind):
            raise ValueError(f"unknown answer kind {kind!r}; use one of {sorted(KINDS)} or a dotted class "
                             "name such as 'keras.Model'")
    if takes is not None and (not is_int(takes) or takes < 0 or "function" not in kinds):
        raise ValueError(f"takes must be a whole number >= 0 and needs expects='function', got {takes!r}")
    if isinstance(giveaways, str) or not all(isinstance(w, str) and w for w in giveaways):
        raise ValueError(f"giveaways must be a list of non-empty strings, got {giveaways!r}")
    if not isinstance(slow, bool):
        raise ValueError(f"slow must be True or False, got {slow!r}")
    if kinds[:1] == ("function",) and not wants.startswith("a function"):
        wants = f"a function {wants}".strip()      # the learner reads "this exercise wants a function ..."
    time_limit = positive_number("time_limit", time_limit, unit="seconds")
    ex = Exercise(key, title, checker, solution, hint, kinds, wants, takes, tuple(giveaways), slow, time_limit)
    REGISTRY[key] = ex
    return ex


def get(key: str) -> Exercise:
    """The registered exercise ``key``; ``ValueError`` names the known keys if absent.

    Only the lesson's own module is imported first: lessons 08, 10 and 11 run on JAX, without TensorFlow.
    """
    lesson = f"{__name__}.lesson{str(key)[:2]}"
    if key not in REGISTRY and re.fullmatch(r"\d\d\.\d+", str(key)) and importlib.util.find_spec(lesson):
        importlib.import_module(lesson)
    if key not in REGISTRY and key not in all_keys():  # all_keys() loads every module: the capstone has its own
        raise ValueError(f"no exercise {key!r}; known: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[key]


def all_keys() -> list[str]:
    """Every registered exercise key, sorted (every lesson's module imported first)."""
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
    return sorted(REGISTRY)


def verdict(key: str, answer: Any, *, time_limit: Union[float, None] = None) -> "tuple[bool, str]":
    """``(ok, text)`` for ``answer`` to exercise ``key``: exactly what :func:`check` prints.

    Never raises (but passes a ``KeyboardInterrupt`` on): ``...`` is "not attempted" (with the hint), a wrong kind
    gets one sentence naming what was passed and what is wanted, a checker that fails on a strange answer reports
    the reason, and one that runs past ``time_limit`` seconds (default: the exercise's) is stopped and says what
    the answer was doing.
    """
    ex = get(key)
    limit = ex.time_limit if time_limit is None else positive_number("time_limit", time_limit, unit="seconds")
    if answer is Ellipsis:
        hint = f" Hint: {ex.hint}" if ex.hint else ""
        return False, f"Exercise {key}: not attempted yet.{hint}"
    try:
        with time_limit_of(limit):
            problem = ex.shape_problem(answer)
            ok, message = (False, problem) if problem is not None else ex.checker(answer)
    except TimeLimitExceeded as exc:
        problem, ok, message = None, False, (
            f"no verdict within {limit:g} s, the time limit of this check: {exc.where}. Does a loop never end, "
            "a dataset repeat forever, or a process wait for another?")
    except Exception as exc:  # a malformed answer is a wrong answer, with the reason
        problem, ok, message = None, False, f"could not check this answer ({type(exc).__name__}: {exc})"
    text = f"Exercise {key} - {'correct' if ok else 'not yet'}: {message}"
    if not ok and ex.hint and problem is None:  # a wrong kind of answer gets the targeted sentence only
        text += f"\n  Hint: {ex.hint}"
    return bool(ok), text


def check(key: str, answer: Any) -> None:
    """Print whether ``answer`` to exercise ``key`` is right, and why; None, so Jupyter displays nothing."""
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

    Why: a solution's own source does not show its module's top imports; :func:`show_solution` prints
    these above it, so the printed solution runs as it stands when pasted into a notebook.
    """
    code, module = getattr(fn, "__code__", None), inspect.getmodule(fn)
    try:
        tree = ast.parse(inspect.getsource(module))
    except (TypeError, OSError, SyntaxError):
        return []
    used = _global_names(code) if code is not None else set()
    lines = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names = [a for a in node.names if (a.asname or a.name.split(".")[0]) in used]
            if names:
                lines.append(ast.unparse(ast.Import(names=names)))
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            names = [a for a in node.names if (a.asname or a.name) in used]
            if names:  # from ..devices import x -> from helpers.devices import x
                base = importlib.util.resolve_name("." * node.level + (node.module or ""), module.__package__)
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


# ---- shared by the checkers -------------------------------------------------------------------

def as_int(name: str, value: Any) -> int:
    """``value`` as a plain ``int`` if it is a whole number (an int or a NumPy integer, not a bool or a float);
    ``TypeError`` naming ``name`` and showing ``repr(value)`` otherwise. Why: an int subclass (or any object) may
    answer ``==`` with anything; the plain int compares honestly, and "64" (a str) never passes for 64."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int.__int__(value) if isinstance(value, int) else int(value)
    raise TypeError(f"{name} must be a whole number (an int), got {value!r} ({type(value).__name__})")


def as_float(name: str, value: Any) -> float:
    """``value`` as a plain ``float`` if it is a real number (not a bool, not a str); ``TypeError`` otherwise."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float.__float__(value) if isinstance(value, float) else float(value)
    if hasattr(value, "dtype") and getattr(value, "shape", None) == () and not isinstance(value, (str, bytes)):
        return float(value)                                  # a 0-d array or tensor
    raise TypeError(f"{name} must be a number, got {value!r} ({type(value).__name__})")


def as_str(name: str, value: Any) -> str:
    """``value`` as a plain ``str`` if it is a string (a str subclass's own ``__eq__``/``__str__`` dropped);
    ``TypeError`` naming ``name`` and showing ``repr(value)`` otherwise."""
    if isinstance(value, str):
        return str.__str__(value)
    raise TypeError(f"{name} must be a string, got {value!r} ({type(value).__name__})")


def as_str_dict(name: str, value: Any) -> "dict[str, str]":
    """A dict answer as a plain ``{str: str}`` dict, its stored items read past any ``get``/``__getitem__`` the
    answer overrides; ``TypeError`` if it is not a dict or holds other than strings."""
    if not isinstance(value, dict):
        raise TypeError(f"{name} must be a dict, got {describe(value)}")
    return {as_str(f"a key of {name}", k): as_str(f"{name}[{k!r}]", v) for k, v in dict.items(value)}


def take(dataset: Any, n: int, what: str = "the dataset") -> list:
    """The first ``n + 1`` elements of a ``tf.data.Dataset`` at most, as a list: a dataset that never ends (a
    ``repeat()``) is read no further, and the extra element shows it is longer than ``n``."""
    import tensorflow as tf

    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(f"{what} must be a tf.data.Dataset, got {describe(dataset)}")
    return list(dataset.take(n + 1))


_STRATEGIES: dict = {}


def practice_strategy(devices: "list[str] | None" = None):
    """A checker's MirroredStrategy over ``devices`` (default: 2 replica devices), made once per device list.

    It reduces with ReductionToOneDevice: a kernel keeps at most one collective MirroredStrategy (lesson 04,
    "A trap when you re-run cells"), and a check must never break the learner's kernel.
    """
    names = tuple(devices or ensure_devices(2))
    if names not in _STRATEGIES:
        import tensorflow as tf

        _STRATEGIES[names] = tf.distribute.MirroredStrategy(
            list(names), cross_device_ops=tf.distribute.ReductionToOneDevice())
    return _STRATEGIES[names]


@contextlib.contextmanager
def quiet_tf():
    """TensorFlow's Python logger shows errors only inside the block (a check's steps would warn about retracing)."""
    import tensorflow as tf

    logger = tf.get_logger()
    level = logger.level
    logger.setLevel("ERROR")
    try:
        yield
    finally:
        logger.setLevel(level)


def error_line(exc: BaseException, limit: int = 200) -> str:
    """``"TypeError: first line of the message"``, cut at ``limit`` characters: a learner's error in a verdict."""
    lines = str(exc).splitlines()
    return f"{type(exc).__name__}: {lines[0][:limit] if lines else ''}"


def model_problem(model: Any, strategy: Any, call: str) -> Union[str, None]:
    """Why ``model``, what ``call`` returned, is not a Keras model distributed by ``strategy``; None if it is."""
    if not hasattr(model, "distribute_strategy"):
        return (f"{call} must return the Keras model, it returned {describe(model)}"
                + (": does it end with `return model`?" if model is None else ""))
    try:
        check_distributed(model, strategy)
    except AssertionError as err:
        return str(err)
    return None


def jax_devices_here() -> Union[int, None]:
    """How many JAX devices this process has when Keras runs on JAX here (lessons 10-11's kernels), else None."""
    if "keras" not in sys.modules or "jax" not in sys.modules:
        return None
    import jax
    import keras

    return len(jax.devices()) if keras.backend.backend() == "jax" else None


def devices_here() -> int:
    """N of lessons 10-11's exercises: this process's JAX devices in their kernel, else 4 (their default)."""
    return jax_devices_here() or 4


def run_in_jax(code: str, devices: int) -> Any:
    """Run ``code`` in a fresh Keras-on-JAX process with ``devices`` host devices; its last line, JSON-decoded."""
    run = run_python(code, env={"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
                                "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"},
                     timeout=JAX_TIME_LIMIT_S, echo=False)
    if not run.ok:
        raise RuntimeError(f"checking in a JAX subprocess failed: {run.last_error_line() or run.stderr[-300:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])
