"""Repository-wide pytest hooks: a per-notebook duration table after nbval runs.

nbval turns each notebook cell into a test item; this plugin adds up the cell
times per notebook and prints one line per notebook, flagging any notebook over
the quick-mode budget (``NB_BUDGET_S``, 45 s; ``NB_LONG_BUDGET_S``, 60 s, for lessons 06-08).
"""

import os
from collections import defaultdict

_NB_TIMES: dict = defaultdict(float)
_NB_FAILED: set = set()
BUDGET_S = float(os.environ.get("NB_BUDGET_S", "45"))
#: Lessons 06-08 start subprocesses (benchmarks, workers, other backends) and get 60 s.
LONG_BUDGET_S = float(os.environ.get("NB_LONG_BUDGET_S", "60"))


def budget(path: str) -> float:
    """Quick-mode time budget of a notebook, in seconds."""
    name = os.path.basename(path)
    return LONG_BUDGET_S if name[:2].isdigit() and int(name[:2]) >= 6 else BUDGET_S


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::")[0]
    if path.endswith(".ipynb"):
        _NB_TIMES[path] += report.duration
        if report.failed:
            _NB_FAILED.add(path)


def pytest_terminal_summary(terminalreporter):
    if not _NB_TIMES:
        return
    tr = terminalreporter
    tr.section("per-notebook duration (quick/full: %s)" % os.environ.get("MULTIGPU_MODE", "quick"))
    width = max(len(p) for p in _NB_TIMES)
    for path in sorted(_NB_TIMES):
        secs = _NB_TIMES[path]
        flag = "FAILED" if path in _NB_FAILED else ("over budget" if secs > budget(path) else "ok")
        tr.write_line(f"{path:<{width}}  {secs:7.1f} s  (budget {budget(path):.0f} s)  {flag}")
    tr.write_line(f"{'total':<{width}}  {sum(_NB_TIMES.values()):7.1f} s")


# ---- the error index check (TROUBLESHOOTING.md) -------------------------------------------
# Every message listed there must be produced by this run's notebooks or tests. The check
# runs only when the whole suite ran (make test): all notebooks collected, nothing deselected.
import pytest  # noqa: E402

_OUTPUT: list = []
_RAN_NOTEBOOKS: set = set()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when == "call":
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
    from pathlib import Path

    root = Path(__file__).resolve().parent
    all_nbs = {p.name for p in (root / "notebooks").glob("*.ipynb")}
    if not all_nbs or _RAN_NOTEBOOKS != all_nbs or not os.environ.get("CHECK_ERROR_INDEX", "1") == "1":
        return
    if not any("tests" in str(a) for a in session.config.args):
        return
    from helpers import troubleshooting

    missing = troubleshooting.missing(troubleshooting.load(root / "TROUBLESHOOTING.md"), "\n".join(_OUTPUT))
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    if missing:
        if tr:
            tr.section("TROUBLESHOOTING.md: messages not produced by any notebook or test", red=True)
            for e in missing:
                tr.write_line(f"- {e.heading}: {e.message}")
        session.exitstatus = 1
    elif tr:
        tr.write_line("TROUBLESHOOTING.md: every indexed error message was produced in this run.")
