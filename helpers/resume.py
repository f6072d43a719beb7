"""Kill a ``model.fit`` job for real and start the same command again (lesson 05 and its capstone).

Why: "a killed job resumes from its last backup" only convinces with a real process and a real ``SIGKILL``.
:class:`TrainingRun` runs ``python <command>`` in its own process group, in its output folder (a script that
writes its files with relative paths writes them there), and waits for a line in its log.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Sequence, Union

from .checks import positive_number
from .subproc import Child, check_command, child_env, strip_noise

#: Run the rest of argv in the folder given first: ``os.execv`` keeps the pid and the process group.
_IN_FOLDER = "import os, sys; os.chdir(sys.argv[1]); os.execv(sys.executable, [sys.executable, *sys.argv[2:]])"


class TrainingTimeoutError(TimeoutError):
    """The training process ran past its time limit; it has been killed."""


class TrainingRun:
    """One training process, ``python <command>`` (a :class:`helpers.subproc.Child`) run in ``out_dir``; a context
    manager that kills it on leaving the block. Its output goes to ``out_dir/run-<n>.log`` (a new ``n``)."""

    def __init__(self, command: Union[str, Sequence[str]], out_dir: Union[str, Path], *, env: Optional[dict] = None):
        self.argv = check_command(command)
        if self.argv[0].endswith(".py"):
            self.argv[0] = str(Path(self.argv[0]).resolve())     # the process starts in out_dir
        if not str(out_dir):
            raise ValueError("out_dir must be a folder path")
        self.out_dir = Path(out_dir).resolve()
        self.extra_env = {str(k): str(v) for k, v in (env or {}).items()}
        self.child: Optional[Child] = None
        self.log_path: Optional[Path] = None

    def start(self) -> "TrainingRun":
        if self.child is not None:
            raise RuntimeError("this run was already started; create a new TrainingRun to restart")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        logs = (self.out_dir / f"run-{n}.log" for n in itertools.count(1))
        self.log_path = next(p for p in logs if not p.exists())
        env = child_env(self.extra_env)
        env.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")   # the notebook's kernel keeps its share of the GPUs
        self.child = Child([sys.executable, "-c", _IN_FOLDER, str(self.out_dir), *self.argv], self.log_path, env)
        return self

    def __enter__(self) -> "TrainingRun":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _started(self) -> Child:
        if self.child is None:
            raise RuntimeError("start the run first (TrainingRun(...).start() or a with block)")
        return self.child

    @property
    def pid(self) -> int:
        return self._started().pid

    @property
    def returncode(self) -> Optional[int]:
        """None while running; ``-9`` after a ``SIGKILL``; 0 after a finished run."""
        return self._started().returncode

    def log(self, raw: bool = False) -> str:
        """The child's output so far (TensorFlow's C++ log lines hidden unless ``raw``)."""
        text = self._started().log
        return text if raw else strip_noise(text).strip()

    def wait_for(self, text: str, timeout: float = 120) -> bool:
        """Block until the log holds ``text`` (True) or the process exited without it (False);
        :class:`TrainingTimeoutError` (the process killed) after ``timeout`` seconds."""
        if not isinstance(text, str) or not text:
            raise ValueError(f"text must be a non-empty str, got {text!r}")
        timeout = positive_number("timeout", timeout, unit="seconds")
        child, deadline = self._started(), time.monotonic() + timeout
        while True:
            exited = child.returncode is not None  # before reading: a line written before exiting is seen
            if text in child.log:
                return True
            if exited:
                return False
            if time.monotonic() > deadline:
                self.stop()
                raise TrainingTimeoutError(f"no {text!r} in the log of process {child.pid} within {timeout:g} s; "
                                           f"killed (log: {self.log_path})")
            time.sleep(0.02)

    def kill(self) -> Optional[int]:
        """``SIGKILL`` the process group, reap it, return its exit code (``-9``; another: it had exited itself)."""
        return self._started().stop()

    def wait(self, timeout: float = 300) -> int:
        """Wait for the process to exit; return its code. Killed and :class:`TrainingTimeoutError` after ``timeout``."""
        child = self._started()
        try:
            return child.wait(timeout)
        except subprocess.TimeoutExpired:
            raise TrainingTimeoutError(f"training process {child.pid} still running after {timeout:g} s; "
                                       f"killed (log: {self.log_path})") from None

    def stop(self) -> None:
        """Kill the process group if it still runs, and reap it. Idempotent."""
        if self.child is not None:
            self.child.stop()

