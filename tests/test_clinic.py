"""helpers.clinic: the measuring plumbing of lesson 09 (weights per step, flat vectors, bytes, worker logs)."""

import numpy as np
import pytest

from helpers import clinic


def test_flat_joins_arrays_tensors_and_variables():
    import tensorflow as tf

    out = clinic.flat([np.ones((2, 2)), tf.constant([3.0]), tf.Variable([4.0, 5.0])])
    assert out.dtype == np.float64 and out.tolist() == [1, 1, 1, 1, 3, 4, 5]
    assert clinic.flat(x for x in [np.zeros(1)]).tolist() == [0.0]          # any iterable
    with pytest.raises(ValueError, match="entry 1 is None"):
        clinic.flat([np.ones(1), None])
    with pytest.raises(ValueError, match="empty"):
        clinic.flat([])


def test_weight_steps_records_one_update_per_step():
    import keras

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(loss="mse", optimizer=keras.optimizers.SGD(0.1))
    before = clinic.flat(model.get_weights())
    steps = clinic.weight_steps()
    with pytest.raises(ValueError, match="no training step"):
        _ = steps.updates
    x, y = np.ones((6, 2), "float32"), np.zeros((6, 1), "float32")
    model.fit(x, y, batch_size=2, epochs=1, verbose=0, shuffle=False, callbacks=[steps])
    assert steps.updates.shape == (3, 3)                       # 3 steps, 2 kernel weights + 1 bias
    np.testing.assert_allclose(before + steps.updates.sum(axis=0), clinic.flat(model.get_weights()), rtol=1e-6)
    assert isinstance(steps, keras.callbacks.Callback)


def test_activation_bytes_counts_every_layer_output():
    import keras

    model = keras.Sequential([keras.Input((4, 4, 1)), keras.layers.Conv2D(2, 3, padding="same"),
                              keras.layers.Flatten(), keras.layers.Dense(3)])
    per_row = 4 * 4 * 2 + 32 + 3
    assert clinic.activation_bytes(model, 1) == per_row * 4
    assert clinic.activation_bytes(model, 64) == 2 * clinic.activation_bytes(model, 32)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="batch"):
            clinic.activation_bytes(model, bad)
    with pytest.raises(ValueError, match="no layers"):
        clinic.activation_bytes(object(), 1)


LOG = """I0000 00:00:1.0 port.cc:153] noise
[worker 0] joined
W0000 00:00:2.0 x.cc:1] a C++ line
[worker 0] step 0: all-reduce ...
[worker 1] something
[worker 0] step 1: all-reduce ...
  [worker 0] indented: not a tagged line
"""


def test_tagged_lines():
    assert clinic.tagged_lines(LOG) == ["[worker 0] joined", "[worker 0] step 0: all-reduce ...",
                                        "[worker 1] something", "[worker 0] step 1: all-reduce ..."]


def test_between():
    assert clinic.between(LOG, "joined", "step 0") == "W0000 00:00:2.0 x.cc:1] a C++ line"
    assert clinic.between(LOG, "step 1").strip() == "[worker 0] indented: not a tagged line"
    assert clinic.between(LOG, "step 0", "no such line").count("\n") == 2     # to the end
    with pytest.raises(ValueError, match="no line contains"):
        clinic.between(LOG, "missing")
    with pytest.raises(ValueError):
        clinic.between(LOG, "")


def test_steps_per_worker():
    def batches(task, extra=0):
        return range(3 - task + extra)

    assert clinic.steps_per_worker(batches, 2) == [3, 2]
    assert clinic.steps_per_worker(batches, 3, extra=1) == [4, 3, 2]
    with pytest.raises(ValueError):
        clinic.steps_per_worker(batches, 0)
    with pytest.raises(ValueError):
        clinic.steps_per_worker("not a function", 2)


def test_ratio():
    assert clinic.ratio([3, 4], [0, 5]) == 1.0
    assert clinic.ratio([6, 8], [3, 4]) == 2.0
    with pytest.raises(ValueError, match="zero"):
        clinic.ratio([1, 1], [0, 0])
