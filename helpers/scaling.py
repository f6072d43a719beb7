"""Global batch and learning-rate scaling: what adding replicas does to the optimizer.

Why: with a fixed batch per replica, every extra GPU makes the *global* batch
bigger, so an epoch has fewer optimizer steps.  With the same learning rate the
model then learns less per epoch; the linear scaling rule (Goyal et al. 2017,
"Accurate, Large Minibatch SGD") multiplies the learning rate by the same
factor as the batch to compensate.  :func:`batch_lr_sweep` measures accuracy
after a fixed number of epochs for several global batch sizes, with and without
the rule, and :func:`plot_sweep` draws it.

The batch arithmetic itself (``global_batch_size``, ``scale_learning_rate``) lives
in :mod:`helpers.strategy`.  The optimizer sees only the global batch (MirroredStrategy averages the
replicas' gradients over it), so the sweep may run on one device: same
arithmetic, less time.  Pass ``strategy=`` to run it under a strategy.
"""

from __future__ import annotations

import math
import time
from typing import Optional, Sequence


def _positive(name: str, value: object, integer: bool = False) -> None:
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type or not value > 0 or \
            (not integer and not math.isfinite(value)):
        kind = "an int" if integer else "a number"
        raise ValueError(f"{name} must be {kind} > 0, got {value!r}")


def batch_lr_sweep(x_train, y_train, x_test, y_test, batch_sizes: Sequence[int], base_lr: float,
                   epochs: int, base_batch: Optional[int] = None, strategy=None, seed: int = 0,
                   echo: bool = True) -> list[dict]:
    """Train the same small MLP for ``epochs`` epochs at each global batch size, LR fixed and scaled.

    Args:
        x_train, y_train, x_test, y_test: images (N, ...) and int labels; images are flattened.
        batch_sizes: global batch sizes (ints > 0, at least 2 different ones).
        base_lr: learning rate (plain SGD) at ``base_batch``.
        epochs: passes over the training data for every run (the same for all).
        base_batch: batch size ``base_lr`` belongs to (default: the smallest batch size).
        strategy: a ``tf.distribute`` strategy to build and train under (default: none).
        seed: weights and shuffling are seeded identically for every run.

    Returns:
        One dict per run: ``batch``, ``lr``, ``lr_scaled`` (bool), ``steps`` (optimizer
        steps in total), ``accuracy`` (test), ``seconds``.  At ``base_batch`` both
        variants are the same run, so it appears once, as ``lr_scaled=False``.
    """
    sizes = list(batch_sizes)
    for b in sizes:
        _positive("batch size", b, integer=True)
    if len(set(sizes)) < 2:
        raise ValueError(f"batch_sizes needs at least 2 different sizes to compare, got {sizes}")
    _positive("base_lr", base_lr)
    _positive("epochs", epochs, integer=True)
    base_batch = min(sizes) if base_batch is None else base_batch
    _positive("base_batch", base_batch, integer=True)
    if len(x_train) != len(y_train) or len(x_test) != len(y_test) or not len(x_train) or not len(x_test):
        raise ValueError("x and y must be non-empty and of the same length")
    import keras
    import numpy as np
    import tensorflow as tf

    from .models import small_mlp
    from .strategy import scale_learning_rate

    xtr = np.asarray(x_train, "float32").reshape(len(x_train), -1)
    xte = np.asarray(x_test, "float32").reshape(len(x_test), -1)
    num_classes = int(max(np.max(y_train), np.max(y_test))) + 1
    strategy = strategy or tf.distribute.get_strategy()
    with strategy.scope():
        keras.utils.set_random_seed(seed)
        model = small_mlp(xtr.shape[1], max(num_classes, 2), name="sweep_mlp")
        model.compile(optimizer=keras.optimizers.SGD(base_lr), loss="sparse_categorical_crossentropy",
                      metrics=["accuracy"])
    start_weights = model.get_weights()  # every run starts from the same weights
    rows = []
    for batch in sorted(sizes):
        for lr_scaled in (False, True):
            if lr_scaled and batch == base_batch:
                continue
            lr = scale_learning_rate(base_lr, base_batch, batch) if lr_scaled else base_lr
            model.set_weights(start_weights)
            model.optimizer.learning_rate.assign(lr)  # plain SGD: no other optimizer state
            keras.utils.set_random_seed(seed)
            t0 = time.perf_counter()
            model.fit(xtr, y_train, batch_size=batch, epochs=epochs, verbose=0)
            acc = float(model.evaluate(xte, y_test, batch_size=256, verbose=0)[1])
            row = {"batch": batch, "lr": lr, "lr_scaled": lr_scaled,
                   "steps": epochs * math.ceil(len(xtr) / batch), "accuracy": acc,
                   "seconds": time.perf_counter() - t0}
            rows.append(row)
            if echo:
                print(f"[sweep] global batch {batch:5d} | lr {lr:7.4f} "
                      f"({'scaled' if lr_scaled else 'fixed '}) | {row['steps']:5d} steps | "
                      f"test accuracy {acc:.3f}", flush=True)
    return rows


def plot_sweep(rows: Sequence[dict], ax=None):
    """Accuracy against global batch size, one line with the fixed LR and one with the scaled LR.

    The base batch (the smallest) is on both lines.  Returns the Axes.
    """
    rows = list(rows)
    if not rows or not all({"batch", "accuracy", "lr_scaled"} <= set(r) for r in rows):
        raise ValueError("rows must be the non-empty output of batch_lr_sweep")
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    base = min(r["batch"] for r in rows)
    base_rows = [r for r in rows if r["batch"] == base]
    for scaled, style, label in ((False, "o-", "same learning rate"),
                                 (True, "s--", "learning rate x (batch / base batch)")):
        mine = sorted(base_rows + [r for r in rows if r["lr_scaled"] == scaled and r["batch"] != base],
                      key=lambda r: r["batch"])
        ax.plot([r["batch"] for r in mine], [r["accuracy"] for r in mine], style, label=label)
    ax.set_xscale("log", base=2)
    batches = sorted({r["batch"] for r in rows})
    ax.set_xticks(batches, [str(b) for b in batches])
    ax.set(xlabel="global batch size", ylabel="test accuracy", ylim=(0, 1.02),
           title="Accuracy after a fixed number of epochs")
    ax.grid(alpha=0.3)
    ax.legend()
    return ax
