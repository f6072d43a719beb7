"""tools/memcheck.py: process-tree memory sampling, the table, the limits, and a tiny end-to-end run.

Cheap on purpose: small python child trees and two-cell notebooks, no TensorFlow.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import memcheck  # tools/memcheck.py
import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "memcheck.py"

MIB = 2**20
# A process that holds `mib` MiB (written, so really resident), starts a child one level shallower,
# records its pid in `pid_dir` and sleeps until killed.
TREE_SCRIPT = """
import os, subprocess, sys, time
depth, mib, pid_dir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
held = b"x" * (mib * 2**20)
if depth > 0:
    subprocess.Popen([sys.executable, __file__, str(depth - 1), str(mib), pid_dir])
open(os.path.join(pid_dir, str(os.getpid())), "w").close()
time.sleep(120)
"""


@pytest.fixture
def child_tree(tmp_path):
    """A root process with a child and a grandchild, each holding 30 MiB: (root pid, all pids)."""
    script, pid_dir = tmp_path / "tree.py", tmp_path / "pids"
    script.write_text(TREE_SCRIPT)
    pid_dir.mkdir()
    root = subprocess.Popen([sys.executable, str(script), "2", "30", str(pid_dir)], start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while len(list(pid_dir.iterdir())) < 3:
            assert time.monotonic() < deadline, "the child tree did not start"
            time.sleep(0.05)
        yield root.pid, {int(p.name) for p in pid_dir.iterdir()}
    finally:
        os.killpg(root.pid, signal.SIGKILL)      # the session this fixture started: root and descendants
        root.wait()


def test_process_tree_finds_children_and_grandchildren(child_tree):
    root, pids = child_tree
    tree = memcheck.process_tree(root)
    assert tree[0] == root
    assert set(tree) == pids and len(tree) == 3
    assert os.getpid() not in tree                # the parent of the root is not part of its tree


def test_tree_memory_sums_every_process(child_tree):
    root, _ = child_tree
    kib, procs = memcheck.tree_memory_kib(root)
    assert procs == 3
    assert kib >= 3 * 30 * 1024 * 0.95            # three private 30 MiB buffers
    assert memcheck.memory_kib(root) < kib        # the root alone is less than the tree


def test_sampler_keeps_the_peak_after_the_tree_is_gone(child_tree):
    root, _ = child_tree
    sampler = memcheck.TreeSampler(root, interval=0.05)
    sampler.start()
    time.sleep(0.3)
    os.killpg(root, signal.SIGKILL)
    time.sleep(0.3)
    sampler.stop()
    assert sampler.samples >= 3
    assert sampler.peak_procs == 3
    assert sampler.peak_mib >= 3 * 30 * 0.95
    assert memcheck.tree_memory_kib(root)[0] == 0  # gone (a zombie at most): the peak is what remains


def _fake_proc(tmp_path, procs):
    """A fake /proc: procs maps pid -> (ppid, name, smaps Pss KiB or None, VmRSS KiB or None)."""
    for pid, (ppid, name, pss, rss) in procs.items():
        d = tmp_path / str(pid)
        d.mkdir()
        (d / "stat").write_text(f"{pid} ({name}) S {ppid} 1 1 0 -1\n")
        if pss is not None:
            (d / "smaps_rollup").write_text(f"Rss: {pss * 3} kB\nPss: {pss} kB\n")
        if rss is not None:
            (d / "status").write_text(f"Name: x\nVmRSS: {rss} kB\n")
    (tmp_path / "self").mkdir()                   # non-numeric entries are skipped


def test_fake_proc_tree_pss_and_rss_fallback(tmp_path, monkeypatch):
    _fake_proc(tmp_path, {10: (1, "kernel", 1000, 3000),
                          11: (10, "odd ) name", 200, 900),   # ')' in the command name
                          12: (11, "grandchild", None, 50),   # no smaps_rollup: RSS is used
                          13: (1, "stranger", 7000, 7000)})
    monkeypatch.setattr(memcheck, "PROC", str(tmp_path))
    assert memcheck.process_tree(10) == [10, 11, 12]
    assert memcheck.memory_kib(11) == 200          # PSS, not RSS
    assert memcheck.memory_kib(12) == 50           # RSS fallback
    assert memcheck.memory_kib(99) == 0            # gone
    assert memcheck.tree_memory_kib(10) == (1250, 3)
    assert memcheck.process_tree(99) == []


def test_bad_arguments_are_value_errors():
    with pytest.raises(ValueError, match="positive process id"):
        memcheck.process_tree(0)
    with pytest.raises(ValueError, match="interval must be > 0"):
        memcheck.TreeSampler(1, interval=0)
    with pytest.raises(ValueError, match="limit_mib must be > 0"):
        memcheck.problems([], 0)


def _result(name, peak, ok=True, error=""):
    return memcheck.Result(notebook=name, peak_mib=peak, peak_procs=2, seconds=12.34, ok=ok, error=error)


def test_limits_and_table():
    results = [_result("00_a.ipynb", 700.0), _result("01_b.ipynb", 1900.0), _result("02_c.ipynb", 2100.0),
               _result("03_d.ipynb", 300.0, ok=False, error="DeadKernelError: Kernel died")]
    assert memcheck.problems(results, 2048) == [
        "02_c.ipynb: peak 2100 MiB is over the 2048 MiB limit",
        "03_d.ipynb: failed (DeadKernelError: Kernel died)"]
    assert memcheck.problems(results[:2], 2048) == []
    assert [memcheck.verdict(r, 2048, 1843) for r in results] == ["ok", "over target", "over limit", "FAILED"]
    table = memcheck.format_table(results, 2048, 1843).splitlines()
    assert table[0].split() == ["notebook", "peak", "MiB", "procs", "wall", "s", "result"]
    assert table[2].split() == ["00_a.ipynb", "700", "2", "12.3", "ok"]
    assert table[4].split()[-2:] == ["over", "limit"]
    assert table[6].split() == ["max", "/", "total", "2100", "2", "49.4"]
    assert "03_d.ipynb: DeadKernelError: Kernel died" in table


def _notebook(path, *sources):
    cells = [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
              "source": src} for i, src in enumerate(sources)]
    path.write_text(json.dumps({"cells": cells, "metadata": {"kernelspec": {"name": "python3",
                                "display_name": "Python 3", "language": "python"}},
                                "nbformat": 4, "nbformat_minor": 5}))
    return path


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, stdin=subprocess.DEVNULL)


@pytest.mark.slow
def test_end_to_end_one_core_json_and_child_memory(tmp_path):
    report = tmp_path / "affinity.json"
    nb = _notebook(tmp_path / "child.ipynb",
                   "import json, os, subprocess, sys",
                   "child = ('import json, os, sys, time; held = b\"x\" * (200 * 2**20); '\n"
                   "         'print(json.dumps(sorted(os.sched_getaffinity(0)))); time.sleep(1.5)')\n"
                   "out = subprocess.run([sys.executable, '-c', child], capture_output=True, text=True, check=True)\n"
                   f"open({str(report)!r}, 'w').write(json.dumps({{'kernel': sorted(os.sched_getaffinity(0)),\n"
                   "     'child': json.loads(out.stdout), 'cwd': os.getcwd()}))")
    out_json = tmp_path / "out" / "memcheck.json"
    result = _run(nb, "--one-core", "--json", out_json, "--interval", "0.1")
    assert result.returncode == 0, result.stdout + result.stderr
    seen = json.loads(report.read_text())
    assert len(seen["kernel"]) == 1 and seen["child"] == seen["kernel"]      # children inherit the pin
    assert Path(seen["cwd"]).name.startswith("memcheck-")                     # a temporary folder
    assert not Path(seen["cwd"]).exists()                                     # removed afterwards
    data = json.loads(out_json.read_text())
    row = data["notebooks"]["child.ipynb"]
    assert data["one_core"] is True and data["machine"]["cpus_used"] == 1
    assert row["ok"] is True and row["peak_procs"] >= 2
    assert row["peak_mib"] >= 200                                              # the child's 200 MiB counted
    assert "child.ipynb" in result.stdout and "ok" in result.stdout


@pytest.mark.slow
def test_end_to_end_failures_and_limit_exit_non_zero(tmp_path):
    big = _notebook(tmp_path / "big.ipynb", "held = b'x' * (150 * 2**20)")
    bad = _notebook(tmp_path / "bad.ipynb", "raise ValueError('broken on purpose')", "print('never')")
    result = _run(big, bad, "--limit-mib", "100")
    assert result.returncode == 1
    assert "big.ipynb: peak" in result.stderr and "over the 100 MiB limit" in result.stderr
    assert "bad.ipynb: failed (CellExecutionError" in result.stderr
    assert "ValueError: broken on purpose" in result.stdout
    lines = {ln.split()[0]: ln.split() for ln in result.stdout.splitlines() if ln.endswith(("limit", "FAILED"))}
    assert lines["big.ipynb"][-2:] == ["over", "limit"] and lines["bad.ipynb"][-1] == "FAILED"
