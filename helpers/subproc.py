"""Every child process the course starts: one environment, one way to start, stop and read it.

Why: several things can only be shown in a *new* process - device variables
such as ``CUDA_VISIBLE_DEVICES`` are read once, the replica count is fixed once
TensorFlow initialised its devices, and the Keras backend is fixed at import.
Lessons use :func:`run_python` to show each configuration side by side; the
launchers (:mod:`helpers.cluster`, :mod:`helpers.resume`) start their children with
:func:`start` and end them with :func:`kill_group` and :func:`stop_group`; the benchmark and the
time capsule run theirs to the end with :func:`run`. So every child gets the same
environment policy, its own process group (a kill reaches anything it started), and
one ``atexit`` hook stops whatever still runs and then runs the registered clean-ups
(scratch folders). :func:`final_exception` and :func:`error_summary` read the error
out of a child's log, and :func:`load_script` imports a script a lesson wrote into this process.
"""

from __future__ import annotations

import atexit
import ctypes
import importlib.util
import os
import re
import signal
import subprocess
import sys
import textwrap
import weakref
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Callable, Mapping, Optional, Sequence, Union

from .checks import positive_int, positive_number

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


def check_command(command: Union[str, os.PathLike, Sequence[str]]) -> list[str]:
    """The arguments of ``python <command>``: a script path, or ``["-m", "pkg.train", ...]``, checked."""
    if isinstance(command, (str, os.PathLike)):
        command = [os.fspath(command)]
    command = list(command)
    if not command or not all(isinstance(c, str) for c in command):
        raise ValueError("command must be a script path or a list of strings, e.g. ['-m', 'pkg.train', '--lr', '0.1']")
    if command[0] == "-m":
        if len(command) < 2:
            raise ValueError("'-m' must be followed by a module name")
    elif command[0].endswith(".py") and not Path(command[0]).is_file():
        raise ValueError(f"worker script not found: {command[0]}")
    return command


# ---- start, stop, track and clean up children ------------------------------------------------

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


def _popen(argv: Sequence[str], env: Mapping[str, str], die_with_parent: bool, **kwargs) -> subprocess.Popen:
    if not argv:
        raise ValueError("argv must name a program")
    # A new session: the child leads its own process group, so kill_group reaches what it starts.
    # die_with_parent needs a preexec_fn, i.e. a fork that runs the parent's at-fork hooks (JAX warns).
    return subprocess.Popen(list(argv), env=dict(env), stdin=subprocess.DEVNULL, start_new_session=True,
                            preexec_fn=_die_with_parent if die_with_parent else None, **kwargs)


def start(argv: Sequence[str], log_path: Union[str, Path], env: Mapping[str, str], *,
          die_with_parent: bool = True) -> subprocess.Popen:
    """Start ``argv`` in its own process group, output (stdout and stderr) to ``log_path``, no stdin.

    ``die_with_parent``: the kernel kills the child when this process dies (Linux), so a
    crashed notebook kernel leaves no worker behind.
    """
    with open(log_path, "wb") as log:
        return _popen(argv, env, die_with_parent, stdout=log, stderr=subprocess.STDOUT)


def kill_group(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> bool:
    """Send ``sig`` to the process group of ``proc`` while ``proc`` runs; True if it was sent.

    False: ``proc`` had already exited by itself (the caller checks its exit code).
    """
    if proc.poll() is not None:
        return False
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def stop_group(proc: subprocess.Popen, timeout: float = 10) -> Optional[int]:
    """``SIGKILL`` the process group of ``proc``, reap ``proc``, return its exit code. Idempotent.

    The group is signalled even after ``proc`` exited: what it started may still run there
    (a group lives on while any member does, and its id is not reused meanwhile).
    None if ``proc`` did not exit within ``timeout`` s (a process in uninterruptible sleep).
    """
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:  # pragma: no cover - uninterruptible sleep
        return None


def run(argv: Sequence[str], env: Mapping[str, str], *, timeout: float, cwd: Union[str, Path, None] = None,
        merge_stderr: bool = False, die_with_parent: bool = True) -> "Result":
    """Run ``argv`` to the end in its own process group and return its :class:`Result` (text output).

    ``merge_stderr`` interleaves stderr with stdout (``Result.stderr`` is then ``''``).
    After ``timeout`` s the whole group is killed and ``subprocess.TimeoutExpired`` raised.
    """
    timeout = positive_number("timeout", timeout, unit="seconds")
    with _popen(argv, env, die_with_parent, cwd=cwd, text=True, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_group(proc)
            raise
    return Result(proc.returncode, out, err or "")


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


def pid_alive(pid: int) -> bool:
    """True if process ``pid`` exists and is not a zombie (Linux: reads /proc; elsewhere: kill 0)."""
    stat = Path(f"/proc/{pid}/stat")
    if Path("/proc/self/stat").exists():
        try:
            return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except (FileNotFoundError, ProcessLookupError, IndexError):
            return False
    try:  # pragma: no cover - non-Linux
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ---- reading a child's log: its final exception ----------------------------------------------

#: Lines of TensorFlow's C++ logging (absl format) hidden from log displays by default.
#: absl's ``I0000 00:00:...`` (TF 2.21) and the ``2026-12-01 04:46:00.733949: E external/...`` lines TF 2.20
#: prints before absl is initialised.
NOISE_RE = re.compile(r"^([IWEF]\d{4} \d\d:\d\d:\d\d|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] "
                      r"|WARNING: All log messages before absl::InitializeLog)")
#: Terminal colour/style escape sequences (``\x1b[1;35m``...).
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_EXC_RE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b:?")
#: Lines that end an exception's (multi-line) message: a new traceback, a chained-exception
#: banner, a ``[worker 1] ...`` line of a worker script, ``Exception ignored in ...`` at shutdown.
_EXC_END_RE = re.compile(r"^(Traceback \(most recent call last\)|During handling of the above exception"
                         r"|The above exception was the direct cause|Exception ignored|\[[\w-]+ \d+\] )")


def strip_noise(text: str) -> str:
    """Drop TensorFlow's C++ log lines (``I0000 ...``, ``W0000 ...``) and ANSI colour codes from ``text``.

    Python 3.13 colours the exception line of a traceback (``\\x1b[1;35mValueError\\x1b[0m: ...``)
    when ``FORCE_COLOR`` is set, and ipykernel sets it for every process a notebook starts.
    """
    return "\n".join(ln for ln in _ANSI_RE.sub("", text).splitlines() if not NOISE_RE.match(ln))


def final_exception(log: str) -> str:
    """The whole final exception of a Python traceback in ``log``: ``ExcType: message``, every line of it.

    A message can span hundreds of lines (Keras prints the per-replica tensors of
    its ``PerReplica`` error), so this does not stop at the first or look at the last
    line of the log: it finds the last ``Traceback (most recent call last):``, skips
    its indented frames and keeps the exception line with everything up to the next
    traceback, chained-exception banner, ``[worker N]`` line or the end of the log
    (TF's C++ log lines removed).  Without a traceback, the last line that looks like
    ``SomeError: ...`` starts it.  Returns ``''`` if there is none.
    """
    lines = strip_noise(log).splitlines()
    start = None
    tracebacks = [i for i, ln in enumerate(lines) if ln.startswith("Traceback (most recent call last)")]
    if tracebacks:
        i = tracebacks[-1] + 1
        while i < len(lines) and (not lines[i].strip() or lines[i][0].isspace()):
            i += 1  # the frames: '  File "...", line 3, in f' and their indented source lines
        if i < len(lines) and _EXC_RE.match(lines[i]):
            start = i
    if start is None:
        candidates = [i for i, ln in enumerate(lines) if _EXC_RE.match(ln) and not _EXC_END_RE.match(ln)]
        if not candidates:
            return ""
        start = candidates[-1]
    body = [lines[start]]
    for ln in lines[start + 1:]:
        if _EXC_END_RE.match(ln):
            break
        body.append(ln)
    return "\n".join(body).rstrip()


def error_summary(log: str, max_chars: int = 400) -> str:
    """:func:`final_exception` on one line ('' if none): type, key phrase and how the message ends.

    A message of more than three lines keeps its first and last line, joined by
    `` ... ``; a line longer than ``max_chars`` loses its middle the same way.
    """
    positive_int("max_chars", max_chars, minimum=20)
    body = [" ".join(ln.split()) for ln in final_exception(log).splitlines()]
    body = [ln for ln in body if ln]
    if not body:
        return ""
    text = " ".join(body) if len(body) <= 3 else f"{body[0]} ... {body[-1]}"
    return text if len(text) <= max_chars else text[: max_chars // 2] + " ... " + text[-max_chars // 2:]


@dataclass
class Result:
    """Exit code and output of a child run to the end (:func:`run`, :func:`run_python`)."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def last_error_line(self) -> str:
        """The final exception in stderr on one line (:func:`error_summary`), '' if none."""
        return error_summary(self.stderr)


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
    extra = dict(env or {})
    if quiet_tf:
        extra.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    # No die-with-parent hook: it would make every JAX kernel (lessons 08, 10) warn about os.fork().
    result = run([sys.executable, "-c", textwrap.dedent(code)], child_env(extra, fresh_devices=True),
                 timeout=timeout, die_with_parent=False)
    if echo:
        if result.stdout:
            print(result.stdout.rstrip())
        if not result.ok:
            print(f"[exit code {result.returncode}] {result.last_error_line() or result.stderr[-400:]}")
    return result


def load_script(path: Union[str, Path]) -> ModuleType:
    """Import the Python file ``path`` as a module (its ``if __name__ == "__main__":`` part does not run).

    Why: lessons write scripts with ``%%writefile`` (06's benchmark, 09's input module); the kernel
    imports that very file - one source of truth for the kernel and the processes that run it.
    The script's folder is searched first for its own imports (as ``python path`` does), and
    modules imported from that folder before are imported afresh, so an edited file counts.
    """
    path = Path(path).resolve()
    if path.suffix != ".py" or not path.is_file():
        raise ValueError(f"not a Python file: {path} (run the %%writefile cell that writes it first)")
    folder = str(path.parent)
    for name, mod in list(sys.modules.items()):         # an earlier load's sibling modules: forget them
        file = getattr(mod, "__file__", None)
        if isinstance(file, str) and os.path.dirname(os.path.abspath(file)) == folder:
            del sys.modules[name]
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    finally:
        sys.path.remove(folder)
    return module
