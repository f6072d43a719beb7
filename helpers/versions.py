"""Which versions are running, whether they are in the supported range, and what old Pythons say.

Why: learners run the course on Colab's and Kaggle's stack as often as on the pinned one, and behaviour
and error wording differ inside that range: lessons ask :func:`at_least`, the Setup cell prints
:func:`stack_line`, and lesson 05 asks old interpreters for their wording (:func:`pickle_wording`).
"""

from __future__ import annotations

import glob
import importlib.metadata as md
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

from .subproc import run

#: The supported range. The pinned and hosted stacks (requirements.txt, requirements-hosted.txt) test both ends of
#: TensorFlow and Keras and JAX 0.7 and 0.10; JAX 0.11+ needs Python 3.12+, so its upper end runs on the latest stack.
#: Each entry: distribution -> (lowest major.minor, highest major.minor), both included.
SUPPORTED: dict[str, tuple[str, str]] = {
    "python": ("3.11", "3.13"),
    "tensorflow": ("2.20", "2.21"),
    "keras": ("3.13", "3.15"),
    "jax": ("0.7", "0.12"),
}
#: Nightly builds installed under another distribution name with the same import name (the nightly stack, CI).
NIGHTLY = {"keras": "keras-nightly"}
#: Distributions shown in the stack line (only those installed).
SHOWN = ("tensorflow", "keras", "jax", "numpy")
#: The Keras release that fixed the last known multi-replica bug (TensorFlow backend): older ones train or report
#: wrongly on 2+ replicas. The table of those bugs, by version, is in TROUBLESHOOTING.md under this heading.
MULTI_REPLICA_FIXED = "3.10"
VERSION_TABLE = "Keras versions that break multi-replica training"
#: What ``copy.deepcopy`` of a config holding a module says, per Python (recorded with pyenv's 2.7.18,
#: 3.6.15 and 3.8.18; used where that interpreter is missing).
PICKLE_WORDING = {
    "2.7": "TypeError: can't pickle NotImplementedType objects",
    "3.6": "TypeError: can't pickle module objects",
    "3.8": "TypeError: cannot pickle 'module' object",
}
DEEPCOPY_SCRIPT = Path(__file__).resolve().parent / "scripts" / "deepcopy_module.py"


def version_tuple(version: str) -> tuple[int, ...]:
    """``"3.15.1"`` -> ``(3, 15, 1)``; pre-release or local tails are ignored (``"2.21.0rc1"`` -> ``(2, 21, 0)``)."""
    m = re.match(r"\d+(\.\d+)*", version.strip()) if isinstance(version, str) else None
    if not m:
        raise ValueError(f"not a version string: {version!r}")
    return tuple(int(p) for p in m.group(0).split("."))


def installed(dist: str) -> Optional[str]:
    """Version of an installed distribution (``"python"`` for the interpreter), or None if absent. ``"keras"`` is
    also found as ``keras-nightly`` (:data:`NIGHTLY`), which installs the same import name."""
    if dist == "python":
        return platform.python_version()
    for name in (dist, NIGHTLY.get(dist)):
        try:
            return md.version(name) if name else None
        except md.PackageNotFoundError:
            continue
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
    found = {dist: installed(dist) for dist in ("python", *SHOWN)}
    return {dist: v for dist, v in found.items() if v is not None}


def outside_range(found: Optional[dict[str, str]] = None) -> list[str]:
    """One phrase per version outside :data:`SUPPORTED`, e.g. ``"keras 3.9.2 (supported: 3.13-3.15)"``."""
    found = versions() if found is None else found
    return [f"{dist} {found[dist]} (supported: {low}-{high})" for dist, (low, high) in SUPPORTED.items()
            if dist in found and not version_tuple(low) <= version_tuple(found[dist])[:2] <= version_tuple(high)]


def stack_line(found: Optional[dict[str, str]] = None) -> str:
    """The one line the Setup cell prints, plus a note when something is outside the supported range."""
    found = versions() if found is None else found
    line = "stack: " + " | ".join(f"{k} {v}" for k, v in found.items())
    bad = outside_range(found)
    if not bad:
        return line + " (inside the supported range)"
    keras = found.get("keras")
    bugs = (f"\nwarning: keras {keras} has known multi-replica training bugs, fixed by {MULTI_REPLICA_FIXED}: "
            "results on 2+ replicas may be wrong." if keras and version_tuple(keras)[:2] < version_tuple(
                MULTI_REPLICA_FIXED) else "")
    return (line + "\nnote: outside the range this course is tested on: " + "; ".join(bad) + ". The lessons "
            "should still run, but some messages and behaviour may differ; a check that fails says what it "
            "expected. Supported: " + ", ".join(f"{d} {lo}-{hi}" for d, (lo, hi) in SUPPORTED.items())
            + f'. Known bad versions: TROUBLESHOOTING.md, "{VERSION_TABLE}"; check a stack with lesson 09\'s '
            "preflight.py." + bugs)


def find_interpreter(version: str) -> Optional[Path]:
    """A Python ``version`` ('3.6') under pyenv's versions folder or on PATH (pyenv shims skipped), or None."""
    if not re.fullmatch(r"\d\.\d+", version):
        raise ValueError(f"version must look like '3.6', got {version!r}")
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    hits = sorted(glob.glob(os.path.join(root, "versions", f"{version}.*", "bin", "python")))
    found = hits[-1] if hits else shutil.which(f"python{version}")
    return Path(found) if found and "/shims/" not in found else None


def pickle_wording(pythons: Sequence[str] = ("2.7", "3.6", "3.8")) -> list[dict]:
    """What ``copy.deepcopy`` of a config holding a module says, per Python version, then in this kernel: ``"live"``
    from :data:`DEEPCOPY_SCRIPT` where that interpreter is here, else ``"recorded"`` (:data:`PICKLE_WORDING`)."""
    rows = []
    for v in pythons:
        python, message, source = find_interpreter(v), PICKLE_WORDING.get(v, "?"), "recorded"
        if python is not None:
            try:
                proc = run([str(python), str(DEEPCOPY_SCRIPT)], os.environ, timeout=30)
                if proc.returncode == 0 and proc.stdout.strip():
                    message, source = proc.stdout.strip(), "live"
            except (OSError, subprocess.TimeoutExpired):
                pass
        rows.append({"python": v, "message": message, "source": source})
    proc = run([sys.executable, str(DEEPCOPY_SCRIPT)], os.environ, timeout=30)
    rows.append({"python": f"{sys.version_info.major}.{sys.version_info.minor} (this kernel)",
                 "message": proc.stdout.strip(), "source": "live"})
    return rows
