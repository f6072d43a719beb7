"""helpers.placement: a model split over the session's two devices, and the evidence of where it lives/runs."""

import numpy as np
import pytest

from helpers import placement

keras = pytest.importorskip("keras")
tf = pytest.importorskip("tensorflow")
layers = keras.layers


def _parts():
    return [keras.Sequential([layers.Dense(16, activation="relu"), layers.Dense(8, activation="relu")]),
            keras.Sequential([layers.Dense(3, activation="softmax")])]


@pytest.mark.parametrize("raw, short", [("/job:localhost/replica:0/task:0/device:CPU:1", "CPU:1"),
                                        ("/device:GPU:0", "GPU:0"), ("/cpu:0", "CPU:0"), ("GPU:3", "GPU:3"),
                                        ("", "")])
def test_short_device(raw, short):
    assert placement.short_device(raw) == short


@pytest.mark.parametrize("bad", ["/device:XPU:0", "banana", None])
def test_short_device_bad(bad):
    with pytest.raises(ValueError):
        placement.short_device(bad)


def test_split_model_places_and_runs_on_two_devices(replicas):
    model = placement.SplitModel(_parts(), replicas)
    out = model(np.ones((4, 5), "float32"))
    assert placement.ran_on(out) == placement.short_device(replicas[1])
    devices = {r["variable"].split("/")[1]: r["device"] for r in placement.variable_devices(model)}
    assert len(set(devices.values())) == 2
    ops = placement.graph_op_devices(model, (5,), op_types=("MatMul",))
    assert [o["device"] for o in ops] == [placement.short_device(d) for d in (replicas[0], replicas[0], replicas[1])]
    mp = placement.memory_by_device(model, (5,), batch_size=10)
    assert [r["parameters"] for r in mp] == [5 * 16 + 16 + 16 * 8 + 8, 8 * 3 + 3]
    assert sum(r["parameters"] for r in mp) == model.count_params()
    act = "activations MiB (batch 10)"
    assert mp[0][act] == pytest.approx(10 * (16 + 8) * 4 / 2**20)
    dp = placement.data_parallel_memory(model, (5,), 10, replicas)
    assert all(r["parameters"] == model.count_params() for r in dp)
    assert dp[0][act] == pytest.approx(5 * (16 + 8 + 3) * 4 / 2**20)


def test_split_model_trains(replicas):
    model = placement.SplitModel(_parts(), replicas)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    hist = model.fit(np.random.rand(32, 5).astype("float32"), np.zeros(32, "int32"), epochs=2, verbose=0)
    assert hist.history["loss"][-1] < hist.history["loss"][0]


def test_split_model_opts_out_of_xla(replicas):
    # compile(jit_compile="auto") asks this on a GPU machine; one XLA computation runs on one
    # device and cannot read the other part's weights, so SplitModel must say no.
    from keras.src.trainers.trainer import model_supports_jit

    assert model_supports_jit(keras.Sequential([keras.Input((5,)), layers.Dense(2)]))
    assert not model_supports_jit(placement.SplitModel(_parts(), replicas))


def test_split_model_rejects_built_parts_and_mismatch(replicas):
    built = keras.Sequential([keras.Input((5,)), layers.Dense(2)])
    with pytest.raises(ValueError, match="already built"):
        placement.SplitModel([built], replicas[:1])
    with pytest.raises(ValueError, match="one device per part"):
        placement.SplitModel(_parts(), replicas[:1])
    with pytest.raises(ValueError, match="Keras layer"):
        placement.SplitModel(["dense", layers.Dense(2)], replicas)
    with pytest.raises(ValueError):
        placement.SplitModel(_parts(), ["/device:CPU:0", "nonsense"])


def test_functional_model_keeps_weight_placement_but_not_op_placement(replicas):
    with tf.device(replicas[0]):
        inp = keras.Input((5,))
        h = layers.Dense(4)(inp)
    with tf.device(replicas[1]):
        out = layers.Dense(2)(h)
    model = keras.Model(inp, out)
    assert len({r["device"] for r in placement.variable_devices(model)}) == 2
    assert {o["device"] for o in placement.graph_op_devices(model, (5,), ("MatMul",))} == {"(not pinned)"}


def test_memory_helpers_validate(replicas):
    model = placement.SplitModel(_parts(), replicas)
    with pytest.raises(ValueError, match="built"):
        placement.memory_by_device(model, (5,), 8)
    model.build((None, 5))
    with pytest.raises(ValueError, match="batch_size"):
        placement.memory_by_device(model, (5,), 0)
    with pytest.raises(ValueError, match="device"):
        placement.data_parallel_memory(model, (5,), 8, [])
    with pytest.raises(ValueError):
        placement.variable_devices("model")


def test_missing_device(replicas):
    missing = placement.missing_device("CPU")
    assert missing == f"/device:CPU:{len(tf.config.list_logical_devices('CPU'))}"
    with tf.device(missing):  # soft placement: silently elsewhere
        x = tf.ones(2) + 1
    assert placement.ran_on(x) != placement.short_device(missing)
    with pytest.raises(ValueError):
        placement.missing_device("TPU")
    with pytest.raises(ValueError, match="eager tensor"):
        placement.ran_on(object())


def _slot_devices_by_weight(model, optimizer):
    out = {}
    for weight in model.trainable_variables:
        mine = [v for v in optimizer.variables if weight.path.replace("/", "_") in v.path]
        out[placement.short_device(weight.value.device)] = out.get(placement.short_device(weight.value.device), set())
        out[placement.short_device(weight.value.device)] |= {placement.short_device(v.value.device) for v in mine}
    return out


def test_optimizer_slots_follow_weights_only_when_built_eagerly(replicas):
    """What lesson 01 shows: fit() builds the optimizer while tracing (slots on one device); build it first."""
    x, y = np.random.rand(16, 5).astype("float32"), np.zeros(16, "int32")
    plain = placement.SplitModel(_parts(), replicas)
    plain.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    plain.fit(x, y, epochs=1, verbose=0)
    slots = [v for v in plain.optimizer.variables if len(v.shape)]
    assert len({placement.short_device(v.value.device) for v in slots}) == 1

    model = placement.SplitModel(_parts(), replicas)
    model.build((None, 5))
    opt = keras.optimizers.Adam()
    opt.build(model.trainable_variables)          # eagerly: each slot next to its weight
    model.compile(optimizer=opt, loss="sparse_categorical_crossentropy")
    model.fit(x, y, epochs=1, verbose=0)
    assert model.optimizer is opt
    by_weight = _slot_devices_by_weight(model, opt)
    assert len(by_weight) == 2 and all(slot_devs == {dev} for dev, slot_devs in by_weight.items())


def test_require_devices(replicas):
    assert placement.require_devices(replicas) == list(replicas)
    missing = placement.missing_device("GPU")
    with pytest.raises(ValueError, match="does not exist here"):
        placement.require_devices([replicas[0], missing])
    with pytest.raises(ValueError, match="twice"):
        placement.require_devices([replicas[0], replicas[0]])
    with pytest.raises(ValueError, match="non-empty"):
        placement.require_devices([])
    # the silent behaviour require_devices guards against
    strategy = tf.distribute.MirroredStrategy(devices=[missing])
    assert strategy.num_replicas_in_sync == 1
    assert placement.ran_on(strategy.run(lambda: tf.ones(2) * 2)) != placement.short_device(missing)
