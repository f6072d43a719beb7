"""The one quick/full switch of the course, read in exactly one place.

Why: every notebook must run in well under a minute on a 2-core laptop or CI
runner ("quick"), and the same cells must train for real on GPUs ("full"),
without editing a single cell.  Set the environment variable
``MULTIGPU_MODE`` to ``quick`` (default) or ``full`` before starting Jupyter:

    MULTIGPU_MODE=full make lab

Notebooks never read the variable themselves; they ask :func:`mode`,
:func:`is_quick` or :func:`pick`.
"""

from __future__ import annotations

import os
from typing import TypeVar

ENV_VAR = "MULTIGPU_MODE"
MODES = ("quick", "full")
T = TypeVar("T")


def mode() -> str:
    """Return the current mode, ``"quick"`` or ``"full"``.

    Raises ``ValueError`` when ``MULTIGPU_MODE`` holds anything else, so a typo
    such as ``MULTIGPU_MODE=ful`` fails loudly instead of silently running quick.
    """
    value = os.environ.get(ENV_VAR, "quick").strip().lower() or "quick"
    if value not in MODES:
        raise ValueError(
            f"{ENV_VAR}={value!r} is not a mode; use one of {', '.join(MODES)}."
        )
    return value


def is_quick() -> bool:
    """True in quick mode (CI, laptops): train for seconds, not minutes."""
    return mode() == "quick"


def pick(quick: T, full: T) -> T:
    """Return ``quick`` or ``full`` depending on the mode.

    Example: ``epochs = pick(quick=2, full=30)``.
    """
    return quick if is_quick() else full
