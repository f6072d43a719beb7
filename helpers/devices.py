"""Replica devices on 0, 1 or N GPUs: real GPUs, one GPU split, or the CPU split (:func:`ensure_devices`).

Why: a data-parallel lesson needs at least two devices, but learners arrive with 0, 1 or N GPUs. TensorFlow fixes
its device list the first time it touches the devices, so a second call with another ``n`` raises
``RuntimeError`` (restart the kernel, or use a subprocess as lessons 02 and 06 do).
"""

from __future__ import annotations

import functools
import os
from typing import Optional

from . import config
from .checks import nonneg_int, positive_int
from .quiet import filtered_native_stderr
from .tables import print_table

#: The most replica devices the course creates; :func:`check_device_count`'s message says why.
MAX_DEVICES = 64
#: Replicas a TensorFlow lesson gets when it names none (``ensure_devices()``, ``setup_notebook()``): written once.
DEFAULT_REPLICAS = 2
KIND_GPUS = "GPUs"
KIND_SPLIT_GPU = "GPU 0 split into logical GPUs"
KIND_SPLIT_CPU = "CPU split into logical CPUs"

_configured: Optional[tuple[int, tuple[str, ...], str]] = None  # (n, names, kind)


@functools.cache
def import_tensorflow():
    """TensorFlow, imported (and CUDA probed) once with its harmless start-up lines filtered out."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with filtered_native_stderr():
        import tensorflow as tf

        tf.config.list_physical_devices()  # CUDA starts here; this does not fix the device list yet
    return tf


def check_device_count(n: object) -> int:
    """``n`` if it is a replica count from 1 to :data:`MAX_DEVICES`, else ``ValueError`` saying why."""
    positive_int("n", n, why="number of replicas")
    if n > MAX_DEVICES:
        raise ValueError(f"n={n} replica devices is more than this course creates (at most {MAX_DEVICES}, "
                         "helpers.devices.MAX_DEVICES): the largest machine it targets has 8 GPUs, and every "
                         "logical device costs its own memory and threads. Ask for the devices you mean to train on.")
    return n


def default_gpu_memory_mb(n: int) -> int:
    """Memory of each of ``n`` logical GPUs cut from one: ``MULTIGPU_GPU_MEMORY_MB``, else 12 GiB in all
    (a 16 GB Colab T4), at most 4 GiB and at least 512 MiB each."""
    check_device_count(n)
    return config.gpu_memory_mb() or max(512, min(4096, 12288 // n))


def _restart_error(n: int, have: str) -> RuntimeError:
    return RuntimeError(
        f"Cannot provide {n} replica devices: TensorFlow already initialised its devices in this process "
        f"({have}). The device list is fixed the first time TensorFlow touches the devices and cannot change "
        "afterwards. Restart the kernel (Kernel > Restart) and call ensure_devices() before anything else, "
        "or run the other configuration in a subprocess.")


def replica_plan(n: int, n_gpus: int) -> str:
    """Pure: how ``n`` replicas are made with ``n_gpus`` GPUs: :data:`KIND_GPUS` (one GPU each),
    :data:`KIND_SPLIT_GPU` (GPU 0 split, Colab's T4) or :data:`KIND_SPLIT_CPU` (a laptop, Binder, CI)."""
    check_device_count(n)
    nonneg_int("n_gpus", n_gpus)
    if n_gpus >= n:
        return KIND_GPUS
    return KIND_SPLIT_GPU if n_gpus else KIND_SPLIT_CPU


def ensure_devices(n: int = DEFAULT_REPLICAS) -> list[str]:
    """``n`` replica device names (``['/device:GPU:0', ...]``), made as :func:`replica_plan` says; ``RuntimeError``
    when TensorFlow's devices were already initialised in a way that cannot give ``n``. With more GPUs than ``n``,
    only the first ``n`` stay visible in this process, so ``tf.distribute.MirroredStrategy()`` uses the replicas."""
    global _configured
    check_device_count(n)
    if _configured is not None:
        done_n, names, kind = _configured
        if done_n == n:
            return list(names)
        raise _restart_error(n, f"configured for {done_n} replica(s) on {kind}")

    tf = import_tensorflow()
    gpus = tf.config.list_physical_devices("GPU")
    kind = replica_plan(n, len(gpus))
    if kind == KIND_GPUS:
        for gpu in gpus:  # take GPU memory as needed, so worker subprocesses (lesson 07) still fit
            try:
                tf.config.experimental.set_memory_growth(gpu, True)
            except (RuntimeError, ValueError):
                pass  # already initialised or split: leave TensorFlow's setting alone
        if len(gpus) > n:  # the kernel sees its replicas only: a plain MirroredStrategy() then uses exactly them
            try:
                tf.config.set_visible_devices(gpus[:n], "GPU")
            except RuntimeError:
                pass  # initialised already: the first n are still the replicas below
    elif kind == KIND_SPLIT_GPU:
        limit = default_gpu_memory_mb(n)
        _split(tf, gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=limit)] * n)
    elif n > 1:
        _split(tf, tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * n)
    device_type = "GPU" if gpus else "CPU"
    logical = [d.name for d in tf.config.list_logical_devices(device_type)]
    if len(logical) < n:
        raise _restart_error(n, f"only {len(logical)} logical {device_type} device(s) exist")
    _configured = (n, tuple(logical[:n]), kind)
    return logical[:n]


def _split(tf, physical, cfg) -> None:
    """Apply a logical-device split; too late (TF initialised) is fine only if a large enough split exists."""
    try:
        tf.config.set_logical_device_configuration(physical, cfg)
    except RuntimeError as err:
        existing = tf.config.get_logical_device_configuration(physical) or []
        if len(existing) < len(cfg):
            have = f"{physical.name} has {len(existing) or 1} logical device(s): {err}"
            raise _restart_error(len(cfg), have) from err


def configured_devices() -> Optional[list[str]]:
    """The replica devices :func:`ensure_devices` set up in this process (None before it ran)."""
    return None if _configured is None else list(_configured[1])


def replica_kind() -> Optional[str]:
    """How :func:`ensure_devices` made the replicas (None before it ran)."""
    return None if _configured is None else _configured[2]


def gpu_names() -> list[str]:
    """Model names of the physical GPUs TensorFlow sees, e.g. ``['Tesla T4', 'Tesla T4']`` (``[]`` without GPUs)."""
    tf = import_tensorflow()
    names = []
    for gpu in tf.config.list_physical_devices("GPU"):
        try:
            details = tf.config.experimental.get_device_details(gpu)
        except (RuntimeError, ValueError):
            details = {}
        names.append(details.get("device_name") or gpu.name)
    return names


def hardware_label(kind: Optional[str], n: int, names: Optional[list[str]] = None) -> str:
    """What ``n`` replicas of ``kind`` really are, for titles: ``"2 x Tesla T4"``, ``"1 x Tesla T4 split in 2"``."""
    if kind is None:
        raise ValueError("kind is None: call ensure_devices() first")
    check_device_count(n)
    names = list(names or [])
    if kind == KIND_GPUS:
        used = names[:n] or ["GPU"] * n
        return f"{n} x {used[0]}" if len(set(used)) == 1 else " + ".join(used)
    if kind == KIND_SPLIT_GPU:
        return f"1 x {names[0] if names else 'GPU'} split in {n}"
    if kind == KIND_SPLIT_CPU:
        return f"1 CPU split in {n}" if n > 1 else "1 CPU"
    raise ValueError(f"unknown replica kind {kind!r}")


def replicas_note(kind: Optional[str], n: int, names: Optional[list[str]] = None) -> str:
    """One line telling the learner which case they are in and what the all-reduce runs on."""
    label = hardware_label(kind, n, names)
    if n == 1:
        return f"1 replica on {label}: nothing to all-reduce."
    if kind == KIND_GPUS:
        return (f"{label}: real parallel replicas; MirroredStrategy all-reduces the gradients with NCCL "
                "between the GPUs. Speed-ups you measure here are real.")
    if kind == KIND_SPLIT_GPU:
        return (f"{label}: the replicas share one chip, so expect no real speed-up (lesson 06). NCCL does not "
                "work across virtual GPUs: MirroredStrategy (TF 2.20-2.21) all-reduces with its ring implementation "
                "instead.")
    return (f"{label}: real replicas and a real all-reduce (TensorFlow's ring collectives on the CPU), "
            "but on the same cores, so expect no real speed-up (a measurement may still beat one device a little; "
            "lesson 06 explains why).")


def show_devices() -> list[dict[str, str]]:
    """Print the physical and logical devices as a table and return its rows; call it after :func:`ensure_devices`
    (listing logical devices fixes TensorFlow's devices)."""
    tf = import_tensorflow()
    rows = [{"kind": kind, "type": d.device_type, "name": d.name}
            for kind, lister in (("physical", tf.config.list_physical_devices),
                                 ("logical", tf.config.list_logical_devices))
            for d in lister()]
    print_table(rows, ("kind", "type", "name"))
    return rows
