"""Helpers for the Keras multi-GPU course: plumbing by concept, one module each (see each module's docstring).

Setup: config (quick/full), versions, quiet, course (the course map), devices (``ensure_devices``), meshes (JAX
devices), torch_backend (PyTorch, lesson 12), notebook (``setup_notebook``, ``scratch_dir``), errors
(``expect_error``), checks, subproc, models. Lessons: plotting, placement (01); gpus (02); legacy,
replica_checks (03); batchnorm, capsule (04); callbacks, resume (05); bench, precision, scaling, input_pipeline (06);
cluster (07); memory_report, trace_split (10); exercises (self-checks and solutions), timelimit (every check's
time limit). Maintainer tools live in tools/.

The import rule (tests/test_import_rule.py): the setup chain and the launchers (cluster, resume) import
a framework (TensorFlow, Keras, JAX, matplotlib, ...) only inside the function that uses it.
Why: lesson 08 picks the Keras backend after importing helpers, device variables must be set before a framework
starts, and worker processes should not pay for TensorFlow's import. Modules used only after the Setup cells
may import Keras at the top and define plain classes (``ParallelModelCheckpoint??`` shows the source). Everything else
(the standard library, numpy, sibling modules) is imported at the top of a module, never inside a function.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.2.0"

_LAZY = {
    "setup_notebook": ("notebook", "setup_notebook"),
    "scratch_dir": ("notebook", "scratch_dir"),
    "expect_error": ("errors", "expect_error"),
    "ensure_devices": ("devices", "ensure_devices"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        return getattr(importlib.import_module(f"{__name__}.{module}"), attr)
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"{__name__}.{name}":
            raise AttributeError(f"module 'helpers' has no attribute {name!r}") from None
        raise


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_LAZY))
