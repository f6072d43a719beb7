"""helpers.subproc: child processes (environment, start, stop, run), their errors, and load_script."""

import signal
import subprocess
import sys
import time

import pytest

from helpers import subproc
from helpers.subproc import Result, run_python


def test_env_is_passed_and_scrubbed(monkeypatch, capsys):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    r = run_python("import os; print(os.environ.get('CUDA_VISIBLE_DEVICES'), os.environ['X'])", env={"X": 5})
    assert r.ok and r.stdout.strip() == "None 5"
    assert "None 5" in capsys.readouterr().out


def test_failure_reports_last_error_line(capsys):
    r = run_python("raise KeyError('boom')")
    assert not r.ok and r.last_error_line() == "KeyError: 'boom'"
    assert "[exit code 1] KeyError: 'boom'" in capsys.readouterr().out


def test_bad_arguments():
    with pytest.raises(ValueError):
        run_python("   ")
    with pytest.raises(ValueError):
        run_python("print(1)", timeout=0)


def test_last_error_line_empty():
    assert Result(0, "", "just text\n").last_error_line() == ""


def test_child_env_is_the_one_policy(monkeypatch):
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    monkeypatch.setenv("TF_CONFIG", "{}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("PYTHON_COLORS", raising=False)
    env = subproc.child_env({"XLA_FLAGS": "--x"})
    assert "KERAS_BACKEND" not in env and "TF_CONFIG" not in env and env["XLA_FLAGS"] == "--x"
    assert env["CUDA_VISIBLE_DEVICES"] == "1"                       # a launcher passes the learner's GPUs on
    assert "CUDA_VISIBLE_DEVICES" not in subproc.child_env(fresh_devices=True)
    assert env["PYTHONUNBUFFERED"] == "1" and env["PYTHON_COLORS"] == "0"
    assert env["TF_CPP_MIN_LOG_LEVEL"] == subproc.child_env({"TF_CPP_MIN_LOG_LEVEL": "2"})["TF_CPP_MIN_LOG_LEVEL"]


def test_one_exit_hook_stops_children_then_cleans_up(tmp_path):
    code = f"""
import sys
from pathlib import Path
from helpers import subproc

child = subproc.Child([sys.executable, "-c", "import time; time.sleep(60)"], {str(tmp_path / 'child.log')!r},
                      subproc.child_env())
print(child.pid, flush=True)
subproc.at_exit(lambda: Path({str(tmp_path / 'order')!r}).write_text(f"cleaned after exit {{child.returncode}}"))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "order").read_text() == "cleaned after exit -9"   # the child was stopped first
    assert not subproc.pid_alive(int(r.stdout.split()[0]))


def test_a_child_logs_dies_with_its_group_and_says_how_it_ended(tmp_path):
    script = "import subprocess, sys, time; print('kid', subprocess.Popen([sys.executable, '-c', " \
             "'import time; time.sleep(60)']).pid, flush=True); time.sleep(60)"
    child = subproc.Child([sys.executable, "-c", script], tmp_path / "c.log", subproc.child_env())
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(timeout=1.5)                       # the child is stopped, its group killed
    assert child.returncode == -signal.SIGKILL and child.stopped and child.stop() == -signal.SIGKILL
    assert child.describe() == "process: killed by SIGKILL (stopped by the launcher)"
    kid = int(child.log.split()[1])
    deadline = time.time() + 5
    while subproc.pid_alive(kid) and time.time() < deadline:
        time.sleep(0.05)
    assert not subproc.pid_alive(kid) and not child.kill()        # nothing left to signal
    done = subproc.Child([sys.executable, "-c", "print('I0000 00:00:17.553183 1 x.cc:1] noise'); print('hi')"],
                         tmp_path / "d.log", subproc.child_env(), name="worker 3")
    assert done.wait(timeout=60) == 0 and not done.stopped and done.describe() == "worker 3: exit 0"
    assert "noise" in done.log and subproc.strip_noise(done.log) == "hi" and subproc.final_exception(done.log) == ""
    failed = subproc.Child([sys.executable, "-c", "raise KeyError('k')"], tmp_path / "f.log", subproc.child_env())
    assert failed.wait(timeout=60) == 1 and failed.describe() == "process: exit 1 - KeyError: 'k'"


def test_bad_child_arguments(tmp_path):
    with pytest.raises(ValueError):
        subproc.at_exit("not callable")
    with pytest.raises(ValueError):
        subproc.Child([], tmp_path / "x.log", {})


def test_load_script_imports_without_running_main(tmp_path):
    script = tmp_path / "child.py"
    script.write_text("X = 41 + 1\nif __name__ == '__main__':\n    raise SystemExit('ran main')\n")
    assert subproc.load_script(script).X == 42
    with pytest.raises(ValueError, match="%%writefile"):
        subproc.load_script(tmp_path / "missing.py")


def test_load_script_imports_its_siblings_afresh(tmp_path):
    """The script's own imports come from its folder, and an edited sibling counts on the next load."""
    (tmp_path / "lib_for_test.py").write_text("VALUE = 1\n")
    script = tmp_path / "main_for_test.py"
    script.write_text("from lib_for_test import VALUE\n")
    assert subproc.load_script(script).VALUE == 1
    (tmp_path / "lib_for_test.py").write_text("VALUE = 2\n")
    assert subproc.load_script(script).VALUE == 2
    assert str(tmp_path) not in __import__("sys").path


def test_load_script_loads_afresh_and_refuses_what_is_not_a_python_file(tmp_path):
    path = tmp_path / "some_data.py"
    path.write_text("ROWS = 9\ndef twice(x):\n    return 2 * x\n")
    module = subproc.load_script(path)
    assert module.__name__ == "some_data" and module.ROWS == 9 and module.twice(4) == 8
    path.write_text("ROWS = 10\n")
    assert subproc.load_script(str(path)).ROWS == 10               # loaded fresh each time
    with pytest.raises(ValueError, match="not a Python file"):
        subproc.load_script(tmp_path / "missing.py")
    with pytest.raises(ValueError, match="not a Python file"):
        subproc.load_script(tmp_path)
