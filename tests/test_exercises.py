"""Every exercise, through the framework: a right, an unattempted and a wrong-kind answer, and its hint;
the framework itself; and lesson 05's capstone (05.2), whose checker runs the learner's script end to end.

Per-exercise wrong answers (right kind, wrong content) are in tests/test_exercises_lessonNN.py. The capstone
tests launch the script in fresh processes (killed after epoch 1, then the same command again); its wrong
answers are the solution with one or more faults put back, so every message is tied to its fault.
"""

import ast
import functools
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from helpers import exercises
from helpers.exercises import capstone

KEYS = exercises.all_keys()

#: Words a hint must not contain, because they would give the answer away (the old hints did).
GIVEAWAYS = {
    "00.1": ["num_replicas_in_sync", "MirroredStrategy("],
    "00.2": ["strategy.scope", "num_replicas_in_sync", "* 2", "64"],
    "01.1": ["tf.device", "call (not just create)"],
    "02.1": ["memory_free_mib", "sort"],
    "03.1": ["slice_sizes", "replica_split", "[4, 4, 2]", "[3, 3, 4]"],
    "04.1": ["5", "plus one"],
    "05.1": ["keras.ops.shape", "ops.shape(t)[0]"],
    "06.1": ["cache()", "prefetch(", "AUTOTUNE"],
    "06.2": ["0.02", "set_global_policy(\"float32\")", "cache().map", "finally"],
    "07.1": ["compute_average_loss", "global_batch_size)", "/ 8", "reduce_mean"],
    "07.2": ["get_per_replica_batch_size", "drop_remainder", "// 2"],
    "08.1": ["(64, 64)", "// 2"],
    "01.2": ["optimizer.build", ".build(", "trainable_variables"],
    "02.2": ["PCI_BUS_ID", "dict(os.environ)", "strip()"],
    "03.2": ["16 * strategy", "batch_size=32", "inside the scope"],
    "04.2": ["synchronized=True", "synchronized"],
    "05.2": ["BackupAndRestore", "val_accuracy", "0.02", "64", "num_replicas_in_sync", "MirroredStrategy"],
    "08.2": [".*d1", "fullmatch", "re.search"],
    "09.1": ["compute_average_loss", "global_batch_size", "reduce_sum"],
    "09.2": ['aggregation="sum"', "'sum'"],
    "10.1": ['"shard_weights": True', "ModelParallel", "FSDP"],
    "10.2": ['startswith("tf_XLA")', "all-reduce"],
    "11.1": ["(None, 'batch', None)", "/kernel", "(key|value)"],
    "11.2": ["inside the scope", "/kernel", "(key|value)"],
}


# ---- shared by the per-lesson files (tests/test_exercises_lessonNN.py import them) ----

def not_yet(key, answer, *phrases, hint=True):
    """A wrong answer: 'not yet', each phrase, then the hint unless the framework judged its kind (hint=False)."""
    ok, text = exercises.verdict(key, answer)
    assert not ok and text.startswith(f"Exercise {key} - not yet: "), text
    assert "could not check" not in text, text
    for phrase in phrases:
        assert phrase in text, (phrase, text)
    assert text.endswith(f"\n  Hint: {exercises.get(key).hint}") == hint, text
    return text


def notebook_snippet(key, **names):
    """Run the code the lesson's exercise cell shows above `answer = ...`, unchanged; the names it defines."""
    [path] = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob(f"{key[:2]}_*.ipynb"))
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    cell = next("".join(c["source"]) for c in cells
                if c["cell_type"] == "code" and f'check("{key}", answer)' in "".join(c["source"]))
    scope = {"keras": keras, "layers": keras.layers, "np": np, "os": os, "tf": tf, **names}
    exec(cell.split("\nanswer = ...")[0], scope)  # noqa: S102 - the notebook's own snippet
    return scope


def test_registry_not_empty():
    assert KEYS, "no exercises registered"
    assert set(GIVEAWAYS) <= set(KEYS)
    assert set(KEYS) <= set(GIVEAWAYS), "every exercise needs its giveaway list"


#: Exercises whose checkers start processes (two workers, a JAX subprocess, the capstone's training runs).
SLOW_KEYS = {"05.2", "07.1", "07.2", "10.1", "11.1", "11.2"}


@pytest.mark.parametrize("key", [pytest.param(k, marks=pytest.mark.slow) if k in SLOW_KEYS else k for k in KEYS])
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
    """04.2 given what make_bn_model(strategy) returns, a model, instead of the function."""
    import keras

    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(), keras.layers.Dense(10)])
    ok, text = exercises.verdict("04.2", model)
    assert not ok
    assert "you passed a Keras model (Sequential), but this exercise wants a function make_bn_model(strategy)" in text
    assert "Give the function itself (answer = make_bn_model), not the result of calling it." in text
    assert "could not check" not in text and "ValueError" not in text


def test_an_empty_function_is_named():
    def make_bn_model(strategy):
        ...  # your code here

    def documented(strategy):
        """Only a docstring so far."""

    def forgot_return(strategy):
        _ = strategy.num_replicas_in_sync

    for fn in (make_bn_model, documented):
        ok, text = exercises.verdict("04.2", fn)
        assert not ok and "your function does nothing yet" in text and "Hint" not in text, text
    ok, text = exercises.verdict("04.2", forgot_return)   # has a body: the checker runs and says why
    assert not ok and "it returned None: does it end with `return model`?" in text, text


def test_function_arity_is_checked():
    ok, text = exercises.verdict("06.1", lambda ds, extra: ds)
    assert not ok and "accepts 2 positional argument(s), but it is called with 1" in text, text
    ok, _ = exercises.verdict("06.1", lambda *args: args[0].cache().prefetch(1))
    assert ok
    ok, _ = exercises.verdict("06.1", functools.partial(lambda size, ds: ds.cache().prefetch(size), 1))
    assert ok                                                  # a partial is a function too
    ok, text = exercises.verdict("06.1", functools.partial(lambda size, ds: ds.cache(), 1))
    assert not ok and "end with the step that prepares batch k+1" in text, text


def test_a_class_instead_of_an_instance():
    import keras

    ok, text = exercises.verdict("05.1", keras.layers.Lambda)
    assert not ok and "the class Lambda itself (not an instance)" in text
    assert "create one, Lambda(...)" in text


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



# ---- the checkers' shared helpers ----------------------------------------------------------------

def test_framework_class():
    import keras

    assert exercises.framework_class("keras.layers.Lambda") is keras.layers.Lambda
    with pytest.raises(ValueError, match="is not a class"):
        exercises.framework_class("keras.layers")


def test_is_number_and_error_line():
    assert exercises.is_number(np.float32(0.5)) and exercises.is_number(3)
    assert not exercises.is_number(True) and not exercises.is_number("3")
    assert exercises.error_line(ValueError("first line\nsecond")) == "ValueError: first line"
    assert exercises.error_line(KeyError(), 5) == "KeyError: "
    assert exercises.error_line(RuntimeError("x" * 50), 10) == "RuntimeError: " + "x" * 10


def test_practice_strategy_is_made_once_per_device_list(replicas):
    import tensorflow as tf

    strategy = exercises.practice_strategy()
    assert strategy is exercises.practice_strategy(replicas) and strategy.num_replicas_in_sync == 2
    assert isinstance(strategy.extended._cross_device_ops, tf.distribute.ReductionToOneDevice)  # no collectives
    assert exercises.practice_strategy(replicas[:1]).num_replicas_in_sync == 1


def test_quiet_tf_restores_the_level_after_an_error():
    import tensorflow as tf

    logger = tf.get_logger()
    before = logger.level
    with pytest.raises(KeyError), exercises.quiet_tf():
        assert logger.level == 40       # logging.ERROR
        raise KeyError("inside")
    assert logger.level == before


def test_model_problem_names_what_is_wrong(replicas):
    import keras

    strategy = exercises.practice_strategy()
    assert exercises.model_problem(None, strategy, "f(s)") == ("f(s) must return the Keras model, it returned None: "
                                                               "does it end with `return model`?")
    assert "it returned the number 3" in exercises.model_problem(3, strategy, "f(s)")
    outside = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    assert "1 replica(s)" in exercises.model_problem(outside, strategy, "f(s)")
    with strategy.scope():
        inside = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        assert "not compiled" in exercises.model_problem(inside, strategy, "f(s)")
        inside.compile(optimizer="sgd", loss="mse")
    assert exercises.model_problem(inside, strategy, "f(s)") is None


def test_jax_here_and_in_a_fresh_process():
    assert exercises.jax_devices_here() is None                      # this test process runs Keras on TensorFlow
    assert exercises.devices_here() == 4                             # lessons 10-11's default N
    code = "import jax, json\nprint(json.dumps({'devices': len(jax.devices())}))"
    assert exercises.run_in_jax(code, 3) == {"devices": 3}
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        exercises.run_in_jax("1 / 0", 1)

# ---- lesson 05's capstone (05.2) ------------------------------------------------------------------

CAPSTONE = "05.2"
SOLUTION_SOURCE = capstone.SOLUTION.read_text()


def _variant(tmp_path, *replacements):
    """The solution with each (old, new) replacement applied once (each must match), next to its module."""
    source = SOLUTION_SOURCE
    for old, new in replacements:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    path = capstone.starter(tmp_path, capstone.SOLUTION)
    path.write_text(source)
    return path


def _capstone_not_yet(answer, *phrases, absent=()):
    ok, text = exercises.verdict(CAPSTONE, answer)
    assert not ok and text.startswith(f"Exercise {CAPSTONE} - not yet: "), text
    for phrase in phrases:
        assert phrase in text, (phrase, text)
    for phrase in absent:
        assert phrase not in text, (phrase, text)
    return text


def test_capstone_registered_as_lessons_last_exercise():
    ex = exercises.get(CAPSTONE)
    assert ex.checker is capstone._check and ex.title.startswith("capstone")
    assert CAPSTONE == max((k for k in exercises.all_keys() if k.startswith("05.")), key=lambda k: int(k[3:]))


@pytest.mark.parametrize("path", [capstone.GIVEN, capstone.SOLUTION, capstone.SHARED])
def test_capstone_scripts_are_short_and_helper_free(path):
    source = path.read_text()
    imported = {alias.name.split(".")[0] for node in ast.walk(ast.parse(source))
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {(node.module or "").split(".")[0] for node in ast.walk(ast.parse(source))
                 if isinstance(node, ast.ImportFrom)}
    assert "helpers" not in imported
    assert len(source.splitlines()) <= 50


@pytest.mark.slow
def test_capstone_given_script_stops_at_the_checkpoints_period(tmp_path):
    """The "before": on Keras 3 the 2017 script runs up to ModelCheckpoint(..., period=1) and stops there."""
    given = capstone.starter(tmp_path / "given")
    assert given.read_text() == capstone.GIVEN.read_text()
    assert capstone.starter(tmp_path / "given") == given                 # a second call: the same file
    source = given.read_text()
    assert 'monitor="val_acc"' in source and "period=1" in source and '"best.h5"' in source
    assert "BATCH_SIZE = 32" in source and "LEARNING_RATE = 0.01" in source and "build_model(LEARNING_RATE)" in source
    proc = subprocess.run([sys.executable, str(given), "--out", str(tmp_path / "out"), "--epochs", "1"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("TypeError:") and "unexpected keyword argument 'period'" in last, proc.stderr
    assert "keras.callbacks.ModelCheckpoint(" in proc.stderr and "SETUP" not in proc.stdout


def _notebook_stub():
    """What lesson 05's %%writefile cell holds before the learner starts: comments only."""
    cells = json.loads((Path(__file__).resolve().parent.parent / "notebooks" / "05_pickling_checkpoint_error.ipynb")
                       .read_text(encoding="utf-8"))["cells"]
    cell = next("".join(c["source"]) for c in cells if "".join(c["source"]).startswith("%%writefile {PORTED}"))
    return cell.split("\n", 1)[1]


def test_capstone_unattempted_launches_nothing(tmp_path, monkeypatch):
    def no_launch(*args, **kwargs):
        raise AssertionError("the checker launched a process for an unattempted exercise")

    monkeypatch.setattr(capstone, "TrainingRun", no_launch)
    stub = tmp_path / "train_2_replicas.py"
    stub.write_text(_notebook_stub())
    start = time.monotonic()
    text = _capstone_not_yet(stub, "not attempted yet", "nothing was run")
    assert time.monotonic() - start < 1
    hint = exercises.get(CAPSTONE).hint
    assert exercises.verdict(CAPSTONE, ...) == (False, f"Exercise {CAPSTONE}: not attempted yet. Hint: {hint}")
    _capstone_not_yet(tmp_path / "missing.py", "run the %%writefile cell first")
    stub.write_text("def broken(:\n")
    _capstone_not_yet(stub, "not valid Python: line 1")
    assert "Hint" in text


@pytest.mark.slow
def test_capstone_solution_passes_and_resumes():
    start = time.monotonic()
    ok, text = exercises.verdict(CAPSTONE, exercises.get(CAPSTONE).solution())
    print(f"checker run time for the right answer: {time.monotonic() - start:.1f} s")
    assert ok, text
    for phrase in ("2 replicas", "global batch of 64", "learning rate of 0.02 (linear scaling)",
                   "reloads from best.keras", "resumed at epoch 2"):
        assert phrase in text, (phrase, text)


@pytest.mark.slow
def test_capstone_batch_rate_and_resume_left_alone(tmp_path):
    """Global batch left at 32, learning rate left at 0.01, no BackupAndRestore: three messages."""
    answer = _variant(tmp_path,
                      ("BATCH_SIZE = 32 * strategy.num_replicas_in_sync", "BATCH_SIZE = 32"),
                      ("LEARNING_RATE = 0.01 * strategy.num_replicas_in_sync", "LEARNING_RATE = 0.01"),
                      ("callbacks=[backup, checkpoint, EpochLine()]", "callbacks=[checkpoint, EpochLine()]"))
    text = _capstone_not_yet(answer,
                    "the global batch is 32, 16 per replica", "32 x num_replicas_in_sync = 64",
                    "the learning rate is 0.01 (left at the one-device rate)", "linear scaling rule",
                    "started over at epoch 1", "BackupAndRestore",
                    absent=("replica(s): build", "monitor", "steps in epoch 1", "failed"))
    assert text.count("; ") == 2, text                       # one message per problem


@pytest.mark.slow
def test_capstone_old_monitor_name(tmp_path):
    answer = _variant(tmp_path, ('monitor="val_accuracy"', 'monitor="val_acc"'))
    _capstone_not_yet(answer, "monitors 'val_acc'", "'val_accuracy'", "the first run failed: ValueError",
             absent=("global batch is", "learning rate is", "started over"))


@pytest.mark.slow
def test_capstone_the_given_script_as_answer(tmp_path):
    """Handing in the unported script: the checker explains `period`, then names the failure."""
    _capstone_not_yet(capstone.GIVEN, "ModelCheckpoint has no `period`", "save_freq='epoch'",
             "the first run failed: TypeError", "unexpected keyword argument 'period'")


def test_capstone_show_solution_prints_the_script(monkeypatch, capsys):
    monkeypatch.setattr(exercises, "check", lambda key, answer: print(f"checked {Path(answer).name}"))
    exercises.show_solution(CAPSTONE)
    out = capsys.readouterr().out
    assert SOLUTION_SOURCE in out and "import helpers" not in out
    assert out.rstrip().endswith("checked train_2_replicas.py")


def test_capstone_each_problem_has_its_message(tmp_path):
    """The checker's judgements on SETUP and EPOCH lines, without launching anything."""
    out = tmp_path / "out"
    good = {"global_batch": 64, "checkpoint": str(out / "best.keras"), "monitor": "val_accuracy",
            "save_best_only": True}
    assert capstone._setup_problems(good, out) == []
    wrong = dict(good, checkpoint=str(out / "best.h5"), monitor="val_loss", save_best_only=False)
    text = "; ".join(capstone._setup_problems(wrong, out))
    assert "'best.h5'" in text and "ending in .keras" in text and "monitors 'val_loss'" in text
    assert "save_best_only=True" in text
    assert "not in the --out folder" in capstone._setup_problems(dict(good, checkpoint="/elsewhere/b.keras"), out)[0]
    epoch = {"replicas": 2, "steps": 23, "learning_rate": 0.02}
    assert capstone._batch_and_lr_problems(good, epoch) == []
    four = {"replicas": 4, "steps": 12, "learning_rate": 0.04}       # MirroredStrategy() on 4 GPUs
    assert capstone._batch_and_lr_problems(dict(good, global_batch=128), four) == []
    [one] = capstone._batch_and_lr_problems(good, dict(epoch, replicas=1))
    assert "trains on 1 replica(s)" in one and "set_logical_device_configuration" in one
    [steps] = capstone._batch_and_lr_problems(good, dict(epoch, steps=45))
    assert "fit ran 45 steps in epoch 1" in steps and "make 23" in steps
    [lr] = capstone._batch_and_lr_problems(good, dict(epoch, learning_rate=0.04))
    assert "the learning rate is 0.04:" in lr and "0.01 x num_replicas_in_sync = 0.02" in lr
