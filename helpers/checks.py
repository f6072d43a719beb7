"""Argument checks: a clear ``ValueError`` naming the argument and what it takes.

Why: a learner who passes ``2.0`` replicas or ``True`` as a batch size should read which
argument is wrong and what it takes, not a ``TypeError`` from deep inside TensorFlow.
``bool`` is refused where an int is asked for, although Python counts it as one.
Each check returns the value, so ``n = positive_int("n", n)`` reads as one step.
"""

from __future__ import annotations

import math


def is_int(value: object) -> bool:
    """True for an ``int`` that is not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def positive_int(name: str, value: object, *, minimum: int = 1, why: str = "") -> int:
    """``value`` if it is an int >= ``minimum`` (default 1), else ``ValueError``: "``name`` must be ...".

    ``why`` is added to the message in brackets (what the number counts).
    """
    if not is_int(value) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}{f' ({why})' if why else ''}, got {value!r}")
    return value


def nonneg_int(name: str, value: object, *, why: str = "") -> int:
    """``value`` if it is an int >= 0, else ``ValueError``."""
    return positive_int(name, value, minimum=0, why=why)


def int_between(name: str, value: object, low: int, high: int, *, what: str = "an int") -> int:
    """``value`` if it is an int from ``low`` to ``high`` (both included), else ``ValueError``."""
    if not is_int(value) or not low <= value <= high:
        raise ValueError(f"{name} must be {what} from {low} to {high}, got {value!r}")
    return value


def positive_number(name: str, value: object, *, unit: str = "") -> float:
    """``value`` as a float if it is a finite number > 0 (``unit``: "seconds" ...), else ``ValueError``."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value < math.inf:
        raise ValueError(f"{name} must be a number{f' of {unit}' if unit else ''} > 0, got {value!r}")
    return float(value)


def nonneg_number(name: str, value: object, *, unit: str = "") -> float:
    """``value`` as a float if it is a finite number >= 0, else ``ValueError``."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value < math.inf:
        raise ValueError(f"{name} must be a number{f' of {unit}' if unit else ''} >= 0, got {value!r}")
    return float(value)
