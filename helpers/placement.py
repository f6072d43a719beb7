"""Device placement made visible (lesson 01): split a Keras 3 model over devices, and prove where it lives and runs.

Why: Keras 3 builds weights lazily, so a layer *created* under ``tf.device`` lands on the default device, and a
functional model forgets its scopes when it runs; :class:`SplitModel` builds *and* runs each part on its device.
Imported after the Setup cells (it imports Keras), so ``SplitModel`` is a plain class (``SplitModel??`` works).
"""

from __future__ import annotations

import math
import re
from typing import Optional, Sequence

import keras

from .checks import positive_int

_DEVICE_RE = re.compile(r"(?:^|/)(?:device:)?(CPU|GPU|TPU)(?::(\d+))?$", re.IGNORECASE)


def short_device(name: str) -> str:
    """``/job:localhost/replica:0/task:0/device:CPU:1`` -> ``CPU:1`` ('' stays '': not pinned)."""
    if not isinstance(name, str):
        raise ValueError(f"device name must be a string, got {name!r}")
    if name == "":
        return ""
    m = _DEVICE_RE.search(name)
    if not m:
        raise ValueError(f"not a TensorFlow device name: {name!r}")
    return f"{m.group(1).upper()}:{m.group(2) or 0}"


def same_device(a: str, b: str) -> bool:
    """True if two device names denote the same device (``/device:CPU:1`` == ``/job:.../CPU:1``)."""
    return short_device(a) == short_device(b)


class SplitModel(keras.Model):
    """Device (model) parallelism in its simplest form: consecutive *unbuilt* ``parts``, part ``i`` built and run on
    ``devices[i]``. No ``get_config`` (not for saving). XLA is off (``supports_jit = False``): one XLA computation
    runs on one device and cannot read the other part's weights."""

    def __init__(self, parts: Sequence[keras.layers.Layer], devices: Sequence[str], **kwargs):
        super().__init__(**kwargs)
        parts, devices = list(parts), list(devices)
        if not parts or len(parts) != len(devices):
            raise ValueError(f"need one device per part: got {len(parts)} part(s) and {len(devices)} device(s)")
        for i, part in enumerate(parts):
            if not isinstance(part, keras.layers.Layer):
                raise ValueError(f"part {i} must be a Keras layer or model, got {type(part).__name__}")
            if part.built and part.weights:
                raise ValueError(
                    f"part {i} ({part.name}) is already built, so its weights already live on some device. "
                    "Create it without keras.Input (unbuilt) and let SplitModel build it under tf.device.")
        for d in devices:
            short_device(d)
        self.parts = parts
        self.part_devices = tuple(devices)
        self.supports_jit = False  # one XLA computation = one device

    def build(self, input_shape):
        import tensorflow as tf

        shape = tuple(input_shape)
        for part, device in zip(self.parts, self.part_devices):
            with tf.device(device):
                part.build(shape)
            shape = tuple(part.compute_output_shape(shape))

    def call(self, inputs, training=None):
        import tensorflow as tf

        x = inputs
        for part, device in zip(self.parts, self.part_devices):
            with tf.device(device):
                x = part(x, training=training)
        return x

    def compute_output_shape(self, input_shape):
        shape = tuple(input_shape)
        for part in self.parts:
            shape = tuple(part.compute_output_shape(shape))
        return shape


def variable_devices(model: keras.layers.Layer) -> list[dict]:
    """One row per weight: path, shape and the device(s) holding it (all copies of a MirroredVariable)."""
    if not isinstance(model, keras.layers.Layer):
        raise ValueError(f"expected a Keras layer or model, got {type(model).__name__}")
    rows = []
    for v in model.weights:
        tf_var = getattr(v, "value", v)
        copies = getattr(tf_var, "values", None) or (tf_var,)
        rows.append({"variable": v.path, "shape": tuple(v.shape), "kind": type(tf_var).__name__,
                     "device": ", ".join(short_device(c.device) for c in copies)})
    return rows


def graph_op_devices(model: keras.layers.Layer, input_shape: Sequence[int], op_types: Sequence[str]) -> list[dict]:
    """Trace ``model`` (``input_shape`` without the batch) and list where its ops of ``op_types`` are pinned (an op
    with no device shows ``(not pinned)``: TensorFlow runs it on the default device)."""
    import tensorflow as tf

    if not isinstance(model, keras.layers.Layer):
        raise ValueError(f"expected a Keras layer or model, got {type(model).__name__}")
    spec = tf.TensorSpec((None, *tuple(input_shape)), tf.float32)
    graph = tf.function(lambda x: model(x, training=False)).get_concrete_function(spec).graph
    return [{"op": op.name, "type": op.type, "device": short_device(op.device) or "(not pinned)"}
            for op in graph.get_operations() if op.type in set(op_types)]


def _memory_costs(model: SplitModel, input_shape: Sequence[int], batch_size: int) -> list[dict]:
    """Per layer of each part (a Sequential walked layer by layer): parameters and activation values per example."""
    if not isinstance(model, SplitModel) or not model.built:
        raise ValueError("memory_by_device and data_parallel_memory need a built SplitModel (call it once or build it)")
    positive_int("batch_size", batch_size)
    rows = []
    shape = (None, *tuple(input_shape))
    for p, part in enumerate(model.parts):
        for layer in part.layers if isinstance(part, keras.Sequential) else [part]:
            shape = tuple(layer.compute_output_shape(shape))
            rows.append({"part": p, "layer": layer.name, "parameters": int(layer.count_params()),
                         "activations_per_example": int(math.prod(d for d in shape[1:] if d is not None))})
    return rows


def _memory_row(device: str, costs: list[dict], layers: str, examples: int, batch_size: int) -> dict:
    """One device's row, in float32 (4 bytes per value): the weights of ``costs``'s layers and their activations
    for ``examples`` examples."""
    params = sum(c["parameters"] for c in costs)
    acts = examples * sum(c["activations_per_example"] for c in costs)
    return {"device": short_device(device), "layers": layers, "parameters": params, "weights MiB": params * 4 / 2**20,
            f"activations MiB (batch {batch_size})": acts * 4 / 2**20}


def memory_by_device(model: SplitModel, input_shape: Sequence[int], batch_size: int) -> list[dict]:
    """Under *model* parallelism: per device of a built :class:`SplitModel`, its part's parameters and weight MiB,
    and the activations its layers produce for ``batch_size`` examples."""
    costs = _memory_costs(model, input_shape, batch_size)
    parts = [[c for c in costs if c["part"] == p] for p in range(len(model.parts))]
    return [_memory_row(device, mine, ", ".join(c["layer"] for c in mine), batch_size, batch_size)
            for device, mine in zip(model.part_devices, parts)]


def data_parallel_memory(model: SplitModel, input_shape: Sequence[int], batch_size: int,
                         devices: Sequence[str]) -> list[dict]:
    """The same model under *data* parallelism: every device holds all weights and 1/n of the batch."""
    costs = _memory_costs(model, input_shape, batch_size)
    if not devices:
        raise ValueError("need at least one device")
    examples = math.ceil(batch_size / len(devices))
    return [_memory_row(d, costs, "all (a replica)", examples, batch_size) for d in devices]


def require_devices(devices: Sequence[str]) -> list[str]:
    """``devices`` unchanged if each exists here as a logical device, else ``ValueError``. Why:
    ``MirroredStrategy(devices=["/gpu:7"])`` accepts a missing device and silently runs elsewhere."""
    import tensorflow as tf

    devices = list(devices)
    if not devices or not all(isinstance(d, str) for d in devices):
        raise ValueError(f"devices must be a non-empty list of device names, got {devices!r}")
    existing = [d.name for d in tf.config.list_logical_devices()]
    have = {short_device(d) for d in existing}
    for d in devices:
        if short_device(d) not in have:
            raise ValueError(f"device {d!r} does not exist here; logical devices: {existing}")
    if len({short_device(d) for d in devices}) != len(devices):
        raise ValueError(f"a device is listed twice: {devices}")
    return devices


def missing_device(device_type: str = "GPU") -> str:
    """A device name that does not exist here: the first index past the last logical device."""
    if device_type not in ("CPU", "GPU"):
        raise ValueError(f"device_type must be 'CPU' or 'GPU', got {device_type!r}")
    import tensorflow as tf

    return f"/device:{device_type}:{len(tf.config.list_logical_devices(device_type))}"


def ran_on(tensor: "tf.Tensor") -> str:  # noqa: F821 (TensorFlow is imported by the caller)
    """Short name of the device an eager tensor lives on, i.e. where the op that made it ran."""
    device: Optional[str] = getattr(tensor, "device", None)
    if not device:
        raise ValueError("expected an eager tensor with a device (not a symbolic tensor)")
    return short_device(device)
