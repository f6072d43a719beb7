"""Exercises of 00_start_here."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import keras
import numpy as np

from . import RANDOM, as_float, as_int, describe, error_line, model_problem, practice_strategy, quiet_tf, register

# ---- 00.1: scale the batch and the learning rate --------------------------------------------------------------


#: Replica counts 00.1 is always called with, in this order (2: the checkers' real MirroredStrategy, the others
#: stand-ins); then one drawn from 3-64 each check, so that an answer cannot learn the calls by heart.
REPLICAS_00_1 = (2, 1, 8)


def _stand_in(replicas: int, local: "int | None" = None) -> SimpleNamespace:
    """A strategy with ``replicas`` in sync, of which ``local`` (default all) on this worker: MultiWorkerMirrored
    lists only this worker's devices in ``extended.worker_devices``."""
    devices = tuple(f"/gpu:{i}" for i in range(replicas if local is None else local))
    return SimpleNamespace(num_replicas_in_sync=replicas, extended=SimpleNamespace(worker_devices=devices))


def _check_batch_and_lr(answer):
    """Call ``answer`` with 2, 1, 8 and a random count of replicas, then with 2 workers of 4 devices each (8 replicas,
    4 of them local); compare plain numbers."""
    counts = [*REPLICAS_00_1, RANDOM.choice([n for n in range(3, 65) if n != 8])]
    cases = [(n, practice_strategy() if n == 2 else _stand_in(n), f"with {n} replicas") for n in counts]
    cases.append((8, _stand_in(8, local=4), "with 2 workers of 4 devices each (8 replicas in sync)"))
    for n, strategy, case in cases:
        got = answer(strategy)
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            return False, f"batch_and_lr returned {describe(got)}: return two numbers, (global_batch, learning_rate)"
        try:
            batch = as_int("the global batch", got[0])
        except TypeError:
            return False, (f"{case} the global batch is {got[0]!r} ({type(got[0]).__name__}), not {32 * n}: fit's "
                           "batch_size takes a whole number, an int (use // or int(), not /)")
        try:
            lr = as_float("the learning rate", got[1])
        except TypeError:
            return False, f"{case} the learning rate is {got[1]!r} ({type(got[1]).__name__}): return a number"
        if batch != 32 * n:
            why = ("32 is one replica's rows; fit's batch is the global one" if batch == 32 else
                   "worker_devices lists only this worker's devices: num_replicas_in_sync counts every replica"
                   if "workers" in case and batch == 32 * 4 else
                   "is the replica count written in? Read it from the strategy" if batch == 64 else "")
            return False, f"{case} the global batch is {batch}, not {32 * n}" + (f": {why}" if why else "")
        if not math.isclose(lr, 1e-3 * math.sqrt(n), rel_tol=1e-6):
            why = ("Adam's rate grows like the square root of the batch; times N is SGD's linear rule"
                   if math.isclose(lr, 1e-3 * n) else "the rate must grow with the global batch"
                   if math.isclose(lr, 1e-3) else "is the replica count written in? Read it from the strategy"
                   if math.isclose(lr, 1e-3 * math.sqrt(2)) else "expected 1e-3 x sqrt(replicas)")
            return False, f"{case} the learning rate is {lr:g}, not {1e-3 * math.sqrt(n):.6g}: {why}"
    return True, ("32 rows on each replica and Adam's rate times sqrt(N): 64 rows and 0.00141 on 2 replicas, "
                  "256 rows and 0.00283 on 8, also when 8 replicas span two workers")


def _solve_batch_and_lr():
    def batch_and_lr(strategy):
        replicas = strategy.num_replicas_in_sync
        return 32 * replicas, 1e-3 * replicas ** 0.5   # N x the batch: Adam x sqrt(N)

    return batch_and_lr


register("00.1", title="scale the batch and the learning rate", checker=_check_batch_and_lr,
         solution=_solve_batch_and_lr, expects="function", takes=1,
         wants="a function batch_and_lr(strategy) returning (global_batch, learning_rate)",
         hint="both come from one attribute of the strategy; the batch grows like the replica count, Adam's "
              "rate more slowly (the quick start's comment says how).",
         giveaways=["num_replicas_in_sync", "** 0.5", "sqrt(", "32 *"])

# ---- 00.2: make this model train on 2 replicas ----------------------------------------------------------

ROWS_00_2 = 256


def _check_train(answer: Any) -> "tuple[bool, str]":
    """Train with ``answer`` on two replicas; right if each step gave every replica 32 rows."""
    per_replica, call = 32, "train"
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


register("00.2", title="make this model train on 2 replicas", checker=_check_train, solution=_solve_train,
         expects="function", takes=3, wants="a function train(strategy, x, y): your changed version",
         hint="the quick start's script does both things: where does it build and compile the model, and how "
              "does it compute the batch size it gives the data?",
         giveaways=["strategy.scope", "num_replicas_in_sync", "* 2", "64"])
