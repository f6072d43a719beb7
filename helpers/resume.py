"""Kill a ``model.fit`` job for real, restart it, check what ``BackupAndRestore`` restored (lesson 05).

Why: "a killed job resumes from its last backup" only convinces with a real process and a real ``SIGKILL``.
The training script appends ``epochs.jsonl`` lines and, once finished, writes ``result.json`` and
``final.weights.npz`` in its output folder.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Sequence, Union

import numpy as np

from .checks import positive_int, positive_number
from .subproc import Child, check_command, child_env, error_summary, strip_noise


class TrainingFailedError(RuntimeError):
    """The training process exited with an error (or before the awaited epoch)."""


class TrainingTimeoutError(TimeoutError):
    """The training process ran past its time limit; it has been killed."""


def read_epochs(out_dir: Union[str, Path]) -> list[dict]:
    """Every epoch line all runs in ``out_dir`` appended, in order: ``{"epoch", "loss", "pid"}``."""
    path = Path(out_dir) / "epochs.jsonl"
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()] if path.exists() else []


def read_result(out_dir: Union[str, Path]) -> Optional[dict]:
    """The ``result.json`` of the run that finished in ``out_dir``, or None if none finished."""
    path = Path(out_dir) / "result.json"
    return json.loads(path.read_text()) if path.exists() else None


def read_weights(out_dir: Union[str, Path]) -> list:
    """The final weights (numpy arrays) a finished run saved; ``FileNotFoundError`` if none finished."""
    with np.load(Path(out_dir) / "final.weights.npz") as z:
        return [z[f"arr_{i}"] for i in range(len(z.files))]


class TrainingRun:
    """One training process, ``python <command>`` (a :class:`helpers.subproc.Child`) writing to ``out_dir``; a
    context manager that kills it on leaving the block. Its output goes to ``out_dir/run-<n>.log`` (a new ``n``)."""

    def __init__(self, command: Union[str, Sequence[str]], out_dir: Union[str, Path], *, env: Optional[dict] = None):
        self.argv = check_command(command)
        if not str(out_dir):
            raise ValueError("out_dir must be a folder path")
        self.out_dir = Path(out_dir)
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
        env.setdefault("MULTIGPU_GPU_MEMORY_MB", "1024")  # a split GPU must also hold the notebook's share
        self.child = Child([sys.executable, *self.argv], self.log_path, env)
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

    def _failure(self, what: str) -> TrainingFailedError:
        return TrainingFailedError(f"training process {self.pid} exited with {self.returncode} "
                                   f"{what}: {error_summary(self.log(raw=True)) or 'no Python error in its log'} "
                                   f"(log: {self.log_path})")

    def wait_for_epoch(self, epoch: int, timeout: float = 120) -> dict:
        """Block until this process logged the end of ``epoch`` (1-based, logged after its backup); return the line.

        :class:`TrainingFailedError` if it exits first, :class:`TrainingTimeoutError` (killed) after ``timeout`` s.
        """
        positive_int("epoch", epoch)
        timeout = positive_number("timeout", timeout, unit="seconds")
        child, deadline = self._started(), time.time() + timeout
        while True:
            exited = child.returncode is not None  # before reading: a line written before exiting is seen
            for row in read_epochs(self.out_dir):
                if row["pid"] == child.pid and row["epoch"] == epoch:
                    return row
            if exited:
                raise self._failure(f"before finishing epoch {epoch}")
            if time.time() > deadline:
                self.stop()
                raise TrainingTimeoutError(f"epoch {epoch} not finished within {timeout:g} s; "
                                           f"process {child.pid} killed (log: {self.log_path})")
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


def run(command: Union[str, Sequence[str]], out_dir: Union[str, Path], *, timeout: float = 300,
        echo: bool = True, env: Optional[dict] = None) -> dict:
    """Run the training to the end (always cleaned up), print its output, return its ``result.json``;
    :class:`TrainingFailedError` if it fails, :class:`TrainingTimeoutError` if it hangs."""
    with TrainingRun(command, out_dir, env=env) as job:
        code = job.wait(timeout=timeout)
        if echo:
            print(job.log())
        if code != 0:
            raise job._failure("instead of 0")
    return read_result(out_dir)
