"""Every child process the course starts: one environment policy, one cleanup hook.

Why: several things can only be shown in a *new* process - device variables
such as ``CUDA_VISIBLE_DEVICES`` are read once, the replica count is fixed once
TensorFlow initialised its devices, and the Keras backend is fixed at import.
Lessons use :func:`run_python` to show each configuration side by side; the
launchers (:mod:`helpers.cluster`, :mod:`helpers.resume`, :mod:`helpers.bench`)
start their children with :func:`start` and :func:`child_env`. So every child gets
the same environment policy, and one ``atexit`` hook stops whatever still runs and
then runs the registered clean-ups (scratch folders).
"""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import subprocess
import sys
import textwrap
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence, Union

#: Settings that configure *this* process only; a child never inherits them (lesson 08's kernel runs
#: KERAS_BACKEND=jax, a worker's TF_CONFIG names one task), unless the caller passes them again.
PARENT_ONLY = ("KERAS_BACKEND", "XLA_FLAGS", "TF_CONFIG")
#: Device selection, read once when CUDA starts. Launchers pass it on (a learner's choice of GPUs holds
#: for the workers too); run_python's fresh-process demonstrations (lesson 02) start without it.
DEVICE_VARS = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")


def child_env(env: Optional[Mapping[str, str]] = None, *, fresh_devices: bool = False) -> dict[str, str]:
    """The environment of a child process: the one policy for every process the course starts.

    This process's environment without :data:`PARENT_ONLY` (and :data:`DEVICE_VARS` when
    ``fresh_devices``), with TensorFlow's log level 2 unless set, unbuffered output, and plain
    (uncoloured) tracebacks - ipykernel sets ``FORCE_COLOR``, and Python 3.13 then colours the
    exception lines the launchers read from logs. ``env`` is applied last and wins.
    """
    drop = PARENT_ONLY + (DEVICE_VARS if fresh_devices else ())
    out = {k: v for k, v in os.environ.items() if k not in drop}
    out.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    out["PYTHONUNBUFFERED"] = "1"
    out.setdefault("PYTHON_COLORS", "0")
    out.update({str(k): str(v) for k, v in (env or {}).items()})
    return out


# ---- start, track and clean up children ------------------------------------------------------

_LIVE: "weakref.WeakSet" = weakref.WeakSet()          # launchers with a .stop() method
_AT_EXIT: list[Callable[[], None]] = []
_PRCTL = None
if sys.platform.startswith("linux"):
    try:
        _PRCTL = ctypes.CDLL(None, use_errno=True).prctl  # resolved in the parent, called in the child
    except (OSError, AttributeError):  # pragma: no cover - exotic libc
        _PRCTL = None


def _die_with_parent() -> None:  # runs in the child between fork and exec: keep it tiny
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: the kernel kills the child if its launcher dies


def start(argv: Sequence[str], log_path: Union[str, Path], env: Mapping[str, str], *,
          die_with_parent: bool = True) -> subprocess.Popen:
    """Start ``argv`` in its own process group, output (stdout and stderr) to ``log_path``, no stdin."""
    if not argv:
        raise ValueError("argv must name a program")
    with open(log_path, "wb") as log:
        return subprocess.Popen(list(argv), env=dict(env), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=_die_with_parent if die_with_parent else None)


def track(launcher: object) -> None:
    """Stop ``launcher`` (anything with ``.stop()``) when this process exits, if it still runs."""
    if not callable(getattr(launcher, "stop", None)):
        raise ValueError("a tracked launcher needs a stop() method")
    _LIVE.add(launcher)


def untrack(launcher: object) -> None:
    """``launcher`` has stopped: nothing to do for it at exit."""
    _LIVE.discard(launcher)


def at_exit(callback: Callable[[], None]) -> None:
    """Run ``callback`` when this process exits, after every tracked child was stopped."""
    if not callable(callback):
        raise ValueError("callback must be callable")
    if callback not in _AT_EXIT:
        _AT_EXIT.append(callback)


@atexit.register
def stop_all() -> None:
    """The course's one exit hook: stop every tracked launcher, then run the clean-ups."""
    for launcher in list(_LIVE):
        launcher.stop()
    for callback in list(_AT_EXIT):
        callback()


@dataclass
class Result:
    """Exit code and output of a snippet run by :func:`run_python`."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def last_error_line(self) -> str:
        """The final ``SomeError: message`` line of a traceback in stderr ('' if none)."""
        lines = [ln for ln in self.stderr.splitlines() if ln and not ln.startswith(" ")]
        for ln in reversed(lines):
            head = ln.split(":", 1)[0]
            if head.endswith(("Error", "Exception", "Exit", "Interrupt")) or head.endswith("Warning"):
                return ln
        return ""


def run_python(code: str, env: Optional[Mapping[str, str]] = None, timeout: float = 120,
               echo: bool = True, quiet_tf: bool = True) -> Result:
    """Run ``code`` (dedented) with ``sys.executable`` in a new process.

    Args:
        code: Python source.
        env: variables to set for the child on top of :func:`child_env` (a fresh process:
            without this process's backend, XLA, TF_CONFIG and CUDA device variables).
        timeout: seconds before the child is killed (``subprocess.TimeoutExpired``).
        echo: print the child's stdout (and a compact stderr tail on failure).
        quiet_tf: set ``TF_CPP_MIN_LOG_LEVEL=3`` unless ``env`` says otherwise.
    """
    if not isinstance(code, str) or not code.strip():
        raise ValueError("code must be a non-empty string of Python source")
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout}")
    extra = dict(env or {})
    if quiet_tf:
        extra.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=child_env(extra, fresh_devices=True),
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    result = Result(proc.returncode, proc.stdout, proc.stderr)
    if echo:
        if result.stdout:
            print(result.stdout.rstrip())
        if not result.ok:
            print(f"[exit code {result.returncode}] {result.last_error_line() or result.stderr[-400:]}")
    return result
