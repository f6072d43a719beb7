"""Argument checks: a clear ``ValueError`` naming the argument and what it takes.

Why: a learner who passes ``2.0`` replicas or ``True`` as a batch size should read which argument is
wrong, not a ``TypeError`` from deep inside TensorFlow (``bool`` counts as an int in Python, not here).
Each check returns the value: ``n = positive_int("n", n)``.
"""

from __future__ import annotations

import math


def is_int(value: object) -> bool:
    """True for an ``int`` that is not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def positive_int(name: str, value: object, *, minimum: int = 1, why: str = "") -> int:
    """``value`` if it is an int >= ``minimum`` (default 1), else ``ValueError``: "``name`` must be ...", with
    ``why`` (what the number counts) in brackets."""
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


def positive_number(name: str, value: object, *, unit: str = "", zero_ok: bool = False) -> float:
    """``value`` as a float if it is a finite number > 0 (>= 0 if ``zero_ok``; ``unit``: "seconds" ...)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and value < math.inf
    if not number or value < 0 or (value == 0 and not zero_ok):
        raise ValueError(f"{name} must be a number{f' of {unit}' if unit else ''} {'>=' if zero_ok else '>'} 0, "
                         f"got {value!r}")
    return float(value)


def nonneg_number(name: str, value: object, *, unit: str = "") -> float:
    """``value`` as a float if it is a finite number >= 0, else ``ValueError``."""
    return positive_number(name, value, unit=unit, zero_ok=True)
