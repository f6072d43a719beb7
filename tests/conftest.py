"""Unit-test session set-up: two logical CPU devices before anything touches TensorFlow.

Why: tests of strategies and tower models need two replica devices, and the
device list is fixed once TensorFlow initialises. Tests that need another
configuration run in a subprocess.
"""

import os
import secrets
import signal
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# The unit tests choose their JAX device counts themselves (the default, or [2] and [4]); a count the run was started
# with (make test STACK=hosted: Kaggle's 2) is for the notebooks, whose kernels get the environment the run began with.
os.environ.pop("MULTIGPU_JAX_DEVICES", None)

import pytest  # noqa: E402

import helpers.subproc  # noqa: E402


@pytest.fixture(scope="session")
def replicas():
    """Two replica device names (logical CPUs here, GPUs on a GPU machine)."""
    from helpers.devices import ensure_devices

    return ensure_devices(2)


def pytest_sessionstart(session):
    from helpers.devices import ensure_devices

    ensure_devices(2)


@pytest.fixture
def fresh_jax_choice(monkeypatch):
    """A process in which JAX has not started and nothing was chosen yet; the environment is restored after.

    ``choose_jax_platform`` writes ``os.environ`` itself (JAX_PLATFORMS, XLA_FLAGS...): without the restore, a
    test's choice would leak into the notebooks nbval starts later from this process.
    """
    saved = dict(os.environ)
    monkeypatch.delitem(sys.modules, "jax", raising=False)
    monkeypatch.setattr("helpers.meshes._PLANS", [])
    for key in ("JAX_PLATFORMS", "XLA_FLAGS", "XLA_PYTHON_CLIENT_PREALLOCATE", "TF_FORCE_GPU_ALLOW_GROWTH",
                "MULTIGPU_JAX_DEVICES"):
        monkeypatch.delenv(key, raising=False)
    yield monkeypatch
    os.environ.clear()
    os.environ.update(saved)


# ---- what a failure left behind (helpers.subproc tags every process the course starts) ----

class Leftovers:
    """What a failure left behind: processes carrying this test's tag (every descendant inherits it, even one in a
    session of its own), and folders in this test's temp directory."""

    def __init__(self, tag, temp):
        self.tag, self.temp = tag, temp

    def processes(self, within: float = 10.0) -> list:
        deadline = time.time() + within          # a SIGKILL reaches a process that is not our child asynchronously
        while (pids := helpers.subproc.tagged_pids(self.tag)) and time.time() < deadline:
            time.sleep(0.05)
        return pids

    def folders(self) -> list:
        return sorted(p.name for p in self.temp.iterdir())


@pytest.fixture
def leftovers(monkeypatch, tmp_path):
    """Tag every process this test starts, and give it a temp directory of its own: what a failure left behind."""
    tag = f"test-{secrets.token_hex(4)}"
    monkeypatch.setenv(helpers.subproc.TAG_ENV, tag)
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    yield Leftovers(tag, temp)
    for pid in helpers.subproc.tagged_pids(tag):       # never leave one to the next test, even when this one failed
        os.kill(pid, signal.SIGKILL)
