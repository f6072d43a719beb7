"""helpers.resume (start a fit job in its folder, wait for a log line, kill it, start it again).

The tests use a tiny fake training script (no TensorFlow) that prints one line per epoch as Keras's verbose=2
does; lesson 05 runs the real script end to end (a real SIGKILL, then the same command, which resumes).
"""

import os
import signal
import textwrap
import time

import pytest

from helpers import subproc
from helpers.resume import TrainingRun, TrainingTimeoutError
from helpers.subproc import pid_alive as alive

FAKE = """
    import os, subprocess, sys, time
    epochs = int(sys.argv[sys.argv.index("--epochs") + 1])
    mode = os.environ.get("FAKE_MODE", "train")
    if mode == "fail":
        raise ValueError("broken on purpose")
    if mode == "grandchild":
        kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        open("kid.pid", "w").write(str(kid.pid))              # relative: in the run's folder
    print("fake training", os.getpid(), "colors", os.environ.get("PYTHON_COLORS"), flush=True)
    for epoch in range(1, epochs + 1):
        print(f"Epoch {epoch}/{epochs}", flush=True)
        time.sleep(float(os.environ.get("FAKE_EPOCH_S", "0.02")))
    open("done.txt", "w").write(os.getcwd())
"""


def _gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.time() + within
    while alive(pid):
        if time.time() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def fake(tmp_path):
    """A factory of TrainingRuns of the fake script (as ``-m fakemod``) with FAKE_* settings."""
    (tmp_path / "fakemod.py").write_text(textwrap.dedent(FAKE))

    def make(epochs=3, mode="train", epoch_s=0.02, out="out"):
        return TrainingRun(["-m", "fakemod", "--epochs", str(epochs)], tmp_path / out,
                           env={"PYTHONPATH": str(tmp_path), "FAKE_MODE": mode, "FAKE_EPOCH_S": epoch_s})
    return make


def test_bad_commands_are_refused_before_anything_starts(tmp_path):
    for command, words in (([], "command must be"), (["-m"], "followed by a module name"),
                           ([str(tmp_path / "missing.py")], "worker script not found"), ([1, 2], "command must be")):
        with pytest.raises(ValueError, match=words):
            TrainingRun(command, tmp_path / "never")
    with pytest.raises(ValueError, match="out_dir must be a folder path"):
        TrainingRun(["-m", "json.tool"], "")
    assert not (tmp_path / "never").exists()


def test_a_run_must_be_started_once(tmp_path, fake):
    job = fake()
    for call in (lambda: job.pid, job.kill, job.wait, lambda: job.wait_for("Epoch 1/"), job.log):
        with pytest.raises(RuntimeError, match="start the run first"):
            call()
    job.stop()  # harmless before start
    with job:
        with pytest.raises(RuntimeError, match="already started"):
            job.start()
        assert job.wait(timeout=60) == 0
    assert "fake training" in job.log() and job.log_path.name == "run-1.log"


def test_wait_for_refuses_bad_arguments(fake):
    with fake(epochs=2) as job:
        for text in ("", None, 3):
            with pytest.raises(ValueError, match="text must be a non-empty str"):
                job.wait_for(text)
        for timeout in (0, -1, True, "5"):
            with pytest.raises(ValueError, match="timeout must be a number of seconds > 0"):
                job.wait_for("Epoch 1/", timeout=timeout)
        with pytest.raises(ValueError, match="timeout must be a number of seconds > 0"):
            job.wait(timeout=0)


def test_the_process_runs_in_its_folder_under_its_own_pid(fake, tmp_path):
    with fake(epochs=1) as job:
        assert job.wait(timeout=60) == 0
    assert (tmp_path / "out" / "done.txt").read_text() == str(tmp_path / "out")
    assert f"fake training {job.pid} " in job.log()        # the folder change kept the pid: kill reaches the script


def test_kill_after_a_line_is_a_real_sigkill_of_the_whole_group(fake, tmp_path):
    with fake(epochs=50, mode="grandchild", epoch_s=0.1) as job:
        assert job.wait_for("Epoch 3/", timeout=60)
        kid = int((tmp_path / "out" / "kid.pid").read_text())
        assert alive(kid)
        assert job.kill() == -signal.SIGKILL and job.returncode == -signal.SIGKILL
        assert job.kill() == -signal.SIGKILL  # again: nothing left to kill, same code
    assert _gone(kid), "the kill must reach what the training process started"
    assert "Epoch 2/50" in job.log() and "Epoch 50/50" not in job.log()
    assert not (tmp_path / "out" / "done.txt").exists()


def test_a_restart_gets_a_new_log_file(fake, tmp_path):
    for _ in range(2):
        with fake(epochs=2) as job:
            assert job.wait(timeout=60) == 0
    assert sorted(p.name for p in (tmp_path / "out").glob("run-*.log")) == ["run-1.log", "run-2.log"]


def test_a_failing_process_ends_the_wait(fake):
    with fake(mode="fail") as job:
        assert job.wait_for("Epoch 1/", timeout=60) is False
        assert job.returncode == 1 and "ValueError: broken on purpose" in job.log()


def test_a_line_that_never_comes_and_a_hang_are_killed(fake):
    with fake(epochs=2, epoch_s=60) as job:
        with pytest.raises(TrainingTimeoutError, match=r"no 'Epoch 2/' in the log of process \d+ within 0.5 s; killed"):
            job.wait_for("Epoch 2/", timeout=0.5)
        assert job.returncode == -signal.SIGKILL
    with fake(epochs=2, epoch_s=60, out="other") as job:
        with pytest.raises(TrainingTimeoutError, match="still running after 0.5 s; killed"):
            job.wait(timeout=0.5)
        assert job.returncode == -signal.SIGKILL


def test_leaving_the_with_block_or_the_interpreter_stops_the_process(fake):
    with pytest.raises(KeyError):
        with fake(epochs=2, epoch_s=60) as job:
            raise KeyError("a cell fails halfway")
    assert job.returncode == -signal.SIGKILL
    other = fake(epochs=2, epoch_s=60, out="other").start()
    subproc.stop_all()  # what the one atexit hook does
    assert other.returncode == -signal.SIGKILL


def test_children_log_plain_text_under_force_color(fake, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")       # ipykernel sets it; Python 3.13 would colour tracebacks
    with fake(epochs=1) as job:
        assert job.wait(timeout=60) == 0
    assert "colors 0" in job.log()


def test_a_relative_script_path_runs_too(tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text(textwrap.dedent(FAKE))
    monkeypatch.chdir(tmp_path)
    with TrainingRun(["train.py", "--epochs", "2"], tmp_path / "out") as job:
        assert job.wait(timeout=60) == 0
    assert "Epoch 2/2" in job.log() and job.pid != os.getpid()
