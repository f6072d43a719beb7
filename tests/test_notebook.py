"""helpers.notebook: setup_notebook, scratch_dir, environment detection."""

import os
import stat
import subprocess
import sys
import tempfile

import pytest

from helpers import notebook
from helpers.subproc import run_python


def test_setup_notebook_twice_same_devices(replicas, capsys):
    assert notebook.setup_notebook(devices=2) == replicas
    assert notebook.setup_notebook(devices=2) == replicas
    out = capsys.readouterr().out
    assert "tensorflow" in out and "mode: quick" in out and "replicas: 2" in out


def test_setup_notebook_bad_args():
    with pytest.raises(ValueError):
        notebook.setup_notebook(devices=0)
    with pytest.raises(ValueError, match="backend"):
        notebook.setup_notebook(devices=2, backend="mxnet")
    with pytest.raises(ValueError, match="MAX_DEVICES"):   # the JAX device count has the same cap
        notebook.setup_notebook(devices=10000, backend="jax")
    with pytest.raises(ValueError, match="takes no devices"):
        notebook.setup_notebook(devices=2, backend="torch")


def test_backend_already_fixed(replicas):
    with pytest.raises(RuntimeError, match="Restart the kernel"):
        notebook.setup_notebook(devices=2, backend="jax")


@pytest.mark.slow
def test_jax_backend_in_fresh_process():
    r = run_python("""
        import helpers
        names = helpers.setup_notebook(devices=4, backend="jax")
        import keras
        print("RESULT", keras.backend.backend(), len(names))
    """, echo=False, timeout=180)
    assert r.ok, r.stderr[-2000:]
    assert "RESULT jax 4" in r.stdout


def test_scratch_dir_is_fresh_and_outside_repo(tmp_path, monkeypatch):
    monkeypatch.setenv(notebook.SCRATCH_ENV, str(tmp_path))
    p = notebook.scratch_dir("lesson99")
    (p / "f.txt").write_text("x")
    assert notebook.scratch_dir("lesson99") == p and not any(p.iterdir())
    assert p.parent == tmp_path and p.name == f"lesson99-{os.getpid()}" and stat.S_IMODE(p.stat().st_mode) == 0o700
    with pytest.raises(ValueError):
        notebook.scratch_dir("../escape")
    with pytest.raises(ValueError):
        notebook.scratch_dir("")


def test_where_am_i(monkeypatch):
    for var in ("COLAB_RELEASE_TAG", "KAGGLE_KERNEL_RUN_TYPE", "KAGGLE_URL_BASE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("BINDER_LAUNCH_HOST", raising=False)
    monkeypatch.delenv("BINDER_REPO_URL", raising=False)
    assert notebook.where_am_i() == "local"
    monkeypatch.setenv("BINDER_LAUNCH_HOST", "https://mybinder.org/")
    assert notebook.where_am_i() == "binder"
    monkeypatch.setitem(sys.modules, "google.colab", object())
    assert notebook.where_am_i() == "colab"


def test_versions():
    v = notebook.versions()
    assert v["tensorflow"].startswith("2.") and v["keras"].startswith("3.")


def test_import_helpers_does_not_import_tensorflow():
    r = run_python("import sys, helpers; helpers.config; print('tensorflow' in sys.modules, 'keras' in sys.modules)",
                   echo=False)
    assert r.stdout.strip() == "False False"


def test_scratch_dirs_differ_between_processes_and_are_removed(tmp_path):
    code = "import helpers; p = helpers.scratch_dir('same'); (p / 'f').write_text('x'); print(p)"
    env = {"MULTIGPU_SCRATCH": str(tmp_path)}
    a, b = (run_python(code, env=env, echo=False).stdout.strip() for _ in range(2))
    assert a != b and a.startswith(str(tmp_path))
    assert not list(tmp_path.iterdir()), "scratch folders must be removed when the process exits"


def test_where_am_i_kaggle(monkeypatch):
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    monkeypatch.delenv("COLAB_RELEASE_TAG", raising=False)
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive")
    assert notebook.where_am_i() == "kaggle"


def test_no_gpu_advice_is_one_line_on_hosted_platforms_only():
    assert "GPU T4 x2" in notebook.no_gpu_advice("kaggle", 0) and "\n" not in notebook.no_gpu_advice("kaggle", 0)
    assert "Change runtime type" in notebook.no_gpu_advice("colab", 0)
    assert notebook.no_gpu_advice("colab", 1) == notebook.no_gpu_advice("local", 0) == ""
    with pytest.raises(ValueError):
        notebook.no_gpu_advice("colab", -1)


def test_bad_mode_fails_before_tensorflow_is_imported():
    r = run_python("""
        import sys, helpers
        try:
            helpers.setup_notebook(devices=2)
        except ValueError as e:
            print("ValueError", e, "| tensorflow imported:", "tensorflow" in sys.modules)
    """, env={"MULTIGPU_MODE": "bogus"}, echo=False)
    assert r.ok, r.stderr[-2000:]
    assert "ValueError" in r.stdout and "'bogus'" in r.stdout and "tensorflow imported: False" in r.stdout


def test_setup_prints_stack_line_and_replicas_note(replicas, capsys):
    notebook.setup_notebook(devices=2)
    out = capsys.readouterr().out
    assert out.startswith("stack: python ") and "(inside the supported range)" in out
    assert "expect no real speed-up" in out or "NCCL" in out


# ---- a scratch root of the user's own ---------------------------------------------------------------------

@pytest.fixture
def temp_root(tmp_path, monkeypatch):
    """The default root (no MULTIGPU_SCRATCH) in a temp directory of this test's; the sweep not done yet."""
    monkeypatch.delenv(notebook.SCRATCH_ENV, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(notebook, "_SWEPT", set())
    return tmp_path / f"keras-multigpu-course-{os.getuid()}"


def test_the_default_root_is_the_users_own(temp_root):
    path = notebook.scratch_dir("lesson99")
    assert path.parent == temp_root and stat.S_IMODE(temp_root.stat().st_mode) == 0o700
    assert (temp_root / notebook.ROOT_MARK).is_file()


def test_another_users_root_is_refused(temp_root, monkeypatch):
    temp_root.mkdir(mode=0o700)
    if os.geteuid() == 0:                      # as root: really another owner
        os.chown(temp_root, 65534, 65534)
        words = "belongs to user id 65534, not to you (user id 0)"
    else:                                      # else: this process pretends to be another user
        real = os.getuid()
        monkeypatch.setattr(os, "getuid", lambda: real + 1)
        temp_root = temp_root.parent / f"keras-multigpu-course-{real + 1}"
        temp_root.mkdir(mode=0o700)
        words = f"belongs to user id {real}, not to you (user id {real + 1})"
    with pytest.raises(notebook.ScratchFolderError, match=r"another user made it first.*Set MULTIGPU_SCRATCH") as info:
        notebook.scratch_dir("lesson99")
    assert words in str(info.value)
    print(f"{type(info.value).__name__}: {info.value}")    # the message TROUBLESHOOTING.md indexes
    with pytest.raises(ValueError, match="another user made it first"):     # and Setup says so before TensorFlow starts
        notebook.config.validate_environment()


def test_a_symlink_or_a_folder_others_can_write_is_refused(temp_root, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    temp_root.symlink_to(elsewhere)
    with pytest.raises(notebook.ScratchFolderError, match="is a symbolic link"):
        notebook.scratch_dir("lesson99")
    assert not any(elsewhere.iterdir())
    temp_root.unlink()
    temp_root.mkdir()
    temp_root.chmod(0o777)                     # the attack: a root anyone may fill with a train.py
    with pytest.raises(notebook.ScratchFolderError, match=r"writable by others \(mode 777\).*chmod go-w"):
        notebook.scratch_dir("lesson99")


def test_multigpu_scratch_is_checked_the_same_way(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o775)
    monkeypatch.setenv(notebook.SCRATCH_ENV, str(shared))
    with pytest.raises(notebook.ScratchFolderError, match="writable by others"):
        notebook.scratch_dir("lesson99")
    monkeypatch.setenv(notebook.SCRATCH_ENV, str(tmp_path / "new" / "root"))     # missing: made, private
    assert stat.S_IMODE(notebook.scratch_dir("lesson99").parent.stat().st_mode) == 0o700


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_dead_kernels_folder_is_swept_and_a_live_ones_kept(temp_root):
    notebook.own_scratch_root()
    dead, live = temp_root / f"lesson03-{_dead_pid()}", temp_root / f"lesson03-{os.getppid()}"
    other = temp_root / "notes-2024"                      # a name like ours, but not a folder: kept
    for folder in (dead, live):
        folder.mkdir()
        (folder / "train.py").write_text("x")
    other.write_text("x")
    notebook.scratch_dir("lesson99")
    assert not dead.exists() and live.exists() and other.exists()
    assert (temp_root / f"lesson99-{os.getpid()}").is_dir()


def test_a_folder_the_learner_chose_is_never_swept(tmp_path, monkeypatch):
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    experiment = mine / f"experiment-{_dead_pid()}"         # a learner's folder that looks like a dead kernel's
    experiment.mkdir()
    monkeypatch.setenv(notebook.SCRATCH_ENV, str(mine))
    monkeypatch.setattr(notebook, "_SWEPT", set())
    notebook.scratch_dir("lesson99")
    assert experiment.exists() and not (mine / notebook.ROOT_MARK).exists()
