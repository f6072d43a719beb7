"""The course's pytest plugin (loaded by the root conftest.py): three checks on the notebooks nbval runs.

1. Time budgets: nbval turns each cell into a test item; the cell times (set-up, call, tear-down) are added
   up per notebook and printed as a table. In quick mode every notebook has a budget of ``NB_BUDGET_S``
   seconds (45 s): over it is "over budget", over twice it FAILS the run, so slow lessons cannot creep in.
   Full mode trains for real and has no budget. With ``NB_TIMES_JSON=path`` the times are also written
   there, with the mode and the stack's versions (``tools/timings.py record`` reads it).
2. What the learner sees: a cell whose outputs hold native start-up noise or a stray result fails
   (the rule is ``nblint.output_problems``).
3. The error index: when the whole suite ran (tests and every notebook), every message listed in
   TROUBLESHOOTING.md must have been produced by this run.
"""


import os
from collections import defaultdict
from pathlib import Path

import error_index
import pytest
from nblint import output_problems

_NB_TIMES: dict = defaultdict(float)
_NB_FAILED: set = set()
BUDGET_S = float(os.environ.get("NB_BUDGET_S", "45"))
#: A notebook over FAIL_FACTOR x its budget fails the run.
FAIL_FACTOR = 2.0
_PACKAGES = ("tensorflow", "keras", "jax", "jaxlib", "tf-keras", "numpy", "nbval")


def budget(path: str, mode: str | None = None) -> float | None:
    """Time budget of a notebook in seconds (the same for every lesson), or None in full mode."""
    mode = mode or os.environ.get("MULTIGPU_MODE", "quick")
    return None if mode == "full" else BUDGET_S


def verdict(secs: float, budget_s: float | None, failed: bool = False) -> str:
    """'FAILED' (a cell failed), 'FAILED: over 2x budget', 'over budget' or 'ok'."""
    if secs < 0:
        raise ValueError(f"secs must be >= 0, got {secs}")
    if failed:
        return "FAILED"
    if budget_s is not None and secs > FAIL_FACTOR * budget_s:
        return f"FAILED: over {FAIL_FACTOR:g}x budget"
    if budget_s is not None and secs > budget_s:
        return "over budget"
    return "ok"


def budget_failures(times: dict, mode: str | None = None) -> list:
    """Notebooks (sorted) whose time is over twice their budget."""
    return sorted(p for p, secs in times.items()
                  if verdict(secs, budget(p, mode)).startswith("FAILED"))


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::")[0]
    if path.endswith(".ipynb"):
        _NB_TIMES[path] += report.duration
        if report.failed:
            _NB_FAILED.add(path)


def times_record(times: dict, failed: set, mode: str) -> dict:
    """The JSON written to NB_TIMES_JSON: per-notebook seconds, budget and verdict, mode, stack."""
    import platform

    from helpers.versions import installed

    packages = {name: installed(name) for name in _PACKAGES if installed(name)}
    return {"mode": mode, "python": platform.python_version(), "packages": packages,
            "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
            "notebooks": {os.path.basename(p): {"seconds": round(secs, 1), "budget_s": budget(p, mode),
                                                "verdict": verdict(secs, budget(p, mode), p in failed)}
                          for p, secs in sorted(times.items())}}


def pytest_terminal_summary(terminalreporter):
    if not _NB_TIMES:
        return
    tr = terminalreporter
    mode = os.environ.get("MULTIGPU_MODE", "quick")
    tr.section("per-notebook duration (quick/full: %s)" % mode)
    width = max(len(p) for p in _NB_TIMES)
    for path in sorted(_NB_TIMES):
        secs, limit = _NB_TIMES[path], budget(path, mode)
        note = f"(budget {limit:.0f} s)" if limit is not None else "(no budget in full mode)"
        tr.write_line(f"{path:<{width}}  {secs:7.1f} s  {note}  {verdict(secs, limit, path in _NB_FAILED)}")
    tr.write_line(f"{'total':<{width}}  {sum(_NB_TIMES.values()):7.1f} s")
    slow = budget_failures(_NB_TIMES, mode)
    if slow:
        tr.write_line(f"FAILED: over {FAIL_FACTOR:g}x the {BUDGET_S:.0f} s budget: {', '.join(slow)} "
                      "(make it faster in quick mode; NB_BUDGET_S=... sets the budget)", red=True, bold=True)
    if os.environ.get("NB_TIMES_JSON"):
        tr.write_line(f"per-notebook times written to {os.environ['NB_TIMES_JSON']}")


def _finish_notebook_times(session) -> None:
    """Fail the session for notebooks over twice their budget; write NB_TIMES_JSON if asked."""
    if not _NB_TIMES:
        return
    mode = os.environ.get("MULTIGPU_MODE", "quick")
    if budget_failures(_NB_TIMES, mode):
        session.exitstatus = max(int(session.exitstatus), 1)
    out = os.environ.get("NB_TIMES_JSON")
    if out:
        import json

        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w") as f:
            f.write(json.dumps(times_record(_NB_TIMES, _NB_FAILED, mode), indent=1) + "\n")


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
    all_nbs = {p.name for p in (root / "notebooks").glob("*.ipynb")}
    if not all_nbs or _RAN_NOTEBOOKS != all_nbs or not os.environ.get("CHECK_ERROR_INDEX", "1") == "1":
        return
    if not any("tests" in str(a) for a in session.config.args):
        return
    missing = error_index.missing(error_index.load(root / "TROUBLESHOOTING.md"), "\n".join(_OUTPUT))
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    if missing:
        if tr:
            tr.section("TROUBLESHOOTING.md: messages not produced by any notebook or test", red=True)
            for e in missing:
                tr.write_line(f"- {e.heading}: {e.message}")
        session.exitstatus = 1
    elif tr:
        tr.write_line("TROUBLESHOOTING.md: every indexed error message was produced in this run.")
