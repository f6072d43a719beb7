"""``--cpu-files=N`` (tools/pytest_course.py): each test file's CPU seconds, a child process's included."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

from pytest_course import top_cpu_files  # noqa: E402

BUSY = "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end:\n    pass\n"


def _session(tmp_path, *args):
    (tmp_path / "conftest.py").write_text(f"import sys\nsys.path.insert(0, {str(ROOT / 'tools')!r})\n"
                                          "pytest_plugins = ['pytest_course']\n")
    env = {k: v for k, v in os.environ.items() if k != "STACK"}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, env=env)


def test_a_childs_cpu_counts_and_a_sleep_does_not(tmp_path):
    (tmp_path / "test_child.py").write_text(
        f"import subprocess, sys\n\ndef test_busy_child():\n    subprocess.run([sys.executable, '-c', {BUSY!r}], "
        "check=True)\n")
    (tmp_path / "test_sleep.py").write_text("import time\n\ndef test_sleeps():\n    time.sleep(0.6)\n")
    result = _session(tmp_path, "--cpu-files=5")
    assert result.returncode == 0, result.stdout[-2000:]
    rows = {name: secs for secs, name in
            re.findall(r"^\s*([\d.]+) s  (test_\w+\.py) \(1 test\(s\)\)$", result.stdout, flags=re.M)}
    assert list(rows) == ["test_child.py", "test_sleep.py"], result.stdout[-1500:]
    assert float(rows["test_child.py"]) >= 0.5 and float(rows["test_sleep.py"]) < 0.3, rows
    assert re.search(r"^CPU seconds: \d+ in 2 test\(s\)", result.stdout, flags=re.M), result.stdout[-1500:]


def test_the_top_files_most_first_and_a_bad_count_refused():
    lines = top_cpu_files({"a.py": 1.0, "b.py": 5.0, "c.py": 3.0}, {"a.py": 1, "b.py": 2, "c.py": 1}, 2)
    assert lines[0].startswith("CPU seconds: 9 in 4 test(s)")
    assert [line.split()[2] for line in lines[1:]] == ["b.py", "c.py"]
    with pytest.raises(ValueError, match="positive number of files"):
        top_cpu_files({}, {}, 0)


def test_a_negative_count_stops_the_session(tmp_path):
    (tmp_path / "test_x.py").write_text("def test_x():\n    pass\n")
    result = _session(tmp_path, "--cpu-files=-1")
    assert result.returncode == 4 and "--cpu-files=-1: give a number of files" in result.stderr, result.stderr[-800:]
