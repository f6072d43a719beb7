"""A time limit for code we call but do not control (a learner's answer), and where that code was when time ran out.

Why: a checker calls the learner's function inside the kernel. An endless loop, or a dataset that repeats forever,
would hang the kernel with no word of why. :func:`time_limit` raises :class:`TimeLimitExceeded` *inside* the
running code once its time is up, and the exception says which line of the learner's code was running.

How: in the main thread (a notebook cell runs there) ``setitimer`` sends ``SIGALRM``, whose handler raises; it
repeats every second while the learner's code runs, so a bare ``except:`` that swallows it once does not save the
loop (and never while the checker cleans up: a launcher's grace period is not cut short). Elsewhere (another
thread, or no ``SIGALRM``: Windows) a watchdog thread raises it asynchronously in the limited thread
(``PyThreadState_SetAsyncExc``, CPython); that form cannot end a blocking call (``time.sleep``, a lock) before it
returns. Either way a call stuck inside native code (a TensorFlow kernel) ends only when it returns to Python.
Threads that the limited code started and that still run its code (``strategy.run`` runs each replica in a thread
of its own) get the exception too. The previous ``SIGALRM`` handler and timer are put back afterwards.
"""

from __future__ import annotations

import contextlib
import ctypes
import linecache
import os
import re
import signal
import sys
import sysconfig
import threading
import time
import types
from pathlib import Path
from typing import Iterator, Optional

from .checks import positive_number

#: Seconds between repeats of the exception once the time is up (until the limited block is left).
REPEAT_S = 1.0
_HELPERS = str(Path(__file__).resolve().parent)
#: Where the interpreter's own code and the installed packages live: never "the learner's code".
_LIBRARIES = tuple(sorted({str(Path(p).resolve()) for key in ("stdlib", "platstdlib", "purelib", "platlib")
                           if (p := sysconfig.get_paths().get(key))}))
#: ipykernel's file name for a cell (``/tmp/ipykernel_123/456.py``); IPython's older ``<ipython-input-1-...>``.
_CELL = re.compile(r"(ipykernel_\d+[/\\]\d+\.py$|^<ipython-input-)")


class TimeLimitExceeded(BaseException):
    """Raised inside the limited code when its time is up.

    A ``BaseException`` (like ``KeyboardInterrupt``), so that the learner's ``except Exception:`` cannot swallow it.
    ``seconds`` is the limit; ``where`` what was running (see :func:`describe_frame`), filled in on the way out.
    """

    def __init__(self, seconds: float = 0.0):
        super().__init__(seconds)
        self.seconds = seconds
        self.where = ""


def is_own_code(filename: str) -> bool:
    """True for code that is neither the course's helpers, nor Python's library, nor an installed package:
    the learner's cells and files (and a test's answers)."""
    if not filename or filename.startswith("<frozen"):
        return False
    if _CELL.search(filename) or filename.startswith("<"):
        return True
    path = os.path.realpath(filename)
    return not (path.startswith(_HELPERS + os.sep) or any(path.startswith(lib + os.sep) for lib in _LIBRARIES))


def describe_frame(frame: types.FrameType) -> str:
    """``"batch_and_lr, line 3 of your cell: `while True:`"``: a frame's function, line, file and source line."""
    code, line = frame.f_code, frame.f_lineno
    name = code.co_filename
    where = "your cell" if _CELL.search(name) else os.path.basename(name) if not name.startswith("<") else name
    text = linecache.getline(name, line, frame.f_globals).strip()
    return f"{code.co_name}, line {line} of {where}" + (f": `{text}`" if text else "")


def _stack(frame: Optional[types.FrameType]) -> list[types.FrameType]:
    out = []
    while frame is not None:
        out.append(frame)
        frame = frame.f_back
    return out                          # innermost first


def _traceback_frames(exc: BaseException) -> list[types.FrameType]:
    frames, tb = [], exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    return frames[::-1]                 # innermost first


def where_it_was(exc: BaseException, others: "dict[int, types.FrameType]") -> str:
    """What was running when ``exc`` was raised: the innermost frame of the learner's code in a thread the limited
    code started (``others``: ``strategy.run``'s replica threads, where the loop is while the caller waits), else
    in its traceback, else the innermost frame of the checker (or of a library it called)."""
    mine = _traceback_frames(exc)
    for frames in [*(_stack(f) for f in others.values()), mine]:
        own = next((f for f in frames if is_own_code(f.f_code.co_filename)), None)
        if own is not None:
            return f"your code was running {describe_frame(own)}"
    checker = [f for f in mine if f.f_code.co_filename != __file__]
    inner = next((f for f in checker if os.path.realpath(f.f_code.co_filename).startswith(_HELPERS + os.sep)),
                 checker[0] if checker else None)      # the checker's own line first, else a library's
    return f"the check was in {describe_frame(inner)}" if inner is not None else "the check was running"


def _raise_in(ident: int, exc: Optional[type]) -> None:
    """Raise ``exc`` asynchronously in thread ``ident`` at its next bytecode (None: cancel a pending one)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(exc) if exc else None)


def _threads_running_own_code(before: set) -> "dict[int, types.FrameType]":
    """Threads started since ``before`` (their idents) whose stack holds the learner's code now: ident -> frame."""
    out = {}
    for ident, frame in sys._current_frames().items():
        if ident not in before and ident != threading.get_ident():
            if any(is_own_code(f.f_code.co_filename) for f in _stack(frame)):
                out[ident] = frame
    return out


def _quiet_thread_ends() -> None:
    """Let a thread that :class:`TimeLimitExceeded` ended end quietly (no "Exception in thread" traceback after
    the verdict); every other exception goes to the hook there was."""
    previous = threading.excepthook
    if getattr(previous, "quiet_time_limits", False):
        return

    def hook(args):
        if not (args.exc_type and issubclass(args.exc_type, TimeLimitExceeded)):
            previous(args)

    hook.quiet_time_limits = True
    threading.excepthook = hook


def _learner_runs(frame: Optional[types.FrameType]) -> bool:
    """True if the innermost frame that is not a library's is the learner's (not the checker cleaning up)."""
    for f in _stack(frame):
        name = f.f_code.co_filename
        if is_own_code(name):
            return True
        if os.path.realpath(name).startswith(_HELPERS + os.sep):
            return False
    return False


def _uses_alarm() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    armed, fired = True, False

    def handler(signum, frame):
        nonlocal fired
        if armed and (not fired or _learner_runs(frame)):
            fired = True
            raise TimeLimitExceeded(seconds)

    previous = signal.getsignal(signal.SIGALRM)
    old_delay, old_interval = signal.getitimer(signal.ITIMER_REAL)
    if 0 < old_delay <= seconds:        # an outer limit ends sooner: it governs
        yield
        return
    t0 = time.monotonic()
    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds, REPEAT_S)
    try:
        yield
    finally:
        armed = False                   # an alarm already on its way does nothing now
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
        if old_delay > 0:               # an outer timer: what is left of it
            signal.setitimer(signal.ITIMER_REAL, max(old_delay - (time.monotonic() - t0), 1e-3), old_interval)


@contextlib.contextmanager
def _watchdog(seconds: float) -> Iterator[None]:
    ident, done, lock = threading.get_ident(), threading.Event(), threading.Lock()

    def watch():
        wait, fired = seconds, False
        while not done.wait(wait):
            with lock:
                if not done.is_set() and (not fired or _learner_runs(sys._current_frames().get(ident))):
                    _raise_in(ident, TimeLimitExceeded)
                    fired = True
            wait = REPEAT_S

    threading.Thread(target=watch, name="time-limit", daemon=True).start()
    try:
        yield
    finally:
        with lock:
            done.set()
            _raise_in(ident, None)      # one raised just now and not yet seen: cancelled


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Run the block for at most ``seconds``; then :class:`TimeLimitExceeded` is raised inside it, its ``where``
    saying what was running. Threads the block started that still run the learner's code are stopped the same way."""
    seconds = positive_number("seconds", seconds, unit="seconds")
    before = set(sys._current_frames())
    try:
        with (_alarm if _uses_alarm() else _watchdog)(seconds):
            yield
    except TimeLimitExceeded as exc:
        if not exc.seconds:             # raised asynchronously: the class, without its limit
            exc.seconds = seconds
        others = _threads_running_own_code(before)
        exc.where = where_it_was(exc, others)
        if others:
            _quiet_thread_ends()
        for other in others:            # e.g. a replica thread of strategy.run still in the learner's loop
            _raise_in(other, TimeLimitExceeded)
        raise
