"""BatchNormalization and data parallelism (lesson 04): the 2017 variable clash and today's replica drift.

Why: TF 1.3's zero-debiased moving average created a shadow variable ``biased`` without a unique name, so the
second tower of ``multi_gpu_model`` crashed with ``.../moving_mean/biased already exists``; TF 2.21 lacks that code,
so :func:`zero_debias_tf13` re-states it. Today, under ``MirroredStrategy``, each replica keeps its own moving
statistics and only replica 0's are saved: :class:`ReplicaBN` and :func:`drift_experiment` measure the drift.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .checks import is_int, positive_int
from .devices import import_tensorflow


def _require_graph_mode(tf) -> None:
    if tf.executing_eagerly():
        raise RuntimeError("this needs graph mode: call it inside `with tf.Graph().as_default():` "
                           "(never disable eager execution for the whole notebook)")


def make_moving_mean(layer_name: str = "batch_normalization_1", size: int = 4):
    """``(moving_mean, batch_mean)``: a Keras-2-style BN variable (a TF 1.3 reference variable) in the current graph."""
    tf = import_tensorflow()
    _require_graph_mode(tf)
    if not layer_name or "/" in layer_name:
        raise ValueError(f"layer_name must be a plain scope name, got {layer_name!r}")
    positive_int("size", size)
    v1 = tf.compat.v1
    with tf.name_scope(layer_name):
        moving_mean = v1.Variable(tf.zeros([size]), name="moving_mean", trainable=False,
                                  use_resource=False)
    x = v1.placeholder(tf.float32, [None, size], name="x")
    return moving_mean, tf.reduce_mean(x, axis=0)


def zero_debias_tf13(unbiased_var, value, decay: float):
    """TF 1.3's ``_zero_debias`` variable creation: ``(biased, local_step)``, names not made unique.

    A second call for the same variable raises ``Variable .../moving_mean/biased already exists, disallowed``
    (a ``tf.name_scope`` around it does not help: a name scope is not a variable scope).
    """
    tf = import_tensorflow()
    _require_graph_mode(tf)
    if not 0.0 <= float(decay) <= 1.0:
        raise ValueError(f"decay must be in [0, 1], got {decay!r}")
    v1 = tf.compat.v1
    with v1.variable_scope(unbiased_var.op.name, values=[unbiased_var, value], use_resource=False):
        biased = v1.get_variable("biased", shape=unbiased_var.shape, initializer=v1.zeros_initializer(),
                                 trainable=False)
        local_step = v1.get_variable("local_step", shape=[], initializer=v1.zeros_initializer(),
                                     trainable=False)
    return biased, local_step


def assign_moving_average_tf14(variable, value, decay: float):
    """TensorFlow's real ``assign_moving_average(..., zero_debias=True)``: unique names ``biased``, ``biased_1``..."""
    tf = import_tensorflow()
    _require_graph_mode(tf)
    from tensorflow.python.training import moving_averages

    return moving_averages.assign_moving_average(variable, value, decay, zero_debias=True)


def shadow_variables(graph) -> list[str]:
    """Names of the zero-debias shadow variables (``biased*``, ``local_step*``) in ``graph``."""
    tf = import_tensorflow()
    with graph.as_default():
        names = [v.op.name for v in tf.compat.v1.global_variables()]
    return sorted(n for n in names if n.rsplit("/", 1)[-1].startswith(("biased", "local_step")))


class ReplicaBN:
    """One ``BatchNormalization`` layer under a strategy: ``step([a, b])`` feeds replica 0 ``a`` and replica 1 ``b``;
    :meth:`per_replica` reads every replica's moving statistics (the drift experiment's fast inner loop)."""

    def __init__(self, strategy, synchronized: bool, momentum: float = 0.99):
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {momentum!r}")
        tf = import_tensorflow()
        import keras

        self.strategy, self.replicas = strategy, strategy.num_replicas_in_sync
        with strategy.scope():
            self.layer = keras.layers.BatchNormalization(momentum=momentum, synchronized=synchronized)
            self.model = keras.Sequential([keras.Input((1,)), self.layer])

        @tf.function(reduce_retracing=True)
        def _step(dist_x):
            return strategy.run(lambda x: self.layer(x, training=True), args=(dist_x,))

        self._step = _step

    def step(self, per_replica: Sequence[np.ndarray]) -> None:
        """One training-mode forward pass; ``per_replica[i]`` is replica i's batch of ``b`` values."""
        if len(per_replica) != self.replicas:
            raise ValueError(f"need one batch per replica ({self.replicas}), got {len(per_replica)}")
        tf = import_tensorflow()
        data = [tf.constant(np.asarray(b, dtype="float32").reshape(-1, 1)) for b in per_replica]
        if any(int(d.shape[0]) < 1 for d in data):
            raise ValueError("every replica needs at least one row")
        dist = self.strategy.experimental_distribute_values_from_function(
            lambda ctx: data[ctx.replica_id_in_sync_group])
        self._step(dist)

    def reset(self) -> None:
        """Moving mean 0, moving variance 1 on every replica (as after building)."""
        self.layer.moving_mean.assign(np.zeros(1, "float32"))
        self.layer.moving_variance.assign(np.ones(1, "float32"))

    def per_replica(self) -> dict[str, np.ndarray]:
        """``moving_mean`` and ``moving_variance``: arrays of shape (replicas, 1)."""
        return {name: replica_values(getattr(self.layer, name), self.strategy)
                for name in ("moving_mean", "moving_variance")}


def replica_values(variable, strategy) -> np.ndarray:
    """Every replica's copy of a (Keras or tf) variable, stacked: shape (replicas, *variable.shape)."""
    var = getattr(variable, "value", variable)  # a Keras variable wraps the tf.Variable
    return np.stack([np.asarray(v) for v in strategy.experimental_local_results(var)])


def replica_gaps(model, strategy) -> dict[str, float]:
    """Per BatchNormalization layer of ``model``: the largest max - min of ``moving_mean`` across replicas."""
    import keras

    if not isinstance(model, keras.Model):
        raise ValueError(f"model must be a keras.Model, got {type(model).__name__}")

    def walk(parent):
        for child in getattr(parent, "layers", []):
            yield child
            yield from walk(child)

    gaps = {}
    for layer in walk(model):
        if isinstance(layer, keras.layers.BatchNormalization):
            values = replica_values(layer.moving_mean, strategy)
            gaps[layer.name] = float(np.max(values.max(axis=0) - values.min(axis=0)))
    return gaps


def drift_experiment(strategy, batch_sizes: Sequence[int] = (2, 4, 8, 16, 32, 64, 128), steps: int = 60,
                     momentum: float = 0.9, warmup: int = 20, seed: int = 0) -> list[dict]:
    """Train-mode BN on N(0, 1) data, per replica batch size ``b``, with and without sync: one row per
    (synchronized, b), averaged over the steps after ``warmup``: ``mean_gap`` (max - min of the replicas' moving
    means), ``saved_var`` (replica 0's moving variance; the truth is 1), ``replica_means``."""
    if not batch_sizes or any(not is_int(b) or b < 2 for b in batch_sizes):
        raise ValueError(f"batch_sizes must be ints >= 2, got {batch_sizes!r}")
    if not 0 <= warmup < steps:
        raise ValueError(f"need 0 <= warmup < steps, got warmup={warmup}, steps={steps}")
    rows = []
    for sync in (False, True):
        rbn = ReplicaBN(strategy, synchronized=sync, momentum=momentum)
        rng = np.random.default_rng(seed)
        for b in batch_sizes:
            rbn.reset()
            gaps, variances = [], []
            for step in range(steps):
                rbn.step([rng.standard_normal((b, 1)) for _ in range(rbn.replicas)])
                if step >= warmup:
                    stats = rbn.per_replica()
                    mm = stats["moving_mean"][:, 0]
                    gaps.append(float(mm.max() - mm.min()))
                    variances.append(float(stats["moving_variance"][0, 0]))
            rows.append({"synchronized": sync, "batch_size": b, "mean_gap": float(np.mean(gaps)),
                         "saved_var": float(np.mean(variances)),
                         "replica_means": [float(v) for v in mm]})
        print(f"synchronized={sync}: {len(batch_sizes)} batch sizes x {steps} steps measured")
    return rows


def plot_drift(rows: Sequence[dict]):
    """Two panels from :func:`drift_experiment`: replica disagreement, and the saved variance vs the truth."""
    if not rows:
        raise ValueError("rows is empty: run drift_experiment first")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    for sync, style in ((False, "o-"), (True, "s--")):
        sel = sorted((r for r in rows if r["synchronized"] == sync), key=lambda r: r["batch_size"])
        label = f"synchronized={sync}"
        bs = [r["batch_size"] for r in sel]
        left.plot(bs, [max(r["mean_gap"], 1e-6) for r in sel], style, label=label)
        right.plot(bs, [r["saved_var"] for r in sel], style, label=label)
    left.set(xscale="log", yscale="log", xlabel="batch size per replica",
             ylabel="max - min of replicas' moving_mean", title="Replicas disagree (1e-6 = equal)")
    right.axhline(1.0, color="gray", lw=1, label="true variance")
    right.set(xscale="log", xlabel="batch size per replica", ylabel="saved moving_variance",
              title="What save() keeps (replica 0)")
    for ax in (left, right):
        ax.legend()
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig
