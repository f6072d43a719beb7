"""Exercises of 03_from_multi_gpu_model_to_mirrored_strategy."""

from __future__ import annotations

import functools

import keras
from keras import layers

from ..checks import is_int
from ..legacy import slice_sizes
from ..replica_checks import replica_split
from . import register
from .lesson00 import check_train_on_replicas  # 00.2's checker: the same task, 16 rows per replica here

# ---- 03.1: two ways to split an uneven batch -------------------------------------------------------


def _check_split(answer):
    if set(answer) != {"multi_gpu_model", "mirrored"}:
        return False, ("expected exactly the keys 'multi_gpu_model' and 'mirrored', each a list of 3 ints; "
                       f"got {sorted(map(repr, answer))}")
    legacy, mirrored = answer["multi_gpu_model"], answer["mirrored"]
    if not all(isinstance(v, (list, tuple)) and len(v) == 3 and all(map(is_int, v)) for v in (legacy, mirrored)):
        return False, "each value must be a list of 3 whole numbers: rows for device 0, 1 and 2"
    legacy, mirrored = list(legacy), list(mirrored)
    if sum(legacy) != 10 or sum(mirrored) != 10:
        return False, f"each split must hand out all 10 rows; yours sum to {sum(legacy)} and {sum(mirrored)}"
    want_legacy, want_mirrored = slice_sizes(10, 3), replica_split(10, 3)
    if legacy == want_mirrored and mirrored == want_legacy:
        return False, "the two answers are swapped: which one gives the remainder to the last device?"
    if legacy != want_legacy:
        return False, (f"multi_gpu_model {legacy}: it gave every tower 10 // 3 = 3 rows and the last "
                       "tower also took the remainder")
    if mirrored != want_mirrored:
        return False, (f"mirrored {mirrored}: MirroredStrategy gives ceil(10 / 3) = 4 rows to each replica "
                       "in turn until the rows run out")
    return True, (f"multi_gpu_model: {legacy} (floor, remainder to the last tower); MirroredStrategy: "
                  f"{mirrored} (ceil, the last replica gets what is left). Both train on all 10 rows")


def _solve_split():
    return {"multi_gpu_model": slice_sizes(10, 3), "mirrored": replica_split(10, 3)}


register("03.1", title="two ways to split an uneven batch", checker=_check_split, solution=_solve_split,
         expects="dict", wants='a dict {"multi_gpu_model": [3 ints], "mirrored": [3 ints]}',
         hint="one of the two rounds the slice size down and leaves the remainder to one device, the "
              "other rounds it up; sections 2 and 7 show which is which.")


# ---- 03.2: find and fix - training on two replicas --------------------------------------------------

def _solve_train_on_replicas():
    def train_on_replicas(strategy, x, y):
        with strategy.scope():                       # the weights are variables too: create them here
            model = keras.Sequential([keras.Input((64,)), layers.Dense(32, activation="relu"),
                                      layers.Dense(10, activation="softmax")])
            model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        batch = 16 * strategy.num_replicas_in_sync   # fit's batch_size is the global batch
        model.fit(x, y, batch_size=batch, epochs=1, verbose=0)
        return model

    return train_on_replicas


register("03.2", title="find and fix: training on two replicas",
         checker=functools.partial(check_train_on_replicas, per_replica=16, call="train_on_replicas"),
         solution=_solve_train_on_replicas, expects="function", takes=3,
         wants="a function train_on_replicas(strategy, x, y): your fixed version",
         hint="two bugs: which variables are created before the `with`? And does fit's batch_size count "
              "the rows of one replica or of all?")
