"""``multi_gpu_model`` as Keras 2.2 had it, re-implemented on Keras 3 for teaching.

Why: the 2017 seed code does ``from keras.utils.training_utils import
multi_gpu_model``.  That function left TensorFlow in 2.4 (deprecated in 2.0 in
favour of ``tf.distribute.MirroredStrategy``), so the seed no longer runs.  To
*show* what it did - and why MirroredStrategy replaced it - lessons 03, 05 and
06 use this faithful, runnable copy of its 2.2-era semantics:

* every batch is cut into ``gpus`` slices along axis 0 (the last slice takes
  the remainder, e.g. 10 rows on 3 devices -> 3, 3, 4);
* each slice runs the *template* model on its own device under ``tf.device``
  (the "towers"; the devices come from :func:`helpers.devices.ensure_devices`,
  so they are real GPUs or logical CPUs/GPUs);
* the towers' outputs are concatenated on the CPU (``cpu_merge=True``) or on
  the first tower's device; the loss and the gradients are computed from that
  merged batch;
* the weights are the template's own variables: shared, not copied.  Training
  the wrapper trains the template; save the template, not the wrapper.

It is not for real training: MirroredStrategy does the same job with one
all-reduce of the gradients per step, mirrored variables and plain ``fit``.
"""

from __future__ import annotations

from typing import Any, Sequence, Union

from . import devices
from .checks import is_int

GpusArg = Union[None, int, Sequence[int]]


def replica_devices() -> list[str]:
    """The replica devices ``multi_gpu_model`` may place towers on, without changing anything.

    If :func:`helpers.devices.ensure_devices` already ran in this process, these
    are exactly the devices it returned (so ``gpus=None`` means "all of them").
    Otherwise they are the logical GPUs TensorFlow has or, without GPUs, its
    logical CPUs - like Keras 2, which listed the visible devices.  This never
    calls ``ensure_devices`` (a different count would need a kernel restart).
    """

    configured = devices.configured_devices()
    if configured is not None:
        return configured
    tf = devices.import_tensorflow()
    gpus = tf.config.list_logical_devices("GPU")
    return [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]


def slice_sizes(rows: int, parts: int) -> list[int]:
    """How ``multi_gpu_model`` cut a batch of ``rows`` rows into ``parts`` tower slices.

    Every tower gets ``rows // parts`` rows and the last one also takes the
    remainder: 10 rows on 3 towers -> [3, 3, 4]; 1 row on 2 towers -> [0, 1].
    (MirroredStrategy splits differently: :func:`helpers.replica_checks.replica_split`.)
    """
    if not is_int(rows) or rows < 0:
        raise ValueError(f"rows must be an int >= 0, got {rows!r}")
    if not is_int(parts) or parts < 1:
        raise ValueError(f"parts must be an int >= 1, got {parts!r}")
    step = rows // parts
    return [step] * (parts - 1) + [rows - step * (parts - 1)]


def _target_indices(gpus: GpusArg, available: list[str]) -> list[int]:
    """Validate ``gpus`` against the available devices; return the tower device indices."""
    if gpus is None:
        gpus = len(available)
    if is_int(gpus):
        if gpus <= 1:
            raise ValueError("For multi-gpu usage to be effective, call `multi_gpu_model` with "
                             f"`gpus >= 2`. Received: `gpus={gpus}`")
        ids = list(range(gpus))
    elif isinstance(gpus, (list, tuple)):
        if not all(is_int(g) for g in gpus):
            raise ValueError(f"`gpus` must hold device indices (ints), got {gpus!r}")
        if len(gpus) <= 1:
            raise ValueError("For multi-gpu usage to be effective, call `multi_gpu_model` with "
                             f"`len(gpus) >= 2`. Received: `gpus={list(gpus)}`")
        if len(set(gpus)) != len(gpus):
            raise ValueError(f"`gpus` lists a device twice: {list(gpus)}")
        ids = list(gpus)
    else:
        raise ValueError(f"`gpus` must be None, an int >= 2 or a list of device indices, got {gpus!r}")
    if any(i < 0 or i >= len(available) for i in ids):
        wanted = [f"replica device {i}" for i in ids]
        raise ValueError(
            f"To call `multi_gpu_model` with `gpus={gpus}`, we expect the following devices to be "
            f"available: {wanted}. However this machine only has: {available}. Try reducing `gpus` "
            "(the replica devices are the ones helpers.devices.ensure_devices configured).")
    return ids


def _make_wrapper_class():
    import keras
    import tensorflow as tf

    class MultiGpuModel(keras.Model):
        """The parallel model: slices each batch, runs the template per tower, concatenates.

        The class name doubles as Keras' name scope, so it must not start with an
        underscore.  It deliberately has no ``get_config``: ``save()`` on it raises
        ``NotImplementedError`` (the Keras 3 form of 2017's ``can't pickle``), and
        the fix is the same as then - save ``.template``.

        XLA is off for it (``supports_jit = False``), as in Keras 2, which had no
        XLA: on a GPU machine ``compile(jit_compile="auto")`` would otherwise
        compile the training step as one XLA computation on one device, so the
        towers' ``tf.device`` scopes would no longer put them on their devices.
        """

        def __init__(self, template, tower_devices, merge_device, **kwargs):
            super().__init__(**kwargs)
            self.template = template
            self.tower_devices = list(tower_devices)
            self.merge_device = merge_device
            self.built = True  # all its weights exist already: they are the template's
            self.supports_jit = False  # XLA would run every tower on one device (see above)
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


_WRAPPER_CLASS = None


def _wrapper_class():
    global _WRAPPER_CLASS
    if _WRAPPER_CLASS is None:
        _WRAPPER_CLASS = _make_wrapper_class()
    return _WRAPPER_CLASS


def multi_gpu_model(model, gpus: GpusArg = None, cpu_merge: bool = True,
                    cpu_relocation: bool = False):
    """Replicate ``model`` on several devices, Keras 2.2 style (data parallelism by slicing).

    Args:
        model: a built ``keras.Model`` (the "template"; it has variables already).
        gpus: an int >= 2 (use the first ``gpus`` replica devices), a list of >= 2
            replica-device indices, or ``None`` for all replica devices (see
            :func:`replica_devices`).  On a machine without GPUs the replica devices
            are logical CPUs, so the same code runs everywhere.
        cpu_merge: concatenate the towers' outputs on ``/cpu:0`` (True) or on the
            first tower's device (False, what Keras recommended with NVLink).
        cpu_relocation: first rebuild the template under ``/cpu:0`` with
            ``keras.models.clone_model`` so its variables live on the CPU.  Keras 2
            cloned with *fresh* weights; this copy also copies the weights, so the
            wrapper starts from the same function.  The wrapper's ``.template`` is
            then the clone - train and save that one, not the original.

    Returns:
        A ``keras.Model`` (class ``MultiGpuModel``) with the same inputs and outputs
        as ``model``; ``compile``/``fit``/``predict`` work on it, and ``predict``
        gives the template's predictions (remainder batches included).  Attributes:
        ``template``, ``tower_devices``, ``merge_device``.

    Caveats, all inherited from the original:
        * Saving the wrapper fails - ``model.save`` raises ``NotImplementedError:
          ... must override get_config()``.  Save the template (``.template``).
        * A batch with fewer rows than towers would give empty slices (Keras 2 ran
          them anyway); this copy runs such a batch on the last tower alone - the
          same result, without feeding empty batches to the layers.
        * Each tower calls the same layers again, so a BatchNormalization layer's
          moving statistics are updated once per tower per step.

    Raises:
        ValueError: not the TensorFlow backend; ``model`` is not a built
            ``keras.Model``; ``gpus`` is 1, ``[0]``, not an int/list, or asks for
            more or unknown devices than there are; bad flag types.
    """
    import keras

    if keras.backend.backend() != "tensorflow":
        raise ValueError("`multi_gpu_model` is only available with the TensorFlow backend.")
    if not isinstance(model, keras.Model):
        raise ValueError(f"`model` must be a keras.Model, got {type(model).__name__}")
    if not model.built:
        raise ValueError("`model` must be built (give it a keras.Input or call it on data once) "
                         "so that its weights exist before they are shared by the towers")
    if not isinstance(cpu_merge, bool) or not isinstance(cpu_relocation, bool):
        raise ValueError("`cpu_merge` and `cpu_relocation` must be True or False")
    available = replica_devices()
    ids = _target_indices(gpus, available)
    import tensorflow as tf

    if cpu_relocation:
        with tf.device("/cpu:0"):
            clone = keras.models.clone_model(model)
        clone.set_weights(model.get_weights())
        model = clone
    towers = [available[i] for i in ids]
    merge_device = "/cpu:0" if cpu_merge else towers[0]
    return _wrapper_class()(model, towers, merge_device)


def tower_op_devices(parallel_model, example: Any) -> dict[str, set[str]]:
    """Trace ``parallel_model`` as a ``tf.function`` and report where its ops were placed.

    Returns ``{"replica_0": {...devices...}, "replica_1": ..., "merge": ...}``: for
    each tower (and the merge) the set of device strings requested for its ops, read
    from the traced graph.  ``example`` is one batch (array or structure of arrays);
    only its shapes and dtypes are used (the batch dimension is left unknown).
    This is the proof that the towers really run on different devices.
    """
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
