"""Small tools for ``tf.distribute.MirroredStrategy``: batch math, scope checks, how a batch is split.

Why: the three things people get wrong moving from ``multi_gpu_model`` - where the model is built relative to
``strategy.scope()``, which batch size ``fit`` means (the global one), a partial last batch - in one line each.
"""

from __future__ import annotations

import math
from typing import Any

from .checks import nonneg_int, positive_int, positive_number

LR_RULES = ("linear", "sqrt", "none")


def global_batch_size(per_replica: int, num_replicas: int) -> int:
    """The batch size to give ``fit``/``tf.data`` (rows per step, split over the replicas)."""
    return positive_int("per_replica", per_replica) * positive_int("num_replicas", num_replicas)


def replica_split(rows: int, num_replicas: int) -> list[int]:
    """How MirroredStrategy splits ``rows`` rows: ``ceil(rows / num_replicas)`` each in turn until they run out
    (5 rows on 2 replicas -> [3, 2]; 1 -> [1, 0]; 4 on 3 -> [2, 2, 0]; compare :func:`helpers.legacy.slice_sizes`)."""
    nonneg_int("rows", rows)
    each = math.ceil(rows / positive_int("num_replicas", num_replicas))
    return [min(each, max(0, rows - i * each)) for i in range(num_replicas)]


def scale_learning_rate(base_lr: float, base_batch: int, new_batch: int, rule: str = "linear") -> float:
    """Learning rate for ``new_batch`` given one tuned at ``base_batch``: ``"linear"`` (Goyal et al. 2017, SGD),
    ``"sqrt"`` (the learning-rate part of Malladi et al. 2022's rule for Adam) or ``"none"`` (keep ``base_lr``)."""
    positive_number("base_lr", base_lr)
    positive_int("base_batch", base_batch)
    positive_int("new_batch", new_batch)
    if rule not in LR_RULES:
        raise ValueError(f"rule must be one of {LR_RULES}, got {rule!r}")
    k = new_batch / base_batch
    return float(base_lr * {"linear": k, "sqrt": math.sqrt(k), "none": 1.0}[rule])


def per_replica_batch_sizes(strategy, dataset) -> list[list[int]]:
    """Rows each replica receives per batch of ``dataset`` (batched globally): ``[[16, 16], ..., [3, 2]]``."""
    import tensorflow as tf

    out = []
    for batch in strategy.experimental_distribute_dataset(dataset):
        first = batch[0] if isinstance(batch, (tuple, list)) else batch
        leaf = tf.nest.flatten(first)[0]
        out.append([int(t.shape[0]) for t in strategy.experimental_local_results(leaf)])
    return out


def model_strategy_report(model) -> dict[str, Any]:
    """Which strategy a Keras model is bound to, its replica count and variable class (built outside any
    ``strategy.scope()``: the default strategy, 1 replica, plain ``ResourceVariable``)."""
    if not hasattr(model, "distribute_strategy"):
        raise ValueError(f"expected a Keras model on the TensorFlow backend, got {type(model).__name__}")
    strategy = model.distribute_strategy
    weights = list(getattr(model, "weights", []))
    var_class = type(getattr(weights[0], "value", weights[0])).__name__ if weights else None
    return {"strategy": type(strategy).__name__, "replicas": int(strategy.num_replicas_in_sync),
            "variable_class": var_class}


def check_distributed(model, strategy) -> dict[str, Any]:
    """Assert that ``model`` was created and compiled under ``strategy.scope()``; return the report.
    ``AssertionError`` says what is wrong (another strategy, variables or optimizer not distributed)."""
    import tensorflow as tf

    report = model_strategy_report(model)
    # ``model.distribute_strategy`` falls back to the *current* strategy for a model
    # created outside any scope, so ask for the one recorded at creation time.
    bound = getattr(model, "_distribute_strategy", model.distribute_strategy)
    if bound is not strategy:
        raise AssertionError(
            f"the model is bound to {report['strategy']} with {report['replicas']} replica(s), not to "
            f"the given strategy ({strategy.num_replicas_in_sync} replicas): create it inside "
            "`with strategy.scope():`")
    # Other strategies use other variable classes: not checked here.
    if isinstance(strategy, tf.distribute.MirroredStrategy) and report["variable_class"] != "MirroredVariable":
        raise AssertionError(f"the model's variables are {report['variable_class']}, not distributed "
                             "(MirroredVariable)")
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None:
        raise AssertionError("the model is not compiled: compile it inside the scope too")
    if getattr(optimizer, "_distribution_strategy", strategy) is not strategy:
        raise AssertionError("the optimizer was created outside the scope: compile inside "
                             "`with strategy.scope():`")
    return report
