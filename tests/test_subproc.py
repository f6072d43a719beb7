"""helpers.subproc: child processes (environment, start, stop, run), their errors, and load_script."""

import signal
import subprocess
import sys
import textwrap
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


# ---- no process outlives its job; no temporary folder either ----------------------------------------------

#: Like torchrun: starts its "rank" in a session of its own (out of reach of a process-group kill); on SIGTERM it
#: stops the rank and writes TERMINATED, unless told to ignore SIGTERM; argv: MODE (hang | crash | ignore-term).
LAUNCHER = """
import os, signal, subprocess, sys, time
rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
print("rank", rank.pid, flush=True)
def stop(signum, frame):
    rank.terminate()
    open("TERMINATED", "w").close()
    sys.exit(143)
signal.signal(signal.SIGTERM, signal.SIG_IGN if sys.argv[1] == "ignore-term" else stop)
if sys.argv[1] == "crash":
    raise SystemExit("launcher crashed, its rank left running")
time.sleep(300)
"""


def _launcher(tmp_path, mode):
    return [sys.executable, "-c", LAUNCHER, mode]


def test_a_timeout_stops_the_launcher_and_its_rank_in_another_session(leftovers, tmp_path):
    t0 = time.time()
    with pytest.raises(subprocess.TimeoutExpired):
        subproc.run(_launcher(tmp_path, "hang"), subproc.child_env(), timeout=1.5, cwd=tmp_path, grace=5)
    assert (tmp_path / "TERMINATED").exists()          # SIGTERM first: the launcher stopped its rank itself
    assert time.time() - t0 < 1.5 + 5                  # it went at once, without waiting out the grace
    assert leftovers.processes() == [] and leftovers.folders() == []


def test_a_launcher_that_ignores_sigterm_is_killed_after_the_grace(leftovers, tmp_path):
    t0 = time.time()
    with pytest.raises(subprocess.TimeoutExpired):
        subproc.run(_launcher(tmp_path, "ignore-term"), subproc.child_env(), timeout=1, cwd=tmp_path, grace=1)
    assert 2 <= time.time() - t0 < 10 and not (tmp_path / "TERMINATED").exists()
    assert leftovers.processes() == []


def test_an_interrupt_stops_the_child_and_goes_on(leftovers, tmp_path):
    """Jupyter's Interrupt (KeyboardInterrupt in the main thread) during run_python and run."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        for start in (lambda: subproc.run_python("import time; time.sleep(300)", timeout=60, echo=False),
                      lambda: subproc.run(_launcher(tmp_path, "hang"), subproc.child_env(), timeout=60, cwd=tmp_path)):
            signal.setitimer(signal.ITIMER_REAL, 1.0)
            with pytest.raises(KeyboardInterrupt):
                start()
            assert leftovers.processes() == []
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert leftovers.folders() == []


def test_a_crashed_launchers_rank_is_stopped_too(leftovers, tmp_path):
    result = subproc.run(_launcher(tmp_path, "crash"), subproc.child_env(), timeout=60, cwd=tmp_path)
    assert result.returncode == 1 and "launcher crashed" in result.stderr
    assert leftovers.processes() == []


def test_a_child_stops_with_what_it_started_in_another_session(leftovers, tmp_path):
    child = subproc.Child(_launcher(tmp_path, "ignore-term"), tmp_path / "c.log", subproc.child_env())
    deadline = time.time() + 30
    while "rank" not in child.log and time.time() < deadline:
        time.sleep(0.05)
    rank = int(child.log.split()[1])
    assert subproc.pid_alive(rank) and rank in subproc.tagged_pids(child.tag)
    assert child.stop() == -signal.SIGKILL and "rank" in child.log
    assert leftovers.processes() == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_run_python_children_die_with_a_killed_kernel(leftovers, tmp_path):
    """The kernel killed outright (no clean-up runs): its run_python child goes too."""
    pidfile = tmp_path / "child.pid"
    kernel = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        from helpers import subproc
        subproc.run_python("import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(300)",
                           timeout=300)
        """)], env=subproc.child_env())
    try:
        deadline = time.time() + 60
        while not (pidfile.exists() and pidfile.read_text()):
            assert time.time() < deadline and kernel.poll() is None
            time.sleep(0.05)
        child = int(pidfile.read_text())
        assert subproc.pid_alive(child)
        kernel.kill()
        kernel.wait()
        assert leftovers.processes() == [] and not subproc.pid_alive(child)
    finally:
        kernel.kill()


def test_no_fork_hook_runs_when_a_child_starts():
    """JAX warns in an at-fork hook; the die-with-parent wrapper execs, so no hook of this process runs."""
    code = """
import os
from helpers import subproc
os.register_at_fork(before=lambda: print("FORK HOOK RAN", flush=True))
subproc.run_python("print('child ran')", timeout=60)
child = subproc.Child(["true"], os.devnull, subproc.child_env())
print("child exit", child.wait(60))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=subproc.child_env())
    assert r.returncode == 0, r.stderr
    assert "child ran" in r.stdout and "child exit 0" in r.stdout and "FORK HOOK RAN" not in r.stdout


def test_a_missing_program_fails_here_as_popen_would(tmp_path):
    with pytest.raises(FileNotFoundError, match="no-such-program-here"):
        subproc.run(["no-such-program-here"], subproc.child_env(), timeout=10)
    assert subproc.run(["true"], subproc.child_env(), timeout=10).ok          # found on PATH


def test_tags_chain_and_are_found():
    env = subproc.tagged_env({"A": "1", subproc.TAG_ENV: "outer"}, "inner")
    assert env == {"A": "1", subproc.TAG_ENV: "outer,inner"}
    with pytest.raises(ValueError, match="one non-empty tag"):
        subproc.tagged_pids("a,b")
    assert subproc.tagged_pids(subproc.new_tag()) == []
    with pytest.raises(ValueError, match="grace"):
        subproc.run(["true"], {}, timeout=1, grace=-1)


def test_temp_dirs_are_private_and_removed_at_exit(tmp_path):
    code = f"""
import tempfile
tempfile.tempdir = {str(tmp_path)!r}
from helpers import subproc
kept, gone = subproc.temp_dir("kept-"), subproc.temp_dir("gone-")
(kept / "f").write_text("x")
subproc.remove_temp_dir(gone)
subproc.remove_temp_dir(gone)                      # idempotent
print(oct(kept.stat().st_mode & 0o777), gone.exists())
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=subproc.child_env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0o700", "False"] and list(tmp_path.iterdir()) == []   # the kept one went at exit
    with pytest.raises(ValueError, match="not made by helpers.subproc.temp_dir"):
        subproc.remove_temp_dir(tmp_path)
    with pytest.raises(ValueError, match="prefix"):
        subproc.temp_dir("../x")


SLOW_TO_STOP = """
import signal, sys, time
def stop(signum, frame):
    time.sleep(2.5)                 # stopping its ranks takes a while
    open("TERMINATED", "w").close()
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
time.sleep(300)
"""


def test_a_time_limit_gives_the_launcher_its_whole_grace(leftovers, tmp_path):
    """The limit's exception repeats every second while the learner's code runs, never during the clean-up."""
    from helpers.timelimit import TimeLimitExceeded, time_limit

    with pytest.raises(TimeLimitExceeded), time_limit(1):
        subproc.run([sys.executable, "-c", SLOW_TO_STOP], subproc.child_env(), timeout=60, cwd=tmp_path, grace=10)
    assert (tmp_path / "TERMINATED").exists()
    assert leftovers.processes() == []
