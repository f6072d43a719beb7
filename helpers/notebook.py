"""The Setup section every notebook shares: versions, mode, devices, seeds, scratch space.

Why: each notebook's setup is ``REPLICAS = helpers.setup_notebook(devices=2)``, not 20 lines copied into each.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path
from typing import Optional

from . import config
from .checks import nonneg_int
from .config import SCRATCH_ENV, ScratchFolderError, private_folder_problem, scratch_root  # noqa: F401 (SCRATCH_ENV)
from .devices import (
    DEFAULT_REPLICAS,
    check_device_count,
    ensure_devices,
    gpu_names,
    replica_kind,
    replicas_note,
    show_devices,
)
from .meshes import choose_jax_platform
from .quiet import install_native_filter
from .subproc import at_exit, pid_alive
from .torch_backend import setup as setup_torch
from .versions import stack_line, versions  # noqa: F401  (lesson 00 calls helpers.notebook.versions)

BACKENDS = ("tensorflow", "jax", "torch")


def where_am_i() -> str:
    """``"colab"``, ``"kaggle"``, ``"binder"`` or ``"local"``."""
    if "google.colab" in sys.modules or os.environ.get("COLAB_RELEASE_TAG"):
        return "colab"
    if os.environ.get("KAGGLE_KERNEL_RUN_TYPE") or os.environ.get("KAGGLE_URL_BASE"):
        return "kaggle"
    if os.environ.get("BINDER_LAUNCH_HOST") or os.environ.get("BINDER_REPO_URL"):
        return "binder"
    return "local"


#: What a hosted learner without a GPU reads, once, in the Setup cell.
NO_GPU_ADVICE = {
    "colab": "Colab: this runtime has no GPU. For one real GPU choose Runtime > Change runtime type > T4 GPU "
             "(the kernel restarts); until then every lesson runs on the CPU split in two logical devices.",
    "kaggle": "Kaggle: this session has no GPU. For two real GPUs choose Settings > Accelerator > GPU T4 x2 "
              "(the session restarts); until then every lesson runs on the CPU split in two logical devices.",
}


def no_gpu_advice(where: str, n_gpus: int) -> str:
    """The one line for a Colab/Kaggle session without a GPU ('' elsewhere or when a GPU is there)."""
    nonneg_int("n_gpus", n_gpus)
    return NO_GPU_ADVICE.get(where, "") if n_gpus == 0 else ""


def _select_backend(backend: str, n_devices: Optional[int]) -> Optional[int]:
    """Set KERAS_BACKEND (and, for JAX, its devices); return the JAX device count (None for TensorFlow)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if "keras" in sys.modules:
        import keras

        if keras.backend.backend() != backend:
            raise RuntimeError(f"Keras was already imported with the {keras.backend.backend()!r} backend; the "
                               "backend is fixed at import. Restart the kernel and run the Setup cells first.")
    else:
        os.environ["KERAS_BACKEND"] = backend
    if backend != "jax":
        return None
    plan = choose_jax_platform(n_devices)  # 2+ GPUs: the GPUs; fewer: MULTIGPU_JAX_DEVICES (default 4) CPUs
    print(f"JAX devices: {plan.reason}")
    return n_devices or plan.devices


def _jax_devices(n: int) -> list[str]:
    """``n`` JAX devices (GPUs if present, else forced host CPU devices) as strings; ``n`` is a plan's count
    (:func:`helpers.meshes.jax_device_plan` validated it)."""
    import jax

    devs = jax.devices()
    if len(devs) < n:
        raise RuntimeError(f"JAX sees {len(devs)} device(s), fewer than {n}. XLA_FLAGS must ask for "
                           f"--xla_force_host_platform_device_count={n} before jax is imported: restart the kernel.")
    return [str(d) for d in devs[:n]]


def setup_notebook(devices: Optional[int] = None, backend: str = "tensorflow") -> list[str]:
    """Prepare a lesson (backend, replica devices, seeds), print versions and devices, return the device names.
    ``devices``: TensorFlow replicas (default :data:`helpers.devices.DEFAULT_REPLICAS`, 2); on JAX the devices
    :func:`helpers.meshes.choose_jax_platform` plans (its plan when None); PyTorch takes none (one process per
    device). Checked once, here, before a framework starts. Safe to call again with the same arguments."""
    config.validate_environment()  # a typo in MULTIGPU_* fails here, before seconds of importing TensorFlow
    if "ipykernel" in sys.modules:  # in a notebook: keep TensorFlow's harmless C++ lines out of the cells
        install_native_filter()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    if devices is not None:                      # the one check of devices, before anything starts
        check_device_count(devices)
        if backend == "torch":
            raise ValueError(f"setup_notebook(backend='torch') takes no devices, got devices={devices!r}: PyTorch "
                             "runs one process per device (helpers.torch_backend.process_plan)")
    n_jax = _select_backend(backend, devices)
    if backend == "torch":                       # lesson 12: one process per device (helpers.torch_backend)
        return setup_torch(where_am_i(), no_gpu_advice)
    if backend == "tensorflow":
        names = ensure_devices(DEFAULT_REPLICAS if devices is None else devices)
        import tensorflow as tf

        tf.get_logger().setLevel("WARNING")  # tf.distribute's INFO lines drown the lesson's output
    else:
        names = _jax_devices(n_jax)
    import keras

    keras.utils.set_random_seed(42)
    where = where_am_i()
    print(stack_line())
    print(f"Keras backend: {keras.backend.backend()} | mode: {config.mode()} "
          f"(set {config.ENV_VAR}=full to train for real) | running on: {where}")
    if backend == "tensorflow":
        show_devices()
        gpus = gpu_names()
        print(f"replicas: {len(names)} ({replica_kind()}) -> {names}")
        print(replicas_note(replica_kind(), len(names), gpus))
        advice = no_gpu_advice(where, len(gpus))
    else:
        print(f"replicas: {len(names)} JAX devices -> {names}")
        advice = no_gpu_advice(where, sum(n.lower().startswith(("cuda", "gpu")) for n in names))
    if advice:
        print(advice)
    return names


_SCRATCH_MADE: set = set()
_SWEPT: set = set()                        # roots swept by this process (once each)
#: A file in a scratch root that scratch_dir made: only there are the folders of ended processes swept.
ROOT_MARK = ".made-by-keras-multigpu-course"
_SCRATCH_NAME = re.compile(r"^[A-Za-z0-9_-]+-(\d+)$")


def _remove_scratch() -> None:
    for path in _SCRATCH_MADE:
        shutil.rmtree(path, ignore_errors=True)


def own_scratch_root() -> Path:
    """:func:`helpers.config.scratch_root`, made (mode 0700, with :data:`ROOT_MARK`) if missing, and checked: a real
    folder of this user's own, writable by no one else; :class:`helpers.config.ScratchFolderError` otherwise."""
    root = scratch_root()
    made = False
    if not os.path.lexists(root):
        root.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(root, 0o700)
            made = True
        except FileExistsError:            # someone made it just now: checked below like any other
            pass
    problem = private_folder_problem(root)
    if problem:
        raise ScratchFolderError(problem[0].upper() + problem[1:])
    if made:
        (root / ROOT_MARK).write_text("made by helpers.notebook.scratch_dir: the <name>-<pid> folders of processes "
                                      "that ended are removed from here\n")
    return root


def sweep_scratch(root: Path) -> list[Path]:
    """Remove the ``<name>-<pid>`` folders in ``root`` whose process has ended (a killed kernel never removed its
    own): only in a root :func:`own_scratch_root` made, only real folders of this user's, only for pids that are
    not running. The folders removed."""
    if not (root / ROOT_MARK).is_file():   # a folder the learner pointed MULTIGPU_SCRATCH at: theirs, not swept
        return []
    gone = []
    for entry in os.scandir(root):
        match = _SCRATCH_NAME.match(entry.name)
        if not match or int(match.group(1)) == os.getpid() or not entry.is_dir(follow_symlinks=False):
            continue
        if hasattr(os, "getuid") and entry.stat(follow_symlinks=False).st_uid != os.getuid():
            continue
        if not pid_alive(int(match.group(1))):
            shutil.rmtree(entry.path, ignore_errors=True)
            gone.append(Path(entry.path))
    return gone


def scratch_dir(name: str) -> Path:
    """A fresh, empty folder ``<name>-<pid>`` under :func:`own_scratch_root`, outside the repository: per process
    (two kernels never share files), emptied on each call (Run All twice starts clean), removed at exit. The first
    call also sweeps the folders that ended kernels left (:func:`sweep_scratch`)."""
    if not name or not all(c.isalnum() or c in "-_" for c in name):
        raise ValueError(f"name must be letters, digits, '-' or '_', got {name!r}")
    root = own_scratch_root()
    if root not in _SWEPT:
        _SWEPT.add(root)
        sweep_scratch(root)
    path = root / f"{name}-{os.getpid()}"
    if path.is_symlink():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
    path.mkdir(mode=0o700)
    if not _SCRATCH_MADE:
        at_exit(_remove_scratch)  # the course's one exit hook: after any child still using the folder is stopped
    _SCRATCH_MADE.add(path)
    return path
