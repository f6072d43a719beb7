"""Every exercise, through the framework: a right, an unattempted and a wrong-kind answer, and its hint;
and the framework itself.

Per-exercise wrong answers (right kind, wrong content) are in tests/test_exercises_lessonNN.py, lesson 05's
capstone (05.2) in tests/test_exercises_capstone.py.
"""

import functools
import json
import os
import time
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from helpers import exercises

KEYS = exercises.all_keys()

#: Words a hint must not contain, because they would give the answer away (the old hints did): each exercise's
#: own, registered with it (``register(..., giveaways=[...])``).
GIVEAWAYS = {key: list(exercises.get(key).giveaways) for key in KEYS}


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


def one_job_verdicts(key, module, mode, answers, monkeypatch):
    """Each answer's verdict for ``key``, judged on its own reports from one two-process job for all of them
    (``module.run_answers``: lesson 07's workers or lesson 12's ranks, each answer on a fresh model), instead of a
    job per answer; {answer: (ok, text)}. An answer that raises or waits forever ends the job: give it alone."""
    runs = dict(zip(answers, module.run_answers(answers, mode)))

    def reports(fn, asked):     # the checker asks for its exercise's mode: reports of another would be misjudged
        assert asked == mode, f"{key}'s checker runs its answers in mode {asked!r}, not {mode!r}"
        return runs[fn]
    monkeypatch.setattr(module, "_run_answer", reports)
    verdicts = {}
    for answer in answers:
        ok, text = exercises.verdict(key, answer)
        assert text.startswith(f"Exercise {key} - {'correct' if ok else 'not yet'}: "), text
        assert "could not check" not in text, text
        verdicts[answer] = ok, text
    return verdicts


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
    missing = [k for k, words in GIVEAWAYS.items() if not words]
    assert not missing, f"every exercise needs its giveaways (register(..., giveaways=[...])): {missing}"


#: Exercises whose checkers start processes (two workers, a JAX subprocess, the capstone's training runs): each
#: registers itself with ``slow=True``; test_solution_is_correct fails one unregistered that takes as long.
SLOW_KEYS = {key for key in KEYS if exercises.get(key).slow}
#: Seconds a solution's check may take unless its exercise is registered slow: twice the suite's 30 s for any test,
#: so that a loaded machine (CI runs both stacks' tests at once) does not fail a fast checker.
FAST_S = 60


@pytest.mark.parametrize("key", [pytest.param(k, marks=pytest.mark.slow) if k in SLOW_KEYS else k for k in KEYS])
def test_solution_is_correct(key, replicas, capsys, monkeypatch):
    ex = exercises.get(key)
    start = time.perf_counter()
    ok, text = exercises.verdict(key, ex.solution())
    took = time.perf_counter() - start
    assert ex.slow or took < FAST_S, f"{key}'s checker took {took:.0f} s: register it with slow=True"
    assert ok, f"{key}: solution rejected: {text}"
    assert text.startswith(f"Exercise {key} - correct: ") and len(text) > 40, text
    assert "Hint" not in text
    monkeypatch.setattr(exercises, "verdict", lambda k, answer: (ok, text) if k == key else None)  # checked once
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


#: Answers that are code: a function, a class, an instance of a framework class, or a script (its path).
CODE_KINDS = ("function", "class", "pathlib.PurePath")


def test_at_most_two_exercises_have_a_bare_value_as_the_answer():
    """The exercises practise the job: nearly every answer is code the checker runs."""
    def is_code(kind):
        return kind in CODE_KINDS or ("." in kind and kind.split(".")[0] in ("keras", "tf", "tensorflow", "jax"))
    bare = [k for k in KEYS if not any(is_code(kind) for kind in exercises.get(k).expects)]
    assert len(bare) <= 2, f"exercises answered by a bare value: {bare}"


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

    exercises.register("99.8", title="t", checker=lambda a: (True, "ok"), solution=lambda: keras.layers.Lambda(abs),
                       expects="keras.layers.Lambda", wants="a keras.layers.Lambda layer")
    try:
        ok, text = exercises.verdict("99.8", keras.layers.Lambda)
        assert not ok and "the class Lambda itself (not an instance)" in text
        assert "create one, Lambda(...)" in text
    finally:
        exercises.REGISTRY.pop("99.8")


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


def test_register_writes_a_function_exercises_wants_as_a_function():
    """The message "this exercise wants a function ..." (test_wrong_kind_gets_a_targeted_message) holds for every
    function exercise, whatever its author wrote in wants."""
    def solve():
        return lambda x: x

    for wants, said in [("train(strategy, x, y)", "a function train(strategy, x, y)"), ("", "a function"),
                        ("a function f(x)", "a function f(x)")]:
        ex = exercises.register("99.6", title="t", checker=lambda a: (True, "ok"), solution=solve,
                                expects="function", wants=wants)
        try:
            assert ex.wants == said
            assert f"you passed the number 42, but this exercise wants {said}" in exercises.verdict("99.6", 42)[1]
        finally:
            exercises.REGISTRY.pop("99.6")


def test_register_validates():
    with pytest.raises(ValueError):
        exercises.register("1.1", title="t", checker=lambda a: (True, "ok"), solution=lambda: 1)
    with pytest.raises(ValueError):
        exercises.register("99.1", title="t", checker=None, solution=lambda: 1)
    with pytest.raises(ValueError, match="unknown answer kind"):
        exercises.register("99.1", title="t", checker=lambda a: (True, "ok"), solution=lambda: 1,
                           expects="thing")
    with pytest.raises(ValueError, match="giveaways must be"):
        exercises.register("99.1", title="t", checker=lambda a: (True, "ok"), solution=lambda: 1, giveaways="sort")
    with pytest.raises(ValueError, match="slow must be"):
        exercises.register("99.1", title="t", checker=lambda a: (True, "ok"), solution=lambda: 1, slow="yes")
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


# ---- checks that end and cannot be fooled (time limit, plain values) ----------------------------------------

def _endless(answer):
    while True:                          # a checker stuck forever, as one running an endless answer would be
        pass


def test_every_check_has_a_time_limit_through_verdict(monkeypatch, replicas):
    """Every exercise, the capstone (05.2) and the two-process ones (07, 12) included, is stopped by verdict's limit."""
    import dataclasses

    for key in KEYS:
        ex = exercises.get(key)
        assert ex.time_limit >= exercises.TIME_LIMIT_S, key
        monkeypatch.setitem(exercises.REGISTRY, key, dataclasses.replace(ex, checker=_endless))
        ok, text = exercises.verdict(key, ex.solution(), time_limit=0.2)
        assert not ok and "no verdict within 0.2 s, the time limit of this check: " in text, (key, text)
        assert "the check was in _endless" in text or "your code was running _endless" in text, text


def test_the_limits_leave_room_for_the_launchers_own_timeouts():
    """A check that starts processes says why they hung (its launcher's timeout) before verdict's limit stops it."""
    from helpers.exercises import capstone, harness, lesson07, lesson12

    assert exercises.get("05.2").time_limit > 2 * capstone.RUN_TIMEOUT
    assert exercises.get("07.1").time_limit == exercises.get("07.2").time_limit > lesson07.TIMEOUT
    assert exercises.get("12.1").time_limit == exercises.get("12.2").time_limit > lesson12.TIMEOUT + harness.TERM_GRACE_S
    for key in ("08.1", "10.1", "11.1", "11.2"):
        assert exercises.get(key).time_limit == exercises.JAX_TIME_LIMIT_S, key


def test_an_endless_answer_is_stopped_and_its_line_named():
    def loops(n):
        while n > 0:                     # the answer's line
            n += 1

    exercises.register("99.6", title="t", checker=lambda answer: (answer(1) == 2, "done"), solution=lambda: loops,
                       expects="function", hint="h", time_limit=0.5)
    try:
        ok, text = exercises.verdict("99.6", loops)
        assert not ok and text.startswith("Exercise 99.6 - not yet: no verdict within 0.5 s, the time limit of "
                                          "this check: your code was running loops, line "), text
        assert "of test_exercises.py: `while n > 0:" in text and text.endswith("\n  Hint: h"), text
    finally:
        exercises.REGISTRY.pop("99.6")
    with pytest.raises(ValueError, match="time_limit must be a number of seconds > 0"):
        exercises.register("99.6", title="t", checker=lambda a: (True, ""), solution=lambda: 1, time_limit=0)
    with pytest.raises(ValueError, match="time_limit"):
        exercises.verdict("00.1", ..., time_limit=-1)


def test_plain_values_are_compared_not_what_an_answer_says_about_itself():
    class Yes(str):
        def __eq__(self, other):
            return True

        def __ne__(self, other):
            return False

        __hash__ = str.__hash__

    class Big(int):
        def __eq__(self, other):
            return True

    assert exercises.as_str("x", Yes("1,2")) != "0,3" and type(exercises.as_str("x", Yes("a"))) is str
    assert exercises.as_int("n", Big(3)) != 64 and exercises.as_int("n", np.int64(7)) == 7
    assert exercises.as_float("lr", np.float32(0.5)) == 0.5 and exercises.as_float("lr", tf.constant(2.0)) == 2.0
    for bad, convert in (("64", exercises.as_int), (64.0, exercises.as_int), (True, exercises.as_int),
                         ("0.1", exercises.as_float), (None, exercises.as_float), (3, exercises.as_str)):
        with pytest.raises(TypeError, match=repr(bad).replace("(", r"\(").replace(".", r"\.")):
            convert("the value", bad)

    class Lying(dict):
        def get(self, key, default=None):
            return "3,5"

    assert exercises.as_str_dict("env", Lying(A="1")) == {"A": "1"}
    with pytest.raises(TypeError, match=r"env\['A'\] must be a string, got 1 \(int\)"):
        exercises.as_str_dict("env", {"A": 1})


def test_take_reads_an_endless_dataset_one_element_past_what_it_wants():
    endless = tf.data.Dataset.range(3).repeat()
    assert [int(v) for v in exercises.take(endless, 4)] == [0, 1, 2, 0, 1]
    assert len(exercises.take(tf.data.Dataset.range(3), 4)) == 3
    with pytest.raises(TypeError, match="must be a tf.data.Dataset"):
        exercises.take([1, 2], 1)
