"""Tests for helpers.batchnorm: the TF 1.3 shadow-variable clash, the TF 1.4 names, replica drift."""

import numpy as np
import pytest

from helpers import batchnorm


@pytest.fixture(scope="module")
def tf():
    import tensorflow as tf

    return tf


@pytest.fixture(scope="module")
def strategy(replicas, tf):
    # The course's collective-key policy (lesson 04, "A trap when you re-run cells"): a kernel has at most
    # one multi-replica MirroredStrategy with the default (collective) all-reduce; any other multi-replica
    # strategy in the same kernel (a checker's, a comparison's, a throw-away one) passes
    # cross_device_ops=tf.distribute.ReductionToOneDevice().
    # A test process is a kernel too: its one default strategy is tests/test_bench.py's benchmark.
    return tf.distribute.MirroredStrategy(replicas, cross_device_ops=tf.distribute.ReductionToOneDevice())


def test_tf13_second_call_clashes(tf):
    g = tf.Graph()
    with g.as_default():
        moving_mean, batch_mean = batchnorm.make_moving_mean()
        assert moving_mean.op.name == "batch_normalization_1/moving_mean"
        batchnorm.zero_debias_tf13(moving_mean, batch_mean, 0.99)
        with pytest.raises(ValueError, match=r"batch_normalization_1/moving_mean/biased already exists, "
                                             r"disallowed.*Originally defined at"):
            with tf.name_scope("replica_0"):
                batchnorm.zero_debias_tf13(moving_mean, batch_mean, 0.99)
    assert batchnorm.shadow_variables(g) == ["batch_normalization_1/moving_mean/biased",
                                             "batch_normalization_1/moving_mean/local_step"]
    assert tf.executing_eagerly()  # the graph block did not switch eager off


def test_tf14_names_are_unique(tf):
    g = tf.Graph()
    with g.as_default():
        moving_mean, batch_mean = batchnorm.make_moving_mean("bn", size=2)
        for i in range(3):
            with tf.name_scope(f"replica_{i}"):
                batchnorm.assign_moving_average_tf14(moving_mean, batch_mean, 0.99)
    names = batchnorm.shadow_variables(g)
    assert [n for n in names if "biased" in n] == ["bn/moving_mean/biased", "bn/moving_mean/biased_1",
                                                   "bn/moving_mean/biased_2"]
    assert len(names) == 6


def test_graph_helpers_refuse_eager_mode_and_bad_input(tf):
    with pytest.raises(RuntimeError, match="graph mode"):
        batchnorm.make_moving_mean()
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="layer_name"):
            batchnorm.make_moving_mean("a/b")
        with pytest.raises(ValueError, match="size"):
            batchnorm.make_moving_mean(size=0)
        mm, bm = batchnorm.make_moving_mean()
        with pytest.raises(ValueError, match="decay"):
            batchnorm.zero_debias_tf13(mm, bm, 1.5)


@pytest.mark.parametrize("sync, means", [(False, [0.0, 10.0]), (True, [5.0, 5.0])])
def test_replica_statistics(strategy, sync, means):
    rbn = batchnorm.ReplicaBN(strategy, synchronized=sync, momentum=0.0)
    rbn.step([np.zeros((4, 1)), np.full((4, 1), 10.0)])
    stats = rbn.per_replica()
    np.testing.assert_allclose(stats["moving_mean"][:, 0], means)
    if sync:
        np.testing.assert_allclose(stats["moving_variance"][:, 0], [25.0, 25.0])
    rbn.reset()
    np.testing.assert_allclose(rbn.per_replica()["moving_mean"], 0.0)


def test_replica_bn_bad_input(strategy):
    with pytest.raises(ValueError, match="momentum"):
        batchnorm.ReplicaBN(strategy, synchronized=False, momentum=1.0)
    rbn = batchnorm.ReplicaBN(strategy, synchronized=False)
    with pytest.raises(ValueError, match="one batch per replica"):
        rbn.step([np.zeros((2, 1))])
    with pytest.raises(ValueError, match="at least one row"):
        rbn.step([np.zeros((0, 1)), np.zeros((2, 1))])


def test_drift_experiment_and_plot(strategy):
    rows = batchnorm.drift_experiment(strategy, batch_sizes=(2, 64), steps=25, warmup=5)
    by = {(r["synchronized"], r["batch_size"]): r for r in rows}
    assert by[(False, 2)]["mean_gap"] > by[(False, 64)]["mean_gap"] > 0
    assert by[(True, 2)]["mean_gap"] == 0 and by[(True, 64)]["mean_gap"] == 0
    assert by[(False, 2)]["saved_var"] < by[(True, 2)]["saved_var"] < 1.0  # small batches: variance biased low
    fig = batchnorm.plot_drift(rows)
    assert len(fig.axes) == 2
    with pytest.raises(ValueError, match="batch_sizes"):
        batchnorm.drift_experiment(strategy, batch_sizes=(1,))
    with pytest.raises(ValueError, match="warmup"):
        batchnorm.drift_experiment(strategy, steps=5, warmup=5)
    with pytest.raises(ValueError, match="empty"):
        batchnorm.plot_drift([])


def test_replica_values_and_gaps(strategy, tf):
    rbn = batchnorm.ReplicaBN(strategy, synchronized=False, momentum=0.0)
    rbn.step([np.zeros((4, 1)), np.full((4, 1), 10.0)])
    np.testing.assert_allclose(batchnorm.replica_values(rbn.layer.moving_mean, strategy)[:, 0], [0.0, 10.0])
    import keras

    outer = keras.Sequential([rbn.model])  # nested models are searched too
    assert batchnorm.replica_gaps(outer, strategy) == {rbn.layer.name: 10.0}
    with pytest.raises(ValueError, match="keras.Model"):
        batchnorm.replica_gaps(rbn.layer, strategy)
