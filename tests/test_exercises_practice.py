"""Exercises that make the learner write distributed code, and the find-and-fix ones (01.4-08.4).

The generic tests in tests/test_exercises.py run every solution, the unattempted answer and answers of the
wrong kind; here each exercise gets typical wrong answers, run on the two replicas, and the messages they
must produce. The broken snippets the notebooks show are executed as they are, and must fail the check.
"""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import layers

from helpers import exercises
from helpers.exercises import lesson01, lesson02, lesson03, lesson04, lesson05, lesson08
from helpers.subproc import run_python

NEW_KEYS = ["01.4", "01.5", "02.4", "02.5", "03.4", "03.5", "04.3", "04.4", "05.3", "05.4", "08.3", "08.4"]


def _broken(source, name, **names):
    """Define the notebook's broken snippet, unchanged, and return the function or class it defines."""
    scope = {"keras": keras, "layers": layers, "np": np, "os": os, "tf": tf, **names}
    exec(source, scope)  # noqa: S102 - our own snippet, the very text the notebook shows
    return scope[name]


def _not_yet(key, answer, *phrases):
    ok, text = exercises.verdict(key, answer)
    assert not ok and text.startswith(f"Exercise {key} - not yet: "), text
    assert "could not check" not in text, text
    for phrase in phrases:
        assert phrase in text, (phrase, text)
    return text


@pytest.mark.parametrize("key", NEW_KEYS)
def test_registered_with_kind_and_hint(key):
    ex = exercises.get(key)
    assert ex.expects and ex.hint and ex.wants
    assert exercises.verdict(key, ...) == (False, f"Exercise {key}: not attempted yet. Hint: {ex.hint}")


def test_01_4_plain_mean_is_twice_the_step(replicas):
    def replica_step(model, optimizer, x, y, global_batch_size):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    _not_yet("01.4", replica_step, "the step is 2x the one-device step", "per-replica batch (4 rows)")


def test_01_4_no_update_and_wrong_loss(replicas):
    _not_yet("01.4", lambda model, optimizer, x, y, gbs: model(x), "the weights did not change")

    def absolute(model, optimizer, x, y, global_batch_size):
        with tf.GradientTape() as tape:
            per_example = tf.abs(model(x, training=True) - y)[:, 0]
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch_size)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    _not_yet("01.4", absolute, "one device on the whole batch gives")


def test_01_5_broken_snippet_keeps_adam_on_one_device(replicas):
    _not_yet("01.5", _broken(lesson01.BROKEN_01_5, "compile_split"), "all of Adam's slots ended up on",
             "fit creates them lazily")

    def forgot_return(model):
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")

    _not_yet("01.5", forgot_return, "it returned None (no `return model`?)")


def test_02_4_unchecked_strategy(replicas):
    _not_yet("02.4", lambda devices: tf.distribute.MirroredStrategy(devices=devices),
             "returned a strategy although", "soft placement")

    def wrong_error(devices):
        raise KeyError("missing")

    _not_yet("02.4", wrong_error, "raise a ValueError that names the missing device")


def test_02_5_broken_snippet_changes_this_process():
    before = dict(os.environ)
    _not_yet("02.5", _broken(lesson02.BROKEN_02_5, "child_env"), "changed this process's own environment")
    assert dict(os.environ) == before                 # the checker restored it


def test_02_5_half_fixes():
    _not_yet("02.5", lambda s: dict(os.environ, CUDA_VISIBLE_DEVICES=s.replace(" ", ""),
                                    CUDA_DEVICE_ORDER="PCI_BUS_ID"), "entry 2 is empty", "CUDA would stop")
    _not_yet("02.5", lambda s: dict(os.environ, CUDA_VISIBLE_DEVICES=",".join(
        e.strip() for e in s.split(",") if e.strip())), "CUDA_DEVICE_ORDER")
    _not_yet("02.5", lambda s: {"CUDA_VISIBLE_DEVICES": "3,5", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
             "keep the rest of the environment")


def test_03_4_per_replica_batch_as_global(replicas):
    def fit_per_replica(strategy, model, x, y, per_replica_batch):
        return model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(per_replica_batch), verbose=0)

    _not_yet("03.4", fit_per_replica, "each replica got 4 rows per step, not 8")

    def two_epochs(strategy, model, x, y, per_replica_batch):
        ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(per_replica_batch * 2)
        return model.fit(ds, epochs=2, verbose=0)

    _not_yet("03.4", two_epochs, "train for exactly one epoch")


def test_03_5_broken_snippet_and_half_fix(replicas):
    _not_yet("03.5", _broken(lesson03.BROKEN_03_5, "train_on_replicas"), "it still fails",
             "created outside the scope")

    def half(strategy, x, y):
        with strategy.scope():
            model = keras.Sequential([keras.Input((64,)), layers.Dense(10, activation="softmax")])
            model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        model.fit(x, y, batch_size=16, epochs=1, verbose=0)
        return model

    _not_yet("03.5", half, "batch_size=16 is the global batch", "not the 16 the comment promises")


def test_04_3_unsynchronized_bn(replicas):
    def make_bn_model(strategy):
        with strategy.scope():
            model = keras.Sequential([keras.Input((4,)), layers.BatchNormalization(), layers.Dense(1)])
            model.compile(optimizer="sgd", loss="mse")
        return model

    _not_yet("04.3", make_bn_model, "the replicas' moving_mean differ")

    def no_bn(strategy):
        with strategy.scope():
            model = keras.Sequential([keras.Input((4,)), layers.Dense(1)])
            model.compile(optimizer="sgd", loss="mse")
        return model

    _not_yet("04.3", no_bn, "no BatchNormalization layer")


def test_04_4_broken_snippet_reads_replica_0(replicas):
    _not_yet("04.4", _broken(lesson04.BROKEN_04_4, "replica_gap"), "it returned 0, but the copies differ by 5",
             "replica 0's here")
    from helpers.batchnorm import replica_gaps

    _not_yet("04.4", lambda model, strategy: max(replica_gaps(model, strategy).values()),
             "not with helpers.batchnorm")


def test_05_3_outside_scope_and_recompile(replicas):
    def outside(path, strategy, x, y):
        model = keras.models.load_model(path)
        model.fit(x, y, batch_size=16, epochs=1, verbose=0)
        return model

    _not_yet("05.3", outside, "call load_model inside the scope")

    def recompiled(path, strategy, x, y):
        with strategy.scope():
            model = keras.models.load_model(path)
            model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        model.fit(x, y, batch_size=16, epochs=1, verbose=0)
        return model

    _not_yet("05.3", recompiled, "the optimizer is at step 4", "step counter restarted")


def test_05_4_broken_class_saves_every_batch():
    _not_yet("05.4", _broken(lesson05.BROKEN_05_4, "BlogParallelModelCheckpoint"), "6 saves in 2 epochs",
             "save_freq")

    class NoTemplate(keras.callbacks.ModelCheckpoint):
        def __init__(self, model, filepath, monitor="val_loss"):
            super().__init__(filepath, monitor=monitor)

    _not_yet("05.4", NoTemplate, "the template was never saved", "self.single_model")


def test_08_3_and_08_4_lookup_on_tensorflow(replicas):
    from keras import distribution as kd

    def columns_only(mesh):
        layout_map = kd.LayoutMap(mesh)
        layout_map[".*embed/embeddings"] = (None, "model")
        return layout_map

    _not_yet("08.3", columns_only, "tower/embed/embeddings gets (None, 'model'), want ('model', None)",
             "looked up in the LayoutMap")
    text = exercises.verdict("08.4", _broken(lesson08.BROKEN_08_4, "guide_layout", kd=kd))[1]
    if lesson08._version(keras.__version__) >= (3, 14):
        assert "not yet" in text and "'d1/kernel' matches nothing" in text, text
    else:
        assert "correct" in text and "From Keras 3.14 keys must match the whole path" in text, text


JAX_CHECK = """
import json
from keras import distribution as kd
from helpers import exercises
from helpers.exercises import lesson08
broken = {}
exec(lesson08.BROKEN_08_4, {"kd": kd}, broken)
out = {key: exercises.verdict(key, exercises.get(key).solution()) for key in ("08.3", "08.4")}
out["broken"] = exercises.verdict("08.4", broken["guide_layout"])
print("RESULT " + json.dumps(out))
"""


@pytest.mark.parametrize("devices, mesh", [(4, "2x2"), (2, "1x2")])
def test_08_3_and_08_4_read_real_shardings_under_jax(devices, mesh):
    """The notebook's kernel: JAX with 4 CPU devices (or 2, as on a T4 x2), where ModelParallel really shards."""
    result = run_python(JAX_CHECK, env={"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
                                        "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"},
                        timeout=240, echo=False)
    assert result.ok, result.stderr[-2000:]
    line = next(ln for ln in result.stdout.splitlines() if ln.startswith("RESULT "))
    out = json.loads(line[len("RESULT "):])
    for key in ("08.3", "08.4"):
        ok, text = out[key]
        assert ok and "read from each weight's jax sharding" in text, text
    assert f"one training step ran on the {mesh} mesh" in out["08.3"][1]
    ok, text = out["broken"]
    if lesson08._version(keras.__version__) >= (3, 14):
        assert not ok and "mlp/d1/kernel gets (None, None)" in text, text
    else:
        assert ok and "From Keras 3.14" in text, text


@pytest.mark.parametrize("notebook, key, snippet", [
    ("01_data_vs_device_parallelism", "01.5", lesson01.BROKEN_01_5),
    ("02_picking_gpus", "02.5", lesson02.BROKEN_02_5),
    ("03_from_multi_gpu_model_to_mirrored_strategy", "03.5", lesson03.BROKEN_03_5),
    ("04_batchnorm_variable_error", "04.4", lesson04.BROKEN_04_4),
    ("05_pickling_checkpoint_error", "05.4", lesson05.BROKEN_05_4),
    ("08_keras3_distribution_api", "08.4", lesson08.BROKEN_08_4),
])
def test_notebook_shows_the_snippet_the_tests_run(notebook, key, snippet):
    """The broken code in the notebook is the very text these tests prove broken (no drift between the two)."""
    from pathlib import Path

    cells = json.loads((Path(__file__).parent.parent / "notebooks" / f"{notebook}.ipynb").read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    cell = next(c for c in code if f'helpers.exercises.check("{key}", answer)' in c)
    assert snippet in cell
    lesson = key[:2]
    assert {k for k in NEW_KEYS if k.startswith(lesson)} <= {
        k for c in code for k in __import__("re").findall(r'check\("(\d\d\.\d+)", answer\)', c)}
