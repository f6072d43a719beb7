"""``multi_gpu_model`` as Keras 2.2 had it, re-implemented on Keras 3 for teaching (lessons 03, 04, 05).

Why: the 2017 seed code imports ``keras.utils.training_utils.multi_gpu_model``, which left TensorFlow in 2.4.
This runnable copy keeps its semantics: each batch is cut into slices along axis 0 (the last takes the remainder),
each slice runs the shared *template* model on its own device (a "tower"), and the outputs are concatenated on
the CPU. ``MirroredStrategy`` replaced it with one all-reduce of the gradients per step.
"""

from __future__ import annotations

import functools
from typing import Any, Sequence, Union

from . import devices
from .checks import is_int, nonneg_int, positive_int


def replica_devices() -> list[str]:
    """The devices ``multi_gpu_model`` may place towers on: those :func:`helpers.devices.ensure_devices` returned,
    else TensorFlow's logical GPUs (or CPUs), as Keras 2 listed them. Never calls ``ensure_devices``."""
    configured = devices.configured_devices()
    if configured is not None:
        return configured
    tf = devices.import_tensorflow()
    gpus = tf.config.list_logical_devices("GPU")
    return [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]


def slice_sizes(rows: int, parts: int) -> list[int]:
    """How ``multi_gpu_model`` cut ``rows`` rows into ``parts`` slices, the last taking the remainder: 10 rows on 3
    towers -> [3, 3, 4]; 1 row on 2 -> [0, 1] (MirroredStrategy gives ceil(rows / parts) each in turn)."""
    nonneg_int("rows", rows)
    positive_int("parts", parts)
    step = rows // parts
    return [step] * (parts - 1) + [rows - step * (parts - 1)]


def _tower_ids(gpus: Union[int, Sequence[int], None], available: list[str]) -> list[int]:
    """Check ``gpus`` (a count, a list of GPU ids, or None for all) against the available devices, with Keras 2's
    messages; return the ids of the towers' devices (GPU id ``i`` is the ``i``-th replica device here)."""
    if gpus is None or (not gpus and (is_int(gpus) or isinstance(gpus, (list, tuple)))):
        gpus = len(available)  # Keras 2: `if not gpus`, all visible GPUs (0 and [] too)
    if isinstance(gpus, (list, tuple)):
        if not all(is_int(i) and i >= 0 for i in gpus):
            raise ValueError(f"`gpus` as a list holds GPU ids, whole numbers >= 0, got {gpus!r}")
        if len(gpus) <= 1:
            raise ValueError("For multi-gpu usage to be effective, call `multi_gpu_model` with "
                             f"`len(gpus) >= 2`. Received: `gpus={list(gpus)}`")
        ids = list(gpus)
    elif not is_int(gpus):
        raise ValueError(f"`gpus` must be None, an int >= 2 or a list of GPU ids, got {gpus!r}")
    elif gpus <= 1:
        raise ValueError("For multi-gpu usage to be effective, call `multi_gpu_model` with "
                         f"`gpus >= 2`. Received: `gpus={gpus}`")
    else:
        ids = list(range(gpus))
    if max(ids) >= len(available):
        wanted = [f"replica device {i}" for i in ids]
        raise ValueError(
            f"To call `multi_gpu_model` with `gpus={gpus}`, we expect the following devices to be "
            f"available: {wanted}. However this machine only has: {available}. Try reducing `gpus` "
            "(the replica devices are the ones helpers.devices.ensure_devices configured).")
    return ids


@functools.cache
def _wrapper_class():
    """The ``MultiGpuModel`` class, defined once Keras and TensorFlow may be imported (after the Setup cells)."""
    import keras
    import tensorflow as tf

    class MultiGpuModel(keras.Model):
        """The parallel model: slices each batch, runs the template per tower, concatenates.

        No ``get_config``: ``save()`` raises ``NotImplementedError`` (2017's ``can't pickle``); save ``.template``.
        XLA is off, as Keras 2 had none: one XLA computation on one device would ignore the towers' devices.
        """

        def __init__(self, template, tower_devices, merge_device="/cpu:0", **kwargs):
            super().__init__(**kwargs)
            self.template = template
            self.tower_devices = list(tower_devices)
            self.merge_device = merge_device  # where the towers' outputs are concatenated
            self.built = True  # all its weights exist already: they are the template's
            self.supports_jit = False  # XLA would run every tower on one device
            names = getattr(template, "output_names", None)
            if names:
                self.output_names = list(names)  # so compile(loss={name: ...}) works as in Keras 2

        @staticmethod
        def _slice(x, i: int, parts: int):
            batch = tf.shape(x)[0]
            step = batch // parts
            size = batch - step * i if i == parts - 1 else step  # last tower takes the remainder
            return x[step * i: step * i + size]

        def _towers(self, inputs, training):
            parts = len(self.tower_devices)
            tower_outputs = []
            for i, device in enumerate(self.tower_devices):
                with tf.device(device), tf.name_scope(f"replica_{i}"):
                    sliced = tf.nest.map_structure(lambda x, i=i: self._slice(x, i, parts), inputs)
                    tower_outputs.append(self.template(sliced, training=training))
            with tf.device(self.merge_device), tf.name_scope("merge"):
                return tf.nest.map_structure(lambda *ys: tf.concat(ys, axis=0), *tower_outputs)

        def _last_tower_only(self, inputs, training):
            # Fewer rows than towers: every slice but the last would be empty.  Run the
            # batch on the last tower alone (same result, and TensorFlow's CPU
            # convolution mishandles empty batches).
            with tf.device(self.tower_devices[-1]), tf.name_scope(f"replica_{len(self.tower_devices) - 1}"):
                return self.template(inputs, training=training)

        def call(self, inputs, training=None):
            batch = tf.shape(tf.nest.flatten(inputs)[0])[0]
            return tf.cond(batch >= len(self.tower_devices),
                           lambda: self._towers(inputs, training),
                           lambda: self._last_tower_only(inputs, training))

    return MultiGpuModel


def multi_gpu_model(model, gpus: Union[int, Sequence[int], None] = None, cpu_merge: bool = True,
                    cpu_relocation: bool = False):
    """Replicate a built ``model`` (the "template") on replica devices, with Keras 2.2's signature.

    ``gpus``: how many towers (an int >= 2), which GPU ids (a list, ``[0, 2]``; id ``i`` is the ``i``-th replica
    device), or None for all. ``cpu_merge=False`` concatenates the outputs on the first tower's device instead of
    the CPU. ``cpu_relocation=True`` first clones the model under ``/cpu:0``, as Keras 2 did: the towers then share
    the clone's new, freshly initialised weights (``.template``), not ``model``'s.

    Returns a ``keras.Model`` (class ``MultiGpuModel``: ``template``, ``tower_devices``, ``merge_device``) with
    the template's inputs and outputs, which shares its weights. As in 2017, saving it fails (save the template)
    and a BatchNormalization layer is updated once per tower per step. A batch with fewer rows than towers runs
    on the last tower alone (same result, no empty slices).
    """
    import keras

    if keras.backend.backend() != "tensorflow":
        raise ValueError("`multi_gpu_model` is only available with the TensorFlow backend.")
    if not isinstance(model, keras.Model):
        raise ValueError(f"`model` must be a keras.Model, got {type(model).__name__}")
    if not model.built:
        raise ValueError("`model` must be built (give it a keras.Input or call it on data once) "
                         "so that its weights exist before they are shared by the towers")
    available = replica_devices()
    towers = [available[i] for i in _tower_ids(gpus, available)]
    if cpu_relocation:
        import tensorflow as tf

        with tf.device("/cpu:0"):
            model = keras.models.clone_model(model)
    return _wrapper_class()(model, towers, "/cpu:0" if cpu_merge else towers[0])


def tower_op_devices(parallel_model, example: Any) -> dict[str, set[str]]:
    """Where the ops of each tower and of the merge are placed, ``{"replica_0": {devices}, ..., "merge": ...}``, read
    from ``parallel_model`` traced on ``example``'s shapes and dtypes: proof the towers run on their devices."""
    import tensorflow as tf

    if not hasattr(parallel_model, "tower_devices"):
        raise ValueError("expected a model returned by multi_gpu_model")
    spec = tf.nest.map_structure(
        lambda a: tf.TensorSpec((None,) + tuple(a.shape[1:]), tf.as_dtype(a.dtype)), example)
    # Trace the multi-tower path itself (``call`` wraps it in a tf.cond, whose branches
    # live in separate function graphs). No AutoGraph: _towers has only Python loops,
    # and AutoGraph cannot read a lambda's source (it would print a long warning).
    fn = tf.function(lambda x: parallel_model._towers(x, False), autograph=False)
    graph = fn.get_concrete_function(spec).graph
    found: dict[str, set[str]] = {}
    scopes = [f"replica_{i}" for i in range(len(parallel_model.tower_devices))] + ["merge"]
    for op in graph.get_operations():
        parts = op.name.split("/")
        for scope in scopes:
            if scope in parts and op.device:
                found.setdefault(scope, set()).add(op.device)
    return found
