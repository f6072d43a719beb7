"""Run a Python snippet in a fresh interpreter with its own environment.

Why: several things can only be shown in a *new* process - device variables
such as ``CUDA_VISIBLE_DEVICES`` are read once, the replica count is fixed once
TensorFlow initialised its devices, and the Keras backend is fixed at import.
Lessons use :func:`run_python` to show each configuration side by side.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from typing import Mapping, Optional

#: Variables removed from the child's environment unless passed explicitly, so a
#: notebook's own settings (e.g. KERAS_BACKEND=jax in lesson 08) do not leak in.
_SCRUB = ("KERAS_BACKEND", "XLA_FLAGS", "TF_CONFIG", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")


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
        env: variables to set for the child on top of this process's environment
            (minus the device/backend variables listed in ``_SCRUB``).
        timeout: seconds before the child is killed (``subprocess.TimeoutExpired``).
        echo: print the child's stdout (and a compact stderr tail on failure).
        quiet_tf: set ``TF_CPP_MIN_LOG_LEVEL=3`` unless ``env`` says otherwise.
    """
    if not isinstance(code, str) or not code.strip():
        raise ValueError("code must be a non-empty string of Python source")
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout}")
    child_env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    if quiet_tf:
        child_env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    child_env.update({str(k): str(v) for k, v in (env or {}).items()})
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=child_env,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    result = Result(proc.returncode, proc.stdout, proc.stderr)
    if echo:
        if result.stdout:
            print(result.stdout.rstrip())
        if not result.ok:
            print(f"[exit code {result.returncode}] {result.last_error_line() or result.stderr[-400:]}")
    return result
