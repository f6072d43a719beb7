"""Each exercise (00-08, except 03: tests/test_exercises_lesson03.py) explains typical wrong answers.

The answers here have the right kind but wrong content; every case asserts the sentence the learner
reads (through helpers.exercises.verdict, i.e. exactly what check() prints).
"""

import os
import tempfile

import numpy as np
import pytest

from helpers import exercises


def _wrong(key, answer, words):
    ok, text = exercises.verdict(key, answer)
    assert not ok, text
    assert text.startswith(f"Exercise {key} - not yet: "), text
    assert words in text, text
    assert "could not check" not in text, text
    hint = exercises.get(key).hint
    assert text.endswith(f"\n  Hint: {hint}"), text   # a wrong answer of the right kind gets the hint


# ---- lessons 00-02: plain values --------------------------------------------------------------------

@pytest.mark.parametrize("key, answer, words", [
    ("00.1", 1, "a single device - did you pass devices=REPLICAS?"),
    ("00.1", np.int64(3), "3 replicas: the strategy should use exactly the devices in REPLICAS"),
    ("01.1", [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]], "1 slice(s): REPLICAS has 2 devices"),
    ("01.1", [[0, 1, 2, 3, 4], [5, 6, 7, 8]], "whole global batch 0..9 once each"),
    ("01.1", [[0, 1, 2, 3], [4, 5, 6, 7, 8, 9]], "splits the batch evenly"),
    ("01.1", [[5, 6, 7, 8, 9], [0, 1, 2, 3, 4]], "replica 0 the first half"),
    ("01.1", ["0,1,2,3,4", "5,6,7,8,9"], "each item must be one replica's numbers"),
    ("01.3", {"a": "model", "b": "model", "c": "pipeline"}, "a: not 'model'"),
    ("01.3", {"a": "data", "b": "data parallel", "c": "pipeline"}, "b: not 'data'"),
    ("01.3", {"a": "data", "b": "model", "c": "speed"}, "'speed' is not one of"),
    ("01.3", {"a": "data", "b": "model"}, "one answer for each of the keys a, b, c"),
    ("02.1", "0,1", "the two freest GPUs are not these"),
    ("02.1", "3", "selects 1 GPU(s); pick exactly two"),
    ("02.1", "3,,5", "empty"),
    ("02.2", {5: "/GPU:5", 3: "/GPU:3", 0: "/GPU:0"}, "does not keep nvidia-smi's numbers"),
    ("02.2", {5: "/GPU:2", 3: "/GPU:1", 0: "/GPU:0"}, "the order of the list decides"),
    ("02.2", {1: "/GPU:0", 2: "/GPU:1", 3: "/GPU:2"}, "the three listed GPUs 5, 3 and 0"),
    ("02.3", {"CUDA_VISIBLE_DEVICES": "1"}, "index 1 alone is ambiguous"),
    ("02.3", {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "BY_NAME"}, "not a value CUDA knows"),
    ("02.3", {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, "sees both GPUs"),
    ("02.3", {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "0"}, "not 0"),
    ("02.3", {"CUDA_VISIBLE_DEVICES": 1}, "every key and value must be a str"),
])
def test_values_00_to_02(key, answer, words, replicas):
    _wrong(key, answer, words)


def test_01_1_per_replica_value_is_named(replicas):
    import tensorflow as tf

    # The course's collective-key policy (lesson 04, "A trap when you re-run cells"): a kernel has at most
    # one multi-replica MirroredStrategy with the default (collective) all-reduce; any other multi-replica
    # strategy in the same kernel (a checker's, a comparison's, a throw-away one) passes
    # cross_device_ops=tf.distribute.ReductionToOneDevice().
    # A test process is a kernel too: its one default strategy is tests/test_bench.py's benchmark.
    strategy = tf.distribute.MirroredStrategy(replicas, cross_device_ops=tf.distribute.ReductionToOneDevice())
    per_replica = strategy.run(lambda: tf.constant([1.0]))
    ok, text = exercises.verdict("01.1", per_replica)
    assert not ok and "you passed a PerReplica value" in text and "experimental_local_results" in text, text
    ok, _ = exercises.verdict("01.1", tuple(tf.constant(v) for v in ([0, 1, 2, 3, 4], [5, 6, 7, 8, 9])))
    assert ok, "a tuple of tensors (what experimental_local_results gives) is accepted"


def _two_dense(first_units, place):
    import keras
    import tensorflow as tf

    from helpers.devices import ensure_devices

    a, b = ensure_devices(2)
    inputs = keras.Input((8,))
    with tf.device(a):
        layer1 = keras.layers.Dense(first_units, activation="relu")
    with tf.device(b):
        layer2 = keras.layers.Dense(3, activation="softmax")
    if place:  # call each layer inside its own block: built there
        with tf.device(a):
            hidden = layer1(inputs)
        with tf.device(b):
            outputs = layer2(hidden)
    else:      # the trap: created under tf.device, built outside it
        outputs = layer2(layer1(inputs))
    return keras.Model(inputs, outputs)


def test_01_2_the_lazy_build_trap(replicas):
    _wrong("01.2", _two_dense(16, place=False), "both kernels are on")
    _wrong("01.2", _two_dense(8, place=True), "expected Dense(16) then Dense(3), got Dense(8)")


# ---- lesson 04 ----------------------------------------------------------------------------------------

def test_04_wrong_counts_and_means():
    truth = exercises.get("04.1").solution()
    _wrong("04.1", truth - 1, "counts the towers only")
    _wrong("04.1", 2 * truth, "count only the 'biased*' variables")
    _wrong("04.1", truth + 7, f"{truth + 7} is not it")
    _wrong("04.2", {"unsynced": 2.0, "synced": 2.0}, "did you pass synchronized=False?")
    _wrong("04.2", {"unsynced": 1.0, "synced": 1.0}, "synced should be the mean of both replicas' batches")
    _wrong("04.2", {"unsynced": "one", "synced": 2.0}, "the values must be numbers")
    _wrong("04.2", {"unsynced": 1.0}, 'expected exactly the keys "unsynced" and "synced"')


# ---- lesson 05 ----------------------------------------------------------------------------------------

def _lambda_capturing_a_module():
    import keras
    import numpy as local_np  # a module captured by the closure below: multi_gpu_model's bug

    return keras.layers.Lambda(lambda t: t[: local_np.shape(t)[0] // 2])


def test_05_1_wrong_lambdas():
    import keras

    _wrong("05.1", _lambda_capturing_a_module(), "captures the module(s) ['numpy'] in its closure")
    _wrong("05.1", keras.layers.Lambda(lambda t: t), "it should return the first 4 rows")


@pytest.mark.parametrize("kwargs, words", [
    ({"monitor": "val_acc", "save_best_only": True}, "'val_acc' is never in the logs"),
    ({"monitor": "val_loss", "save_best_only": True}, "not 'val_loss'"),
    ({"monitor": "val_accuracy"}, "save_best_only=True"),
    ({"monitor": "val_accuracy", "save_best_only": True, "save_freq": 5}, "saves every 5 batches"),
    ({"monitor": "val_accuracy", "save_best_only": True, "mode": "min"}, "the *worst* accuracy"),
])
def test_05_2_wrong_checkpoints(kwargs, words):
    import keras

    path = os.path.join(tempfile.gettempdir(), "best.keras")
    _wrong("05.2", keras.callbacks.ModelCheckpoint(path, **kwargs), words)


def test_05_2_weights_only():
    import keras

    path = os.path.join(tempfile.gettempdir(), "best.weights.h5")
    _wrong("05.2", keras.callbacks.ModelCheckpoint(path, monitor="val_accuracy", save_best_only=True,
                                                   save_weights_only=True), "save the whole model")


# ---- lesson 06 ----------------------------------------------------------------------------------------

def test_06_wrong_functions():
    import tensorflow as tf

    _wrong("06.1", lambda sps, base, n: sps / base, "that is the speed-up")
    _wrong("06.1", lambda sps, base, n: n / (sps / base), "expected")
    def no_return(sps, base, n):
        sps / base / n

    _wrong("06.1", no_return, "returned None; it should return a number")
    _wrong("06.2", lambda n: 0.01, "returned the one-GPU rate 0.01")
    _wrong("06.2", lambda n: 0.01 * n * 32, "(linear scaling rule)")
    _wrong("06.3", lambda ds: ds.prefetch(tf.data.AUTOTUNE), "the slow map ran 9 times")
    _wrong("06.3", lambda ds: ds.cache(), "end with the step that prepares batch k+1")
    _wrong("06.3", lambda ds: ds.shuffle(10, seed=1).cache().prefetch(1), "the data changed")
    _wrong("06.3", lambda ds: ds.cache() and None, "it returned None")


# ---- lesson 08 ----------------------------------------------------------------------------------------

def test_08_wrong_layouts_and_shards():
    _wrong("08.1", {"mlp/d1/kernel": (None, "model"), "mlp/d2/kernel": ("model", None)},
           "Keys are full-match regexes")
    _wrong("08.1", {".*d1/kernel": ("model", None), ".*d2/kernel": ("model", None)},
           "want (None, 'model') (split its columns)")
    _wrong("08.1", {".*d1/kernel": (None, "model"), ".*d2/kernel": ("model", None), ".*d2/bias": ("model",)},
           "its bias must stay whole")
    _wrong("08.1", {}, "the dict is empty")
    right = exercises.get("08.2").solution()
    _wrong("08.2", {**right, "d1_kernel_per_device": (64, 128)}, "splits the 128 columns")
    _wrong("08.2", {**right, "batch_per_device_model_parallel": 16}, "batch_dim_name='data' only")
    _wrong("08.2", {"devices_per_d1_block": 2}, "expected the keys")
