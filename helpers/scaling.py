"""The plot of lesson 06's global-batch and learning-rate sweep (the lesson's cells run the sweep).

Why: every extra GPU makes the global batch bigger and an epoch shorter in steps; the plot shows how much
the linear scaling rule (learning rate x batch growth, Goyal et al. 2017) gives back.
"""

from __future__ import annotations

from typing import Sequence


def plot_sweep(rows: Sequence[dict]):
    """Accuracy against global batch, one line with the same LR and one with the scaled LR; returns the Axes.
    ``rows``: one dict per run with ``batch``, ``accuracy`` and ``lr_scaled``; the base (smallest) batch is on both."""
    rows = list(rows)
    if not rows or not all({"batch", "accuracy", "lr_scaled"} <= set(r) for r in rows):
        raise ValueError("rows must be non-empty dicts with batch, accuracy and lr_scaled (one per run)")
    import matplotlib.pyplot as plt

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
