"""The two-process harness of exercises 07 and 12: the learner's function runs in two real processes.

Why: a multi-worker step (07: two MultiWorkerMirroredStrategy workers) or a DDP step (12: two gloo ranks under
torchrun) is only right if it is right in two processes. The checker copies the function's source, below the
imports the workers need, into ``answer.py`` beside a copy of the lesson's worker script, in a private temporary
folder; a launcher starts the two processes there; each writes ``out-<k>-<i>.json`` for the k-th answer, which
the checker reads back. However the run ends (finished, failed, timed out, interrupted, or stopped by the check's
time limit) the folder is removed and no process is left: :mod:`helpers.subproc` stops each launcher with what it
started.

A learner's check runs one answer. :func:`run_answers` runs several, one after the other in the same processes
(each on its own fresh model), so that the course's tests judge many answers for the cost of one start of the
frameworks; an answer that raises, or waits forever, ends the job for all, so such an answer runs alone.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Callable, Iterator, Mapping, Optional, Sequence, Union

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
def job_folder(fns: Sequence[Callable], worker_script: Union[str, Path], header: str, where: str) -> Iterator[Path]:
    """A private temporary folder holding ``answer.py`` (``header``, the source of each of ``fns``, then
    ``ANSWERS = [<their names>]``) and ``worker.py`` (a copy of ``worker_script``); removed on leaving the block,
    however it is left. A ``ValueError`` for no function or two of one name (the second would hide the first)."""
    if not fns:
        raise ValueError("fns must hold at least one function, got none")
    sources, names = [answer_source(fn, where) for fn in fns], [fn.__name__ for fn in fns]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"each answer needs a name of its own in one job, {twice} appear more than once")
    work = subproc.temp_dir("exercise-job-")
    try:
        (work / "answer.py").write_text(header + "\n\n".join(sources) + f"\n\nANSWERS = [{', '.join(names)}]\n")
        shutil.copy(worker_script, work / "worker.py")
        yield work
    finally:
        subproc.remove_temp_dir(work)


def run_answers(fns: Sequence[Callable], worker_script: Union[str, Path], header: str, launch: Launch, *,
                where: str, n: int = 2) -> "list[tuple[bool, object]]":
    """Run each of ``fns`` in turn in the ``n`` processes that ``launch(folder)`` starts in a :func:`job_folder`
    and waits for: for each, ``(True, [process 0's report, process 1's, ...])`` (their ``out-<k>-<i>.json``), or
    ``(False, message)``; when the job fails, or an answer cannot be copied, every answer gets the message."""
    positive_int("n", n)
    try:
        with job_folder(fns, worker_script, header, where) as work:
            failed = launch(work)
            if failed:
                return [(False, failed)] * len(fns)
            results: "list[tuple[bool, object]]" = []
            for k in range(len(fns)):
                paths = [work / f"out-{k}-{i}.json" for i in range(n)]
                missing = [i for i, path in enumerate(paths) if not path.exists()]
                if missing:
                    results.append((False, f"process {missing[0]} finished without writing its report (a bug of "
                                           "the checker?)"))
                else:
                    results.append((True, [json.loads(path.read_text()) for path in paths]))
            return results
    except AnswerSourceError as exc:
        return [(False, str(exc))] * len(fns)


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
