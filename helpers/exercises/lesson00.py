"""Exercises of 00_start_here."""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import tensorflow as tf

from ..devices import ensure_devices
from . import error_line, model_problem, practice_strategy, quiet_tf, register

# ---- 00.1: count the replicas -------------------------------------------------------------------------


def _check_replicas(answer):
    answer = int(answer)
    if answer == 2:
        return True, "2 replicas: MirroredStrategy over the two devices that ensure_devices(2) returned."
    if answer == 1:
        return False, "1 would be a strategy over a single device - did you pass devices=REPLICAS?"
    return False, f"{answer} replicas: the strategy should use exactly the devices in REPLICAS."


def _solve_replicas():
    # In the notebook: strategy.num_replicas_in_sync, the strategy made above (one per kernel, lesson 04).
    # A second strategy in the same kernel passes ReductionToOneDevice (no collective ops, no clash):
    second = tf.distribute.MirroredStrategy(devices=ensure_devices(2),
                                            cross_device_ops=tf.distribute.ReductionToOneDevice())
    return second.num_replicas_in_sync


register("00.1", title="count the replicas", checker=_check_replicas, solution=_solve_replicas,
         expects="int", wants="a whole number: how many replicas the strategy keeps in sync",
         hint="use the strategy that the all-reduce example above built over REPLICAS; a strategy "
              "has an attribute that counts the replicas it keeps in sync.")

# ---- 00.2: make this model train on 2 replicas ----------------------------------------------------------

ROWS_00_2 = 256


def check_train_on_replicas(answer: Any, per_replica: int = 32, call: str = "train") -> "tuple[bool, str]":
    """Train with ``answer`` on two replicas; right if each step gave every replica ``per_replica`` rows.

    Lesson 03's find-and-fix (03.2) is judged the same way, with its own batch and function name.
    """
    strategy = practice_strategy()
    replicas = strategy.num_replicas_in_sync
    rng = np.random.default_rng(0)
    x = rng.normal(size=(ROWS_00_2, 64)).astype("float32")
    y = np.arange(ROWS_00_2) % 10
    try:
        with quiet_tf():
            model = answer(strategy, x, y)
    except Exception as exc:  # the learner's code: any failure is a wrong answer, with its first line
        if "Mixing different tf.distribute.Strategy objects" in str(exc):
            return False, ("compile ran outside the scope the model was built in (TensorFlow: 'Mixing different "
                           "tf.distribute.Strategy objects'): compile inside the same `with strategy.scope():`")
        return False, (f"{call}(strategy, x, y) raised {error_line(exc, 160)}. Did you build and compile the "
                       "model inside the strategy's scope, and pass fit the x and y it was given?")
    problem = model_problem(model, strategy, call)
    if problem is not None:
        bound = getattr(model, "_distribute_strategy", None)
        other = bound is not None and bound is not strategy and bound.num_replicas_in_sync > 1
        return False, problem + (f". Use the strategy {call} receives, not a new one" if other else "")
    steps = int(model.optimizer.iterations.numpy())
    epochs = len(getattr(getattr(model, "history", None), "epoch", []) or []) or 1
    if steps == 0:
        return False, "the model was never trained: the optimizer made 0 steps. Call fit after building it"
    per_step = ROWS_00_2 * epochs / steps
    if per_step == per_replica:
        return False, (f"{steps} steps for {epochs} epoch(s) of {ROWS_00_2} rows: batch_size={per_replica} "
                       f"is the global batch, split over the {replicas} replicas, so each replica got "
                       f"{per_replica // replicas} rows per step, not {per_replica}")
    if per_step != per_replica * replicas:
        return False, (f"{steps} steps for {epochs} epoch(s) of {ROWS_00_2} rows, {per_step:g} rows per step; "
                       f"{per_replica} rows on each of {replicas} replicas is {per_replica * replicas} rows per step")
    return True, (f"the model's variables and optimizer are mirrored on the {replicas} replicas, and each step "
                  f"took {per_replica * replicas} rows: {per_replica} on each replica")


def _solve_train():
    def train(strategy, x, y):
        with strategy.scope():                       # variables created here are mirrored on every replica
            model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(10, activation="softmax")])
            model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        batch = 32 * strategy.num_replicas_in_sync   # fit's batch_size is the global batch
        model.fit(x, y, batch_size=batch, epochs=1, verbose=0)
        return model

    return train


register("00.2", title="make this model train on 2 replicas", checker=check_train_on_replicas, solution=_solve_train,
         expects="function", takes=3, wants="a function train(strategy, x, y): your changed version",
         hint="the quick start's script does both things: where does it build and compile the model, and how "
              "does it compute the batch size it gives the data?")
