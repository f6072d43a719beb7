"""Plumbing for lesson 09 (the debugging clinic): record updates, flatten gradients, count bytes, read logs.

Why: the lesson measures every failure; these small measuring tools are not what it teaches, so its
cells show only the TensorFlow and Keras calls under study.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterable, Sequence

import numpy as np

from .checks import positive_int

#: The tag every line of the clinic's worker script starts with: ``[worker 0] ...``.
TAG_RE = re.compile(r"^\[worker \d+\] ")


def flat(values: Iterable[Any]) -> "Any":
    """One float64 numpy vector from a list of weights/gradients (arrays, tensors or variables). A ``None`` entry
    (a variable without gradient) is a ``ValueError``: a bug to report, not a zero to hide."""
    parts = []
    for i, v in enumerate(values):
        if v is None:
            raise ValueError(f"entry {i} is None (a variable without a gradient?)")
        v = v.numpy() if hasattr(v, "numpy") else v
        parts.append(np.asarray(v, dtype="float64").ravel())
    if not parts:
        raise ValueError("nothing to flatten: got an empty list")
    return np.concatenate(parts)


def weight_steps():
    """A Keras callback that records all weights (flattened) before training and after every batch: ``cb.updates[i]``
    is the change made by step ``i`` (``-lr * gradient`` with plain SGD), so two runs compare step by step."""
    import keras  # here: helpers.exercises imports this module, and must start no framework

    class WeightSteps(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self.weights_seen = [flat(self.model.get_weights())]

        def on_train_batch_end(self, batch, logs=None):
            self.weights_seen.append(flat(self.model.get_weights()))

        @property
        def updates(self):
            """One row per training step: the weights after the step minus the weights before it."""
            if len(getattr(self, "weights_seen", [])) < 2:
                raise ValueError("no training step recorded yet: pass this callback to fit() first")
            return np.diff(np.array(self.weights_seen), axis=0)

    return WeightSteps()


def activation_bytes(model, batch: int) -> int:
    """Bytes (float32) the outputs of every layer of ``model`` take for ``batch`` rows. The backward pass keeps them
    until the gradients are computed: a lower bound of what one replica needs for one step, beyond its weights,
    gradients and optimizer state."""
    positive_int("batch", batch)
    layers = getattr(model, "layers", None)
    if not layers:
        raise ValueError("model has no layers (build it with an Input first)")
    per_row = 0
    for layer in layers:
        shape = tuple(layer.output.shape)[1:]
        if None in shape:
            raise ValueError(f"layer {layer.name} has an unknown dimension in {shape}")
        per_row += math.prod(shape)
    return per_row * batch * 4


def tagged_lines(log: str) -> list[str]:
    """The ``[worker N] ...`` lines of a log, TensorFlow's noise left out."""
    return [ln for ln in log.splitlines() if TAG_RE.match(ln)]


def between(log: str, start: str, end: "str | None" = None) -> str:
    """The lines of ``log`` after the first containing ``start`` and before the next containing ``end``. A worker
    script prints a marker before each step, so this tells which step printed a C++ log line."""
    if not start:
        raise ValueError("start must be a non-empty string")
    lines = log.splitlines()
    i = next((k for k, ln in enumerate(lines) if start in ln), None)
    if i is None:
        raise ValueError(f"no line contains {start!r}")
    j = next((k for k in range(i + 1, len(lines)) if end and end in lines[k]), len(lines))
    return "\n".join(lines[i + 1:j])


def steps_per_worker(make_batches, n_workers: int, **kwargs) -> list[int]:
    """How many batches ``make_batches(task, **kwargs)`` yields for each task 0..n_workers-1 (counted here)."""
    positive_int("n_workers", n_workers)
    if not callable(make_batches):
        raise ValueError("make_batches must be a function make_batches(task, ...) returning batches")
    return [sum(1 for _ in make_batches(task, **kwargs)) for task in range(n_workers)]


def ratio(a: Sequence[float], b: Sequence[float]) -> float:
    """``|a| / |b|`` for two vectors (e.g. a gradient against the one-device gradient)."""
    nb = float(np.linalg.norm(np.asarray(b, dtype="float64")))
    if nb == 0.0:
        raise ValueError("the reference vector b is zero")
    return float(np.linalg.norm(np.asarray(a, dtype="float64"))) / nb
