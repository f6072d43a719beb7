"""Lesson 07's worker-script exercises: right, wrong and unattempted answers, each checked on two real workers.

Every checker copies the answer's source into a small worker script and starts two MultiWorkerMirroredStrategy
workers with helpers.cluster: two TensorFlow processes (~10 s). Here the answers of one exercise share one job
(``one_job_verdicts``: each on a fresh model, each judged on its own outputs); an answer that waits forever has a
job of its own. The solutions themselves run in tests/test_exercises.py.
"""

import importlib.util
import json
from pathlib import Path

import pytest
from test_exercises import one_job_verdicts

from helpers import exercises
from helpers.exercises import lesson07

#: The wrong-answer cases run on one stack: a wrong answer fails for its logic, whatever the versions; on the
#: other stacks the solution (tests/test_exercises.py) and the lesson run.
WRONG_ANSWERS = pytest.mark.one_stack(reason="wrong answers fail for their logic, whatever the versions")

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "07_multi_worker_and_fault_tolerance.ipynb"


def _verdict(key, answer):
    ok, text = exercises.verdict(key, answer)
    assert text.startswith(f"Exercise {key} - {'correct' if ok else 'not yet'}: "), text
    assert "could not check" not in text, text
    return ok, text


# ---- 07.1: the replica step -----------------------------------------------------------------------

def keras_default_loss(model, optimizer, x, y, global_batch_size):       # right: the loss object scales by 1/N
    with tf.GradientTape() as tape:
        loss = keras.losses.MeanSquaredError()(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))


def keras_loss_divided_again(model, optimizer, x, y, global_batch_size):  # the old advice: divides twice
    with tf.GradientTape() as tape:
        n = tf.distribute.get_strategy().num_replicas_in_sync
        loss = keras.losses.MeanSquaredError()(y, model(x, training=True)) / n
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))


def local_mean(model, optimizer, x, y, global_batch_size):                # divides by this worker's rows
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))


def no_update(model, optimizer, x, y, global_batch_size):
    model(x)


#: 07.1's answers, with the verdict and words each gets.
CASES_07_1 = [
    (keras_default_loss, True, "one device's step on the global batch of 8"),
    (keras_loss_divided_again, False, "the step is 1/2 of one device's: the loss was divided twice"),
    (local_mean, False, "the step is 2x one device's: each worker divided by its own 4 rows"),
    (no_update, False, "the weights did not change"),
]


@WRONG_ANSWERS
@pytest.mark.slow  # reason: one two-worker TensorFlow job for all four answers (about 10 s here)
def test_07_1_on_two_workers(monkeypatch):
    """Each answer's verdict on its own outputs from one job (each on a fresh model: the right one among them
    passes, so no answer's step leaks into the next)."""
    got = one_job_verdicts("07.1", lesson07, "step", [answer for answer, _, _ in CASES_07_1], monkeypatch)
    wrong = [f"{answer.__name__}: {got[answer][1]}" for answer, ok, words in CASES_07_1
             if got[answer][0] is not ok or words not in got[answer][1]]
    assert not wrong, "\n".join(wrong)


def test_07_1_unattempted_and_lambda_start_nothing(monkeypatch):
    monkeypatch.setattr(lesson07.cluster, "run", lambda *a, **k: pytest.fail("a worker was started"))
    ok, text = exercises.verdict("07.1", ...)
    assert not ok and text == f"Exercise 07.1: not attempted yet. Hint: {exercises.get('07.1').hint}"
    ok, text = _verdict("07.1", lambda model, optimizer, x, y, gbs: model(x))
    assert not ok and "not lambda" in text, text


# ---- 07.2: fix the input ---------------------------------------------------------------------------

def _broken_snippet(key):
    """The code the notebook's exercise cell shows above `answer = ...` (the broken version to fix)."""
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    [source] = ["".join(c["source"]) for c in cells if f'check("{key}"' in "".join(c["source"])]
    return source.split("\nanswer = ...")[0]


def _module_from(source, tmp_path):
    path = tmp_path / "broken07.py"
    path.write_text("import tensorflow as tf\n\n" + source)
    spec = importlib.util.spec_from_file_location("broken07", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_dataset


def no_shard(ctx, x, y, global_batch):
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    return ds.batch(ctx.get_per_replica_batch_size(global_batch), drop_remainder=True)


def per_worker_arithmetic(ctx, x, y, global_batch):                      # right with one replica per worker
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(64, seed=1)
    ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
    return ds.batch(global_batch // ctx.num_input_pipelines, drop_remainder=True)


@WRONG_ANSWERS
@pytest.mark.slow  # reason: one two-worker TensorFlow job for all three answers (about 10 s here)
def test_07_2_on_two_workers_and_the_broken_snippet(tmp_path, monkeypatch):
    """Each on its own outputs from one job; the notebook's broken snippet fails for both of its faults."""
    broken = _module_from(_broken_snippet("07.2"), tmp_path)
    cases = {no_shard: (False, ["both workers read the examples"]),
             per_worker_arithmetic: (True, ["both take 6 steps"]),
             broken: (False, ["a worker's batch has 8 rows: the global batch of 8 is shared by 2 workers",
                              "drop the partial last batch"])}
    got = one_job_verdicts("07.2", lesson07, "data", list(cases), monkeypatch)
    for answer, (ok, words) in cases.items():
        assert got[answer][0] is ok and all(w in got[answer][1] for w in words), (answer.__name__, got[answer][1])


# ---- a worker that waits forever: the check ends, and nothing is left ------------------------------------

def worker_one_waits(model, optimizer, x, y, global_batch_size):         # worker 0 waits for it in the all-reduce
    import json
    import os
    import time

    if json.loads(os.environ["TF_CONFIG"])["task"]["index"] == 1:
        time.sleep(3600)                        # while the step is traced: worker 0 runs on into the collective
    with tf.GradientTape() as tape:
        loss = keras.losses.MeanSquaredError()(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))


@pytest.mark.slow  # reason: each case starts two TensorFlow workers (about 15 s here)
@pytest.mark.parametrize("ending", ["the launcher's timeout", "the check's time limit"])
def test_07_1_a_worker_that_waits_forever_leaves_no_process_and_no_folder(ending, leftovers, monkeypatch):
    if ending == "the launcher's timeout":
        monkeypatch.setattr(lesson07, "TIMEOUT", 25)
        ok, text = _verdict("07.1", worker_one_waits)
        assert not ok and "the two workers did not finish within 25 s" in text, text
    else:
        ok, text = exercises.verdict("07.1", worker_one_waits, time_limit=25)
        assert not ok and "no verdict within 25 s" in text, text
    assert leftovers.processes() == [] and leftovers.folders() == []


def test_07_and_12_share_one_harness():
    from helpers.exercises import harness, lesson12

    assert lesson07.harness is lesson12.harness is harness
    with pytest.raises(harness.AnswerSourceError, match="with `def` in a cell, not lambda"):
        harness.answer_source(lambda: 0, "the workers")


# ---- imports the answers above use (the checker copies their source, with these imports) -----------
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
