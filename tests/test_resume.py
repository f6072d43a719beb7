"""helpers.resume (kill a fit job, restart it) and helpers.workers.backup_restore_train.

Launcher tests use a tiny fake training module (no TensorFlow) that writes the
same epoch log; one end-to-end test runs the real script: two real processes,
a real SIGKILL, a restart that BackupAndRestore resumes.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from helpers import resume, workers
from helpers.resume import TrainingFailedError, TrainingRun, TrainingTimeoutError
from helpers.cluster import pid_alive as alive

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
    print("fake training", os.getpid(), flush=True)
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
def fake(tmp_path, monkeypatch):
    """Make TrainingRun start the fake module; returns a factory of runs with FAKE_* settings."""
    (tmp_path / "fakemod.py").write_text(textwrap.dedent(FAKE))
    monkeypatch.setattr(resume, "MODULE", "fakemod")

    def make(epochs=3, mode="train", epoch_s=0.02, out="out"):
        return TrainingRun(tmp_path / out, epochs, env={"PYTHONPATH": str(tmp_path), "FAKE_MODE": mode,
                                                        "FAKE_EPOCH_S": epoch_s})
    return make


def test_command_is_the_same_every_time_and_complete(tmp_path):
    argv = resume.command(tmp_path, 5, examples=0, batch=16, lr=0.1, seed=7)
    assert argv == resume.command(tmp_path, 5, examples=0, batch=16, lr=0.1, seed=7)
    assert argv[:2] == ["-m", "helpers.workers.backup_restore_train"]
    opts = dict(zip(argv[2::2], argv[3::2]))
    assert opts == {"--out": str(tmp_path), "--epochs": "5", "--examples": "0", "--batch": "16",
                    "--lr": "0.1", "--seed": "7"}
    assert resume.command(tmp_path, backup_dir=tmp_path / "b")[-2:] == ["--backup-dir", str(tmp_path / "b")]
    assert "--min-epoch-seconds" not in argv  # 0 (the default): no wait, no flag
    assert resume.command(tmp_path, min_epoch_seconds=0.25)[-2:] == ["--min-epoch-seconds", "0.25"]
    workers.path("backup_restore_train")  # the script ships with the helpers


@pytest.mark.parametrize("kwargs, words", [
    ({"epochs": 0}, "epochs must be an int >= 1"),
    ({"epochs": True}, "epochs must be an int >= 1"),
    ({"epochs": 2.0}, "epochs must be an int >= 1"),
    ({"examples": -1}, "examples must be an int >= 0"),
    ({"batch": 1}, "batch must be an int >= 2"),
    ({"lr": 0}, "lr must be a number > 0"),
    ({"lr": "0.1"}, "lr must be a number > 0"),
    ({"min_epoch_seconds": -1}, "min_epoch_seconds must be a number of seconds >= 0"),
    ({"min_epoch_seconds": float("nan")}, "min_epoch_seconds must be a number of seconds >= 0"),
])
def test_bad_arguments_are_refused_before_anything_starts(tmp_path, kwargs, words):
    with pytest.raises(ValueError, match=words):
        resume.command(tmp_path, **kwargs)
    with pytest.raises(ValueError, match=words):
        TrainingRun(tmp_path / "never", **kwargs)
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
        for epoch, words in ((0, "epoch must be an int >= 1"), (3, "epoch 3 never comes: this run has 2")):
            with pytest.raises(ValueError, match=words):
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
        resume.run(job.out_dir, 3, timeout=60, echo=False,
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
    resume._stop_all()  # what the atexit hook does
    assert other.returncode == -signal.SIGKILL


def test_run_returns_the_result_and_prints_the_log(fake, tmp_path, capsys):
    env = {"PYTHONPATH": str(tmp_path), "FAKE_EPOCH_S": "0"}
    result = resume.run(tmp_path / "out", 2, timeout=60, env=env)
    assert result["epochs_run"] == 2 and "fake training" in capsys.readouterr().out


def test_sigkill_mid_way_then_restart_resumes_after_the_backup(tmp_path):
    """The real thing: the reference and the victim run at once, the victim is killed after epoch 1.

    ``min_epoch_seconds`` keeps every epoch >= 0.2 s, so the kill lands in epoch 2 however fast this machine is.
    """
    epochs, fit = 4, dict(examples=256, batch=32, min_epoch_seconds=0.2)
    with TrainingRun(tmp_path / "ref", epochs, **fit) as ref, TrainingRun(tmp_path / "job", epochs, **fit) as job:
        job.wait_for_epoch(1, timeout=180)
        assert job.kill() == -signal.SIGKILL, "the job finished before the kill"
        assert ref.wait(timeout=180) == 0, ref.log()
    before = [r["epoch"] for r in resume.read_epochs(tmp_path / "job")]
    meta = json.loads((tmp_path / "job" / "backup" / "training_metadata.json").read_text())
    assert meta["epoch"] == before[-1] < epochs, "the last logged epoch must be the backed-up one"

    result = resume.run(tmp_path / "job", epochs, timeout=180, echo=False, **fit)
    rows = resume.read_epochs(tmp_path / "job")
    assert [r["epoch"] for r in rows] == list(range(1, epochs + 1))
    assert [r["pid"] for r in rows] == [job.pid] * len(before) + [result["pid"]] * (epochs - len(before))
    assert result["epochs_run"] == epochs - meta["epoch"] and result["replicas"] == 2
    assert not result["backup_left"] and not (tmp_path / "job" / "backup").exists()
    assert not (tmp_path / "ref" / "backup").exists()
    ref_rows = resume.read_epochs(tmp_path / "ref")
    np.testing.assert_allclose([r["loss"] for r in rows], [r["loss"] for r in ref_rows], rtol=1e-6)
    for a, b in zip(resume.read_weights(tmp_path / "job"), resume.read_weights(tmp_path / "ref")):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=0)


def test_worker_script_refuses_bad_options(tmp_path):
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run([sys.executable, "-m", resume.MODULE, "--out", str(tmp_path), "--epochs", "0"],
                          capture_output=True, text=True, cwd=root, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(root)))
    assert proc.returncode == 2 and "need --epochs >= 1" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", resume.MODULE, "--out", str(tmp_path), "--min-epoch-seconds", "-1"],
                          capture_output=True, text=True, cwd=root, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(root)))
    assert proc.returncode == 2 and "--min-epoch-seconds >= 0" in proc.stderr
