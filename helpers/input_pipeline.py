"""The input pipeline: the most common reason extra GPUs sit idle.

Why: a replica can only compute as fast as batches arrive.  When preparing a
batch (decoding JPEGs, augmenting, Python code) takes longer than a training
step, more GPUs only wait longer.  ``Dataset.cache()`` does the expensive work
once, ``Dataset.prefetch()`` prepares the next batch while the current one
trains.  :func:`compare_pipelines` measures both on a pipeline made slow on
purpose (:func:`make_pipeline` with ``delay_s``), and counts how often the slow
function really ran - a number that does not depend on the machine's speed.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Sequence

#: (label, cache, prefetch) of the variants :func:`compare_pipelines` measures by default.
VARIANTS = (("plain", False, False), ("cache + prefetch", True, True))


@dataclass
class CallCounter:
    """How many batches the slow map function prepared (thread-safe)."""

    calls: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def add(self) -> None:
        with self._lock:
            self.calls += 1


def make_pipeline(x, y, batch_size: int, delay_s: float = 0.0, cache: bool = False,
                  prefetch: bool = False, counter: CallCounter | None = None):
    """``(x, y)`` batched, then a map that sleeps ``delay_s`` per batch, then optional cache/prefetch.

    The sleep stands in for expensive per-batch work in Python (decoding,
    augmentation); it runs in ``tf.py_function`` and leaves the data unchanged.
    ``counter.calls`` counts how many times it ran.  The order is the usual one:
    expensive map, *then* ``cache()`` (so the result is cached), then ``prefetch``
    last.  No shuffling, so every epoch has identical batches.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
    if not isinstance(delay_s, (int, float)) or not math.isfinite(delay_s) or delay_s < 0:
        raise ValueError(f"delay_s must be a number of seconds >= 0, got {delay_s!r}")
    if len(x) != len(y) or len(x) == 0:
        raise ValueError(f"x and y must be non-empty and of the same length, got {len(x)} and {len(y)}")
    import tensorflow as tf

    counter = counter if counter is not None else CallCounter()

    def _slow_work(_):
        counter.add()
        if delay_s:
            time.sleep(delay_s)
        return 0

    def _prepare(xb, yb):
        done = tf.py_function(_slow_work, [tf.shape(xb)[0]], tf.int32)
        with tf.control_dependencies([done]):  # the batch is ready only after the slow work
            return tf.identity(xb), tf.identity(yb)

    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size).map(_prepare)
    if cache:
        ds = ds.cache()
    if prefetch:
        ds = ds.prefetch(tf.data.AUTOTUNE)
    return ds


def compare_pipelines(model, x, y, batch_size: int, delay_s: float, epochs: int,
                      variants: Sequence[tuple] = VARIANTS, echo: bool = True) -> list[dict]:
    """Train ``model`` (compiled) for ``epochs`` epochs on each pipeline variant and time it.

    Runs one untimed epoch on a fast pipeline first, so graph tracing is not
    charged to the first variant.  Returns one dict per variant: ``label``,
    ``cache``, ``prefetch``, ``seconds``, ``map_calls`` (slow-function runs),
    ``batches`` (per epoch), ``slow_work_s`` (``map_calls * delay_s``, the time
    spent in the slow function).
    """
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs must be an int >= 1, got {epochs!r}")
    if not variants:
        raise ValueError("variants must list at least one (label, cache, prefetch)")
    if getattr(model, "optimizer", None) is None:
        raise ValueError("model must be compiled first")
    model.fit(make_pipeline(x, y, batch_size), epochs=1, verbose=0, shuffle=False)  # warm-up: tracing
    batches = math.ceil(len(x) / batch_size)
    rows = []
    for label, cache, prefetch in variants:
        counter = CallCounter()
        ds = make_pipeline(x, y, batch_size, delay_s, cache=cache, prefetch=prefetch, counter=counter)
        t0 = time.perf_counter()
        model.fit(ds, epochs=epochs, verbose=0, shuffle=False)
        seconds = time.perf_counter() - t0
        rows.append({"label": label, "cache": cache, "prefetch": prefetch, "seconds": seconds,
                     "map_calls": counter.calls, "batches": batches,
                     "slow_work_s": counter.calls * delay_s})
        if echo:
            print(f"[pipeline] {label:<17} {epochs} epochs in {seconds:5.2f} s | slow map ran "
                  f"{counter.calls:3d} times ({counter.calls * delay_s:.2f} s of it)", flush=True)
    return rows


def plot_pipelines(rows: Sequence[dict], ax=None):
    """Horizontal bars: training time per pipeline variant, with the slow work inside it marked."""
    rows = list(rows)
    if not rows or not all({"label", "seconds", "slow_work_s"} <= set(r) for r in rows):
        raise ValueError("rows must be the non-empty output of compare_pipelines")
    import matplotlib.pyplot as plt

    if ax is None:
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
