"""helpers.legacy.multi_gpu_model: the Keras 2.2 semantics on Keras 3 (2 logical replica devices)."""

import numpy as np
import pytest

from helpers.legacy import multi_gpu_model, replica_devices, tower_op_devices
from helpers.subproc import run_python


@pytest.fixture(scope="module")
def keras():
    import keras

    return keras


def _cnn(keras, batchnorm=False):
    from helpers.models import small_cnn

    keras.utils.set_random_seed(0)
    return small_cnn(batchnorm=batchnorm, width=8)


def _seq2(keras):
    """Two inputs (an RNN whose initial_state comes from a nested model), two dict outputs."""
    layers = keras.layers
    seq = keras.Input((5, 3), name="seq")
    h0 = keras.Input((4,), name="h0")
    inner = keras.Sequential([keras.Input((4,)), layers.Dense(4)], name="inner")
    state = layers.SimpleRNN(4)(seq, initial_state=inner(h0))
    outputs = {"a": layers.Dense(2, name="a")(state), "b": layers.Dense(1, name="b")(state)}
    return keras.Model({"seq": seq, "h0": h0}, outputs)


def _seq2_data(n, seed=0):
    rng = np.random.default_rng(seed)
    x = {"seq": rng.random((n, 5, 3), dtype="float32"), "h0": rng.random((n, 4), dtype="float32")}
    y = {"a": rng.random((n, 2), dtype="float32"), "b": rng.random((n, 1), dtype="float32")}
    return x, y


def test_replica_devices_are_the_configured_ones(replicas):
    assert replica_devices() == replicas
    assert len(set(replica_devices())) == 2


def test_predict_matches_template_including_remainder_batches(keras, replicas):
    model = _cnn(keras)
    parallel = multi_gpu_model(model, gpus=2)
    x = np.random.default_rng(1).random((37, 8, 8, 1), dtype="float32")
    expected = model.predict(x, verbose=0)
    for batch_size in (10, 7, 1):  # 37 % 10 = 7 rows left; 7 rows on 2 towers -> 3 + 4; 1 row -> 0 + 1
        np.testing.assert_allclose(parallel.predict(x, batch_size=batch_size, verbose=0), expected,
                                   rtol=1e-5, atol=1e-6)
    assert parallel.template is model
    assert parallel.tower_devices == replicas and parallel.merge_device == "/cpu:0"


def test_slices_are_even_with_remainder_on_last_tower(keras):
    model = _cnn(keras)
    parallel = multi_gpu_model(model, gpus=2)
    x = np.arange(7 * 64, dtype="float32").reshape(7, 8, 8, 1)
    sizes = [int(parallel._slice(x, i, 2).shape[0]) for i in range(2)]
    assert sizes == [3, 4]
    three = [int(parallel._slice(np.zeros((10, 1)), i, 3).shape[0]) for i in range(3)]
    assert three == [3, 3, 4]
    np.testing.assert_array_equal(np.concatenate([parallel._slice(x, i, 2) for i in range(2)]), x)


def test_weights_are_shared_and_fit_trains_the_template(keras):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    parallel = multi_gpu_model(model)
    assert len(parallel.weights) == len(model.weights) == 2
    assert all(a is b for a, b in zip(parallel.weights, model.weights))
    rng = np.random.default_rng(0)
    x = rng.random((64, 3), dtype="float32")
    y = x @ np.array([[1.0], [-2.0], [0.5]], dtype="float32") + 0.3
    before = [w.copy() for w in model.get_weights()]
    parallel.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse")
    # 64 rows in batches of 21: the last batch has 1 row, fewer than the 2 towers.
    loss = parallel.fit(x, y, batch_size=21, epochs=8, verbose=0).history["loss"]
    assert loss[-1] < 0.5 * loss[0], loss
    assert any(not np.allclose(b, a) for b, a in zip(before, model.get_weights()))
    np.testing.assert_allclose(model.predict(x, verbose=0), parallel.predict(x, verbose=0), rtol=1e-5)


def canon(name):
    """('CPU', 1) for '/device:CPU:1', '/job:localhost/replica:0/task:0/device:CPU:1', '/cpu:1'."""
    import tensorflow as tf

    spec = tf.DeviceSpec.from_string(name)
    return spec.device_type.upper(), spec.device_index


def test_towers_run_on_different_devices(keras, replicas):
    parallel = multi_gpu_model(_cnn(keras), gpus=2)
    placed = tower_op_devices(parallel, np.zeros((4, 8, 8, 1), "float32"))
    assert {canon(d) for d in placed["replica_0"]} == {canon(replicas[0])}
    assert {canon(d) for d in placed["replica_1"]} == {canon(replicas[1])}
    assert canon(replicas[0]) != canon(replicas[1])
    assert {canon(d) for d in placed["merge"]} == {("CPU", 0)}


def test_wrapper_opts_out_of_xla(keras):
    # On a GPU, compile(jit_compile="auto") would otherwise make fit's step one XLA computation
    # on one device, and the towers would not run on their devices (Keras 2 had no XLA).
    from keras.src.trainers.trainer import model_supports_jit

    template = _cnn(keras)
    assert model_supports_jit(template)
    assert not model_supports_jit(multi_gpu_model(template, gpus=2))


def test_multi_input_multi_output_nested_rnn_initial_state(keras):
    model = _seq2(keras)
    parallel = multi_gpu_model(model, gpus=2)
    x, y = _seq2_data(13)
    got, want = parallel.predict(x, batch_size=5, verbose=0), model.predict(x, verbose=0)
    assert set(got) == {"a", "b"}
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-6)
    parallel.compile(optimizer="adam", loss={"a": "mse", "b": "mse"})
    hist = parallel.fit(x, y, batch_size=5, epochs=1, verbose=0).history
    assert {"loss", "a_loss", "b_loss"} <= set(hist)
    assert np.isfinite(hist["loss"][0])


def test_batchnorm_template_called_per_tower_trains(keras):
    """The 2017 'moving_mean/biased already exists' cannot happen: BN is simply called twice."""
    model = _cnn(keras, batchnorm=True)
    parallel = multi_gpu_model(model)
    parallel.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    rng = np.random.default_rng(2)
    x, y = rng.random((20, 8, 8, 1), dtype="float32"), rng.integers(0, 10, 20)
    bn = next(layer for layer in model.layers if "batch_normalization" in layer.name)
    before = bn.moving_mean.numpy().copy()
    hist = parallel.fit(x, y, batch_size=10, epochs=1, verbose=0).history
    assert np.isfinite(hist["loss"][0])
    assert not np.allclose(before, bn.moving_mean.numpy())


def test_saving_the_wrapper_fails_but_the_template_saves(keras, tmp_path):
    model = _cnn(keras)
    parallel = multi_gpu_model(model)
    assert type(parallel).__name__ == "MultiGpuModel"
    with pytest.raises(NotImplementedError, match=r"must override `get_config\(\)`"):
        parallel.save(tmp_path / "parallel.keras")
    model.save(tmp_path / "template.keras")
    reloaded = keras.models.load_model(tmp_path / "template.keras")
    x = np.ones((3, 8, 8, 1), "float32")
    np.testing.assert_allclose(reloaded.predict(x, verbose=0), parallel.predict(x, verbose=0), rtol=1e-5)


@pytest.mark.parametrize("gpus, match", [
    (1, r"`gpus >= 2`. Received: `gpus=1`"),
    (-1, r"`gpus >= 2`"),
    (3, r"`gpus=3`, we expect .* only has: \['/device"),
    ([0], r"`len\(gpus\) >= 2`. Received: `gpus=\[0\]`"),
    ([0, 2], r"`gpus=\[0, 2\]`, we expect the following devices to be available: \['replica device 0', "
             r"'replica device 2'\]"),
    ((0, -1), r"GPU ids, whole numbers >= 0"),
    ([0, 1.0], r"GPU ids, whole numbers >= 0"),
    ([0, "1"], r"GPU ids, whole numbers >= 0"),
    (True, r"must be None, an int >= 2 or a list of GPU ids"),
    (2.0, r"must be None, an int >= 2 or a list of GPU ids"),
    ("2", r"must be None, an int >= 2 or a list of GPU ids"),
])
def test_bad_gpus(keras, gpus, match):
    with pytest.raises(ValueError, match=match):
        multi_gpu_model(_cnn(keras), gpus=gpus)


@pytest.mark.parametrize("gpus", [None, 0, [], 2, [0, 1], (0, 1)])
def test_every_form_of_all_gpus(keras, replicas, gpus):
    """Keras 2.1.5-2.2.4: `if not gpus` uses every visible GPU; an int counts towers, a list names GPU ids."""
    assert multi_gpu_model(_cnn(keras), gpus=gpus).tower_devices == replicas


def test_a_list_of_gpu_ids_picks_and_orders_the_devices(keras, replicas):
    model = _cnn(keras)
    parallel = multi_gpu_model(model, gpus=[1, 0])
    assert parallel.tower_devices == [replicas[1], replicas[0]] and parallel.merge_device == "/cpu:0"
    placed = tower_op_devices(parallel, np.zeros((4, 8, 8, 1), "float32"))
    assert {canon(d) for d in placed["replica_0"]} == {canon(replicas[1])}   # tower 0 on GPU id 1
    x = np.random.default_rng(3).random((9, 8, 8, 1), dtype="float32")
    np.testing.assert_allclose(parallel.predict(x, batch_size=4, verbose=0), model.predict(x, verbose=0),
                               rtol=1e-5, atol=1e-6)


def test_cpu_merge_false_merges_on_the_first_tower(keras, replicas):
    parallel = multi_gpu_model(_cnn(keras), gpus=[1, 0], cpu_merge=False)
    assert parallel.merge_device == replicas[1]
    placed = tower_op_devices(parallel, np.zeros((4, 8, 8, 1), "float32"))
    assert {canon(d) for d in placed["merge"]} == {canon(replicas[1])}


def test_cpu_relocation_trains_a_clone_on_the_cpu(keras):
    """As in Keras 2, the towers share a clone made under /cpu:0 (fresh weights), so `model` itself does not
    train: save `parallel.template`."""
    model = _cnn(keras)
    parallel = multi_gpu_model(model, cpu_relocation=True)
    assert parallel.template is not model and len(parallel.weights) == len(model.weights)
    assert not any(a is b for a, b in zip(parallel.weights, model.weights))
    assert all(canon(w.value.device) == ("CPU", 0) for w in parallel.template.weights)
    before = [w.copy() for w in model.get_weights()]
    parallel.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    rng = np.random.default_rng(4)
    parallel.fit(rng.random((8, 8, 8, 1), dtype="float32"), rng.integers(0, 10, 8), batch_size=4, verbose=0)
    assert all(np.array_equal(b, a) for b, a in zip(before, model.get_weights()))


def test_bad_model(keras):
    with pytest.raises(ValueError, match="must be a keras.Model"):
        multi_gpu_model(keras.layers.Dense(2))
    with pytest.raises(ValueError, match="must be built"):
        multi_gpu_model(keras.Sequential([keras.layers.Dense(2)]))
    with pytest.raises(ValueError, match="returned by multi_gpu_model"):
        tower_op_devices(_cnn(keras), np.zeros((2, 8, 8, 1), "float32"))


@pytest.mark.slow
def test_without_ensure_devices_and_on_jax_backend():
    """A fresh process: one CPU and no ensure_devices -> 'only has'; JAX backend -> refused."""
    code = """
import keras, numpy as np
from helpers.legacy import multi_gpu_model, replica_devices
print("devices", replica_devices())
m = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
try:
    multi_gpu_model(m, gpus=2)
except ValueError as e:
    print("refused:", e)
"""
    hide_gpus = {"CUDA_VISIBLE_DEVICES": ""}
    tf_run = run_python(code, env={"KERAS_BACKEND": "tensorflow", **hide_gpus}, echo=False)
    assert tf_run.ok, tf_run.stderr[-2000:]
    assert "devices ['/device:CPU:0']" in tf_run.stdout
    assert "refused:" in tf_run.stdout and "only has" in tf_run.stdout
    jax_run = run_python(code, env={"KERAS_BACKEND": "jax", **hide_gpus}, echo=False)
    assert jax_run.ok, jax_run.stderr[-2000:]
    assert "only available with the TensorFlow backend" in jax_run.stdout


def test_slice_sizes():
    from helpers.legacy import slice_sizes

    assert slice_sizes(10, 3) == [3, 3, 4]
    assert slice_sizes(1, 2) == [0, 1]
    assert slice_sizes(64, 2) == [32, 32]
    assert slice_sizes(0, 2) == [0, 0]
    for bad in [(-1, 2), (3, 0), (2.0, 2), (3, True)]:
        with pytest.raises(ValueError):
            slice_sizes(*bad)


def test_slice_sizes_match_the_wrapper(keras):
    from helpers.legacy import slice_sizes

    parallel = multi_gpu_model(_cnn(keras))
    for rows in (2, 7, 10):
        x = np.zeros((rows, 3), "float32")
        assert [int(parallel._slice(x, i, 2).shape[0]) for i in range(2)] == slice_sizes(rows, 2)
