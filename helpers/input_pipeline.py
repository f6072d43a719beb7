"""Lesson 06's input-pipeline plumbing: a pipeline slow on purpose, a counter of its slow calls, the plot.

Why: a replica computes only as fast as batches arrive; the lesson's cells add ``cache()`` and
``prefetch()`` and time ``fit``.  The counter gives a number that does not depend on the machine's speed.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Sequence

from .checks import nonneg_number, positive_int


@dataclass
class CallCounter:
    """How many batches the slow map function prepared (thread-safe)."""

    calls: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def add(self) -> None:
        with self._lock:
            self.calls += 1


def make_pipeline(x, y, batch_size: int, delay_s: float = 0.0, counter: CallCounter | None = None):
    """``(x, y)`` batched (no shuffling), then a map that sleeps ``delay_s`` per batch in ``tf.py_function``: the
    sleep stands in for expensive per-batch work in Python; ``counter.calls`` counts how often it ran."""
    positive_int("batch_size", batch_size)
    nonneg_number("delay_s", delay_s, unit="seconds")
    if len(x) != len(y) or len(x) == 0:
        raise ValueError(f"x and y must be non-empty and of the same length, got {len(x)} and {len(y)}")
    import tensorflow as tf

    counter = counter if counter is not None else CallCounter()

    def _slow_work(_):
        counter.add()
        time.sleep(delay_s)
        return 0

    def _prepare(xb, yb):
        done = tf.py_function(_slow_work, [tf.shape(xb)[0]], tf.int32)
        with tf.control_dependencies([done]):  # the batch is ready only after the slow work
            return tf.identity(xb), tf.identity(yb)

    return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size).map(_prepare)


def plot_pipelines(rows: Sequence[dict]):
    """Horizontal bars: training time per pipeline variant, with the slow work inside it marked."""
    rows = list(rows)
    if not rows or not all({"label", "seconds", "slow_work_s"} <= set(r) for r in rows):
        raise ValueError("rows must be non-empty dicts with label, seconds and slow_work_s (one per pipeline)")
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=(7, 2.8))
    labels = [r["label"] for r in rows]
    ax.barh(labels, [r["seconds"] for r in rows], color="tab:blue", label="training time (measured)")
    ax.barh(labels, [r["slow_work_s"] for r in rows], height=0.35, color="tab:orange",
            label="time inside the slow map function")
    ax.invert_yaxis()
    ax.set(xlabel="seconds", title="Same model, same data, different input pipelines")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    return ax
