"""Why nblint's collective rule exists: two default MirroredStrategy objects in one process clash, for real.

The policy (lesson 04, "A trap when you re-run cells"; the static rule is tools/nblint.py's ``collective``): a
kernel has at most one multi-replica MirroredStrategy with the default (collective) all-reduce; any other passes
cross_device_ops=tf.distribute.ReductionToOneDevice(). A one-replica strategy has nothing to all-reduce.
"""

import pytest

# -- the clash the policy prevents, for real (in a fresh process: it breaks every collective op) ---------

CLASH = """
import numpy as np
import tensorflow as tf
from helpers.devices import ensure_devices
from helpers.models import small_mlp

replicas = ensure_devices(2)

def train(strategy, hidden):                       # a model of another shape for every hidden size
    with strategy.scope():
        model = small_mlp(4, 2, hidden=hidden)
        model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    model.fit(np.zeros((8, 4), "float32"), np.zeros(8, "int64"), batch_size=4, verbose=0)
    print("trained hidden", hidden, "on", strategy.num_replicas_in_sync, "replica(s)", flush=True)

default = tf.distribute.MirroredStrategy(replicas)              # the process's one default strategy
train(default, 3)
train(tf.distribute.MirroredStrategy(replicas[:1]), 5)          # one replica: nothing to all-reduce
train(tf.distribute.MirroredStrategy(replicas, cross_device_ops=tf.distribute.ReductionToOneDevice()), 7)
train(default, 9)                                               # reused: new keys, no clash
print("policy followed: no clash", flush=True)
train(tf.distribute.MirroredStrategy(replicas), 11)             # a second default strategy: the clash
print("no clash after all", flush=True)
"""


@pytest.mark.slow
def test_two_default_strategies_clash_and_the_policy_does_not():
    from helpers.subproc import run_python

    result = run_python(CLASH, env={"CUDA_VISIBLE_DEVICES": ""}, timeout=300, echo=False)
    out = result.stdout
    assert "policy followed: no clash" in out, (out, result.stderr[-3000:])
    assert "trained hidden 5 on 1 replica(s)" in out and "trained hidden 9 on 2 replica(s)" in out
    assert not result.ok and "no clash after all" not in out, out
    assert "Shape mismatch in the collective instance" in result.stderr, result.stderr[-3000:]
