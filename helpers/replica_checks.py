"""Small tools for ``tf.distribute.MirroredStrategy``: batch math, scope checks, how a batch is split.

Why: the three things people get wrong when moving from ``multi_gpu_model`` to
MirroredStrategy are (1) where the model is created and compiled relative to
``strategy.scope()``, (2) which batch size ``fit`` means (the *global* one),
and (3) what happens to a partial last batch.  These helpers make each of them
visible and checkable in one line, so lessons can ``assert`` them.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence

from .checks import nonneg_int, positive_int, positive_number

LR_RULES = ("linear", "sqrt", "none")


def global_batch_size(per_replica: int, num_replicas: int) -> int:
    """The batch size to give ``fit``/``tf.data``: ``per_replica * num_replicas``.

    Under MirroredStrategy ``fit(batch_size=B)`` means B rows per *step*, split
    across the replicas - exactly as ``multi_gpu_model`` split its batch.
    """
    return positive_int("per_replica", per_replica) * positive_int("num_replicas", num_replicas)


def replica_split(rows: int, num_replicas: int) -> list[int]:
    """How MirroredStrategy splits a batch of ``rows`` rows across ``num_replicas`` replicas.

    Each replica gets ``ceil(rows / num_replicas)`` rows in turn until the rows run
    out, so the last replicas may get fewer - or none: 5 rows on 2 replicas -> [3, 2],
    1 row -> [1, 0], 4 rows on 3 replicas -> [2, 2, 0].  (Measured on TF 2.21 with
    ``strategy.experimental_distribute_dataset``; ``tests/test_strategy.py`` checks
    it against the real strategy.)  Compare :func:`helpers.legacy.slice_sizes`.
    """
    nonneg_int("rows", rows)
    positive_int("num_replicas", num_replicas)
    each = math.ceil(rows / num_replicas)
    out, left = [], rows
    for _ in range(num_replicas):
        take = min(each, left)
        out.append(take)
        left -= take
    return out


def scale_learning_rate(base_lr: float, base_batch: int, new_batch: int, rule: str = "linear") -> float:
    """Learning rate for ``new_batch`` given one tuned at ``base_batch``.

    ``"linear"`` (Goyal et al. 2017: k times the batch, k times the rate - the usual
    rule for SGD, with a warm-up for large k), ``"sqrt"`` (the learning-rate part of Malladi et al. 2022's rule for Adam, which also changes 1-β and ε),
    ``"none"`` (keep ``base_lr``).
    """
    positive_number("base_lr", base_lr)
    positive_int("base_batch", base_batch)
    positive_int("new_batch", new_batch)
    if rule not in LR_RULES:
        raise ValueError(f"rule must be one of {LR_RULES}, got {rule!r}")
    k = new_batch / base_batch
    return float(base_lr * {"linear": k, "sqrt": math.sqrt(k), "none": 1.0}[rule])


def per_replica_batch_sizes(strategy, dataset) -> list[list[int]]:
    """Rows each replica receives, batch by batch, when ``strategy`` distributes ``dataset``.

    ``dataset`` must be batched with the global batch size (as for ``fit``).
    Returns e.g. ``[[16, 16], ..., [3, 2]]`` for a partial last batch of 5 rows.
    """
    out = []
    for batch in strategy.experimental_distribute_dataset(dataset):
        first = batch[0] if isinstance(batch, (tuple, list)) else batch
        import tensorflow as tf

        leaf = tf.nest.flatten(first)[0]
        out.append([int(t.shape[0]) for t in strategy.experimental_local_results(leaf)])
    return out


def model_strategy_report(model) -> dict[str, Any]:
    """Which strategy a Keras model is bound to, its replica count and variable class.

    A model created outside any ``strategy.scope()`` reports the default strategy,
    1 replica and plain ``ResourceVariable``s - training still works, on one device.
    """
    if not hasattr(model, "distribute_strategy"):
        raise ValueError(f"expected a Keras model on the TensorFlow backend, got {type(model).__name__}")
    strategy = model.distribute_strategy
    weights = list(getattr(model, "weights", []))
    var_class = type(getattr(weights[0], "value", weights[0])).__name__ if weights else None
    return {"strategy": type(strategy).__name__, "replicas": int(strategy.num_replicas_in_sync),
            "variable_class": var_class}


def check_distributed(model, strategy, optimizer_too: bool = True) -> dict[str, Any]:
    """Assert that ``model`` was created (and compiled) under ``strategy.scope()``; return the report.

    Raises ``AssertionError`` saying what is wrong: the model belongs to another
    (or the default) strategy, or its variables / optimizer variables are not
    distributed.  Use it right after building a model, before a long ``fit``.
    """
    report = model_strategy_report(model)
    # ``model.distribute_strategy`` falls back to the *current* strategy for a model
    # created outside any scope, so ask for the one recorded at creation time.
    bound = getattr(model, "_distribute_strategy", model.distribute_strategy)
    if bound is not strategy:
        raise AssertionError(
            f"the model is bound to {report['strategy']} with {report['replicas']} replica(s), not to "
            f"the given strategy ({strategy.num_replicas_in_sync} replicas): create it inside "
            "`with strategy.scope():`")
    expected = _distributed_variable_names(strategy)
    if expected and report["variable_class"] not in expected:
        raise AssertionError(f"the model's variables are {report['variable_class']}, not distributed "
                             f"({' or '.join(expected)})")
    optimizer = getattr(model, "optimizer", None)
    if optimizer_too:
        if optimizer is None:
            raise AssertionError("the model is not compiled: compile it inside the scope too")
        if getattr(optimizer, "_distribution_strategy", strategy) is not strategy:
            raise AssertionError("the optimizer was created outside the scope: compile inside "
                                 "`with strategy.scope():`")
    return report


def _distributed_variable_names(strategy) -> tuple[str, ...]:
    import tensorflow as tf

    if isinstance(strategy, tf.distribute.MirroredStrategy):
        return ("MirroredVariable",)
    return ()  # other strategies use other variable classes: not checked here


def plot_histories(histories: dict[str, Any], metric: str = "loss", title: Optional[str] = None,
                   ax=None):
    """One line per run: ``metric`` per epoch from ``{label: keras History or history dict}``.

    Returns the matplotlib Axes (the notebook calls ``plt.show()``).
    """
    if not histories:
        raise ValueError("histories is empty: pass {label: History}")
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    for label, hist in histories.items():
        values = getattr(hist, "history", hist)
        if metric not in values:
            raise ValueError(f"run {label!r} has no {metric!r}; it has {sorted(values)}")
        series: Sequence[float] = values[metric]
        ax.plot(range(1, len(series) + 1), series, marker="o", label=label)
    ax.set_xlabel("epoch")
    ax.set_ylabel(metric)
    ax.set_title(title or metric)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return ax
