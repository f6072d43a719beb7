"""helpers.notebook: setup_notebook, scratch_dir, environment detection."""

import os
import sys

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
    assert p.parent == tmp_path and p.name == f"lesson99-{os.getpid()}"
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
