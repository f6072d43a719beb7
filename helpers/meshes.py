"""Plumbing for lesson 08 (``keras.distribution``): which devices JAX gets, and the TensorFlow-backend check.

Why: the lesson writes every ``keras.distribution`` call in its cells.  What is
left here is what is not the lesson's subject:

* before JAX starts, decide between the real accelerators (when there are
  enough for the mesh) and the host CPU split into N XLA devices;
* in a *separate* TensorFlow-backend process (the backend is fixed at import),
  record what ``keras.distribution`` really did to a model's weights next to
  ``tf.distribute.MirroredStrategy`` (nothing, in Keras 3.15; Keras 3.13-3.14
  fail when the distribution is constructed).

The module is not called ``distribution`` so that it never shadows, in a
learner's head or namespace, the ``keras.distribution`` the lesson teaches.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from . import gpus
from .models import small_mlp


def _check_n(n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int (number of devices), got {n!r}")
    return n


def choose_jax_platform(n: int = 4) -> str:
    """Before JAX starts: keep accelerators if at least ``n`` are visible, else use ``n`` CPU devices.

    JAX uses its default platform (GPU when a CUDA-enabled jax is installed), and
    a 2x2 mesh needs 4 devices.  With fewer than ``n`` GPUs this sets
    ``JAX_PLATFORMS=cpu`` (the host CPU is split by ``XLA_FLAGS``, see
    :func:`helpers.notebook.setup_notebook`).  Returns ``"accelerators"`` or
    ``"cpu"``.  Does nothing once ``jax`` is imported (the choice is fixed then).
    """
    _check_n(n)
    if "jax" in sys.modules:
        import jax

        return "cpu" if jax.default_backend() == "cpu" else "accelerators"
    if os.environ.get("JAX_PLATFORMS"):
        return "cpu" if os.environ["JAX_PLATFORMS"].strip() == "cpu" else "accelerators"

    if len(gpus.visible_gpu_ids()) >= n:
        return "accelerators"
    os.environ["JAX_PLATFORMS"] = "cpu"
    return "cpu"


def tf_backend_report() -> dict:
    """On the TensorFlow backend: what ``keras.distribution`` does to a model, next to ``tf.distribute``.

    Sets ``DataParallel`` and then ``ModelParallel`` over every device Keras lists,
    builds and fits a tiny :func:`helpers.models.small_mlp` under each, and records
    what Keras *believes* (the layout it reports for the first kernel) and what
    TensorFlow *did* (variable class and devices, ``tf.distribute.has_strategy()``).
    For comparison, the same model under ``tf.distribute.MirroredStrategy``.
    Where constructing the distribution fails (Keras 3.13-3.14: ``AttributeError``,
    the TensorFlow backend has no ``num_processes``), the entry is
    ``{"error": "AttributeError: ..."}``.  Resets the global distribution afterwards.  Returns plain data (JSON-able).
    Needs >= 2 devices (e.g. :func:`helpers.devices.ensure_devices` first).
    """
    import keras
    import tensorflow as tf
    from keras import distribution as kd

    if keras.backend.backend() != "tensorflow":
        raise RuntimeError("tf_backend_report must run with KERAS_BACKEND=tensorflow")
    devices = kd.list_devices()
    if len(devices) < 2:
        raise RuntimeError(f"need >= 2 devices, Keras lists {devices}; call helpers.devices.ensure_devices(2) first")
    x, y = np.zeros((16, 8), "float32"), np.zeros((16,), "int64")

    def fit_small():
        model = small_mlp(input_dim=8, num_classes=2, hidden=4)
        model.compile("sgd", "sparse_categorical_crossentropy")
        model.fit(x, y, batch_size=8, epochs=1, verbose=0)
        return model.layers[0].kernel

    def actual(var):
        value = var.value
        parts = getattr(value, "values", None) or (value,)
        return {"variable_class": type(value).__name__, "variable_devices": [p.device for p in parts],
                "per_device_shape": list(parts[0].shape)}

    def attempt(build):
        """``build()``'s record, or ``{"error": "Type: message"}``: Keras 3.13-3.14 fail at construction."""
        try:
            return build()
        except (AttributeError, NotImplementedError) as exc:
            return {"error": f"{type(exc).__name__}: {exc}"}

    def data_parallel():
        dp = kd.DataParallel(devices=devices)
        kd.set_distribution(dp)
        kernel = fit_small()
        return {"distribution": type(kd.distribution()).__name__, "mesh_shape": list(dp.device_mesh.shape),
                "keras_layout": list(dp.get_variable_layout(kernel).axes),
                "has_strategy": tf.distribute.has_strategy(), **actual(kernel)}

    def model_parallel():
        mesh = kd.DeviceMesh((1, len(devices)), ("data", "model"), devices)
        layout_map = kd.LayoutMap(mesh)
        layout_map[".*kernel"] = (None, "model")   # every kernel of the tiny MLP (hidden=4, 2 classes: divisible)
        mp = kd.ModelParallel(layout_map=layout_map, batch_dim_name="data")
        kd.set_distribution(mp)
        kernel = fit_small()
        return {"distribution": type(kd.distribution()).__name__,
                "keras_layout": list(mp.get_variable_layout(kernel).axes), "shape": list(kernel.shape),
                **actual(kernel)}

    report = {"keras_devices": list(devices)}
    try:
        report["data_parallel"] = attempt(data_parallel)
        report["model_parallel"] = attempt(model_parallel)
    finally:
        kd.set_distribution(None)
    strategy = tf.distribute.MirroredStrategy(devices=[f"/{d.split(':')[0].upper()}:{d.split(':')[1]}"
                                                       for d in devices])
    with strategy.scope():
        model = small_mlp(input_dim=8, num_classes=2, hidden=4)
    report["mirrored_strategy"] = {"replicas": strategy.num_replicas_in_sync, **actual(model.layers[0].kernel)}
    return report
