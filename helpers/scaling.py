"""Global batch and learning-rate scaling: the plot of lesson 06's sweep.

Why: with a fixed batch per replica, every extra GPU makes the *global* batch
bigger, so an epoch has fewer optimizer steps.  With the same learning rate the
model then learns less per epoch; the linear scaling rule (Goyal et al. 2017,
"Accurate, Large Minibatch SGD") multiplies the learning rate by the same
factor as the batch to compensate.  Lesson 06 writes the sweep itself (its
``fit`` calls are the lesson); :func:`plot_sweep` only draws its rows.

The batch arithmetic (``global_batch_size``, ``scale_learning_rate``) lives in
:mod:`helpers.replica_checks`.
"""

from __future__ import annotations

from typing import Sequence


def plot_sweep(rows: Sequence[dict], ax=None):
    """Accuracy against global batch size, one line with the fixed LR and one with the scaled LR.

    ``rows``: dicts with ``batch``, ``accuracy`` and ``lr_scaled`` (bool), one per run; the
    base batch (the smallest) has only the unscaled run and is on both lines.  Returns the Axes.
    """
    rows = list(rows)
    if not rows or not all({"batch", "accuracy", "lr_scaled"} <= set(r) for r in rows):
        raise ValueError("rows must be non-empty dicts with batch, accuracy and lr_scaled (one per run)")
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
