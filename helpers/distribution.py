"""Keras 3's distribution API (``keras.distribution``) made visible: devices, meshes, where each weight lives.

Why: ``DataParallel`` and ``ModelParallel`` do their work silently - a layout
that does not match, or a backend that ignores the API, trains just as
"successfully" as one that shards.  Lesson 08 therefore *prints and asserts*
where every weight lives.  The helpers here:

* pick the devices for a mesh (real accelerators when there are enough, else
  the host CPU split into N XLA devices);
* build a small MLP whose layers have fixed names (``d1``, ``d2``) so LayoutMap
  keys stay stable when a notebook is run twice;
* read each weight's sharding (JAX backend) and answer what a LayoutMap key
  matches (its keys are *full-match* regexes);
* report, on the TensorFlow backend, what ``keras.distribution`` really did
  (nothing, today) next to ``tf.distribute.MirroredStrategy``.
"""

from __future__ import annotations

import os
import sys
from typing import Optional

#: Kinds of accelerators tried, in order, before falling back to host CPU devices.
ACCELERATORS = ("gpu", "tpu")


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
    from .cluster import visible_gpu_ids

    if len(visible_gpu_ids()) >= n:
        return "accelerators"
    os.environ["JAX_PLATFORMS"] = "cpu"
    return "cpu"


def mesh_devices(n: int = 4) -> list[str]:
    """``n`` device names for a ``keras.distribution.DeviceMesh``: accelerators if >= n, else CPUs.

    Raises ``RuntimeError`` (saying how to fix it) when there are fewer than ``n``
    CPU devices, i.e. ``XLA_FLAGS=--xla_force_host_platform_device_count=n`` was
    not set before JAX started.
    """
    _check_n(n)
    from keras import distribution as kd

    for kind in ACCELERATORS:
        try:
            found = kd.list_devices(kind)
        except (RuntimeError, ValueError):
            found = []
        if len(found) >= n:
            return list(found[:n])
    cpus = kd.list_devices("cpu")
    if len(cpus) < n:
        raise RuntimeError(
            f"only {len(cpus)} CPU device(s) for a mesh of {n}. Set "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={n} before JAX is imported "
            "(helpers.setup_notebook(devices=n, backend='jax') does) and restart the kernel.")
    return list(cpus[:n])


def mlp(input_dim: int = 64, num_classes: int = 10, hidden: int = 128, name: str = "mlp"):
    """``Input -> Dense(hidden, name="d1") -> Dense(num_classes, name="d2")``, softmax output.

    Fixed layer names give fixed weight paths (``mlp/d1/kernel``...), which is
    what a ``LayoutMap`` matches against.
    """
    if min(input_dim, hidden) < 1 or num_classes < 2:
        raise ValueError("input_dim and hidden must be >= 1 and num_classes >= 2")
    import keras

    return keras.Sequential([keras.Input((input_dim,)),
                             keras.layers.Dense(hidden, activation="relu", name="d1"),
                             keras.layers.Dense(num_classes, activation="softmax", name="d2")], name=name)


def _spec_tuple(spec) -> tuple:
    return tuple(spec) if spec is not None else ()


def weight_layouts(model) -> list[dict]:
    """Where each weight of ``model`` lives (JAX backend).

    One dict per weight: ``path``, ``shape``, ``spec`` (the PartitionSpec as a
    tuple, e.g. ``(None, 'model')``; ``(None, None)`` = replicated), ``devices``
    (how many hold a piece), ``shard_shape`` (what one device holds) and
    ``blocks``: device -> index slices of the piece it holds.
    """
    import keras

    if keras.backend.backend() != "jax":
        raise RuntimeError(f"weight_layouts reads JAX shardings; this Keras runs on {keras.backend.backend()!r}")
    rows = []
    for v in model.weights:
        arr = v.value
        shards = arr.addressable_shards
        rows.append({
            "path": v.path, "shape": tuple(arr.shape),
            "spec": _spec_tuple(getattr(arr.sharding, "spec", None)),
            "devices": len(shards), "shard_shape": tuple(shards[0].data.shape),
            "blocks": {str(s.device): tuple((sl.start or 0, sl.stop if sl.stop is not None else dim)
                                            for sl, dim in zip(s.index, arr.shape)) for s in shards},
        })
    return rows


def show_layouts(model) -> list[dict]:
    """Print :func:`weight_layouts` as a table and return its rows."""
    rows = weight_layouts(model)
    width = max(len(r["path"]) for r in rows)
    print(f"{'weight':<{width}}  {'shape':<10} {'sharding spec':<18} {'per device':<10} devices")
    for r in rows:
        spec = str(r["spec"])
        print(f"{r['path']:<{width}}  {str(r['shape']):<10} {spec:<18} {str(r['shard_shape']):<10} {r['devices']}")
    return rows


def layout_of(model, suffix: str) -> dict:
    """The :func:`weight_layouts` row of the weight whose path ends with ``suffix`` (e.g. ``"d1/kernel"``)."""
    rows = [r for r in weight_layouts(model) if r["path"].endswith(suffix)]
    if len(rows) != 1:
        raise ValueError(f"{len(rows)} weights end with {suffix!r}; paths: {[v.path for v in model.weights]}")
    return rows[0]


def matched_axes(layout_map, path: str) -> Optional[tuple]:
    """What ``layout_map[path]`` gives: the axes tuple, or None when no key matches.

    Keras tries the exact key, then every key as a **full-match** regex
    (``re.fullmatch``), so ``"d1/kernel"`` does not match ``"mlp/d1/kernel"``
    while ``".*d1/kernel"`` does.  Several matching keys raise ``ValueError``.
    """
    layout = layout_map[path]
    return None if layout is None else tuple(layout.axes)


def trim_to_multiple(multiple: int, *arrays):
    """Cut ``arrays`` (same length) to the largest multiple of ``multiple`` examples.

    A batch sharded over N devices must divide by N - also the last, partial
    batch of an epoch - so lesson 08 trims the data to whole global batches.
    """
    _check_n(multiple)
    if not arrays:
        raise ValueError("give at least one array")
    n = len(arrays[0])
    if any(len(a) != n for a in arrays):
        raise ValueError(f"arrays differ in length: {[len(a) for a in arrays]}")
    keep = n // multiple * multiple
    if keep == 0:
        raise ValueError(f"{n} example(s) are fewer than one batch of {multiple}")
    out = tuple(a[:keep] for a in arrays)
    return out if len(out) > 1 else out[0]


def reset() -> None:
    """Remove the global distribution (``keras.distribution.set_distribution(None)``)."""
    from keras import distribution as kd

    kd.set_distribution(None)


def tf_backend_report() -> dict:
    """On the TensorFlow backend: what ``keras.distribution`` does to a model, next to ``tf.distribute``.

    Sets ``DataParallel`` and then ``ModelParallel`` over every device Keras lists,
    builds and fits a tiny model under each, and records what Keras *believes*
    (the layout it reports) and what TensorFlow *did* (variable class and device,
    ``tf.distribute.has_strategy()``).  For comparison, the same model under
    ``tf.distribute.MirroredStrategy``.  Resets the global distribution afterwards.
    Needs >= 2 devices (e.g. :func:`helpers.devices.ensure_devices` first).
    """
    import keras
    import numpy as np
    import tensorflow as tf
    from keras import distribution as kd

    if keras.backend.backend() != "tensorflow":
        raise RuntimeError("tf_backend_report must run with KERAS_BACKEND=tensorflow")
    devices = kd.list_devices()
    if len(devices) < 2:
        raise RuntimeError(f"need >= 2 devices, Keras lists {devices}; call helpers.devices.ensure_devices(2) first")
    x, y = np.zeros((16, 8), "float32"), np.zeros((16,), "int64")

    def fit_small():
        model = mlp(input_dim=8, num_classes=2, hidden=4)
        model.compile("sgd", "sparse_categorical_crossentropy")
        model.fit(x, y, batch_size=8, epochs=1, verbose=0)
        return model.get_layer("d1").kernel

    def actual(var):
        value = var.value
        parts = getattr(value, "values", None) or (value,)
        return {"variable_class": type(value).__name__, "variable_devices": [p.device for p in parts],
                "per_device_shape": list(parts[0].shape)}

    report = {"keras_devices": list(devices)}
    try:
        dp = kd.DataParallel(devices=devices)
        kd.set_distribution(dp)
        kernel = fit_small()
        report["data_parallel"] = {"distribution": type(kd.distribution()).__name__,
                                   "mesh_shape": list(dp.device_mesh.shape),
                                   "keras_layout": list(dp.get_variable_layout(kernel).axes),
                                   "has_strategy": tf.distribute.has_strategy(), **actual(kernel)}
        mesh = kd.DeviceMesh((1, len(devices)), ("data", "model"), devices)
        layout_map = kd.LayoutMap(mesh)
        layout_map[".*d1/kernel"] = (None, "model")
        mp = kd.ModelParallel(layout_map=layout_map, batch_dim_name="data")
        kd.set_distribution(mp)
        kernel = fit_small()
        report["model_parallel"] = {"distribution": type(kd.distribution()).__name__,
                                    "keras_layout": list(mp.get_variable_layout(kernel).axes),
                                    "shape": list(kernel.shape), **actual(kernel)}
    finally:
        kd.set_distribution(None)
    strategy = tf.distribute.MirroredStrategy(devices=[f"/{d.split(':')[0].upper()}:{d.split(':')[1]}"
                                                       for d in devices])
    with strategy.scope():
        model = mlp(input_dim=8, num_classes=2, hidden=4)
    report["mirrored_strategy"] = {"replicas": strategy.num_replicas_in_sync,
                                   **actual(model.get_layer("d1").kernel)}
    return report
