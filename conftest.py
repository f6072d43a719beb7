"""Repository-wide pytest hooks: a per-notebook duration table after nbval runs, with budgets that fail.

nbval turns each notebook cell into a test item; this plugin adds up the cell times
(set-up, call and tear-down) per notebook and prints one line per notebook. In quick mode
every notebook has a budget of ``NB_BUDGET_S`` seconds (45 s): a notebook over it is
flagged "over budget"; one over twice the budget FAILS the run (non-zero exit status,
notebook named), so slow lessons cannot creep in unnoticed. Full mode trains for real and
has no budget.

With ``NB_TIMES_JSON=path`` the per-notebook times are also written to that JSON file, with
the mode and the stack's versions (``tools/timings.py record`` reads it for docs/timings.json).
"""

import os
from collections import defaultdict

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
    from importlib import metadata

    packages = {}
    for name in _PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
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


# ---- what the learner sees: no native start-up noise, no stray results -------------------------
# A cell's outputs must not contain TensorFlow's harmless C++ start-up lines (helpers.quiet filters them
# in every kernel) nor a bare result a learner did not ask for: `False`/`None` from a check, or a
# function's repr from show_solution. Notebooks run without TF_CPP_MIN_LOG_LEVEL (see the Makefile).
import re  # noqa: E402
import shutil  # noqa: E402

NOISE = (r"absl::InitializeLog", r"cudart_stub\.cc", r"Could not find cuda drivers")
NOISE_WITHOUT_DRIVER = (r"failed call to cuInit",)
STRAY_RESULT = re.compile(r"^(False|None|True|<function .*>|<bound method .*>)$")


def output_problems(outputs, driver: bool | None = None) -> list:
    """What a learner should not see in one cell's outputs (nbformat output dicts)."""
    driver = shutil.which("nvidia-smi") is not None if driver is None else driver
    noise = NOISE + (() if driver else NOISE_WITHOUT_DRIVER)
    problems = []
    for out in outputs or []:
        kind = out.get("output_type")
        # Native noise arrives on stderr; a lesson that quotes such a line on purpose prints it (stdout).
        if kind == "stream" and out.get("name") == "stderr":
            for line in out.get("text", "").splitlines():
                if any(re.search(p, line) for p in noise):
                    problems.append(f"native start-up noise in {out.get('name')}: {line.strip()[:120]}")
        elif kind == "execute_result":
            text = out.get("data", {}).get("text/plain", "").strip()
            if STRAY_RESULT.match(text):
                problems.append(f"stray result shown: Out[...]: {text[:80]} (end the line with ';' or return nothing)")
    return problems


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
    from pathlib import Path

    root = Path(__file__).resolve().parent
    all_nbs = {p.name for p in (root / "notebooks").glob("*.ipynb")}
    if not all_nbs or _RAN_NOTEBOOKS != all_nbs or not os.environ.get("CHECK_ERROR_INDEX", "1") == "1":
        return
    if not any("tests" in str(a) for a in session.config.args):
        return
    import importlib.util

    spec = importlib.util.spec_from_file_location("error_index", root / "tools" / "error_index.py")
    troubleshooting = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(troubleshooting)

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
