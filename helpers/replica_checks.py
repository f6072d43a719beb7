"""Scope checks for ``tf.distribute.MirroredStrategy``: is a model really distributed by a strategy?

Why: the mistake people make first moving from ``multi_gpu_model`` - building the model outside
``strategy.scope()`` - raises nothing; the exercises' checkers use :func:`check_distributed` to say what is wrong.
"""

from __future__ import annotations

from typing import Any


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
