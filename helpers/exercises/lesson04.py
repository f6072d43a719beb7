"""Exercises of 04_batchnorm_variable_error."""

from __future__ import annotations

import numpy as np

from . import register

#: Exercise 04.2: the batch each replica sees (replica 0: ones, replica 1: threes).
EXERCISE_2_DATA = (np.ones((4, 1), "float32"), np.full((4, 1), 3.0, "float32"))


def _tf14_shadow_count(calls: int) -> int:
    """How many ``biased*`` variables TF >= 1.4 creates for one moving_mean called ``calls`` times."""
    import tensorflow as tf

    from helpers import batchnorm

    graph = tf.Graph()
    with graph.as_default():
        moving_mean, batch_mean = batchnorm.make_moving_mean()
        for i in range(calls):
            with tf.name_scope(f"replica_{i}"):
                batchnorm.assign_moving_average_tf14(moving_mean, batch_mean, 0.99)
    return sum("/biased" in name for name in batchnorm.shadow_variables(graph))


def _check_count(answer):
    truth = _tf14_shadow_count(1 + 4)  # measured, not remembered: template build + 4 towers
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
    import tensorflow as tf

    from helpers import batchnorm

    graph = tf.Graph()
    with graph.as_default():
        moving_mean, batch_mean = batchnorm.make_moving_mean()
        batchnorm.assign_moving_average_tf14(moving_mean, batch_mean, 0.99)  # building the template
        for i in range(4):                                                   # one call per tower
            with tf.name_scope(f"replica_{i}"):
                batchnorm.assign_moving_average_tf14(moving_mean, batch_mean, 0.99)
    return len([n for n in batchnorm.shadow_variables(graph) if "/biased" in n])


def _check_saved(answer):
    if set(answer) != {"unsynced", "synced"}:
        return False, f'expected exactly the keys "unsynced" and "synced", got {sorted(map(repr, answer))}'
    try:
        got = {k: float(np.ravel(v)[0]) for k, v in answer.items()}
    except (TypeError, ValueError, IndexError):
        return False, f"the values must be numbers (or 1-element arrays), got {answer!r}"
    replica0 = float(EXERCISE_2_DATA[0].mean())
    global_mean = float(np.concatenate(EXERCISE_2_DATA).mean())
    problems = []
    if not np.isclose(got["unsynced"], replica0):
        hint = " (that is the global mean: did you pass synchronized=False?)" if np.isclose(
            got["unsynced"], global_mean) else ""
        problems.append(f"unsynced should be replica 0's own batch mean {replica0}, got {got['unsynced']}{hint}")
    if not np.isclose(got["synced"], global_mean):
        problems.append(f"synced should be the mean of both replicas' batches {global_mean}, got {got['synced']}")
    if problems:
        return False, "; ".join(problems)
    return True, (f"save() keeps replica 0's copy: {replica0} without sync (replica 1's "
                  f"{float(EXERCISE_2_DATA[1].mean())} is lost); with synchronized=True every replica "
                  f"holds the global-batch mean {global_mean}.")


def _solve_saved():
    import tempfile

    import tensorflow as tf

    from helpers import batchnorm
    from helpers.devices import ensure_devices

    # A second strategy in one kernel: ReductionToOneDevice keeps it off the collective-op keys of
    # the first one (same keys + other shapes = "Shape mismatch in the collective instance").
    strategy = tf.distribute.MirroredStrategy(ensure_devices(2),
                                              cross_device_ops=tf.distribute.ReductionToOneDevice())
    answer = {}
    for key, sync in (("unsynced", False), ("synced", True)):
        rbn = batchnorm.ReplicaBN(strategy, synchronized=sync, momentum=0.0)
        rbn.step(list(EXERCISE_2_DATA))
        with tempfile.TemporaryDirectory() as folder:
            answer[key] = float(rbn.saved(folder)["moving_mean"][0])
    return answer


register("04.1", title="shadow variables with TF >= 1.4", checker=_check_count, solution=_solve_count,
         expects="int", wants="a whole number of variables",
         hint="each call of the BN layer's moving-average update adds one 'biased' variable: how "
              "many times is the layer called, from its first build on?")
register("04.2", title="what save() keeps", checker=_check_saved, solution=_solve_saved,
         expects="dict", wants='a dict {"unsynced": value, "synced": value}',
         hint="saving keeps one replica's copy of moving_mean: which replica, and which batches has "
              "that copy seen with and without synchronized statistics?")
