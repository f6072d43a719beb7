"""Every exercise, through the framework: a right, an unattempted and a wrong-kind answer, and its hint.

Per-exercise wrong answers (right kind, wrong content) are in tests/test_exercises_wrong.py and
tests/test_exercises_lesson03.py.
"""

import functools
import re

import numpy as np
import pytest

from helpers import exercises

KEYS = exercises.all_keys()

#: Words a hint must not contain, because they would give the answer away (the old hints did).
GIVEAWAYS = {
    "00.1": ["num_replicas_in_sync", "MirroredStrategy("],
    "00.2": ["strategy.scope", "num_replicas_in_sync", "* 2", "64"],
    "01.1": ["experimental_local_results", "experimental_distribute_dataset", "batch(10)"],
    "01.2": ["tf.device", "call (not just create)"],
    "01.3": ["a: data", "'a': 'data'", "b: model"],
    "02.1": ["memory_free_mib", "sort"],
    "02.2": ["tensorflow_names", "/GPU:n-1"],
    "02.3": ["PCI_BUS_ID", "UUID"],
    "03.1": ["256", "0.08", "global_batch_size", "scale_learning_rate"],
    "03.2": ["strategy.scope", "compile("],
    "03.3": ["slice_sizes", "replica_split", "[4, 4, 2]", "[3, 3, 4]"],
    "04.1": ["5", "plus one"],
    "04.2": ["ReplicaBN(", "2.0", "1.0"],
    "05.1": ["keras.ops.shape", "ops.shape(t)[0]"],
    "05.2": ["val_accuracy", "save_best_only", ".keras"],
    "06.1": ["/ replicas", "divide", "speed_up / "],
    "06.2": ["0.01 *", "32 * replicas", "global batch / 32"],
    "06.3": ["cache()", "prefetch(", "AUTOTUNE"],
    "06.4": ["num_replicas_in_sync", "cache()", "prefetch(", "per_replica *"],
    "06.5": ["0.02", "set_global_policy(\"float32\")", "cache().map", "finally"],
    "07.1": ["compute_average_loss", "global_batch_size)", "/ 8", "reduce_mean"],
    "07.2": ["get_per_replica_batch_size", "drop_remainder", "// 2"],
    "08.1": [".*d1", "(None, 'model')", "('model', None)"],
    "08.2": ["(64, 64)", "// 2"],
    "01.4": ["compute_average_loss", "global_batch_size)", "reduce_mean"],
    "01.5": ["optimizer.build", ".build(", "trainable_variables"],
    "02.4": ["list_logical_devices", "short_device"],
    "02.5": ["PCI_BUS_ID", "dict(os.environ)", "strip()"],
    "03.4": ["per_replica_batch *", "* strategy.num_replicas_in_sync", ".batch(16)"],
    "03.5": ["16 * strategy", "batch_size=32", "inside the scope"],
    "04.3": ["synchronized=True", "synchronized"],
    "04.4": ["experimental_local_results", ".values"],
    "05.3": ["load_model", "initial_epoch", "inside the scope"],
    "05.4": ["keyword", "save_freq", "period="],
    "05.5": ["BackupAndRestore", "val_accuracy", "0.02", "64", "num_replicas_in_sync", "MirroredStrategy"],
    "08.3": [".*embed", "('model', None)", "(None, 'model')"],
    "08.4": [".*d1", "fullmatch", "re.search"],
    "09.1": ["compute_average_loss", "global_batch_size", "reduce_sum"],
    "09.2": ['aggregation="sum"', "'sum'"],
    "09.3": ["drop_remainder"],
    "10.1": ['"shard_weights": True', "ModelParallel", "FSDP"],
    "10.2": ['startswith("tf_XLA")', "all-reduce"],
    "11.1": ["(None, 'batch', None)", "/kernel", "(key|value)"],
    "11.2": ["inside the scope", "/kernel", "(key|value)"],
}


def test_registry_not_empty():
    assert KEYS, "no exercises registered"
    assert set(GIVEAWAYS) <= set(KEYS)
    assert set(KEYS) <= set(GIVEAWAYS), "every exercise needs its giveaway list"


@pytest.mark.parametrize("key", KEYS)
def test_solution_is_correct(key, replicas, capsys):
    ex = exercises.get(key)
    ok, text = exercises.verdict(key, ex.solution())
    assert ok, f"{key}: solution rejected: {text}"
    assert text.startswith(f"Exercise {key} - correct: ") and len(text) > 40, text
    assert "Hint" not in text
    assert exercises.check(key, ex.solution()) is None          # nothing for Jupyter to display
    assert capsys.readouterr().out == text + "\n"


@pytest.mark.parametrize("key", KEYS)
def test_unattempted_prints_one_hint_line(key, capsys):
    ex = exercises.get(key)
    assert exercises.verdict(key, ...) == (False, f"Exercise {key}: not attempted yet. Hint: {ex.hint}")
    assert exercises.check(key, ...) is None
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith(f"Exercise {key}: not attempted yet. Hint: "), out


@pytest.mark.parametrize("key", KEYS)
def test_hint_guides_without_the_answer(key):
    hint = exercises.get(key).hint
    assert hint and "\n" not in hint and len(hint) <= 170, hint
    leaked = [w for w in GIVEAWAYS.get(key, []) if w.lower() in hint.lower()]
    assert not leaked, f"{key}: the hint gives away {leaked}: {hint}"
    answer = exercises.get(key).solution() if key in ("00.1", "02.1", "04.1") else None
    if answer is not None:
        assert not re.search(rf"(?<![\w.]){re.escape(str(answer))}(?![\w.])", hint), (answer, hint)


def _first_kind(key):
    return exercises.get(key).expects[0]


@pytest.mark.parametrize("key", KEYS)
def test_wrong_kind_gets_a_targeted_message(key, replicas):
    """A value where a function is wanted and the reverse, None, and a strange object: say what and why."""
    ex = exercises.get(key)
    assert ex.expects, f"{key} declares no answer kind: register(..., expects='dict' / 'function' / 'class' ...)"
    wants = ex.wants or ""
    if _first_kind(key) == "function":
        ok, text = exercises.verdict(key, 42)
        assert not ok and "you passed the number 42, but this exercise wants a function" in text, text
        assert "Give the function itself" in text and "Hint" not in text, text
        ok, text = exercises.verdict(key, lambda *a, **k: None)   # a body left as `...` returns None
        assert not ok and "your function does nothing yet (its body only returns None)" in text, text
    elif "function" not in ex.expects:
        ok, text = exercises.verdict(key, ex.solution)                # the function, not its result
        assert not ok and f"you passed the function {ex.solution.__name__}" in text, text
        assert wants in text and "call it and give the result" in text and "Hint" not in text, text
    ok, text = exercises.verdict(key, None)
    assert not ok and "you passed None" in text and "return" in text, text
    if "class" not in ex.expects:
        ok, text = exercises.verdict(key, object())
        assert not ok and "you passed an object of type object" in text, text


def test_a_model_instead_of_make_model_is_named():
    """The brief's example: 03.2 given make_model(strategy), a model, instead of the function."""
    import keras

    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(), keras.layers.Dense(10)])
    ok, text = exercises.verdict("03.2", model)
    assert not ok
    assert "you passed a Keras model (Sequential), but this exercise wants a function make_model(strategy)" in text
    assert "Give the function itself (answer = make_model), not the result of calling it." in text
    assert "could not check" not in text and "ValueError" not in text


def test_an_empty_function_is_named():
    def make_model(strategy):
        ...  # your code here

    def documented(strategy):
        """Only a docstring so far."""

    def forgot_return(strategy):
        _ = strategy.num_replicas_in_sync

    for fn in (make_model, documented):
        ok, text = exercises.verdict("03.2", fn)
        assert not ok and "your function does nothing yet" in text and "Hint" not in text, text
    ok, text = exercises.verdict("03.2", forgot_return)   # has a body: the checker runs and says why
    assert not ok and "it returned None: does it end with `return model`?" in text, text


def test_function_arity_is_checked():
    ok, text = exercises.verdict("06.1", lambda sps, base: 1.0)
    assert not ok and "accepts 2 positional argument(s), but it is called with 3" in text, text
    ok, _ = exercises.verdict("06.1", lambda *args: args[0] / args[1] / args[2])
    assert ok
    ok, _ = exercises.verdict("06.2", functools.partial(lambda base, replicas: base * replicas, 0.01))
    assert ok                                                  # a partial is a function too
    ok, text = exercises.verdict("06.2", functools.partial(lambda base, replicas: base, 0.01))
    assert not ok and "lr_for(2) returned the one-GPU rate 0.01" in text, text


def test_a_class_instead_of_an_instance():
    import keras

    ok, text = exercises.verdict("05.2", keras.callbacks.ModelCheckpoint)
    assert not ok and "the class ModelCheckpoint itself (not an instance)" in text
    assert "create one, ModelCheckpoint(...)" in text


def test_an_instance_where_a_class_is_wanted():
    class RowsSeen:
        pass

    exercises.register("99.7", title="t", checker=lambda a: (True, "ok"), solution=lambda: RowsSeen,
                       expects="class", wants="your fixed class RowsSeen")
    try:
        ok, text = exercises.verdict("99.7", RowsSeen())
        assert not ok and "you passed an object of type RowsSeen; this exercise wants your fixed class" in text
        assert "Give the class itself (answer = RowsSeen), not an instance of it." in text
        assert exercises.verdict("99.7", RowsSeen)[0]
    finally:
        exercises.REGISTRY.pop("99.7")


def test_a_bare_function_for_the_lambda_layer():
    ok, text = exercises.verdict("05.1", lambda t: t)
    assert not ok and "wrapped in keras.layers.Lambda(...)" in text, text


def test_describe():
    assert exercises.describe(None) == "None"
    assert exercises.describe("full") == "the string 'full'"
    assert exercises.describe(3) == "the number 3"
    assert exercises.describe(np.float64(0.5)) == "the number 0.5"
    assert exercises.describe(functools.partial(max, 1)) == "the function max"
    assert exercises.describe(True) == "the boolean True"
    assert exercises.describe({"b": 1, "a": 2}) == "a dict with keys ['a', 'b']"
    assert exercises.describe([1, 2]) == "a list of 2 item(s)"
    assert exercises.describe(len) == "the function len"
    assert exercises.describe(dict) == "the class dict itself (not an instance)"


def test_a_checker_that_raises_is_a_wrong_answer(capsys):
    def boom(answer):
        raise KeyError("deep inside")

    exercises.register("99.8", title="t", checker=boom, solution=lambda: {}, expects="dict", hint="h")
    try:
        ok, text = exercises.verdict("99.8", {})
        assert not ok and "could not check this answer (KeyError: 'deep inside')" in text
        assert text.endswith("\n  Hint: h")
    finally:
        exercises.REGISTRY.pop("99.8")


def test_register_validates():
    with pytest.raises(ValueError):
        exercises.register("1.1", title="t", checker=lambda a: (True, "ok"), solution=lambda: 1)
    with pytest.raises(ValueError):
        exercises.register("99.1", title="t", checker=None, solution=lambda: 1)
    with pytest.raises(ValueError, match="unknown answer kind"):
        exercises.register("99.1", title="t", checker=lambda a: (True, "ok"), solution=lambda: 1,
                           expects="thing")
    with pytest.raises(ValueError, match="takes must be"):
        exercises.register("99.1", title="t", checker=lambda a: (True, "ok"), solution=lambda: 1,
                           expects="dict", takes=1)
    with pytest.raises(ValueError, match="no exercise"):
        exercises.get("98.7")
    assert "99.1" not in exercises.REGISTRY


def test_show_solution_prints_source_and_returns_nothing(capsys):
    exercises.register("99.9", title="demo", checker=lambda a: (a == 42, f"got {a}"), solution=lambda: 42,
                       expects="int")
    try:
        assert exercises.show_solution("99.9") is None
        out = capsys.readouterr().out
        assert "lambda: 42" in out and "Exercise 99.9 - correct: got 42" in out
    finally:
        exercises.REGISTRY.pop("99.9")
