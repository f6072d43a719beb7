"""Public classes whose base class belongs to a framework, built on first use (PEP 562).

Why: importing a helpers module must not import TensorFlow, Keras or JAX (the import
rule in :mod:`helpers`), yet ``helpers.callbacks.ParallelModelCheckpoint`` subclasses
``keras.callbacks.ModelCheckpoint`` and ``helpers.placement.SplitModel`` subclasses
``keras.Model``. Such a module keeps the methods in a plain class (the *body*, e.g.
``_SplitModel``) and gets a module ``__getattr__`` from :func:`subclasses`: the first
access to ``SplitModel`` imports Keras, builds ``class SplitModel(_SplitModel, keras.Model)``
and stores it in the module, so every later access (``from helpers.placement import
SplitModel``, ``isinstance``, pickle) gets the very same class object. On Python 3.13
and later ``inspect.getsource`` (and ``SplitModel??`` in Jupyter) shows the body's source;
on 3.11-3.12 it cannot find a class built at run time (the methods' source still prints).
"""

from __future__ import annotations

import importlib
import sys
import threading
from typing import Callable


def framework_class(dotted: str) -> type:
    """The class at ``dotted`` (``"keras.callbacks.ModelCheckpoint"``), importing its top package now."""
    top, *parts = dotted.split(".")
    obj = importlib.import_module(top)
    for part in parts:
        obj = getattr(obj, part)
    if not isinstance(obj, type):
        raise ValueError(f"{dotted!r} is not a class")
    return obj


_BUILDING = threading.RLock()  # two threads' first accesses must not build two classes


def subclasses(module_name: str, specs: dict[str, tuple[type, str]]
               ) -> tuple[Callable[[str], type], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for module ``module_name`` that build ``specs``' classes on first access.

    ``specs`` maps each public class name to ``(body, "package.module.Base")``; the class is
    ``type(name, (body, Base), ...)`` with the body's docstring, named as if it had been
    defined at the module's top level (``__module__``, ``__qualname__``) so that pickle finds it.
    """
    def __getattr__(name: str) -> type:
        if name not in specs:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        module = sys.modules[module_name]
        with _BUILDING:
            if name not in vars(module):
                body, base_name = specs[name]
                base = framework_class(base_name)
                namespace = {"__doc__": body.__doc__, "__module__": module_name, "__qualname__": name}
                if hasattr(body, "__firstlineno__"):  # Python >= 3.13: inspect.getsource (and `Cls??`)
                    namespace["__firstlineno__"] = body.__firstlineno__  # then shows the body's source
                cls = type(base)(name, (body, base), namespace)
                setattr(module, name, cls)  # later accesses find it without calling __getattr__
        return vars(module)[name]

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[module_name])) | set(specs))

    return __getattr__, __dir__
