"""Lesson 06's checkers explain wrong answers: each case asserts the sentence the learner reads.

06.2 (find and fix) runs the answer on the lesson's replicas (two logical devices here). Its broken code is
taken from the notebook itself, so the lesson and the checker cannot drift.
"""

import json
from pathlib import Path

from test_exercises import not_yet as _not_yet  # the shared checks

from helpers import exercises

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "06_scaling_and_performance.ipynb"


# ---- 06.2 -----------------------------------------------------------------------------------------

def _broken_code():
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    [src] = ["".join(c["source"]) for c in cells
             if c["cell_type"] == "code" and "def prepare(" in "".join(c["source"])]
    return src


def _variant(*replacements):
    """The notebook's broken prepare with some of its traps fixed (old -> new text replacements)."""
    import keras
    import tensorflow as tf

    src = _broken_code()
    for old, new in replacements:
        assert old in src, f"the notebook's broken code changed: {old!r} not found"
        src = src.replace(old, new)
    namespace = {"tf": tf, "keras": keras}
    exec(compile(src, "broken_prepare", "exec"), namespace)
    return namespace["prepare"]


SCALED_TWICE = (" * strategy.num_replicas_in_sync\n    ds", "\n    ds")
CACHE_AFTER_AUGMENT = (".map(augment).cache()", ".cache().map(augment)")
POLICY_LEFT_SET = ("        model.compile(optimizer=keras.optimizers.SGD(lr), loss=\"sparse_categorical_crossentropy\")\n",
                   "        model.compile(optimizer=keras.optimizers.SGD(lr), loss=\"sparse_categorical_crossentropy\")\n"
                   "    keras.mixed_precision.set_global_policy(\"float32\")\n")


def test_06_2_the_notebooks_broken_code_fails_and_each_trap_is_named(replicas):
    import keras

    _not_yet("06.2", _variant(), "the global policy is still")
    assert keras.mixed_precision.global_policy().name == "float32"   # the checker cleaned up
    _not_yet("06.2", _variant(POLICY_LEFT_SET), "scaled twice")
    _not_yet("06.2", _variant(POLICY_LEFT_SET, SCALED_TWICE), "both epochs saw the same noise")
    ok, text = exercises.verdict("06.2", _variant(POLICY_LEFT_SET, SCALED_TWICE, CACHE_AFTER_AUGMENT))
    assert ok, text                                                   # all three fixed: accepted


def test_06_2_other_wrong_fixes(replicas):
    fixed = (POLICY_LEFT_SET, SCALED_TWICE, CACHE_AFTER_AUGMENT)
    not_scaled = ("lr = base_lr * global_batch / base_batch * strategy.num_replicas_in_sync", "lr = base_lr")
    _not_yet("06.2", _variant(POLICY_LEFT_SET, CACHE_AFTER_AUGMENT, not_scaled), "scales the rate too")
    no_mixed = ('    keras.mixed_precision.set_global_policy("mixed_float16")   # the recipe\'s T4 policy\n', "")
    _not_yet("06.2", _variant(*fixed, no_mixed), "keep mixed precision")
    no_cache = (".map(augment).cache()", ".map(augment)")
    _not_yet("06.2", _variant(POLICY_LEFT_SET, SCALED_TWICE, no_cache), "keep the cache")
    per_replica_batch = ("global_batch = per_replica * strategy.num_replicas_in_sync", "global_batch = per_replica")
    _not_yet("06.2", _variant(*fixed, per_replica_batch), "the global batch is")
    _not_yet("06.2", lambda x, y, strategy: None, "does nothing yet", hint=False)
    _not_yet("06.2", lambda x, y, strategy: print("hi"), "returned None")


def test_06_1_wrong_pipelines():
    import tensorflow as tf

    _not_yet("06.1", lambda ds: ds.prefetch(tf.data.AUTOTUNE), "the slow map ran 9 times")
    _not_yet("06.1", lambda ds: ds.cache(), "end with the step that prepares batch k+1")
    _not_yet("06.1", lambda ds: ds.shuffle(10, seed=1).cache().prefetch(1), "the data changed")
    _not_yet("06.1", lambda ds: ds.cache() and None, "it returned None")


def test_06_1_a_dataset_that_never_ends_is_read_no_further():
    """cache().repeat() hung the kernel: the checker reads one batch past an epoch and says why."""
    import tensorflow as tf

    for answer in (lambda ds: ds.cache().repeat(), lambda ds: ds.cache().prefetch(tf.data.AUTOTUNE).repeat()):
        _not_yet("06.1", answer, "gave more than 3 batches: the dataset never ends (a repeat()?)")


def test_06_2_a_dataset_that_never_ends_is_read_no_further(replicas):
    repeats = ("ds = (tf.data.Dataset.from_tensor_slices((x, y)).map(augment).cache()",
               "ds = (tf.data.Dataset.from_tensor_slices((x, y)).repeat().cache().map(augment)")
    _not_yet("06.2", _variant(POLICY_LEFT_SET, SCALED_TWICE, repeats), "one epoch must hold every sample once")
