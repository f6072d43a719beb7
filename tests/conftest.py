"""Unit-test session set-up: two logical CPU devices before anything touches TensorFlow.

Why: tests of strategies and tower models need two replica devices, and the
device list is fixed once TensorFlow initialises. Tests that need another
configuration run in a subprocess.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# The unit tests choose their JAX device counts themselves (the default, or [2] and [4]); a count the run was started
# with (make test STACK=hosted: Kaggle's 2) is for the notebooks, whose kernels get the environment the run began with.
os.environ.pop("MULTIGPU_JAX_DEVICES", None)

import pytest  # noqa: E402


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
