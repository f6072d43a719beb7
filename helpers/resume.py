"""Kill a ``model.fit`` job for real, restart it, check what ``BackupAndRestore`` restored (lesson 05).

Why: the claim "a killed job resumes from its last backup and loses no epoch"
is only convincing with a real process and a real ``SIGKILL`` - no flag, no
exception, no cleanup in the victim.  :class:`TrainingRun` starts a training
script (``python train.py ...`` or ``python -m pkg.train ...``) as a child
process, waits for a given epoch to appear in the ``epochs.jsonl`` the script
appends to in its output folder, kills it, or waits for it to finish.  Like
:mod:`helpers.cluster` it never leaves a process behind: its own process group
(a kill reaches anything it started), ``SIGKILL`` on timeout or when the
``with`` block exits, an ``atexit`` hook, and ``PR_SET_PDEATHSIG`` so the child
dies with the notebook's kernel.

The script's side of the contract (file names in its output folder):
``epochs.jsonl`` (one ``{"epoch", "loss", "pid"}`` line per finished epoch),
``result.json`` and ``final.weights.npz`` (written by a run that finished).

From a notebook::

    from helpers import resume
    cmd = ["train.py", "--out", str(out), "--epochs", "4"]
    with resume.TrainingRun(cmd, out) as job:
        job.wait_for_epoch(2, timeout=120)
        job.kill()                            # -9
    resume.run(cmd, out, timeout=120)         # the same command again: resumes
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Sequence, Union

import numpy as np

from .checks import positive_int, positive_number
from .subproc import check_command, child_env, error_summary, kill_group, start, stop_group, strip_noise, track, untrack

EPOCH_LOG = "epochs.jsonl"
RESULT = "result.json"
WEIGHTS = "final.weights.npz"


class TrainingFailedError(RuntimeError):
    """The training process exited with an error (or before the awaited epoch)."""


class TrainingTimeoutError(TimeoutError):
    """The training process ran past its time limit; it has been killed."""


def read_epochs(out_dir: Union[str, Path]) -> list[dict]:
    """Every epoch line all runs in ``out_dir`` appended, in order: ``{"epoch", "loss", "pid"}``."""
    path = Path(out_dir) / EPOCH_LOG
    if not path.exists():
        return []
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def read_result(out_dir: Union[str, Path]) -> Optional[dict]:
    """The ``result.json`` of the run that finished in ``out_dir``, or None if none finished."""
    path = Path(out_dir) / RESULT
    return json.loads(path.read_text()) if path.exists() else None


def read_weights(out_dir: Union[str, Path]) -> list:
    """The final weights (numpy arrays) a finished run saved; ``FileNotFoundError`` if none finished."""

    with np.load(Path(out_dir) / WEIGHTS) as z:
        return [z[f"arr_{i}"] for i in range(len(z.files))]


class TrainingRun:
    """One training process: ``python <command>``, e.g. ``["train.py", "--out", OUT, "--epochs", "4"]``.

    A context manager: leaving the ``with`` block kills it if it still runs.
    ``out_dir`` is the folder the script writes its ``epochs.jsonl`` to; the
    process's output goes to ``out_dir/run-<n>.log`` (the first free ``n``).
    ``env`` adds environment variables.
    """

    def __init__(self, command: Union[str, Sequence[str]], out_dir: Union[str, Path], *,
                 env: Optional[dict] = None):
        self.argv = check_command(command)
        if not str(out_dir):
            raise ValueError("out_dir must be a folder path")
        self.out_dir = Path(out_dir)
        self.extra_env = {str(k): str(v) for k, v in (env or {}).items()}
        self.proc: Optional[subprocess.Popen] = None
        self.log_path: Optional[Path] = None

    def start(self) -> "TrainingRun":
        if self.proc is not None:
            raise RuntimeError("this run was already started; create a new TrainingRun to restart")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        n = 1
        while (self.out_dir / f"run-{n}.log").exists():
            n += 1
        self.log_path = self.out_dir / f"run-{n}.log"
        env = child_env(self.extra_env)  # the course's one policy (helpers.subproc)
        env.setdefault("MULTIGPU_GPU_MEMORY_MB", "1024")  # a split GPU must also hold the notebook's share
        self.proc = start([sys.executable, *self.argv], self.log_path, env)
        track(self)
        return self

    def __enter__(self) -> "TrainingRun":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _started(self) -> subprocess.Popen:
        if self.proc is None:
            raise RuntimeError("start the run first (TrainingRun(...).start() or a with block)")
        return self.proc

    @property
    def pid(self) -> int:
        return self._started().pid

    @property
    def returncode(self) -> Optional[int]:
        """None while running; ``-9`` after a ``SIGKILL``; 0 after a finished run."""
        return self._started().poll()

    def log(self, raw: bool = False) -> str:
        """The child's output so far (TensorFlow's C++ log lines hidden unless ``raw``)."""
        self._started()
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return text if raw else strip_noise(text).strip()

    def _failure(self, what: str) -> TrainingFailedError:
        return TrainingFailedError(f"training process {self.proc.pid} exited with {self.proc.returncode} "
                                   f"{what}: {error_summary(self.log(raw=True)) or 'no Python error in its log'} "
                                   f"(log: {self.log_path})")

    def wait_for_epoch(self, epoch: int, timeout: float = 120, poll: float = 0.02) -> dict:
        """Block until this process has logged the end of ``epoch`` (1-based); return that line.

        The line is written after ``BackupAndRestore`` saved that epoch, so
        the backup is on disk when this returns.  Raises
        :class:`TrainingFailedError` if the process exits first and
        :class:`TrainingTimeoutError` (after killing it) after ``timeout`` s.
        """
        positive_int("epoch", epoch)
        timeout = positive_number("timeout", timeout, unit="seconds")
        proc, deadline = self._started(), time.time() + timeout
        while True:
            exited = proc.poll() is not None  # before reading: a line written before exiting is seen
            for row in read_epochs(self.out_dir):
                if row["pid"] == proc.pid and row["epoch"] == epoch:
                    return row
            if exited:
                raise self._failure(f"before finishing epoch {epoch}")
            if time.time() > deadline:
                self.stop()
                raise TrainingTimeoutError(f"epoch {epoch} not finished within {timeout:g} s; "
                                           f"process {proc.pid} killed (log: {self.log_path})")
            time.sleep(poll)

    def kill(self) -> int:
        """``SIGKILL`` the process group (no cleanup in the child), reap it, return its exit code.

        ``-9`` means the kill hit a running process; any other code means it
        had already exited by itself (the caller should check).
        """
        proc = self._started()
        kill_group(proc)
        return proc.wait(timeout=30)

    def wait(self, timeout: float = 300) -> int:
        """Wait for the process to exit; return its code. Killed and :class:`TrainingTimeoutError` after ``timeout``."""
        timeout = positive_number("timeout", timeout, unit="seconds")
        proc = self._started()
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise TrainingTimeoutError(f"training process {proc.pid} still running after {timeout:g} s; "
                                       f"killed (log: {self.log_path})") from None

    def stop(self) -> None:
        """Kill the process group if the process still runs, and reap it. Idempotent."""
        if self.proc is not None:
            stop_group(self.proc)  # also reaches anything it started
        untrack(self)


def run(command: Union[str, Sequence[str]], out_dir: Union[str, Path], *, timeout: float = 300,
        echo: bool = True, env: Optional[dict] = None) -> dict:
    """Run the training to the end (always cleaned up); print its output; return its ``result.json``.

    Raises :class:`TrainingFailedError` if it fails, :class:`TrainingTimeoutError` if it hangs.
    """
    with TrainingRun(command, out_dir, env=env) as job:
        code = job.wait(timeout=timeout)
        if echo:
            print(job.log())
        if code != 0:
            raise job._failure("instead of 0")
    return read_result(out_dir)
