"""The course's pytest plugin (loaded by the root conftest.py): what it does to the notebooks nbval runs.

1. Time budgets: nbval turns each cell into a test item; the cell times (set-up, call, tear-down) are added
   up per notebook and printed as a table. In quick mode every notebook has a budget of ``NB_BUDGET_S``
   seconds (40 s): over it is "over budget", over twice it FAILS the run, so slow lessons cannot creep in.
   Full mode trains for real and has no budget. With ``NB_TIMES_JSON=path`` the times are also written
   there, with the mode and the stack's versions (``tools/timings.py record`` reads it). Each notebook's CPU
   seconds are measured too (its kernel's, with the child processes the kernel waited for, first runs only, where
   ``/proc`` exists). ``--shared-cores`` says the session shares the cores with others (CI's full run: two lesson
   sessions at once, beside tests): a lesson over twice its budget in wall time then fails only when its CPU
   seconds are over twice too, since waiting for a core another session holds is not the lesson's slowness; a
   lesson run alone (``make notebooks``, ``bash .ci/run fast``, ``make timings``) is judged on wall time.
2. What the learner sees: a cell whose outputs hold native start-up noise or a stray result fails
   (the rule is ``nblint.output_problems``).
3. The error index: when the whole suite ran (tests and every notebook), every message listed in
   TROUBLESHOOTING.md must have been produced by this run.
4. A learner's kernel: each notebook's kernel starts with the environment this session started with (what make
   gave it), not with what unit tests set in this process since (tests/conftest.py's ``MPLBACKEND=Agg`` and
   ``TF_CPP_MIN_LOG_LEVEL``, a test's ``MULTIGPU_*`` variable), so figures are drawn and start-up noise shows as a
   learner would see it; and in a fresh temporary folder, not the notebook's own (as on Colab, where the notebook
   is not in the working directory), so no cell depends on the folder it starts from. A setting the run was started with reaches the
   kernels as it is (``make test STACK=hosted`` starts it with ``MULTIGPU_JAX_DEVICES=2``: the JAX lessons run on
   Kaggle's count of 2 devices, read by helpers.config like any learner's setting).
5. Executed copies: with ``NB_EXECUTED_DIR=dir``, each notebook whose every cell passed is written there with its
   outputs, as nbformat stores it (the website renders these instead of running the lessons again); a notebook
   that failed leaves no copy, and an older copy of it is removed.
6. Re-runs, the house rule that any cell run twice gives the same result: ``NB_RERUN=each`` runs every cell a
   second time right after its first run (a learner's Shift+Enter twice), ``NB_RERUN=all`` runs the whole notebook
   a second time after its last cell ("Run All" twice), in the same kernel. Only what the plain run cannot prove
   is added: the first runs are the plain run (their outputs are the ones checked, indexed and copied, their
   seconds the ones budgeted). No cell may refuse a re-run: a second run that fails fails the cell.
7. Which stack: ``make test`` exports ``STACK``; a lesson whose registry entry's ``stacks`` leaves it out is not run.
   The second stack's run: ``--stack-only`` keeps the notebooks and the tests that touch the stack (a framework,
   the helpers, the stack's Python: tools/testscope.py decides from each test's source, so nobody keeps a list)
   and leaves out the stack-free tests and those marked ``one_stack`` (one stack's run covers them); the first
   stack's run ran them all. Every test item carries the ``stack`` mark when it touches the stack (``-m stack``).
8. A run split in sessions (the tests, the notebooks; the tests themselves as N sessions at once, ``--shard=K/N``:
   item K, K+N, K+2N..., each parametrized case an item, so that a file of heavy cases is shared out) keeps the
   error-index check whole: each session writes what it printed to its own ``--outputs-file``, and
   ``python3 tools/error_index.py check FILE...`` checks them together once all have ended.
9. Slow tests: a test that took over ``SLOW_S`` seconds without the ``slow`` mark is named in the summary.
10. Where the CPU goes: ``--cpu-files=N`` adds up each test's CPU seconds (this process's and those of the child
   processes it waited for, with theirs: a framework started in a child costs seconds) per test file, and the
   summary names the N files that took most. CI's runs are bound by the CPU, so these, not wall times, say which
   tests to make cheaper.
"""


import os
import resource
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import error_index
import pytest
import testscope
from nblint import output_problems
from nbtemplate import canonical_text

from helpers import config  # standard library only: the mode is read there, as everywhere

_NB_TIMES: dict = defaultdict(float)
_NB_CPU: dict = {}                          # notebook path -> CPU seconds of its cells' first runs (None: unknown)
_NB_RERUN_TIMES: dict = defaultdict(float)
_NB_FAILED: set = set()
BUDGET_S = float(os.environ.get("NB_BUDGET_S", "40"))
#: A notebook over FAIL_FACTOR x its budget fails the run.
FAIL_FACTOR = 2.0
_PACKAGES = ("tensorflow", "keras", "jax", "jaxlib", "tf-keras", "numpy", "nbval")


def budget(path: str, mode: str | None = None) -> float | None:
    """Time budget of a notebook in seconds (the same for every lesson), or None in full mode."""
    return None if (mode or config.mode()) == "full" else BUDGET_S


def verdict(secs: float, budget_s: float | None, failed: bool = False, cpu: float | None = None) -> str:
    """'FAILED' (a cell failed), 'FAILED: over 2x budget', 'over budget' or 'ok'. ``cpu``: the notebook's CPU
    seconds in a session that shares the cores (``--shared-cores``), None otherwise: over twice the budget in wall
    time, it fails only when ``cpu`` is over twice too ('over budget (over 2x in wall time only, ...)')."""
    if secs < 0 or (cpu is not None and cpu < 0):
        raise ValueError(f"secs and cpu must be >= 0, got secs={secs}, cpu={cpu}")
    if failed:
        return "FAILED"
    if budget_s is not None and secs > FAIL_FACTOR * budget_s:
        if cpu is None or cpu > FAIL_FACTOR * budget_s:
            return f"FAILED: over {FAIL_FACTOR:g}x budget"
        return (f"over budget (over {FAIL_FACTOR:g}x in wall time only, {cpu:.0f} CPU seconds: the cores were "
                "shared)")
    if budget_s is not None and secs > budget_s:
        return "over budget"
    return "ok"


def budget_failures(times: dict, mode: str | None = None, cpu: dict | None = None) -> list:
    """Notebooks (sorted) whose time is over twice their budget (``cpu``: path -> CPU seconds, in a session that
    shares the cores: over twice in CPU seconds too)."""
    return sorted(p for p, secs in times.items()
                  if verdict(secs, budget(p, mode), cpu=(cpu or {}).get(p)).startswith("FAILED"))


def process_cpu_seconds(pid: int) -> float | None:
    """CPU seconds so far of process ``pid`` (all its threads) and of the child processes it has waited for
    (``/proc/<pid>/stat``: utime, stime, cutime, cstime), or None where there is no such file (not Linux, or the
    process is gone)."""
    if pid < 1:
        raise ValueError(f"pid must be a positive process id, got {pid}")
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()    # after "pid (name) ": state is field 3, utime field 14
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _cell_pid(item) -> int:
    """The process that runs a cell: its notebook's kernel (nbval's), or this one (a cell that runs in-process)."""
    km = getattr(getattr(getattr(item, "parent", None), "kernel", None), "km", None)
    process = getattr(getattr(km, "provisioner", None), "process", None)
    return getattr(process, "pid", None) or os.getpid()


# ---- a learner's kernel, and the executed copies -----------------------------------------------------------

#: The environment this session started with (the root conftest loads this plugin before any test module).
_SESSION_ENV = dict(os.environ)


def _is_cell(item) -> bool:
    """An nbval cell item (a notebook's code cell)."""
    return str(getattr(item, "fspath", "")).endswith(".ipynb") and hasattr(item, "cell_num")


_KERNEL_DIRS: dict = {}                     # notebook path -> the temporary folder its kernel started in


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    """nbval starts a notebook's kernel in its first cell's set-up, from ``os.environ``, in the notebook's folder:
    give it the learner's environment and a fresh temporary folder instead."""
    if not _is_cell(item):
        yield
        return
    import nbval.plugin

    saved, start_kernel = dict(os.environ), nbval.plugin.RunningKernel
    if item.parent.kernel is None:
        folder = _KERNEL_DIRS.setdefault(str(item.fspath), tempfile.mkdtemp(prefix="nbval-kernel-"))
        nbval.plugin.RunningKernel = lambda *args, cwd=None, **kw: start_kernel(*args, cwd=folder, **kw)
    os.environ.clear()
    os.environ.update(_SESSION_ENV)
    try:
        yield
    finally:
        nbval.plugin.RunningKernel = start_kernel
        os.environ.clear()
        os.environ.update(saved)


_CELL_OUTPUTS: dict = defaultdict(dict)     # notebook path -> {cell number: outputs}, cells that passed


# ---- re-runs (NB_RERUN=each|all) --------------------------------------------------------------------------

RERUN_MODES = ("", "each", "all")
_RERUN_S: dict = defaultdict(float)         # item node id -> seconds its re-runs took (not budgeted)


def rerun_mode() -> str:
    mode = os.environ.get("NB_RERUN", _SESSION_ENV.get("NB_RERUN", ""))
    if mode not in RERUN_MODES:
        raise pytest.UsageError(f"NB_RERUN={mode!r}: use NB_RERUN=each, NB_RERUN=all or leave it unset")
    return mode


def pytest_configure(config):
    rerun_mode()                                 # a wrong NB_RERUN stops the run before any notebook starts
    if config.getoption("--cpu-files", 0) < 0:
        raise pytest.UsageError(f"--cpu-files={config.getoption('--cpu-files')}: give a number of files, 1 or more "
                                "(0, the default, names none)")


# ---- the second stack's run (--stack-only) and slow tests --------------------------------------------------

#: A test over this many seconds must be marked slow (the summary names those that are not).
SLOW_S = 30.0
_LEFT_OUT: list = []                        # (node id, why) of the tests --stack-only left out
_UNMARKED_SLOW: list = []                   # (seconds, node id) of tests over SLOW_S without the slow mark


def pytest_addoption(parser):
    parser.addoption("--stack-only", action="store_true", default=False,
                     help="the second stack's run: only the notebooks and the tests that touch the stack "
                          "(tools/testscope.py), not the stack-free ones nor those marked one_stack")
    parser.addoption("--outputs-file", action="append", default=[],
                     help="one session of a run split in several (make test TEST_PATHS=tests, TEST_PATHS=notebooks, "
                          "--shard): write what it printed here, for `python3 tools/error_index.py check FILE...` "
                          "over every session's file, in place of this session's error-index check")
    parser.addoption("--shard", default=None, metavar="K/N",
                     help="run items K, K+N, K+2N... (1 <= K <= N) of those collected: N sessions at once share "
                          "the tests out on a machine with cores to spare")
    parser.addoption("--shared-cores", action="store_true", default=False,
                     help="this session shares the cores with other sessions (CI's full run): a lesson over twice "
                          "its budget in wall time fails only when its CPU seconds are over twice too")
    parser.addoption("--cpu-files", type=int, default=0, metavar="N",
                     help="name the N test files that took most CPU seconds (this process's and its children's)")


# ---- where the CPU goes (--cpu-files) ----------------------------------------------------------------------

_CPU_S: dict = defaultdict(float)           # test file -> CPU seconds of its items (self + waited-for children)
_CPU_ITEMS: dict = defaultdict(int)         # test file -> items run


def cpu_seconds() -> float:
    """CPU seconds so far of this process and of every child process it has waited for (and theirs)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def top_cpu_files(cpu: dict, items: dict, n: int) -> "list[str]":
    """The summary's lines: the session's total, then the ``n`` files that took most CPU seconds, most first."""
    if n < 1:
        raise ValueError(f"n must be a positive number of files, got {n!r}")
    lines = [f"CPU seconds: {sum(cpu.values()):.0f} in {sum(items.values())} test(s) (this process and the "
             "children it waited for)"]
    for path, secs in sorted(cpu.items(), key=lambda kv: (-kv[1], kv[0]))[:n]:
        lines.append(f"{secs:8.1f} s  {path} ({items[path]} test(s))")
    return lines


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not item.config.getoption("--cpu-files"):
        yield
        return
    start = cpu_seconds()
    yield
    path = item.nodeid.split("::")[0]
    _CPU_S[path] += cpu_seconds() - start
    _CPU_ITEMS[path] += 1


def shard_of(spec: str) -> "tuple[int, int]":
    """``"K/N"`` as (K, N), 1 <= K <= N; a ``pytest.UsageError`` that says what is wrong otherwise."""
    try:
        k, n = (int(part) for part in spec.split("/"))
    except ValueError:
        raise pytest.UsageError(f"--shard={spec!r}: expected K/N, e.g. 1/2") from None
    if not 1 <= k <= n:
        raise pytest.UsageError(f"--shard={spec!r}: K must be between 1 and N")
    return k, n


def on_this_stack(path) -> bool:
    """Whether ``make test`` on this stack (``STACK``, the Makefile's) runs the lesson: its registry entry's
    ``stacks``; every lesson when ``STACK`` is unset (pytest run by hand)."""
    stack = os.environ.get("STACK") or _SESSION_ENV.get("STACK")
    if not stack:
        return True
    import json

    notebook = json.loads(Path(path).read_text(encoding="utf-8"))
    entry = notebook.get("metadata", {}).get("course", {}) if isinstance(notebook, dict) else {}
    return stack in entry.get("stacks", [stack])   # a file with no registry entry (a test's stand-in) runs


def why_stack(item) -> "str | None":
    """Why a test item touches the stack (a notebook always does), or None for a stack-free test."""
    if str(getattr(item, "fspath", "")).endswith(".ipynb"):
        return "a notebook"
    path = Path(str(item.fspath))
    why = testscope.why_stack(path.resolve()) if path.suffix == ".py" else f"a {path.suffix} item"
    if why is None and set(getattr(item, "fixturenames", ())) & testscope.conftest_fixtures():
        why = "uses a fixture of tests/conftest.py (the unit tests' stack set-up)"
    return why


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    keep, stacks = [], {}
    for item in items:
        path = str(getattr(item, "fspath", ""))
        if path.endswith(".ipynb") and not stacks.setdefault(path, on_this_stack(path)):
            _LEFT_OUT.append((item.nodeid, "not on this stack"))
            continue
        why = why_stack(item)
        if why is not None:
            item.add_marker(pytest.mark.stack(why))
        if config.getoption("stack_only") and (why is None or item.get_closest_marker("one_stack")):
            _LEFT_OUT.append((item.nodeid, "stack-free" if why is None else "one_stack"))
        else:
            keep.append(item)
    if config.getoption("shard"):
        k, n = shard_of(config.getoption("shard"))
        keep = [item for i, item in enumerate(keep) if i % n == k - 1]
    if len(keep) < len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep


def _cells_of(item) -> list:
    return [i for i in item.session.items if i.parent is item.parent]


def _rerun_failed(item, what: str, exc: BaseException):
    """The error nbval reports for a re-run that failed, saying which re-run."""
    from nbval.plugin import NbCellError

    inner = getattr(exc, "inner_traceback", None)
    return NbCellError(item.cell_num, f"{what}: {exc}", item.cell.source, inner)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    mode = rerun_mode() if _is_cell(item) else ""
    path, pid = item.nodeid.split("::")[0], _cell_pid(item)      # the notebook, as _NB_TIMES names it
    before = process_cpu_seconds(pid) if path.endswith(".ipynb") else None
    result = yield
    if path.endswith(".ipynb"):         # the first run's CPU seconds; unknown (None) once any cell's is
        after = process_cpu_seconds(pid)
        known = before is not None and after is not None and _NB_CPU.get(path, 0.0) is not None
        _NB_CPU[path] = _NB_CPU.get(path, 0.0) + (after - before) if known else None
    if mode == "each":
        first, start = item.test_outputs, time.perf_counter()
        try:
            item.runtest()
            second = output_problems(item.test_outputs)
        except Exception as exc:
            raise _rerun_failed(item, "run twice in a row (Shift+Enter twice), the second run fails", exc) from None
        finally:
            _RERUN_S[item.nodeid] += time.perf_counter() - start
            item.test_outputs = first
        if second:
            raise _rerun_failed(item, "run twice in a row, the second run shows what a learner should not see",
                                RuntimeError("; ".join(second)))
    elif mode == "all" and _cells_of(item)[-1] is item:
        start = time.perf_counter()
        first = item.test_outputs
        try:
            for other in _cells_of(item):
                try:
                    other.runtest()
                except Exception as exc:
                    raise _rerun_failed(other, "Run All a second time in the same kernel, this cell fails",
                                        exc) from None
        finally:
            _RERUN_S[item.nodeid] += time.perf_counter() - start
            item.test_outputs = first
    return result


def executed_copy(nb: dict, outputs: dict) -> dict:
    """``nb`` (as nbformat reads it) with each code cell's outputs and a fresh kernel's execution counts
    (``outputs``: code cell number -> its outputs, None for a cell nbval skipped)."""
    import copy
    import json

    out = json.loads(json.dumps(copy.deepcopy(nb)))
    code = [c for c in out["cells"] if c["cell_type"] == "code"]
    count = 0
    for number, cell in enumerate(code):
        ran = outputs.get(number) is not None
        count += ran
        cell["outputs"] = json.loads(json.dumps(outputs[number])) if ran else []
        cell["execution_count"] = count if ran else None
    return out


def pytest_runtest_teardown(item, nextitem):
    if not _is_cell(item) or (nextitem is not None and nextitem.parent is item.parent):
        return
    path = str(item.fspath)
    if path in _KERNEL_DIRS:
        shutil.rmtree(_KERNEL_DIRS.pop(path), ignore_errors=True)
    folder = os.environ.get("NB_EXECUTED_DIR") or _SESSION_ENV.get("NB_EXECUTED_DIR")
    if not folder:
        return
    target = Path(folder) / os.path.basename(path)
    cells = [c for c in item.parent.nb.cells if c.cell_type == "code"]
    done = _CELL_OUTPUTS.pop(path, {})
    if path in _NB_FAILED or len(done) != len(cells):
        target.unlink(missing_ok=True)        # no copy of a run that did not pass: the site runs it again
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(canonical_text(executed_copy(item.parent.nb, done)), encoding="utf-8")


def pytest_runtest_logreport(report):
    if report.when == "call" and report.duration > SLOW_S and "slow" not in report.keywords \
            and not report.nodeid.split("::")[0].endswith(".ipynb"):
        _UNMARKED_SLOW.append((report.duration, report.nodeid))
    path = report.nodeid.split("::")[0]
    if path.endswith(".ipynb"):
        rerun = _RERUN_S.pop(report.nodeid, 0.0) if report.when == "call" else 0.0
        _NB_RERUN_TIMES[path] += rerun
        _NB_TIMES[path] += report.duration - rerun     # the budget is the plain run's
        if report.failed:
            _NB_FAILED.add(path)


def _judged_cpu(config) -> dict | None:
    """The CPU seconds the verdicts read: the notebooks' in a session that shares the cores, else None."""
    return dict(_NB_CPU) if config.getoption("--shared-cores") else None


def times_record(times: dict, failed: set, mode: str, cpu: dict | None = None, judged: bool = False) -> dict:
    """The JSON written to NB_TIMES_JSON: per-notebook seconds, CPU seconds (``cpu``: path -> seconds or None),
    budget and verdict (on the CPU seconds too where ``judged``: ``--shared-cores``), mode, stack."""
    cpu = cpu or {}
    import platform

    from helpers.versions import installed

    packages = {name: installed(name) for name in _PACKAGES if installed(name)}
    return {"mode": mode, "python": platform.python_version(), "packages": packages,
            "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
            "notebooks": {os.path.basename(p): {"seconds": round(secs, 1), "budget_s": budget(p, mode),
                                                "cpu_seconds": None if cpu.get(p) is None else round(cpu[p], 1),
                                                "verdict": verdict(secs, budget(p, mode), p in failed,
                                                                   cpu.get(p) if judged else None)}
                          for p, secs in sorted(times.items())}}


def pytest_terminal_summary(terminalreporter):
    tr = terminalreporter
    if _LEFT_OUT:
        count = {why: sum(w == why for _, w in _LEFT_OUT) for why in ("stack-free", "one_stack", "not on this stack")}
        tr.write_line(f"left out: {count['stack-free']} stack-free test(s) and {count['one_stack']} marked one_stack "
                      f"(--stack-only: the first stack's run ran them), {count['not on this stack']} notebook cell(s) "
                      "of lessons whose registry entry leaves out this stack")
    for secs, nodeid in sorted(_UNMARKED_SLOW, reverse=True):
        tr.write_line(f"slow but not marked slow: {nodeid} took {secs:.0f} s (over {SLOW_S:.0f} s: make it faster "
                      "or mark it slow and say why)", yellow=True)
    if _CPU_S:
        tr.section("CPU seconds per test file")
        for line in top_cpu_files(_CPU_S, _CPU_ITEMS, tr.config.getoption("--cpu-files")):
            tr.write_line(line)
    if not _NB_TIMES:
        return
    mode, judged = config.mode(), _judged_cpu(tr.config)
    tr.section("per-notebook duration (quick/full: %s%s)" % (mode, ", cores shared: 2x is judged on CPU seconds too"
                                                              if judged is not None else ""))
    width = max(len(p) for p in _NB_TIMES)
    for path in sorted(_NB_TIMES):
        secs, limit, cpu = _NB_TIMES[path], budget(path, mode), _NB_CPU.get(path)
        note = f"(budget {limit:.0f} s)" if limit is not None else "(no budget in full mode)"
        used = f"{cpu:7.1f} CPU-s" if cpu is not None else "      ? CPU-s"
        rerun = f"  (+{_NB_RERUN_TIMES[path]:.1f} s re-runs, not budgeted)" if _NB_RERUN_TIMES.get(path) else ""
        shown = verdict(secs, limit, path in _NB_FAILED, None if judged is None else cpu)
        tr.write_line(f"{path:<{width}}  {secs:7.1f} s {used}  {note}  {shown}{rerun}")
    tr.write_line(f"{'total':<{width}}  {sum(_NB_TIMES.values()):7.1f} s")
    if any(_NB_RERUN_TIMES.values()):
        tr.write_line(f"re-runs (NB_RERUN={rerun_mode()}): {sum(_NB_RERUN_TIMES.values()):.1f} s more")
    slow = budget_failures(_NB_TIMES, mode, judged)
    if slow:
        both = " in wall time and in CPU seconds" if judged is not None else ""
        tr.write_line(f"FAILED: over {FAIL_FACTOR:g}x the {BUDGET_S:.0f} s budget{both}: {', '.join(slow)} "
                      "(make it faster in quick mode; NB_BUDGET_S=... sets the budget)", red=True, bold=True)
    if os.environ.get("NB_TIMES_JSON"):
        tr.write_line(f"per-notebook times written to {os.environ['NB_TIMES_JSON']}")


def _finish_notebook_times(session) -> None:
    """Fail the session for notebooks over twice their budget; write NB_TIMES_JSON if asked."""
    if not _NB_TIMES:
        return
    mode, judged = config.mode(), _judged_cpu(session.config)
    if budget_failures(_NB_TIMES, mode, judged):
        session.exitstatus = max(int(session.exitstatus), 1)
    out = os.environ.get("NB_TIMES_JSON")
    if out:
        import json

        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w") as f:
            f.write(json.dumps(times_record(_NB_TIMES, _NB_FAILED, mode, _NB_CPU, judged is not None), indent=1)
                    + "\n")


# ---- the error index check (TROUBLESHOOTING.md) -------------------------------------------
# Every message listed there must be produced by this run's notebooks or tests. The check
# runs only when the whole suite ran (make test): all notebooks collected, nothing deselected.
_OUTPUT: list = []
_RAN_NOTEBOOKS: set = set()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when == "call":
        if str(item.fspath).endswith(".ipynb") and report.passed:
            problems = output_problems(getattr(item, "test_outputs", None))
            if problems:
                report.outcome = "failed"
                report.longrepr = "what the learner would see in this cell:\n" + "\n".join(problems)
            elif _is_cell(item):
                _CELL_OUTPUTS[str(item.fspath)][item.cell_num] = list(item.test_outputs or [])
        elif _is_cell(item) and report.skipped:   # an nbval-skip cell: not run, no outputs
            _CELL_OUTPUTS[str(item.fspath)][item.cell_num] = None
        for out in getattr(item, "test_outputs", None) or []:
            _OUTPUT.append(out.get("text", "") if hasattr(out, "get") else "")
            data = out.get("data", {}) if hasattr(out, "get") else {}
            _OUTPUT.append(data.get("text/plain", ""))
            if out.get("output_type") == "error":
                _OUTPUT.append(f"{out.get('ename')}: {out.get('evalue')}")
        if str(item.fspath).endswith(".ipynb"):
            _RAN_NOTEBOOKS.add(os.path.basename(str(item.fspath)))
    _OUTPUT.append(report.capstdout + report.capstderr)


def pytest_sessionfinish(session, exitstatus):
    _finish_notebook_times(session)
    root = Path(__file__).resolve().parent.parent
    all_nbs = {p.name for p in (root / "notebooks").glob("*.ipynb") if on_this_stack(p)}
    ran_tests = any("tests" in str(a) for a in session.config.args)
    outputs = session.config.getoption("outputs_file")
    if outputs:   # one session of a split run: keep what it printed; tools/error_index.py check reads every one
        if len(outputs) > 1:
            raise pytest.UsageError(f"--outputs-file given {len(outputs)} times: each session writes one file")
        Path(outputs[0]).parent.mkdir(parents=True, exist_ok=True)
        Path(outputs[0]).write_text("\n".join(_OUTPUT), encoding="utf-8")
        return
    if not ran_tests or not all_nbs or _RAN_NOTEBOOKS != all_nbs or not os.environ.get("CHECK_ERROR_INDEX", "1") == "1":
        return
    missing = error_index.unproduced((root / "TROUBLESHOOTING.md").read_text(encoding="utf-8"), "\n".join(_OUTPUT))
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    if missing:
        if tr:
            tr.section("TROUBLESHOOTING.md: messages not produced by any notebook or test", red=True)
            for e in missing:
                tr.write_line(f"- {e.heading}: {e.message}")
        session.exitstatus = 1
    elif tr:
        tr.write_line("TROUBLESHOOTING.md: every indexed error message was produced in this run.")
