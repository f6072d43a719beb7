"""Exercises of 00_start_here."""

from __future__ import annotations

from .. import config
from ..devices import ensure_devices
from . import register


def _check_mode(answer):
    if answer.strip().lower() == "full":
        return True, "MULTIGPU_MODE=full makes every lesson train for real (set it before starting Jupyter)."
    if answer.strip().lower() == "quick":
        return False, "'quick' is the default that keeps each notebook under a minute; the other value trains for real."
    return False, f"{answer!r} is not a mode: helpers.config.mode() would raise ValueError for it."


def _solve_mode():
    return [m for m in config.MODES if m != "quick"][0]


def _check_replicas(answer):
    answer = int(answer)
    if answer == 2:
        return True, "2 replicas: MirroredStrategy over the two devices that ensure_devices(2) returned."
    if answer == 1:
        return False, "1 would be a strategy over a single device - did you pass devices=REPLICAS?"
    return False, f"{answer} replicas: the strategy should use exactly the devices in REPLICAS."


def _solve_replicas():
    import tensorflow as tf

    # In the notebook: strategy.num_replicas_in_sync, the strategy made above (one per kernel, lesson 04).
    # A second strategy in the same kernel passes ReductionToOneDevice (no collective ops, no clash):
    second = tf.distribute.MirroredStrategy(devices=ensure_devices(2),
                                            cross_device_ops=tf.distribute.ReductionToOneDevice())
    return second.num_replicas_in_sync


register("00.1", title="the switch that trains for real", checker=_check_mode, solution=_solve_mode,
         expects="str", wants="a string: one value of MULTIGPU_MODE",
         hint="the section 'How to launch' names both modes; one of them is the default.")
register("00.2", title="count the replicas", checker=_check_replicas, solution=_solve_replicas,
         expects="int", wants="a whole number: how many replicas the strategy keeps in sync",
         hint="use the strategy that the all-reduce example above built over REPLICAS; a strategy "
              "has an attribute that counts the replicas it keeps in sync.")
