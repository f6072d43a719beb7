"""Exercises of 04_batchnorm_variable_error."""

from __future__ import annotations

import functools

import keras
import numpy as np

from .. import batchnorm
from . import RANDOM, as_float, describe, error_line, model_problem, practice_strategy, quiet_tf, register


def _uneven_step(model) -> None:
    """One step on 8 rows of 4 features: fit splits them in order, replica 0 gets rows of 0s, replica 1 of 10s."""
    x = np.concatenate([np.zeros((4, 4), "float32"), np.full((4, 4), 10.0, "float32")])
    with quiet_tf():
        model.fit(x, np.zeros((8, 1), "float32"), batch_size=8, epochs=1, shuffle=False, verbose=0)


# ---- 04.1: find and fix - a drift check that reads one replica's copy -----------------------------------------

@functools.cache
def _trained(strategy) -> dict:
    """{synchronized: model} after one uneven step, made once: only the learner's function varies."""
    models = {}
    for sync in (False, True):
        with strategy.scope():
            models[sync] = keras.Sequential([keras.Input((4,)), keras.layers.BatchNormalization(
                synchronized=sync, momentum=0.5), keras.layers.Dense(1)])
            models[sync].compile(optimizer="sgd", loss="mse")
        _uneven_step(models[sync])
    return models


def _check_gap(answer):
    code = getattr(getattr(answer, "python_function", answer), "__code__", None)
    if code is not None and {"replica_gaps", "replica_values"} & set(code.co_names + code.co_freevars):
        return False, "write it with the strategy's own API, not with helpers.batchnorm (that is the answer key)"
    strategy = practice_strategy()
    got, models = {}, list(_trained(strategy).items())
    RANDOM.shuffle(models)                            # which model comes first: new for each check
    for sync, model in models:
        value = answer(model, strategy)
        try:
            got[sync] = (as_float("replica_gap's result", value), max(batchnorm.replica_gaps(model, strategy).values()))
        except (TypeError, ValueError):
            return False, f"replica_gap must return a number, it returned {describe(value)}"
    (drift, truth), (synced, _) = got[False], got[True]
    if abs(drift - truth) > 1e-5:
        why = (" Reading a mirrored variable (`.numpy()`) gives one copy, replica 0's here, however often you "
               "read it." if drift == 0 else "")
        return False, (f"for an unsynchronized model whose replicas saw 0s and 10s it returned {drift:g}, but the "
                       f"copies differ by {truth:g}.{why} Ask the strategy for every replica's copy of the variable")
    if abs(synced) > 1e-5:
        return False, f"with synchronized=True the copies are equal, but it returned {synced:g}"
    return True, (f"it sees every replica's copy: {drift:g} apart without sync (only replica 0's would be saved), "
                  f"{synced:g} with synchronized=True")


def _solve_gap():
    def replica_gap(model, strategy):
        bn = [layer for layer in model.layers if isinstance(layer, keras.layers.BatchNormalization)][0]
        # bn.moving_mean is a Keras variable; .value is the MirroredVariable with one copy per replica
        copies = np.stack([np.asarray(c) for c in strategy.experimental_local_results(bn.moving_mean.value)])
        return float(np.max(copies.max(axis=0) - copies.min(axis=0)))

    return replica_gap


register("04.1", title="find and fix: a drift check that never sees drift", checker=_check_gap,
         solution=_solve_gap, expects="function", takes=2,
         wants="a function replica_gap(model, strategy) that returns a number: your fixed version",
         hint="which replica's copy does reading a mirrored variable give you, and how do you ask the "
              "strategy for each replica's own value?",
         giveaways=["experimental_local_results", "local_results"])


# ---- 04.2: a model whose replicas keep the same BatchNorm statistics -------------------------------

def _bn_layers(model):
    def walk(parent):
        for child in getattr(parent, "layers", []):
            yield child
            yield from walk(child)

    return [layer for layer in walk(model) if isinstance(layer, keras.layers.BatchNormalization)]


def _check_sync_bn(answer):
    strategy = practice_strategy()
    model = answer(strategy)
    problem = model_problem(model, strategy, "make_bn_model(strategy)")
    if problem is not None:
        return False, problem
    bns = _bn_layers(model)
    if not bns:
        return False, "the model has no BatchNormalization layer"
    if getattr(model, "optimizer", None) is None:
        return False, "compile the model (inside the scope) so that the checker can train it"
    try:
        _uneven_step(model)
    except Exception as exc:  # noqa: BLE001 - a model that cannot train on (8, 4) -> (8, 1) is the answer's fault
        return False, f"one training step on 8 rows of 4 features failed: {error_line(exc)}"
    bn = bns[0]
    copies = batchnorm.replica_values(bn.moving_mean, strategy)[:, 0]
    want = 5.0 * (1 - bn.momentum)          # moving = momentum * 0 + (1 - momentum) * global mean 5
    if abs(copies[0] - copies[1]) > 1e-6:
        return False, (f"after one step the replicas' moving_mean differ: {[round(float(c), 4) for c in copies]}. Each "
                       "replica averaged only its own rows (0s and 10s); only replica 0's copy would be saved")
    if abs(copies[0] - want) > 1e-4:
        return False, (f"both replicas hold moving_mean {copies[0]:.4f}, but the global batch mean is 5, so "
                       f"momentum {bn.momentum} should give {want:.4f}: is the first layer the BatchNormalization?")
    return True, (f"replica 0 saw 0s and replica 1 saw 10s, yet both copies of moving_mean are {copies[0]:.4f} "
                  f"= (1 - {bn.momentum}) x 5: the statistics of the whole global batch, identical everywhere")


def _solve_sync_bn():
    def make_bn_model(strategy):
        import keras

        with strategy.scope():
            model = keras.Sequential([keras.Input((4,)),
                                      keras.layers.BatchNormalization(synchronized=True),  # all-reduced stats
                                      keras.layers.Dense(1)])
            model.compile(optimizer="sgd", loss="mse")
        return model

    return make_bn_model


register("04.2", title="BatchNorm statistics that agree on every replica", checker=_check_sync_bn,
         solution=_solve_sync_bn, expects="function", takes=1,
         wants="a function make_bn_model(strategy) that returns a compiled Keras model",
         hint="by default each replica normalizes with its own slice of the batch; section 1 showed the "
              "layer argument that changes that.",
         giveaways=["synchronized=True", "synchronized"])
