"""Every child process the course starts: one environment, one way to start, stop and read it.

Why: device variables, the replica count and the Keras backend are fixed once per process, so lessons show
each configuration in a new process, with one environment (:func:`child_env`) and its own process group.

No process outlives its job, whatever ends it (it finished, failed, timed out, was interrupted, or the kernel died):
- each child leads its own process group, and stopping it kills the group;
- each carries a tag in its environment (:data:`TAG_ENV`), which whatever it starts inherits: stopping it also kills
  every process with its tag, even one in a session of its own (torchrun starts its ranks so), on Linux;
- on Linux each child dies with its launcher (``PR_SET_PDEATHSIG``, set by a tiny exec wrapper: a ``preexec_fn``
  would fork with the parent's at-fork hooks, and JAX warns at every ``os.fork()``);
- a timeout or an interrupt (``KeyboardInterrupt``, a checker's time limit) in :func:`run` stops the child before
  the exception goes on; ``grace`` gives it a ``SIGTERM`` and that many seconds first (torchrun then stops its ranks);
- temporary folders (:func:`temp_dir`) and the other clean-ups (:func:`at_exit`) go at exit, after the children.
"""

from __future__ import annotations

import atexit
import ctypes
import importlib.util
import itertools
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Callable, Mapping, Optional, Sequence, Union

from .checks import nonneg_number, positive_int, positive_number

#: Settings of *this* process only (lesson 08's KERAS_BACKEND=jax, a worker's TF_CONFIG): never inherited.
PARENT_ONLY = ("KERAS_BACKEND", "XLA_FLAGS", "TF_CONFIG")
#: Device selection: launchers pass it on to workers; run_python's fresh processes (lesson 02) start without it.
DEVICE_VARS = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")


def child_env(env: Optional[Mapping[str, str]] = None, *, fresh_devices: bool = False) -> dict[str, str]:
    """This environment without :data:`PARENT_ONLY` (and :data:`DEVICE_VARS` if ``fresh_devices``), then ``env``.

    Also TF's log level 2 unless set, unbuffered output, and no colours (ipykernel sets ``FORCE_COLOR``).
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


# ---- start, stop and clean up children ------------------------------------------------------

_LIVE: "weakref.WeakSet[Child]" = weakref.WeakSet()   # children still to stop at exit
_AT_EXIT: list[Callable[[], None]] = []
#: libc's prctl on Linux (None elsewhere): PR_SET_PDEATHSIG is Linux's.
_PRCTL = ctypes.CDLL(None).prctl if sys.platform.startswith("linux") else None
#: The variable that tags a child and everything it starts: the tags of its launchers, comma-separated.
TAG_ENV = "MULTIGPU_PROCESS_TAG"
_TAG_COUNT = itertools.count(1)
#: Run in a fresh interpreter before the program: ask for SIGKILL when the launcher dies (PR_SET_PDEATHSIG = 1),
#: give up if it already died, then become the program (exec keeps the pid, the group and the setting).
_DIE_WITH_PARENT = ("import ctypes, os, signal, sys\n"
                    "ctypes.CDLL(None).prctl(1, signal.SIGKILL)\n"
                    "os.getppid() == int(sys.argv[1]) or os._exit(70)\n"
                    "os.execv(sys.argv[2], sys.argv[2:])\n")


def new_tag() -> str:
    """A tag no other process of this machine has: this process's pid and a counter, and random bits."""
    return f"{os.getpid()}-{next(_TAG_COUNT)}-{secrets.token_hex(3)}"


def tagged_env(env: Mapping[str, str], tag: str) -> dict[str, str]:
    """``env`` with ``tag`` added to :data:`TAG_ENV` (the launchers' tags kept: a launcher's clean-up finds what its
    children's children start)."""
    outer = env.get(TAG_ENV) or os.environ.get(TAG_ENV, "")
    return {**env, TAG_ENV: ",".join(t for t in (*outer.split(","), tag) if t)}


def tagged_pids(tag: str) -> list[int]:
    """The live processes of this user whose environment carries ``tag`` (this one excluded); [] without /proc."""
    if not tag or "," in tag:
        raise ValueError(f"tag must be one non-empty tag without commas, got {tag!r}")
    prefix, wanted, found = TAG_ENV.encode() + b"=", tag.encode(), []
    try:
        entries = [e for e in os.scandir("/proc") if e.name.isdigit() and int(e.name) != os.getpid()]
    except OSError:                        # not Linux
        return []
    for entry in entries:
        try:
            with open(os.path.join(entry.path, "environ"), "rb") as f:
                environ = f.read()
        except OSError:                    # another user's, or gone
            continue
        for var in environ.split(b"\0"):
            if var.startswith(prefix) and wanted in var[len(prefix):].split(b","):
                if pid_alive(int(entry.name)):
                    found.append(int(entry.name))
                break
    return found


def kill_tagged(tag: str) -> list[int]:
    """``SIGKILL`` every process with ``tag`` (what a child started, wherever it went); the pids signalled."""
    killed: list[int] = []
    for _ in range(3):                     # one may have started another between the look and the kill
        pids = [p for p in tagged_pids(tag) if p not in killed]
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except (ProcessLookupError, PermissionError):
                pass
    return killed


def _signal_group(proc: subprocess.Popen, sig: int) -> bool:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _program(argv: Sequence[str], env: Mapping[str, str], cwd: Union[str, os.PathLike, None]) -> str:
    """``argv[0]`` as the path that exec runs: found on the child's PATH, as Popen would (FileNotFoundError here)."""
    program = os.fspath(argv[0])
    if os.sep in program:
        return program if os.path.isabs(program) else os.path.join(os.fspath(cwd or os.getcwd()), program)
    found = shutil.which(program, path=env.get("PATH", os.defpath))
    if found is None:
        raise FileNotFoundError(f"No such file or directory: {program!r}")
    return found


def _popen(argv: Sequence[str], env: Mapping[str, str], die_with_parent: bool, tag: str,
           **kwargs) -> subprocess.Popen:
    if not argv:
        raise ValueError("argv must name a program")
    argv = [os.fspath(a) for a in argv]
    # Through the wrapper only from the main thread: PR_SET_PDEATHSIG fires when the *thread* that started the
    # child ends, and a worker thread of this process may end long before its children should.
    if (die_with_parent and _PRCTL is not None and sys.executable
            and threading.current_thread() is threading.main_thread()):
        argv = [sys.executable, "-I", "-S", "-c", _DIE_WITH_PARENT, str(os.getpid()),
                _program(argv, env, kwargs.get("cwd")), *argv[1:]]
    # A new session: the child leads its own process group, so a kill reaches what it starts.
    return subprocess.Popen(argv, env=tagged_env(env, tag), stdin=subprocess.DEVNULL, start_new_session=True,
                            **kwargs)


def _end(proc: subprocess.Popen, tag: str, grace: float = 0.0, timeout: float = 10) -> Optional[int]:
    """Stop ``proc`` and all it started: ``SIGTERM`` to its group and ``grace`` s to go (if ``grace`` and it runs),
    then ``SIGKILL`` to its group and to every process with its ``tag``; reap it. Its exit code (None: not reaped
    within ``timeout`` s, an uninterruptible sleep)."""
    try:
        if grace and proc.poll() is None and _signal_group(proc, signal.SIGTERM):
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
    finally:                                  # a second interrupt during the grace: the kills still happen
        _signal_group(proc, signal.SIGKILL)   # even after it exited: what it started may run on
        kill_tagged(tag)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:  # pragma: no cover - uninterruptible sleep
        return None


class Child:
    """``argv`` in its own process group, stdout and stderr to ``log_path``, no stdin; ``name`` as in "worker 0".

    It dies with this process (Linux) and is stopped at exit, so a crashed or finished notebook leaves no worker.
    """

    def __init__(self, argv: Sequence[str], log_path: Union[str, Path], env: Mapping[str, str], *,
                 name: str = "process"):
        self.name, self.log_path, self.tag = name, Path(log_path), new_tag()
        with open(self.log_path, "wb") as log:
            self.proc = _popen(argv, env, True, self.tag, stdout=log, stderr=subprocess.STDOUT)
        self.stopped = False  # True once stop() ended it while it ran
        self._final_log: Optional[str] = None
        _LIVE.add(self)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> Optional[int]:
        """None while it runs, ``-9`` after a ``SIGKILL``."""
        return self.proc.poll()

    @property
    def log(self) -> str:
        """Its output so far, as written (kept once it was stopped: its log file may be a temporary one)."""
        if self._final_log is not None:
            return self._final_log
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def describe(self) -> str:
        """``worker 1: exit 0`` / ``killed by SIGKILL`` / ``exit 1 - ValueError: ...`` (the log's error, one line)."""
        rc = self.returncode
        if rc is None:
            return f"{self.name}: still running"
        how = f"exit {rc}" if rc >= 0 else f"killed by {signal.Signals(-rc).name}" + (
            " (stopped by the launcher)" if self.stopped else "")
        err = error_summary(self.log) if rc else ""
        return f"{self.name}: {how}" + (f" - {err}" if err else "")

    def kill(self) -> bool:
        """``SIGKILL`` its process group while it runs (like a lost machine); False if it had exited by itself."""
        return self.proc.poll() is None and _signal_group(self.proc, signal.SIGKILL)

    def stop(self, timeout: float = 10) -> Optional[int]:
        """``SIGKILL`` its process group and every process with its tag (even after it exited: what it started may
        run on), reap it, keep its log, return its exit code (None: not reaped in time). Idempotent."""
        self.stopped |= self.proc.poll() is None
        code = _end(self.proc, self.tag, timeout=timeout)
        _LIVE.discard(self)
        if self._final_log is None and code is not None:
            self._final_log = self.log
        return code

    def wait(self, timeout: float) -> int:
        """Its exit code; after ``timeout`` s it is stopped and ``subprocess.TimeoutExpired`` raised."""
        try:
            return self.proc.wait(timeout=positive_number("timeout", timeout, unit="seconds"))
        except subprocess.TimeoutExpired:
            self.stop()
            raise


def run(argv: Sequence[str], env: Mapping[str, str], *, timeout: float, cwd: Union[str, Path, None] = None,
        merge_stderr: bool = False, die_with_parent: bool = True, grace: float = 0.0) -> "Result":
    """Run ``argv`` to the end in its own process group; its :class:`Result` (``merge_stderr``: all in stdout).

    After ``timeout`` s ``subprocess.TimeoutExpired`` is raised, and any exception on the way (an interrupt, a
    checker's time limit) goes on too, once the child and all it started are stopped: a ``SIGTERM`` and ``grace`` s
    to go first (torchrun stops its ranks), then ``SIGKILL``. What it started is killed after a normal end too.
    """
    timeout = positive_number("timeout", timeout, unit="seconds")
    grace = nonneg_number("grace", grace, unit="seconds")
    tag = new_tag()
    deadline = time.monotonic() + timeout
    with _popen(argv, env, die_with_parent, tag, cwd=cwd, text=True, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE) as proc:
        try:
            while True:
                try:       # in steps: once the child has exited, what it left running holds its pipes open
                    out, err = proc.communicate(timeout=max(0.01, min(1.0, deadline - time.monotonic())))
                    break
                except subprocess.TimeoutExpired:
                    if proc.poll() is not None:
                        _end(proc, tag)          # its pipes close: the next communicate returns what they held
                    elif time.monotonic() >= deadline:
                        raise subprocess.TimeoutExpired(proc.args, timeout) from None
        except BaseException:
            _end(proc, tag, grace)
            raise
        _end(proc, tag)
    return Result(proc.returncode, out, err or "")


def at_exit(callback: Callable[[], None]) -> None:
    """Run ``callback`` when this process exits, after every child was stopped."""
    if not callable(callback):
        raise ValueError("callback must be callable")
    if callback not in _AT_EXIT:
        _AT_EXIT.append(callback)


@atexit.register
def stop_all() -> None:
    """The course's one exit hook: stop every child still running, then run the clean-ups."""
    for child in list(_LIVE):
        child.stop()
    for callback in list(_AT_EXIT):
        callback()


_TEMP_DIRS: dict = {}   # every folder temp_dir made -> True while it is still to remove


def _remove_temp_dirs() -> None:
    for path in list(_TEMP_DIRS):
        remove_temp_dir(path)


def temp_dir(prefix: str) -> Path:
    """A new private folder (mode 0700) in the temp directory, removed by :func:`remove_temp_dir` or at exit at the
    latest (after the children that may still write there are stopped)."""
    if not prefix or not all(c.isalnum() or c in "-_" for c in prefix):
        raise ValueError(f"prefix must be letters, digits, '-' or '_', got {prefix!r}")
    path = Path(tempfile.mkdtemp(prefix=prefix))
    if not _TEMP_DIRS:
        at_exit(_remove_temp_dirs)
    _TEMP_DIRS[path] = True
    return path


def remove_temp_dir(path: Union[str, Path]) -> None:
    """Remove a folder :func:`temp_dir` made (and only such a folder; others: ``ValueError``). Idempotent."""
    path = Path(path)
    if path not in _TEMP_DIRS:
        raise ValueError(f"{path} was not made by helpers.subproc.temp_dir: not removing it")
    if _TEMP_DIRS[path]:
        shutil.rmtree(path, ignore_errors=True)
        _TEMP_DIRS[path] = False


def pid_alive(pid: int) -> bool:
    """True if process ``pid`` exists and is not a zombie (a zombie shows in /proc, on Linux)."""
    try:
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except FileNotFoundError:  # no /proc: not Linux, or it exited just now
        return not Path("/proc/self").exists()


# ---- reading a child's log: its final exception ----------------------------------------------

#: TensorFlow's C++ log lines: absl's ``I0000 00:00:...`` (TF 2.21), ``2026-12-01 04:46:00.733949: E ...`` (TF 2.20).
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
    """``text`` without TensorFlow's C++ log lines (``I0000 ...``) and colour codes (Python 3.13 under FORCE_COLOR)."""
    return "\n".join(ln for ln in _ANSI_RE.sub("", text).splitlines() if not NOISE_RE.match(ln))


def final_exception(log: str) -> str:
    """The final exception in ``log``, every line of it (Keras's ``PerReplica`` errors span hundreds); '' if none.

    It starts at the first ``SomeError: ...`` line after the last traceback (else at the last such line) and
    ends before the next traceback, chained-exception banner or ``[worker N]`` line.
    """
    lines = strip_noise(log).splitlines()
    last_tb = max((i for i, ln in enumerate(lines) if ln.startswith("Traceback (most recent call last)")), default=-1)
    starts = [i for i, ln in enumerate(lines) if _EXC_RE.match(ln) and not _EXC_END_RE.match(ln)]
    if not starts:
        return ""
    start = next((i for i in starts if i > last_tb), starts[-1]) if last_tb >= 0 else starts[-1]
    body = itertools.takewhile(lambda ln: not _EXC_END_RE.match(ln), lines[start + 1:])
    return "\n".join([lines[start], *body]).rstrip()


def error_summary(log: str, max_chars: int = 400) -> str:
    """:func:`final_exception` on one line: first and last line of a longer message, joined by `` ... ``, and
    a middle cut the same way from a line over ``max_chars``; '' if none."""
    positive_int("max_chars", max_chars, minimum=20)
    body = [flat for ln in final_exception(log).splitlines() if (flat := " ".join(ln.split()))]
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
               echo: bool = True) -> Result:
    """Run ``code`` (dedented) in a fresh Python process: ``child_env(env, fresh_devices=True)``, TF's log level 3.

    ``echo`` prints its stdout (and on failure its error); ``subprocess.TimeoutExpired`` after ``timeout`` s.
    """
    if not isinstance(code, str) or not code.strip():
        raise ValueError("code must be a non-empty string of Python source")
    extra = {"TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})}
    result = run([sys.executable, "-c", textwrap.dedent(code)], child_env(extra, fresh_devices=True), timeout=timeout)
    if echo:
        if result.stdout:
            print(result.stdout.rstrip())
        if not result.ok:
            print(f"[exit code {result.returncode}] {result.last_error_line() or result.stderr[-400:]}")
    return result


def load_script(path: Union[str, Path]) -> ModuleType:
    """Import the script ``path`` a lesson wrote (not its ``__main__`` part): the kernel uses the very file its
    processes run. Its folder is searched first for its imports, and modules from there are imported afresh.
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
