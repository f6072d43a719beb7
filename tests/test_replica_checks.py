"""helpers.replica_checks: batch math checked against the real MirroredStrategy, scope checks, tf.data, plots."""

import numpy as np
import pytest

from helpers import replica_checks as st
from helpers.subproc import run_python


@pytest.fixture(scope="module")
def mirrored(replicas):
    """Two replicas; ReductionToOneDevice, so that no collective keys are used.

    The course's collective-key policy (lesson 04, "A trap when you re-run cells"): a kernel has at most
    one multi-replica MirroredStrategy with the default (collective) all-reduce; any other multi-replica
    strategy in the same kernel (a checker's, a comparison's, a throw-away one) passes
    cross_device_ops=tf.distribute.ReductionToOneDevice().
    A test process is a kernel too: its one default strategy is tests/test_bench.py's benchmark.
    """
    import tensorflow as tf

    return tf.distribute.MirroredStrategy(replicas, cross_device_ops=tf.distribute.ReductionToOneDevice())


def _tiny(keras):
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, activation="softmax")])


def test_global_batch_size():
    assert st.global_batch_size(32, 8) == 256
    assert st.global_batch_size(1, 1) == 1
    for bad in [(0, 2), (32, 0), (32.0, 2), (True, 2), (32, "8")]:
        with pytest.raises(ValueError, match="must be an int >= 1"):
            st.global_batch_size(*bad)


def test_replica_split_values_and_bad_input():
    assert st.replica_split(5, 2) == [3, 2]
    assert st.replica_split(1, 2) == [1, 0]
    assert st.replica_split(4, 3) == [2, 2, 0]
    assert st.replica_split(10, 3) == [4, 4, 2]
    assert st.replica_split(0, 2) == [0, 0]
    for rows in range(0, 30):
        for n in (1, 2, 3, 4, 8):
            split = st.replica_split(rows, n)
            assert sum(split) == rows and len(split) == n and split == sorted(split, reverse=True)
    with pytest.raises(ValueError, match="rows"):
        st.replica_split(-1, 2)
    with pytest.raises(ValueError, match="rows"):
        st.replica_split(2.5, 2)
    with pytest.raises(ValueError, match="num_replicas"):
        st.replica_split(4, 0)


def test_replica_split_matches_the_real_strategy(mirrored):
    import tensorflow as tf

    for total, batch in [(13, 8), (9, 8), (7, 4), (3, 8), (16, 8)]:
        ds = tf.data.Dataset.range(total).batch(batch)
        got = st.per_replica_batch_sizes(mirrored, ds)
        expected = [st.replica_split(min(batch, total - start), 2) for start in range(0, total, batch)]
        assert got == expected, (total, batch, got)


@pytest.mark.slow
def test_replica_split_matches_three_real_replicas():
    """Three replicas need a fresh process (this one has two)."""
    code = """
import tensorflow as tf
from helpers.devices import ensure_devices
from helpers.replica_checks import per_replica_batch_sizes, replica_split
s = tf.distribute.MirroredStrategy(ensure_devices(3))
for total, batch in [(10, 10), (13, 8), (7, 4), (2, 8)]:
    got = per_replica_batch_sizes(s, tf.data.Dataset.range(total).batch(batch))
    want = [replica_split(min(batch, total - i), 3) for i in range(0, total, batch)]
    assert got == want, (total, batch, got, want)
print("three replicas agree")
"""
    result = run_python(code, env={"CUDA_VISIBLE_DEVICES": ""}, echo=False)
    assert result.ok, result.stderr[-2000:]
    assert "three replicas agree" in result.stdout


def test_scale_learning_rate():
    assert st.scale_learning_rate(0.01, 32, 256) == pytest.approx(0.08)
    assert st.scale_learning_rate(0.01, 32, 128, rule="sqrt") == pytest.approx(0.02)
    assert st.scale_learning_rate(0.01, 32, 256, rule="none") == pytest.approx(0.01)
    assert st.scale_learning_rate(0.08, 256, 32) == pytest.approx(0.01)
    with pytest.raises(ValueError, match="rule"):
        st.scale_learning_rate(0.01, 32, 64, rule="cubic")
    with pytest.raises(ValueError, match="base_lr"):
        st.scale_learning_rate(0, 32, 64)
    with pytest.raises(ValueError, match="new_batch"):
        st.scale_learning_rate(0.1, 32, 0)


def test_per_replica_batch_sizes_on_a_fit_style_dataset(mirrored):
    x, y = np.zeros((11, 3), "float32"), np.zeros(11)
    import tensorflow as tf
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(4)
    sizes = st.per_replica_batch_sizes(mirrored, ds)
    assert sizes == [[2, 2], [2, 2], [2, 1]]


def test_check_distributed_accepts_the_right_way(mirrored):
    import keras

    with mirrored.scope():
        model = _tiny(keras)
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    report = st.check_distributed(model, mirrored)
    assert report == {"strategy": "MirroredStrategy", "replicas": 2, "variable_class": "MirroredVariable"}
    model.fit(np.zeros((8, 3), "float32"), np.zeros(8), batch_size=4, verbose=0)  # fit outside works


def test_check_distributed_rejects_each_mistake(mirrored):
    import keras

    outside = _tiny(keras)
    outside.compile(optimizer="adam", loss="mse")
    with pytest.raises(AssertionError, match="create it inside"):
        st.check_distributed(outside, mirrored)
    with mirrored.scope():  # asked inside the scope, the model still reports where it was built
        with pytest.raises(AssertionError, match="create it inside"):
            st.check_distributed(outside, mirrored)
    with mirrored.scope():
        uncompiled = _tiny(keras)
    with pytest.raises(AssertionError, match="not compiled"):
        st.check_distributed(uncompiled, mirrored)
    uncompiled.compile(optimizer="adam", loss="mse")  # compiled outside the scope
    with pytest.raises(AssertionError, match="optimizer was created outside"):
        st.check_distributed(uncompiled, mirrored)


def test_model_strategy_report_outside_any_scope():
    import keras

    report = st.model_strategy_report(_tiny(keras))
    assert report == {"strategy": "_DefaultDistributionStrategy", "replicas": 1,
                      "variable_class": "ResourceVariable"}
    with pytest.raises(ValueError, match="Keras model"):
        st.model_strategy_report(object())
