"""Which library versions are running, and whether they are inside the range the course supports.

Why: learners open the course on their own stack - Colab's and Kaggle's runtime
(Python 3.13, TF 2.20, Keras 3.13, JAX 0.7) as often as the pinned one (Python
3.11, TF 2.21, Keras 3.15, JAX 0.10). Behaviour and error wording differ inside
that range, so lessons ask :func:`at_least` where they do, and the Setup cell
prints one line with the stack and a note when a version lies outside the range.
Importing this module imports no TensorFlow, Keras or JAX.
"""

from __future__ import annotations

import importlib.metadata as md
import platform
import re
from typing import Optional

#: The supported range, tested at both ends (requirements.txt and requirements-hosted.txt).
#: Each entry: distribution -> (lowest major.minor, highest major.minor), both included.
SUPPORTED: dict[str, tuple[str, str]] = {
    "python": ("3.11", "3.13"),
    "tensorflow": ("2.20", "2.21"),
    "keras": ("3.13", "3.15"),
    "jax": ("0.7", "0.10"),
}
#: Distributions shown in the stack line (only those installed).
SHOWN = ("tensorflow", "keras", "jax", "numpy")


def version_tuple(version: str) -> tuple[int, ...]:
    """``"3.15.1"`` -> ``(3, 15, 1)``; pre-release or local tails are ignored (``"2.21.0rc1"`` -> ``(2, 21, 0)``)."""
    if not isinstance(version, str) or not re.match(r"^\d+", version.strip()):
        raise ValueError(f"not a version string: {version!r}")
    parts = []
    for piece in version.strip().split("."):
        m = re.match(r"^(\d+)", piece)
        if not m:
            break
        parts.append(int(m.group(1)))
        if m.group(1) != piece:
            break
    return tuple(parts)


def installed(dist: str) -> Optional[str]:
    """Version of an installed distribution (``"python"`` for the interpreter), or None if absent."""
    if dist == "python":
        return platform.python_version()
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def at_least(dist: str, minimum: str) -> bool:
    """True when ``dist`` is installed at ``minimum`` or later, e.g. ``at_least("keras", "3.14")``."""
    have = installed(dist)
    if have is None:
        raise ValueError(f"{dist!r} is not installed")
    want = version_tuple(minimum)
    return version_tuple(have)[: len(want)] >= want


def versions() -> dict[str, str]:
    """Versions of Python and of the libraries the course uses (only those installed)."""
    out = {"python": installed("python")}
    for dist in SHOWN:
        v = installed(dist)
        if v is not None:
            out[dist] = v
    return out


def outside_range(found: Optional[dict[str, str]] = None) -> list[str]:
    """One phrase per version outside :data:`SUPPORTED`, e.g. ``"keras 3.9.2 (supported: 3.13-3.15)"``."""
    found = versions() if found is None else found
    out = []
    for dist, (low, high) in SUPPORTED.items():
        have = found.get(dist)
        if have is None:
            continue
        mm = version_tuple(have)[:2]
        if not version_tuple(low) <= mm <= version_tuple(high):
            out.append(f"{dist} {have} (supported: {low}-{high})")
    return out


def stack_line(found: Optional[dict[str, str]] = None) -> str:
    """The one line the Setup cell prints, plus a note when something is outside the supported range."""
    found = versions() if found is None else found
    line = "stack: " + " | ".join(f"{k} {v}" for k, v in found.items())
    bad = outside_range(found)
    if not bad:
        return line + " (inside the supported range)"
    return (line + "\nnote: outside the range this course is tested on: " + "; ".join(bad) + ". The lessons "
            "should still run, but some messages and behaviour may differ; a check that fails says what it "
            "expected. Supported: " + ", ".join(f"{d} {lo}-{hi}" for d, (lo, hi) in SUPPORTED.items()) + ".")
