"""Lesson 06's distributed exercises: 06.4 (a pipeline for MirroredStrategy) and 06.5 (find and fix).

Each checker runs the answer on the lesson's replicas (two logical devices here); every test gives a
right, an unattempted and typical wrong answers, and checks that the message names what is wrong.
The broken code of 06.5 is taken from the notebook itself, so the lesson and the checker cannot drift.
"""

import json
from pathlib import Path

import pytest
from test_exercises import not_yet as _not_yet  # the shared checks

from helpers import exercises

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "06_scaling_and_performance.ipynb"


@pytest.mark.parametrize("key", ["06.4", "06.5"])
def test_right_and_unattempted(key, replicas):
    ok, text = exercises.verdict(key, exercises.get(key).solution())
    assert ok, text
    ok, text = exercises.verdict(key, ...)
    assert not ok and text == f"Exercise {key}: not attempted yet. Hint: {exercises.get(key).hint}"


# ---- 06.4 -----------------------------------------------------------------------------------------

def _pipeline(batch, cache=True, prefetch=True, order="cache-first"):
    import tensorflow as tf

    def make_dataset(x, y, per_replica, strategy):
        ds = tf.data.Dataset.from_tensor_slices((x, y))
        if cache and order == "cache-first":
            ds = ds.cache()
        ds = ds.batch(batch(per_replica, strategy))
        if prefetch:
            ds = ds.prefetch(tf.data.AUTOTUNE)
        if cache and order == "cache-last":
            ds = ds.cache()
        return ds

    return make_dataset


def test_06_4_wrong_answers(replicas):
    per_replica_only = _pipeline(lambda p, s: p)
    _not_yet("06.4", per_replica_only, "that is the batch of ONE replica")
    _not_yet("06.4", _pipeline(lambda p, s: 4 * s.num_replicas_in_sync), "instead of 8 each")  # hard-coded 4
    _not_yet("06.4", _pipeline(lambda p, s: p * s.num_replicas_in_sync, cache=False), "no cache step")
    _not_yet("06.4", _pipeline(lambda p, s: p * s.num_replicas_in_sync, prefetch=False), "the last step")
    _not_yet("06.4", _pipeline(lambda p, s: p * s.num_replicas_in_sync, order="cache-last"), "is Cache")

    def unbatched(x, y, per_replica, strategy):
        import tensorflow as tf

        return tf.data.Dataset.from_tensor_slices((x, y)).cache().prefetch(1)

    _not_yet("06.4", unbatched, "unbatched samples")

    def repeated(x, y, per_replica, strategy):
        return _pipeline(lambda p, s: p * s.num_replicas_in_sync)(x, y, per_replica, strategy).repeat(2)

    _not_yet("06.4", repeated, "each once")
    _not_yet("06.4", lambda x, y, p, s: [x, y], "should return a tf.data.Dataset")
    distributed = _pipeline(lambda p, s: p * s.num_replicas_in_sync)
    _not_yet("06.4", lambda x, y, p, s: s.experimental_distribute_dataset(distributed(x, y, p, s)),
             "return the tf.data.Dataset itself")


# ---- 06.5 -----------------------------------------------------------------------------------------

def _broken_code():
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    [src] = ["".join(c["source"]) for c in cells
             if c["cell_type"] == "code" and "def prepare(" in "".join(c["source"])]
    return src


def _scratch():
    import tempfile
    return Path(tempfile.mkdtemp(prefix="lesson06-scripts-"))


def _variant(*replacements):
    """The notebook's broken prepare with some of its traps fixed (old -> new text replacements)."""
    import benchmark  # tools/benchmark.py
    import keras
    import tensorflow as tf

    from helpers import bench, subproc
    from helpers.devices import ensure_devices

    src = _broken_code()
    for old, new in replacements:
        assert old in src, f"the notebook's broken code changed: {old!r} not found"
        src = src.replace(old, new)
    child = subproc.load_script(benchmark.write_scripts(_scratch()))   # the lesson's bench_child (imports bench_lib)
    namespace = {"tf": tf, "keras": keras, "bench": bench, "child": child, "REPLICAS": ensure_devices(2)}
    exec(compile(src, "broken_prepare", "exec"), namespace)
    return namespace["prepare"]


SCALED_TWICE = (" * strategy.num_replicas_in_sync\n    ds", "\n    ds")
CACHE_AFTER_AUGMENT = (".map(augment).cache()", ".cache().map(augment)")
POLICY_LEFT_SET = ("        model.compile(optimizer=keras.optimizers.SGD(lr), loss=\"sparse_categorical_crossentropy\")\n",
                   "        model.compile(optimizer=keras.optimizers.SGD(lr), loss=\"sparse_categorical_crossentropy\")\n"
                   "    keras.mixed_precision.set_global_policy(\"float32\")\n")


def test_06_5_the_notebooks_broken_code_fails_and_each_trap_is_named(replicas):
    import keras

    _not_yet("06.5", _variant(), "the global policy is still")
    assert keras.mixed_precision.global_policy().name == "float32"   # the checker cleaned up
    _not_yet("06.5", _variant(POLICY_LEFT_SET), "scaled twice")
    _not_yet("06.5", _variant(POLICY_LEFT_SET, SCALED_TWICE), "both epochs saw the same noise")
    ok, text = exercises.verdict("06.5", _variant(POLICY_LEFT_SET, SCALED_TWICE, CACHE_AFTER_AUGMENT))
    assert ok, text                                                   # all three fixed: accepted


def test_06_5_other_wrong_fixes(replicas):
    fixed = (POLICY_LEFT_SET, SCALED_TWICE, CACHE_AFTER_AUGMENT)
    not_scaled = ("lr = base_lr * global_batch / base_batch * strategy.num_replicas_in_sync", "lr = base_lr")
    _not_yet("06.5", _variant(POLICY_LEFT_SET, CACHE_AFTER_AUGMENT, not_scaled), "scales the rate too")
    no_mixed = ("    keras.mixed_precision.set_global_policy(child.mixed_policy(child.capabilities(REPLICAS)))\n", "")
    _not_yet("06.5", _variant(*fixed, no_mixed), "keep mixed precision")
    no_cache = (".map(augment).cache()", ".map(augment)")
    _not_yet("06.5", _variant(POLICY_LEFT_SET, SCALED_TWICE, no_cache), "keep the cache")
    per_replica_batch = ("global_batch = per_replica * strategy.num_replicas_in_sync", "global_batch = per_replica")
    _not_yet("06.5", _variant(*fixed, per_replica_batch), "the global batch is")
    _not_yet("06.5", lambda x, y, strategy: None, "does nothing yet", hint=False)
    _not_yet("06.5", lambda x, y, strategy: print("hi"), "returned None")


def test_06_wrong_functions():
    import tensorflow as tf

    _not_yet("06.1", lambda sps, base, n: sps / base, "that is the speed-up")
    _not_yet("06.1", lambda sps, base, n: n / (sps / base), "expected")
    def no_return(sps, base, n):
        sps / base / n

    _not_yet("06.1", no_return, "returned None; it should return a number")
    _not_yet("06.2", lambda n: 0.01, "returned the one-GPU rate 0.01")
    _not_yet("06.2", lambda n: 0.01 * n * 32, "(linear scaling rule)")
    _not_yet("06.3", lambda ds: ds.prefetch(tf.data.AUTOTUNE), "the slow map ran 9 times")
    _not_yet("06.3", lambda ds: ds.cache(), "end with the step that prepares batch k+1")
    _not_yet("06.3", lambda ds: ds.shuffle(10, seed=1).cache().prefetch(1), "the data changed")
    _not_yet("06.3", lambda ds: ds.cache() and None, "it returned None")
