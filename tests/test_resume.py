"""helpers.resume (start a fit job, kill it, restart it, read what it wrote).

The tests use a tiny fake training script (no TensorFlow) that writes the same
epoch log as lesson 05's ``backup_restore_train.py``; the lesson itself runs the
real script end to end (real SIGKILL, a restart that BackupAndRestore resumes).
"""

import os
import signal
import textwrap
import time

import pytest

from helpers import resume, subproc
from helpers.resume import TrainingFailedError, TrainingRun, TrainingTimeoutError
from helpers.subproc import pid_alive as alive

FAKE = """
    import json, os, subprocess, sys, time
    argv = sys.argv[1:]
    out, epochs = argv[argv.index("--out") + 1], int(argv[argv.index("--epochs") + 1])
    mode = os.environ.get("FAKE_MODE", "train")
    if mode == "fail":
        raise ValueError("broken on purpose")
    if mode == "grandchild":
        kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        open(os.path.join(out, "kid.pid"), "w").write(str(kid.pid))
    print("fake training", os.getpid(), "colors", os.environ.get("PYTHON_COLORS"), flush=True)
    for epoch in range(1, epochs + 1):
        time.sleep(float(os.environ.get("FAKE_EPOCH_S", "0.02")))
        with open(os.path.join(out, "epochs.jsonl"), "a") as f:
            f.write(json.dumps({"epoch": epoch, "loss": 1.0 / epoch, "pid": os.getpid()}) + "\\n")
    json.dump({"pid": os.getpid(), "epochs_run": epochs}, open(os.path.join(out, "result.json"), "w"))
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
        return TrainingRun(fake_command(tmp_path, out, epochs), tmp_path / out,
                           env={"PYTHONPATH": str(tmp_path), "FAKE_MODE": mode, "FAKE_EPOCH_S": epoch_s})
    return make


def fake_command(tmp_path, out="out", epochs=3):
    return ["-m", "fakemod", "--out", str(tmp_path / out), "--epochs", str(epochs)]


def test_bad_commands_are_refused_before_anything_starts(tmp_path):
    for command, words in (([], "command must be"), (["-m"], "followed by a module name"),
                           ([str(tmp_path / "missing.py")], "worker script not found"), ([1, 2], "command must be")):
        with pytest.raises(ValueError, match=words):
            TrainingRun(command, tmp_path / "never")
    with pytest.raises(ValueError, match="out_dir must be a folder path"):
        TrainingRun(["-m", "json.tool"], "")
    assert not (tmp_path / "never").exists()


def test_readers_on_a_folder_without_runs(tmp_path):
    assert resume.read_epochs(tmp_path) == [] and resume.read_result(tmp_path) is None
    with pytest.raises(FileNotFoundError):
        resume.read_weights(tmp_path)


def test_a_run_must_be_started_once(tmp_path, fake):
    job = fake()
    for call in (lambda: job.pid, job.kill, job.wait, lambda: job.wait_for_epoch(1), job.log):
        with pytest.raises(RuntimeError, match="start the run first"):
            call()
    job.stop()  # harmless before start
    with job:
        with pytest.raises(RuntimeError, match="already started"):
            job.start()
        assert job.wait(timeout=60) == 0
    assert "fake training" in job.log() and job.log_path.name == "run-1.log"


def test_wait_for_epoch_refuses_bad_arguments(fake):
    with fake(epochs=2) as job:
        for epoch in (0, -1, True, 1.0):
            with pytest.raises(ValueError, match="epoch must be an int >= 1"):
                job.wait_for_epoch(epoch)
        for timeout in (0, -1, True, "5"):
            with pytest.raises(ValueError, match="timeout must be a number of seconds > 0"):
                job.wait_for_epoch(1, timeout=timeout)
        with pytest.raises(ValueError, match="timeout must be a number of seconds > 0"):
            job.wait(timeout=0)


def test_kill_after_an_epoch_is_a_real_sigkill_of_the_whole_group(fake, tmp_path):
    with fake(epochs=50, mode="grandchild", epoch_s=0.1) as job:
        row = job.wait_for_epoch(2, timeout=60)
        assert row["epoch"] == 2 and row["pid"] == job.pid
        kid = int((tmp_path / "out" / "kid.pid").read_text())
        assert alive(kid)
        assert job.kill() == -signal.SIGKILL and job.returncode == -signal.SIGKILL
        assert job.kill() == -signal.SIGKILL  # again: nothing left to kill, same code
    assert _gone(kid), "the kill must reach what the training process started"
    logged = [r["epoch"] for r in resume.read_epochs(tmp_path / "out")]
    assert logged[:2] == [1, 2] and len(logged) < 50 and resume.read_result(tmp_path / "out") is None


def test_restart_appends_to_the_same_epoch_log_and_gets_a_new_log_file(fake, tmp_path):
    for _ in range(2):
        with fake(epochs=2) as job:
            assert job.wait(timeout=60) == 0
    rows = resume.read_epochs(tmp_path / "out")
    assert [r["epoch"] for r in rows] == [1, 2, 1, 2] and len({r["pid"] for r in rows}) == 2
    assert sorted(p.name for p in (tmp_path / "out").glob("run-*.log")) == ["run-1.log", "run-2.log"]


def test_a_failing_process_is_reported_with_its_error(fake):
    with fake(mode="fail") as job:
        with pytest.raises(TrainingFailedError, match=r"exited with 1 before finishing epoch 1: "
                                                      r"ValueError: broken on purpose"):
            job.wait_for_epoch(1, timeout=60)
    with pytest.raises(TrainingFailedError, match="exited with 1 instead of 0: ValueError: broken on purpose"):
        resume.run(job.argv, job.out_dir, timeout=60, echo=False,
                   env={"PYTHONPATH": job.extra_env["PYTHONPATH"], "FAKE_MODE": "fail"})


def test_an_epoch_that_never_comes_and_a_hang_are_killed(fake):
    with fake(epochs=2, epoch_s=60) as job:
        with pytest.raises(TrainingTimeoutError, match=r"epoch 1 not finished within 0.5 s; process \d+ killed"):
            job.wait_for_epoch(1, timeout=0.5)
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


def test_run_returns_the_result_and_prints_the_log(fake, tmp_path, capsys):
    env = {"PYTHONPATH": str(tmp_path), "FAKE_EPOCH_S": "0"}
    result = resume.run(fake_command(tmp_path, epochs=2), tmp_path / "out", timeout=60, env=env)
    assert result["epochs_run"] == 2 and "fake training" in capsys.readouterr().out


def test_children_log_plain_text_under_force_color(fake, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")       # ipykernel sets it; Python 3.13 would colour tracebacks
    with fake(epochs=1) as job:
        assert job.wait(timeout=60) == 0
    assert "colors 0" in job.log()


def test_a_script_path_runs_too(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(FAKE))
    (tmp_path / "out").mkdir()
    result = resume.run([str(script), "--out", str(tmp_path / "out"), "--epochs", "2"], tmp_path / "out",
                        timeout=60, echo=False)
    assert result["epochs_run"] == 2 and result["pid"] != os.getpid()
