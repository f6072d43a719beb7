"""Plumbing for the JAX lessons (08, 10, 11): which devices JAX gets, TensorFlow kept off them, and a report.

Why: before JAX starts, something must choose between the GPUs (a power of two of them: the lessons' batches,
heads and meshes divide evenly) and the host CPU split into N XLA devices, and keep TensorFlow, which Keras and
KerasHub import beside JAX, off the GPUs (jax#39167); and a separate TensorFlow-backend process records what
``keras.distribution`` really does to a model's weights there. Not called ``distribution``, so it never shadows
the ``keras.distribution`` the lessons teach.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import numpy as np

from . import gpus
from .checks import nonneg_int, positive_int
from .config import jax_devices_requested
from .models import small_mlp

#: CPU devices the JAX lessons use when fewer than 2 GPUs are visible and MULTIGPU_JAX_DEVICES is unset:
#: 4 gives the 2x2 mesh (data x model); MULTIGPU_JAX_DEVICES=2 rehearses Kaggle's T4 x2.
DEFAULT_CPU_DEVICES = 4


@dataclass(frozen=True)
class JaxPlan:
    """What a JAX lesson runs on: ``platform`` ("gpu" or "cpu"), ``devices`` (how many), and why."""

    platform: str
    devices: int
    reason: str


def largest_power_of_two(n: int) -> int:
    """Pure: the largest power of two <= ``n`` (3 -> 2, 6 -> 4, 8 -> 8)."""
    return 1 << (positive_int("n", n, why="number of devices").bit_length() - 1)


def jax_device_plan(n_gpus: int, requested: Optional[int] = None) -> JaxPlan:
    """Pure: the devices a JAX lesson uses. 2+ GPUs: the largest power of two of them (3 -> 2, 6 -> 4), or the first
    ``requested``; fewer (one chip is not split for JAX): the host CPU split into ``requested`` XLA devices,
    :data:`DEFAULT_CPU_DEVICES` when unset. ``requested`` must be a power of two."""
    nonneg_int("n_gpus", n_gpus)
    if requested is not None:
        positive_int("requested", requested, why="number of devices")
        if requested != largest_power_of_two(requested):
            raise ValueError(f"MULTIGPU_JAX_DEVICES={requested}: the JAX lessons' batches, attention heads and meshes "
                             "divide by a power of two; use 2, 4 or 8, or unset it")
    if n_gpus >= 2:
        if requested is not None and requested > n_gpus:
            raise ValueError(f"MULTIGPU_JAX_DEVICES={requested} but only {n_gpus} GPUs are visible; unset it "
                             "(the lessons use every GPU) or set JAX_PLATFORMS=cpu to rehearse on CPU devices")
        n = requested or largest_power_of_two(n_gpus)
        why = "" if n == n_gpus or requested else " (the largest power of two: batches and meshes divide evenly)"
        return JaxPlan("gpu", n, f"{n_gpus} GPUs visible: JAX runs on {n} of them{why}")
    n = requested or DEFAULT_CPU_DEVICES
    why = "no GPU visible" if n_gpus == 0 else "1 GPU visible (JAX does not split one chip)"
    return JaxPlan("cpu", n, f"{why}: JAX runs on the host CPU split into {n} XLA devices")


def jax_env(plan: JaxPlan, gpu_ids: Optional[list[str]] = None) -> dict[str, str]:
    """Pure: the variables a plan sets before JAX starts. CPU: N forced host devices. GPUs: allocate on demand, so
    JAX (up to 75% of each GPU, jax #19267) and TensorFlow processes beside it share them; with fewer than the
    visible ``gpu_ids``, ``CUDA_VISIBLE_DEVICES`` names the plan's, so ``jax.devices()`` lists exactly those."""
    if plan.platform == "cpu":
        return {"JAX_PLATFORMS": "cpu", "XLA_FLAGS": f"--xla_force_host_platform_device_count={plan.devices}"}
    if plan.platform == "gpu":
        env = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "TF_FORCE_GPU_ALLOW_GROWTH": "true"}
        if gpu_ids and len(gpu_ids) > plan.devices:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(gpu_ids[:plan.devices])
        return env
    raise ValueError(f"plan.platform must be 'gpu' or 'cpu', got {plan.platform!r}")


def hide_gpus_from_tensorflow() -> bool:
    """Make TensorFlow in this JAX process see no GPU (``tf.config.set_visible_devices([], "GPU")``), before JAX
    touches one: on Kaggle's T4 x2, TensorFlow beside JAX breaks JAX's NCCL all-reduce (jax#39167, flax#4942).
    False when TensorFlow is not installed; RuntimeError when it already holds the GPUs (restart the kernel)."""
    if importlib.util.find_spec("tensorflow") is None:
        return False
    import tensorflow as tf

    try:
        tf.config.set_visible_devices([], "GPU")
    except RuntimeError as exc:  # TensorFlow started its GPUs already
        raise RuntimeError("TensorFlow already holds the GPUs in this process, beside JAX (jax#39167): restart "
                           "the kernel and run the Setup cells first.") from exc
    return True


#: Google's PCI vendor id, and the PCI device ids of its TPU chips (v3, v4, v5p, v5e, v6e, TPU7x and one unnamed), as
#: JAX reads them (jax/_src/hardware_utils.py): the same vendor id also marks Google's virtual NIC (gVNIC), so the
#: device id must be a TPU's.
GOOGLE_PCI_VENDOR = "0x1ae0"
TPU_PCI_DEVICES = ("0x0027", "0x0056", "0x005e", "0x0062", "0x0063", "0x006f", "0x0076")


def tpu_chips(pci_root: Union[str, Path] = "/sys/bus/pci/devices") -> int:
    """How many TPU chips this machine has on its PCI bus (0 where there is none, or no ``/sys``: not Linux).

    Why: a JAX lesson's kernel runs on the CPU or the GPUs (:func:`choose_jax_platform`), so a cell that runs its
    job on a TPU (Kaggle's TPU v5e-8, Colab's TPU runtime) must find the TPU without asking JAX."""
    found = 0
    for vendor in Path(pci_root).glob("*/vendor"):
        try:
            if vendor.read_text().strip() != GOOGLE_PCI_VENDOR:
                continue
            found += (vendor.parent / "device").read_text().strip() in TPU_PCI_DEVICES
        except OSError:  # a device that went away, or one we may not read
            continue
    return found


_PLANS: list[JaxPlan] = []  # the plan this process chose before JAX started (it holds while JAX runs)


def choose_jax_platform(requested: Optional[int] = None) -> JaxPlan:
    """Before JAX starts: decide the JAX devices (:func:`jax_device_plan`; ``requested`` defaults to
    ``MULTIGPU_JAX_DEVICES``), set :func:`jax_env` (the learner's variables win) and, on a GPU machine, hide the
    GPUs from TensorFlow (:func:`hide_gpus_from_tensorflow`). Once ``jax`` is imported the choice is fixed: the
    plan then describes the devices JAX has."""
    if requested is None:
        requested = jax_devices_requested()
    if "jax" in sys.modules:
        if _PLANS:
            return _PLANS[-1]
        import jax

        devs = jax.devices()
        kind = "cpu" if jax.default_backend() == "cpu" else "gpu"
        return JaxPlan(kind, len(devs), f"JAX already started with {len(devs)} {kind} device(s)")
    forced = os.environ.get("JAX_PLATFORMS", "").strip()
    ids = [] if forced == "cpu" else gpus.visible_gpu_ids()
    plan = jax_device_plan(len(ids), requested)
    if forced and forced != "cpu" and plan.platform == "cpu":  # the learner named an accelerator platform: keep it
        plan = JaxPlan("gpu", requested or max(len(ids), 1), f"JAX_PLATFORMS={forced} set by you")
    for key, value in jax_env(plan, ids).items():
        if key == "XLA_FLAGS":
            flags = os.environ.get("XLA_FLAGS", "")
            if "xla_force_host_platform_device_count" not in flags:
                os.environ["XLA_FLAGS"] = f"{flags} {value}".strip()
        elif key == "CUDA_VISIBLE_DEVICES":  # narrows what the learner's value (or the driver) makes visible
            os.environ[key] = value
        else:
            os.environ.setdefault(key, value)
    if ids:  # a GPU machine: TensorFlow (imported by Keras and KerasHub) must never take a GPU from JAX
        hide_gpus_from_tensorflow()
    _PLANS.append(plan)
    return plan


def tf_backend_report() -> dict:
    """On the TensorFlow backend, as JSON-able data: what Keras reports (the kernel's layout) and what TensorFlow did
    (variable class, devices) to a tiny :func:`helpers.models.small_mlp` fitted under ``DataParallel`` and
    ``ModelParallel``, next to ``MirroredStrategy``. A distribution that fails to construct (Keras 3.13-3.14)
    gives ``{"error": "Type: message"}``."""
    import keras
    import tensorflow as tf
    from keras import distribution as kd

    if keras.backend.backend() != "tensorflow":
        raise RuntimeError("tf_backend_report must run with KERAS_BACKEND=tensorflow")
    devices = kd.list_devices()
    if len(devices) < 2:
        raise RuntimeError(f"need >= 2 devices, Keras lists {devices}; call helpers.devices.ensure_devices(2) first")
    x, y = np.zeros((16, 8), "float32"), np.zeros((16,), "int64")

    def actual(var):
        value = var.value
        parts = getattr(value, "values", None) or (value,)
        return {"variable_class": type(value).__name__, "variable_devices": [p.device for p in parts],
                "per_device_shape": list(parts[0].shape)}

    def model_parallel():
        layout_map = kd.LayoutMap(kd.DeviceMesh((1, len(devices)), ("data", "model"), devices))
        layout_map[".*kernel"] = (None, "model")   # every kernel of the tiny MLP (hidden=4, 2 classes: divisible)
        return kd.ModelParallel(layout_map=layout_map, batch_dim_name="data")

    def fit_under(make_distribution):
        dist = make_distribution()
        kd.set_distribution(dist)
        model = small_mlp(input_dim=8, num_classes=2, hidden=4)
        model.compile("sgd", "sparse_categorical_crossentropy")
        model.fit(x, y, batch_size=8, epochs=1, verbose=0)
        kernel = model.layers[0].kernel
        return {"distribution": type(kd.distribution()).__name__, "mesh_shape": list(dist.device_mesh.shape),
                "keras_layout": list(dist.get_variable_layout(kernel).axes), "shape": list(kernel.shape),
                "has_strategy": tf.distribute.has_strategy(), **actual(kernel)}

    report = {"keras_devices": list(devices)}
    for name, make in (("data_parallel", lambda: kd.DataParallel(devices=devices)), ("model_parallel", model_parallel)):
        try:
            report[name] = fit_under(make)
        except (AttributeError, NotImplementedError) as exc:
            report[name] = {"error": f"{type(exc).__name__}: {exc}"}
        finally:
            kd.set_distribution(None)
    strategy = tf.distribute.MirroredStrategy(devices=devices)  # Keras's "cpu:0" is a TensorFlow device name too
    with strategy.scope():
        model = small_mlp(input_dim=8, num_classes=2, hidden=4)
    report["mirrored_strategy"] = {"replicas": strategy.num_replicas_in_sync, **actual(model.layers[0].kernel)}
    return report
