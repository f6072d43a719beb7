"""Exercises of 09_when_it_goes_wrong: broken pieces of a multi-replica job, fixed by the learner.

Each checker runs the learner's code on two replicas under the checkers' strategy (:func:`practice_strategy`).
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from . import RANDOM, as_float, describe, practice_strategy, register


def flat(values) -> np.ndarray:
    """Weights or gradients (arrays, tensors) as one float64 vector, so two steps compare in one assert."""
    return np.concatenate([np.asarray(v, dtype="float64").ravel() for v in values])


def _data(rows: int):
    rng = np.random.default_rng(9)
    x = rng.normal(size=(rows, 3)).astype("float32")
    y = (x @ np.array([[1.0], [-2.0], [3.0]], "float32") + 0.5).astype("float32")
    w = [rng.normal(size=(3, 1)).astype("float32"), np.full(1, 0.1, "float32")]
    return x, y, w


def _linear(weights):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.set_weights(weights)
    return model


# ---- 09.1: the loss of a custom training step --------------------------------------------------

ROWS_09_1 = 5  # split 3 + 2 over two replicas: an uneven batch, as the last batch of an epoch often is
#: Batches of which each check tries one more after ROWS_09_1's (4 + 3, 5 + 4, 6 + 5 rows): global_batch_size changes.
MORE_ROWS_09_1 = (7, 9, 11)


def _one_device_gradient(x, y, w):
    model = _linear(w)
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x) - y))
    return flat(tape.gradient(loss, model.trainable_variables))


def _replica_gradient(loss_fn, x, y, w):
    """The all-reduced gradient two replicas apply when each uses ``loss_fn``; and each replica's loss."""
    strategy = practice_strategy()
    with strategy.scope():
        model = _linear(w)
    batch = next(iter(strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices((x, y)).batch(len(x)))))

    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb), len(x))
        grads = tape.gradient(loss, model.trainable_variables)
        return tf.distribute.get_replica_context().all_reduce("SUM", grads), loss

    @tf.function
    def all_reduced(xb, yb):
        return strategy.run(step, args=(xb, yb))

    summed, losses = all_reduced(*batch)
    grad = flat([strategy.experimental_local_results(g)[0] for g in summed])
    return grad, strategy.experimental_local_results(losses)


def _check_loss(answer):
    y = _data(ROWS_09_1)[1]
    probe = answer(tf.constant(y[:2]), tf.constant(y[:2] + 1.0), ROWS_09_1)   # one plain call first
    if probe is None:
        return False, ("replica_loss(labels, predictions, global_batch_size) returned None; it should return "
                       "the replica's loss, one number")
    if not hasattr(probe, "dtype"):
        return False, f"replica_loss returned {describe(probe)}; it should return a TensorFlow scalar"
    verdicts = []
    for rows in (ROWS_09_1, RANDOM.choice(MORE_ROWS_09_1)):   # the second: an answer must use global_batch_size
        verdicts.append(_judge_loss(answer, rows))
        if not verdicts[-1][0]:
            return verdicts[-1]
    return True, verdicts[0][1] + "; on a second, larger batch too"


def _judge_loss(answer, rows: int) -> "tuple[bool, str]":
    """The two replicas' summed gradient with ``answer`` on ``rows`` rows (split unevenly), against one device's."""
    x, y, w = _data(rows)
    grad, losses = _replica_gradient(answer, x, y, w)
    shapes = {tuple(getattr(loss, "shape", ())) for loss in losses}
    if shapes != {()}:
        return False, (f"each replica's loss has shape {sorted(shapes)}; return one number per replica (a "
                       "scalar) so that its gradient is the replica's share of the step")
    want = _one_device_gradient(x, y, w)
    n, cut = 2, (rows + 1) // 2                # e.g. 3 + 2; each replica: the mean over ITS rows, / n
    uneven = (_one_device_gradient(x[:cut], y[:cut], w) + _one_device_gradient(x[cut:], y[cut:], w)) / n
    split = f"{cut} + {rows - cut}"

    def close(a, b):
        return np.allclose(a, b, rtol=5e-3, atol=1e-5)   # loose enough for TF32 on GPUs, cases differ by >10 %

    if close(grad, want):
        return True, (f"on {split} rows the two replicas' gradients add up to one device's gradient on all {rows} "
                      f"rows: every row weighs 1/{rows}, whatever replica it landed on")
    if close(grad, n * uneven) or close(grad, n * want):
        return False, (f"the summed gradient is about {n}x one device's: each replica averages over its own rows "
                       "and the all-reduce then ADDS the replicas' gradients (what tf.reduce_mean does)")
    if close(grad, uneven / n) or close(grad, want / n):
        return False, (f"the summed gradient is about 1/{n} of one device's: the loss is divided by the replica "
                       "count twice (a Keras loss object already divides by it)")
    if close(grad, uneven):
        return False, (f"right on an even split, wrong on this {split} batch: each replica divides by its OWN "
                       "row count (then by the replica count), so rows on the smaller replica weigh more. "
                       "Divide by the global batch size instead")
    ratio = np.linalg.norm(grad) / np.linalg.norm(want)
    hint = (f" (on {ROWS_09_1} rows it was right: is a batch size written in instead of global_batch_size?)"
            if rows != ROWS_09_1 else "")
    return False, (f"the summed gradient differs from one device's gradient on the same {rows} rows "
                   f"(norm ratio {ratio:.3f}){hint}; compute the mean squared error of each row, then average "
                   "over the GLOBAL batch")


def _solve_loss():
    def replica_loss(labels, predictions, global_batch_size):
        per_example = tf.reduce_mean(tf.square(labels - predictions), axis=-1)   # one loss per row
        return tf.nn.compute_average_loss(per_example, global_batch_size=global_batch_size)

    return replica_loss


register("09.1", title="fix the loss of a custom training step", checker=_check_loss, solution=_solve_loss,
         expects="function", takes=3,
         wants="a function replica_loss(labels, predictions, global_batch_size) returning a scalar",
         hint="the all-reduce ADDS the replicas' gradients, and the replicas may hold different numbers of "
              "rows: what must each replica divide the sum of its rows' losses by?",
         giveaways=["compute_average_loss", "global_batch_size", "reduce_sum"])


# ---- 09.2: a custom metric that disagrees across replicas ---------------------------------------

ROWS_09_2, BATCH_09_2 = 12, 6
#: Row counts of which each check fits one more epoch after ROWS_09_2's (whole batches of 6).
MORE_ROWS_09_2 = (18, 24, 30)


def _rows_counted(answer, rows: int) -> "tuple[str, float | None, list]":
    """Fit one epoch of ``rows`` rows (batches of BATCH_09_2) with a new ``answer()`` metric: its name, what fit
    reported for it (None: not reported) and every name fit reported."""
    x, y, w = _data(rows)
    strategy = practice_strategy()
    with strategy.scope():
        metric = answer()
        model = _linear(w)
        model.compile(loss="mse", optimizer=keras.optimizers.SGD(0.01), metrics=[metric])
    history = model.fit(x, y, batch_size=BATCH_09_2, epochs=1, verbose=0, shuffle=False).history
    got = as_float("the metric", history[metric.name][-1]) if metric.name in history else None
    return metric.name, got, sorted(history)


def _check_metric(answer):
    if not issubclass(answer, keras.metrics.Metric):
        return False, f"{answer.__name__} is not a keras.metrics.Metric subclass"
    for rows in (ROWS_09_2, RANDOM.choice(MORE_ROWS_09_2)):     # the second: a constant result() fails
        name, got, reported = _rows_counted(answer, rows)
        if got is None:
            return False, f"fit reported {reported}, not your metric's name {name!r}"
        if np.isclose(got, rows):
            continue
        if rows != ROWS_09_2 and np.isclose(got, ROWS_09_2):   # before its per-replica reading: 24 rows on 2 is 12
            return False, (f"the metric says {got:g} rows, but fit trained on {rows} rows (on {ROWS_09_2} rows it "
                           f"said {ROWS_09_2}: does result() count?)")
        per_replica = rows / practice_strategy().num_replicas_in_sync
        if np.isclose(got, per_replica):
            return False, (f"the metric says {got:g} rows, but fit trained on {rows}: each replica counted its "
                           f"own {per_replica:g}, and reading the metric took one replica's count or their mean "
                           "instead of their sum (look at the variable's aggregation)")
        return False, f"the metric says {got:g} rows, but fit trained on {rows} rows"
    return True, (f"{ROWS_09_2} rows, then another count of rows: each replica counted its own rows and reading the "
                  "metric added the replicas' counts (aggregation='sum')")


def _solve_metric():
    class RowsSeen(keras.metrics.Metric):
        def __init__(self, name="rows_seen", **kwargs):
            super().__init__(name=name, **kwargs)
            self.rows = self.add_variable(shape=(), initializer="zeros", aggregation="sum", name="rows")

        def update_state(self, y_true, y_pred, sample_weight=None):
            self.rows.assign_add(tf.cast(tf.shape(y_true)[0], self.dtype))

        def result(self):
            return self.rows

    return RowsSeen


register("09.2", title="fix a metric that disagrees across replicas", checker=_check_metric,
         solution=_solve_metric, expects="class", wants="your fixed metric class (RowsSeen itself, not an instance)",
         hint="each replica updates its own copy of the metric's variable; when Keras reads the metric, "
              "how should the replicas' copies be combined into one count?",
         giveaways=['aggregation="sum"', "'sum'"])
