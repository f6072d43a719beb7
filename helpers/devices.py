"""Replica devices that exist everywhere: real GPUs, one GPU split, or split CPUs.

Why: a data-parallel lesson needs at least two devices, but learners arrive
with 0, 1 or N GPUs.  :func:`ensure_devices` gives the same code path on all of
them:

* ``>= n`` GPUs           -> the first ``n`` GPUs (memory growth on);
* ``1 <= GPUs < n``       -> GPU 0 split into ``n`` logical GPUs (memory capped);
* no GPU                  -> the CPU split into ``n`` logical CPUs.

TensorFlow fixes its device list the first time it touches the devices, so the
replica count cannot change later in the same process: a second call with a
different ``n`` raises ``RuntimeError`` telling you to restart the kernel (or to
use a subprocess, as lessons 02 and 06 do).
"""

from __future__ import annotations

import os
from typing import Optional

from .checks import nonneg_int, positive_int
from .quiet import filtered_native_stderr

#: Per-logical-GPU memory cap when one GPU is split (MiB); override with this variable.
GPU_MEMORY_ENV = "MULTIGPU_GPU_MEMORY_MB"

_configured: Optional[tuple[int, tuple[str, ...], str]] = None  # (n, names, kind)


_tf_started = False


def import_tensorflow():
    """TensorFlow, imported (and CUDA probed) once with its harmless start-up lines filtered out."""
    global _tf_started
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if _tf_started:
        import tensorflow as tf

        return tf

    with filtered_native_stderr():
        import tensorflow as tf

        tf.config.list_physical_devices()  # CUDA starts here; this does not fix the device list yet
    _tf_started = True
    return tf


def default_gpu_memory_mb(n: int) -> int:
    """Memory limit for each of ``n`` logical GPUs carved out of one GPU.

    Reads ``MULTIGPU_GPU_MEMORY_MB`` if set; otherwise keeps the total at
    12 GiB (fits a 16 GB Colab T4) with at most 4 GiB and at least 512 MiB each.
    """
    check_device_count(n)
    env = os.environ.get(GPU_MEMORY_ENV)
    if env:
        try:
            value = int(env)
        except ValueError:
            raise ValueError(f"{GPU_MEMORY_ENV}={env!r} is not a whole number of MiB") from None
        if value < 64:
            raise ValueError(f"{GPU_MEMORY_ENV} must be at least 64 MiB, got {value}")
        return value
    return max(512, min(4096, 12288 // n))


#: The most replica devices the course will create or ask for, on TensorFlow and on JAX alike. An 8-GPU server,
#: the largest machine the course targets, needs 8; TensorFlow and XLA give each logical device its own state and
#: threads, so a count in the thousands (a typo) would quietly burn seconds and memory instead of failing.
MAX_DEVICES = 64


def check_device_count(n: object) -> int:
    """Return ``n`` if it is a usable replica/device count (an int from 1 to :data:`MAX_DEVICES`).

    Raises:
        ValueError: ``n`` is not an int, is below 1, or is above :data:`MAX_DEVICES` (the message says why).
    """
    positive_int("n", n, why="number of replicas")
    if n > MAX_DEVICES:
        raise ValueError(
            f"n={n} replica devices is more than this course creates (at most {MAX_DEVICES}, "
            "helpers.devices.MAX_DEVICES): the largest machine it targets has 8 GPUs, and every logical device "
            "costs its own memory and threads. Ask for the devices you mean to train on."
        )
    return n




def _restart_error(n: int, have: str) -> RuntimeError:
    return RuntimeError(
        f"Cannot provide {n} replica devices: TensorFlow already initialised its devices "
        f"in this process ({have}). The device list is fixed the first time TensorFlow "
        "touches the devices and cannot change afterwards. Restart the kernel "
        "(Kernel > Restart) and call ensure_devices() before anything else, or run the "
        "other configuration in a subprocess."
    )


def replica_plan(n: int, n_gpus: int) -> str:
    """Pure: how :func:`ensure_devices` makes ``n`` replicas on a machine with ``n_gpus`` GPUs.

    :data:`KIND_GPUS` (one real GPU each, memory growth on; Kaggle's T4 x2 for 2 replicas),
    :data:`KIND_SPLIT_GPU` (GPU 0 split into ``n`` logical GPUs with capped memory; Colab's T4) or
    :data:`KIND_SPLIT_CPU` (the CPU split into ``n`` logical CPUs; a laptop, Binder, CI).
    """
    check_device_count(n)
    nonneg_int("n_gpus", n_gpus)
    if n_gpus >= n:
        return KIND_GPUS
    return KIND_SPLIT_GPU if n_gpus else KIND_SPLIT_CPU


def ensure_devices(n: int = 2, gpu_memory_mb: Optional[int] = None) -> list[str]:
    """Return ``n`` device names to use as replicas, creating logical devices if needed.

    Args:
        n: number of replica devices wanted (int >= 1).
        gpu_memory_mb: memory limit of each logical GPU when one GPU must be
            split; default :func:`default_gpu_memory_mb`.

    Returns:
        Device names such as ``['/device:GPU:0', '/device:GPU:1']`` or
        ``['/device:CPU:0', '/device:CPU:1']``, ready for
        ``tf.distribute.MirroredStrategy(devices=...)``.

    Raises:
        ValueError: ``n`` is not an int >= 1, or ``gpu_memory_mb`` is not positive.
        RuntimeError: TensorFlow's devices were already initialised with a
            configuration that cannot provide ``n`` replicas (restart the kernel).
    """
    global _configured
    check_device_count(n)
    if gpu_memory_mb is not None:
        positive_int("gpu_memory_mb", gpu_memory_mb)
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
    elif kind == KIND_SPLIT_GPU:
        limit = gpu_memory_mb or default_gpu_memory_mb(n)
        cfg = [tf.config.LogicalDeviceConfiguration(memory_limit=limit)] * n
        _split(tf, gpus[0], cfg)
    else:
        cpu = tf.config.list_physical_devices("CPU")[0]
        if n > 1:
            _split(tf, cpu, [tf.config.LogicalDeviceConfiguration()] * n)
    device_type = "GPU" if gpus else "CPU"
    logical = [d.name for d in tf.config.list_logical_devices(device_type)]
    if len(logical) < n:
        raise _restart_error(n, f"only {len(logical)} logical {device_type} device(s) exist")
    names = tuple(logical[:n])
    _configured = (n, names, kind)
    return list(names)


def _split(tf, physical, cfg) -> None:
    """Apply a logical-device split unless TF already has the same split."""
    try:
        tf.config.set_logical_device_configuration(physical, cfg)
    except RuntimeError as err:
        # Too late: TF already initialised. Accept it if a large enough split exists.
        existing = tf.config.get_logical_device_configuration(physical) or []
        if len(existing) < len(cfg):
            raise _restart_error(
                len(cfg), f"{physical.name} has {len(existing) or 1} logical device(s): {err}"
            ) from err


def configured_devices() -> Optional[list[str]]:
    """The replica devices :func:`ensure_devices` set up in this process (None before it ran)."""
    return None if _configured is None else list(_configured[1])


def replica_kind() -> Optional[str]:
    """How the replicas were made by :func:`ensure_devices` (None before it ran)."""
    return None if _configured is None else _configured[2]


KIND_GPUS = "GPUs"
KIND_SPLIT_GPU = "GPU 0 split into logical GPUs"
KIND_SPLIT_CPU = "CPU split into logical CPUs"


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
    """What ``n`` replicas of ``kind`` really are, for figure titles: ``"2 x Tesla T4"``, ``"1 x Tesla T4 split in 2"``."""
    if kind is None:
        raise ValueError("kind is None: call ensure_devices() first")
    check_device_count(n)
    names = list(names or [])
    if kind == KIND_GPUS:
        used = names[:n] or ["GPU"] * n
        if len(set(used)) == 1:
            return f"{n} x {used[0]}"
        return " + ".join(used)
    if kind == KIND_SPLIT_GPU:
        return f"1 x {names[0] if names else 'GPU'} split in {n}"
    if kind == KIND_SPLIT_CPU:
        return f"1 CPU split in {n}" if n > 1 else "1 CPU"
    raise ValueError(f"unknown replica kind {kind!r}")


def replicas_note(kind: Optional[str], n: int, names: Optional[list[str]] = None) -> str:
    """One line telling the learner which case they are in and what the all-reduce runs on.

    * ``n`` physical GPUs: replicas run in parallel; ``MirroredStrategy`` all-reduces with NCCL.
    * one GPU split: replicas share one chip; NCCL does not work across virtual GPUs, so TF 2.20-2.21's
      ``MirroredStrategy`` uses its ring all-reduce (older code paths log "NCCL is not supported when
      using virtual GPUs" and reduce on one device).
    * split CPU: real replicas and a real all-reduce, on the same cores.
    """
    label = hardware_label(kind, n, names)
    if n == 1:
        return f"1 replica on {label}: nothing to all-reduce."
    if kind == KIND_GPUS:
        return (f"{label}: real parallel replicas; MirroredStrategy all-reduces the gradients with NCCL "
                "between the GPUs. Speed-ups you measure here are real.")
    if kind == KIND_SPLIT_GPU:
        return (f"{label}: the replicas share one chip, so expect no real speed-up (lesson 06). NCCL does not work "
                "across virtual GPUs: MirroredStrategy (TF 2.20-2.21) all-reduces with its ring implementation instead.")
    return (f"{label}: real replicas and a real all-reduce (TensorFlow's ring collectives on the CPU), "
            "but on the same cores, so expect no real speed-up (a measurement may still beat one device a little; "
            "lesson 06 explains why).")


def device_table() -> list[dict[str, str]]:
    """Rows describing physical and logical devices (kind, type, name)."""
    tf = import_tensorflow()
    rows = []
    for kind, lister in (("physical", tf.config.list_physical_devices),
                         ("logical", tf.config.list_logical_devices)):
        for d in lister():
            rows.append({"kind": kind, "type": d.device_type, "name": d.name})
    return rows


def show_devices() -> list[dict[str, str]]:
    """Print physical and logical devices as a small table and return the rows.

    Note: listing logical devices initialises TensorFlow's devices, after which
    :func:`ensure_devices` can no longer split them; call it after ensure_devices.
    """
    rows = device_table()
    width = max([len(r["name"]) for r in rows] + [4])
    print(f"{'kind':<9} {'type':<5} {'name':<{width}}")
    print(f"{'-' * 9} {'-' * 5} {'-' * width}")
    for r in rows:
        print(f"{r['kind']:<9} {r['type']:<5} {r['name']:<{width}}")
    return rows
