"""helpers.config: the quick/full switch and the fail-fast check of the environment."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import config, devices

ROOT = Path(__file__).resolve().parents[1]


def test_default_is_quick(monkeypatch):
    monkeypatch.delenv(config.ENV_VAR, raising=False)
    assert config.mode() == "quick" and config.is_quick()
    assert config.pick(quick=1, full=10) == 1


def test_full(monkeypatch):
    monkeypatch.setenv(config.ENV_VAR, " FULL ")
    assert config.mode() == "full" and not config.is_quick()
    assert config.pick(quick=1, full=10) == 10


def test_typo_is_an_error(monkeypatch):
    monkeypatch.setenv(config.ENV_VAR, "ful")
    with pytest.raises(ValueError, match="not a mode"):
        config.mode()


@pytest.fixture
def clean_env(monkeypatch):
    for name in (config.ENV_VAR, config.GPU_MEMORY_ENV, config.SCRATCH_ENV, config.JAX_DEVICES_ENV):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize("settings", [
    {},
    {"MULTIGPU_MODE": "full"},
    {"MULTIGPU_MODE": " Quick "},
    {"MULTIGPU_MODE": ""},
    {"MULTIGPU_GPU_MEMORY_MB": "64"},
    {"MULTIGPU_GPU_MEMORY_MB": " 1024 "},
    {"MULTIGPU_GPU_MEMORY_MB": ""},
    {"MULTIGPU_JAX_DEVICES": "2"},
    {"MULTIGPU_JAX_DEVICES": ""},
])
def test_validate_accepts_good_settings(clean_env, settings):
    for name, value in settings.items():
        clean_env.setenv(name, value)
    assert config.validate_environment() is None


@pytest.mark.parametrize("name, value, words", [
    ("MULTIGPU_MODE", "bogus", "MULTIGPU_MODE='bogus' is not a mode; use one of quick, full"),
    ("MULTIGPU_MODE", "ful", "not a mode"),
    ("MULTIGPU_GPU_MEMORY_MB", "lots", "'lots' is not a whole number of MiB"),
    ("MULTIGPU_GPU_MEMORY_MB", "512.5", "not a whole number"),
    ("MULTIGPU_GPU_MEMORY_MB", " ", "not a whole number"),
    ("MULTIGPU_GPU_MEMORY_MB", "63", "at least 64 MiB"),
    ("MULTIGPU_GPU_MEMORY_MB", "-1", "at least 64 MiB"),
    ("MULTIGPU_JAX_DEVICES", "two", "MULTIGPU_JAX_DEVICES='two' is not a device count"),
    ("MULTIGPU_JAX_DEVICES", "0", "from 1 to 64"),
])
def test_validate_rejects_bad_settings_in_one_line(clean_env, name, value, words):
    clean_env.setenv(name, value)
    with pytest.raises(ValueError) as info:
        config.validate_environment()
    message = str(info.value)
    assert words in message and "\n" not in message, message


def test_gpu_memory_mb(clean_env):
    assert config.gpu_memory_mb() is None
    clean_env.setenv(config.GPU_MEMORY_ENV, "")
    assert config.gpu_memory_mb() is None
    clean_env.setenv(config.GPU_MEMORY_ENV, " 1024 ")
    assert config.gpu_memory_mb() == 1024
    clean_env.setenv(config.GPU_MEMORY_ENV, "63")
    with pytest.raises(ValueError, match="at least 64 MiB"):
        config.gpu_memory_mb()


def test_validate_agrees_with_devices(clean_env):
    """What validate_environment rejects, the device set-up would reject later (and the reverse)."""
    for value in ("lots", "63", " ", "64", "2048"):
        clean_env.setenv(config.GPU_MEMORY_ENV, value)
        try:
            devices.default_gpu_memory_mb(2)
            late = None
        except ValueError as exc:
            late = exc
        try:
            config.validate_environment()
            early = None
        except ValueError as exc:
            early = exc
        assert (early is None) == (late is None), (value, early, late)


def test_validate_rejects_a_file_as_scratch(clean_env, tmp_path):
    afile = tmp_path / "not-a-folder"
    afile.write_text("x")
    clean_env.setenv(config.SCRATCH_ENV, str(afile))
    with pytest.raises(ValueError, match="is a file; point it at a folder"):
        config.validate_environment()
    clean_env.setenv(config.SCRATCH_ENV, str(tmp_path / "not-yet-made"))
    config.validate_environment()


def test_the_scratch_root_is_the_users_own_or_the_setting(clean_env, tmp_path):
    clean_env.setattr("tempfile.tempdir", str(tmp_path))
    assert config.scratch_root() == tmp_path / f"keras-multigpu-course-{os.getuid()}"
    clean_env.setenv(config.SCRATCH_ENV, str(tmp_path / "mine"))
    assert config.scratch_root() == tmp_path / "mine"


def test_validate_rejects_a_scratch_folder_that_is_not_the_users_own(clean_env, tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    clean_env.setenv(config.SCRATCH_ENV, str(link))
    with pytest.raises(config.ScratchFolderError, match=r"^The scratch folder .*link is a symbolic link \(to "):
        config.validate_environment()
    clean_env.setenv(config.SCRATCH_ENV, str(real))
    config.validate_environment()
    assert config.private_folder_problem(real) is None
    real.chmod(0o770)
    assert "writable by others (mode 770)" in config.private_folder_problem(real)


_PROBE = """
import json, sys
from helpers import config
try:
    config.validate_environment()
    error = None
except ValueError as exc:
    error = str(exc)
heavy = sorted(m for m in ("tensorflow", "keras", "jax", "numpy") if m in sys.modules)
print(json.dumps({"error": error, "heavy": heavy}))
"""


@pytest.mark.parametrize("value", ["quick", "bogus"])
def test_validate_imports_no_framework(value):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MULTIGPU_")}
    env.update({"MULTIGPU_MODE": value, "PYTHONPATH": str(ROOT)})
    proc = subprocess.run([sys.executable, "-c", _PROBE], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["heavy"] == [], result
    assert (result["error"] is None) == (value == "quick"), result
