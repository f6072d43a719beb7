"""Exercises of 04_batchnorm_variable_error."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from .. import batchnorm
from . import error_line, model_problem, practice_strategy, quiet_tf, register

# ---- 04.1: how many shadow variables TF >= 1.4 makes for multi_gpu_model's towers ---------------


def _check_count(answer):
    truth = _solve_count()  # measured, not remembered: template build + 4 towers
    if answer == truth:
        return True, (f"{truth}: one per call of the BN layer - the template's own build plus one per "
                      "tower - named biased, biased_1, ... (plus as many local_step variables).")
    if answer == truth - 1:
        return False, "that counts the towers only: the template model was already built (called) once."
    if answer == 2 * truth:
        return False, "count only the 'biased*' variables of moving_mean (local_step ones are separate)."
    return False, (f"{answer} is not it. Each call of the BN layer's moving-average update creates one "
                   "'biased' shadow variable; how often is the layer called?")


def _solve_count():
    graph = tf.Graph()
    with graph.as_default():
        moving_mean, batch_mean = batchnorm.make_moving_mean()
        batchnorm.assign_moving_average_tf14(moving_mean, batch_mean, 0.99)  # building the template
        for i in range(4):                                                   # one call per tower
            with tf.name_scope(f"replica_{i}"):
                batchnorm.assign_moving_average_tf14(moving_mean, batch_mean, 0.99)
    return len([n for n in batchnorm.shadow_variables(graph) if "/biased" in n])


register("04.1", title="shadow variables with TF >= 1.4", checker=_check_count, solution=_solve_count,
         expects="int", wants="a whole number of variables",
         hint="each call of the BN layer's moving-average update adds one 'biased' variable: how "
              "many times is the layer called, from its first build on?")


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
    # one step on 8 rows of 4 features: fit splits them in order, replica 0 gets the rows of 0, replica 1 those of 10
    x = np.concatenate([np.zeros((4, 4), "float32"), np.full((4, 4), 10.0, "float32")])
    try:
        with quiet_tf():
            model.fit(x, np.zeros((8, 1), "float32"), batch_size=8, epochs=1, shuffle=False, verbose=0)
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
         hint="by default each replica normalizes with its own slice of the batch; section 4 showed the "
              "layer argument that changes that.")
