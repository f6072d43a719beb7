"""The two-process harness of exercises 07 and 12: the learner's function runs in two real processes.

Why: a multi-worker step (07: two MultiWorkerMirroredStrategy workers) or a DDP step (12: two gloo ranks under
torchrun) is only right if it is right in two processes. The checker copies the function's source, below the
imports the workers need, into ``answer.py`` beside a copy of the lesson's worker script, in a private temporary
folder; a launcher starts the two processes there; each writes ``out-<i>.json``, which the checker reads back.
However the run ends (finished, failed, timed out, interrupted, or stopped by the check's time limit) the folder is
removed and no process is left: :mod:`helpers.subproc` stops each launcher with what it started.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Callable, Iterator, Mapping, Optional, Union

from .. import subproc
from ..checks import positive_int, positive_number

#: Seconds torchrun gets after its SIGTERM to stop its ranks (it sends them SIGTERM) before everything is killed.
TERM_GRACE_S = 10.0

#: What a launcher returns: None when the processes ran to the end, else the learner's sentence on what failed.
Launch = Callable[[Path], Optional[str]]


class AnswerSourceError(ValueError):
    """The answer's source cannot be copied into a worker script; the message says what to do."""


def answer_source(fn: Callable, where: str) -> str:
    """The dedented source of ``fn``, a ``def`` in a cell or a file (``where``: "the workers" or "the ranks")."""
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        source = ""
    if not source or getattr(fn, "__name__", "") == "<lambda>" or source.lstrip().startswith("lambda"):
        raise AnswerSourceError(f"write your answer with `def` in a cell, not lambda: the checker copies its source "
                                f"into {where}' script")
    return source


@contextlib.contextmanager
def job_folder(fn: Callable, worker_script: Union[str, Path], header: str, where: str) -> Iterator[Path]:
    """A private temporary folder holding ``answer.py`` (``header``, ``fn``'s source, ``ANSWER = <its name>``) and
    ``worker.py`` (a copy of ``worker_script``); removed on leaving the block, however it is left."""
    source = answer_source(fn, where)
    work = subproc.temp_dir("exercise-job-")
    try:
        (work / "answer.py").write_text(header + source + f"\n\nANSWER = {fn.__name__}\n")
        shutil.copy(worker_script, work / "worker.py")
        yield work
    finally:
        subproc.remove_temp_dir(work)


def run_answer(fn: Callable, worker_script: Union[str, Path], header: str, launch: Launch, *,
               where: str, n: int = 2) -> "tuple[bool, object]":
    """Run ``fn`` in ``n`` processes that ``launch(folder)`` starts in a :func:`job_folder` and waits for:
    ``(True, [process 0's report, process 1's, ...])`` (their ``out-<i>.json``), or ``(False, message)``."""
    positive_int("n", n)
    try:
        with job_folder(fn, worker_script, header, where) as work:
            failed = launch(work)
            if failed:
                return False, failed
            reports = []
            for i in range(n):
                path = work / f"out-{i}.json"
                if not path.exists():
                    return False, f"process {i} finished without writing its report (a bug of the checker?)"
                reports.append(json.loads(path.read_text()))
            return True, reports
    except AnswerSourceError as exc:
        return False, str(exc)


def torchrun(folder: Union[str, Path], args: list[str], *, timeout: float, nproc: int = 2,
             env: Optional[Mapping[str, str]] = None) -> subproc.Result:
    """``torchrun --standalone --nproc_per_node=nproc ARGS`` in ``folder`` (one CPU thread per rank), to the end.

    ``subprocess.TimeoutExpired`` after ``timeout`` s. On that or any interrupt torchrun gets ``SIGTERM`` (it stops
    its ranks) and :data:`TERM_GRACE_S` s, then it and every rank (by their tag: torchrun starts each rank in a
    session of its own, out of reach of its process group) get ``SIGKILL``.
    """
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc_per_node={positive_int('nproc', nproc)}", *args]
    return subproc.run(argv, subproc.child_env({"OMP_NUM_THREADS": "1", **(env or {})}),
                       timeout=positive_number("timeout", timeout, unit="seconds"), cwd=folder, grace=TERM_GRACE_S)
