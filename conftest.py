"""Repository-wide pytest hooks: a per-notebook duration table after nbval runs.

nbval turns each notebook cell into a test item; this plugin adds up the cell
times per notebook and prints one line per notebook, flagging any notebook over
the quick-mode budget (``NB_BUDGET_S``, default 45 s; also exported for docs).
"""

import os
from collections import defaultdict

_NB_TIMES: dict = defaultdict(float)
_NB_FAILED: set = set()
BUDGET_S = float(os.environ.get("NB_BUDGET_S", "45"))


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
        flag = "FAILED" if path in _NB_FAILED else ("over budget" if secs > BUDGET_S else "ok")
        tr.write_line(f"{path:<{width}}  {secs:7.1f} s  {flag}")
    tr.write_line(f"{'total':<{width}}  {sum(_NB_TIMES.values()):7.1f} s  (budget {BUDGET_S:.0f} s per notebook)")
