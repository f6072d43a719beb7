"""Unit-test session set-up: two logical CPU devices before anything touches TensorFlow.

Why: tests of strategies and tower models need two replica devices, and the
device list is fixed once TensorFlow initialises. Tests that need another
configuration run in a subprocess.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def replicas():
    """Two replica device names (logical CPUs here, GPUs on a GPU machine)."""
    from helpers.devices import ensure_devices

    return ensure_devices(2)


def pytest_sessionstart(session):
    from helpers.devices import ensure_devices

    ensure_devices(2)
