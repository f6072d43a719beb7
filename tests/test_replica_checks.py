"""helpers.replica_checks: the scope checks, on a real two-replica MirroredStrategy."""

import numpy as np
import pytest

from helpers import replica_checks as st


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
