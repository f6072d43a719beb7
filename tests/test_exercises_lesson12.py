"""Lesson 12's exercises: right, wrong and unattempted answers, each checked on two real torchrun ranks.

A learner's check starts a 2-process torchrun job with Keras on PyTorch (seconds, hence ``slow``). Here the answers
of one exercise that end on both ranks share one job (``one_job_verdicts``: each on a fresh model, each judged on
its own reports); an answer that raises or waits forever has a job of its own. The solutions themselves run in
tests/test_exercises.py; the broken function the notebook shows for 12.2 is taken from its exercise cell.
"""

import importlib.util
import json
import signal
from pathlib import Path

import pytest
import torch  # noqa: F401  (the wrong answers below name torch, as the ranks' answer.py does)
from test_exercises import one_job_verdicts

from helpers import exercises
from helpers.exercises import lesson12

#: The wrong-answer cases run on one stack: a wrong answer fails for its logic, whatever the versions; on the
#: other stacks the solution (tests/test_exercises.py) and the lesson run.
WRONG_ANSWERS = pytest.mark.one_stack(reason="wrong answers fail for their logic, whatever the versions")

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "12_pytorch_backend_across_devices.ipynb"


def _verdict(key, answer):
    ok, text = exercises.verdict(key, answer)
    assert text.startswith(f"Exercise {key} - {'correct' if ok else 'not yet'}: "), text
    assert "could not check" not in text, text
    return ok, text


# ---- 12.1: the DDP step ------------------------------------------------------------------------------

def keras_loss_as_it_is(ddp_model, optimizer, loss_fn, x, y):     # right, written another way
    optimizer.zero_grad(set_to_none=True)
    loss_fn(y, ddp_model(x, training=True)).backward()
    optimizer.step()


def pytorch_train_mode(ddp_model, optimizer, loss_fn, x, y):       # right numbers here, but Keras never reads
    ddp_model.train()                                               # .train(): Dropout and BatchNorm would not
    optimizer.zero_grad()                                           # train (keras layer.py, "Infer training value")
    loss_fn(y, ddp_model(x)).backward()
    optimizer.step()


def divided_by_the_ranks(ddp_model, optimizer, loss_fn, x, y):     # code for tf.distribute: averaged twice
    optimizer.zero_grad()
    (loss_fn(y, ddp_model(x, training=True)) / torch.distributed.get_world_size()).backward()
    optimizer.step()


def around_ddp(ddp_model, optimizer, loss_fn, x, y):               # the unwrapped model: no all-reduce
    optimizer.zero_grad()
    loss_fn(y, ddp_model.module(x, training=True)).backward()
    optimizer.step()


def gradients_kept(ddp_model, optimizer, loss_fn, x, y):           # no zero_grad: step 2 adds step 1's gradients
    loss_fn(y, ddp_model(x, training=True)).backward()
    optimizer.step()


def no_step(ddp_model, optimizer, loss_fn, x, y):
    loss_fn(y, ddp_model(x, training=True))


def raises(ddp_model, optimizer, loss_fn, x, y):                  # a typo: the ranks fail, the checker says why
    optimizer.zero_grad()
    loss_fn(y, ddp_model(x, training=True)).backward()
    optimizer.stpe()


#: 12.1's answers that end on both ranks, with the verdict and words each gets: `raises` ends its job, so it runs
#: alone (test_12_1_an_answer_that_raises_is_named).
CASES_12_1 = [
    (keras_loss_as_it_is, True, "one process's step on the global batch of 32, twice"),
    (pytorch_train_mode, False, "the steps are right for this model, but your code called the model without "
                                "training=True: Keras takes the flag from the call, never from PyTorch's .train()"),
    (divided_by_the_ranks, False, "the step is 0.500x one process's step on the global batch of 32 (want 1x): "
                                  "the loss was averaged twice"),
    (around_ddp, False, "the two ranks' weights differ after a step: call the model DDP wrapped"),
    (gradients_kept, False, "the first step is right, the second is not"),
    (no_step, False, "the weights did not change"),
]


@WRONG_ANSWERS
@pytest.mark.slow  # reason: one 2-rank torchrun job with Keras on PyTorch for all six answers (about 10 s here)
def test_12_1_on_two_ranks(monkeypatch):
    """Each answer's verdict on its own reports from one torchrun job (each on a fresh model: the right one among
    them passes, so no answer's steps leak into the next)."""
    got = one_job_verdicts("12.1", lesson12, "step", [answer for answer, _, _ in CASES_12_1], monkeypatch)
    wrong = [f"{answer.__name__}: {got[answer][1]}" for answer, ok, words in CASES_12_1
             if got[answer][0] is not ok or words not in got[answer][1]]
    assert not wrong, "\n".join(wrong)


@WRONG_ANSWERS
@pytest.mark.slow  # reason: a 2-rank torchrun job with Keras on PyTorch (about 10 s here)
def test_12_1_an_answer_that_raises_is_named():
    got, text = _verdict("12.1", raises)
    assert not got and "your function raised, in rank 0: AttributeError: 'SGD' object has no attribute 'stpe'" in text


def test_12_1_unattempted_and_lambda_start_nothing(monkeypatch):
    monkeypatch.setattr(lesson12.subproc, "run", lambda *a, **k: pytest.fail("a torchrun job was started"))
    ok, text = exercises.verdict("12.1", ...)
    assert not ok and text == f"Exercise 12.1: not attempted yet. Hint: {exercises.get('12.1').hint}"
    ok, text = _verdict("12.1", lambda ddp_model, optimizer, loss_fn, x, y: ddp_model(x))
    assert not ok and "with `def`" in text, text


# ---- 12.2: fix the epochs -------------------------------------------------------------------------------

def _notebook_run_epochs(tmp_path):
    """The broken run_epochs the notebook's exercise cell shows, imported from a file (the checker reads its source)."""
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    [source] = ["".join(c["source"]) for c in cells if 'check("12.2"' in "".join(c["source"])]
    path = tmp_path / "broken12.py"
    path.write_text(source.split("\nanswer = ...")[0])
    spec = importlib.util.spec_from_file_location("broken12", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.run_epochs


def only_set_epoch_missing(ddp_model, loader, optimizer, loss_fn, epochs, out_dir):
    for _ in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(y, ddp_model(x, training=True)).backward()
            optimizer.step()
        if torch.distributed.get_rank() == 0:
            ddp_model.module.save(f"{out_dir}/model.keras")


def every_rank_saves(ddp_model, loader, optimizer, loss_fn, epochs, out_dir):
    for epoch in range(epochs):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(y, ddp_model(x, training=True)).backward()
            optimizer.step()
        ddp_model.module.save(f"{out_dir}/model.keras")


def nobody_saves(ddp_model, loader, optimizer, loss_fn, epochs, out_dir):
    for epoch in range(epochs):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(y, ddp_model(x, training=True)).backward()
            optimizer.step()


@WRONG_ANSWERS
@pytest.mark.slow  # reason: one 2-rank torchrun job with Keras on PyTorch for all four answers (about 10 s here)
def test_12_2_wrong_answers_and_the_notebooks_broken_function(tmp_path, monkeypatch):
    """Each on its own reports from one torchrun job; the notebook's broken function has both faults."""
    broken = _notebook_run_epochs(tmp_path)
    cases = {only_set_epoch_missing: ["each epoch read the same rows in the same order"],
             every_rank_saves: ["rank 1 wrote ['model.keras'] too"],
             nobody_saves: ["rank 0 wrote no checkpoint"],
             broken: ["same rows in the same order", "rank 1 wrote ['model-0.keras', 'model-1.keras'] too"]}
    got = one_job_verdicts("12.2", lesson12, "epochs", list(cases), monkeypatch)
    for answer, words in cases.items():
        ok, text = got[answer]
        assert not ok and all(w in text for w in words), (answer.__name__, text)
        assert ("same order" in text) == (answer in (only_set_epoch_missing, broken)), (answer.__name__, text)
        assert "training=True" not in text, text                  # each of them calls the model as it should


def _epochs_reports(training):
    """What the two ranks of a right 12.2 answer report (exercise12_worker.py, mode "epochs"), with the flag of
    each call of the model as ``training`` (its Mode layer's record)."""
    read = list(range(16)) + list(range(16, 32))                      # two epochs, two orders
    return [{"rank": r, "per_epoch": 16, "read": read, "files": ["model.keras"] if r == 0 else [],
             "start": [0.0], "after": [1.0], "training": training} for r in (0, 1)]


@pytest.mark.parametrize("training, ok", [([True] * 4, True), ([False] * 4, False), ([True, False] * 2, False)])
def test_12_2_wants_every_call_in_training_mode(training, ok, monkeypatch):
    """The checker's training-flag rule on the ranks' reports (the worker's recording runs for real in 12.1's
    pytorch_train_mode case): one call without training=True is enough to fail, with the reason."""
    monkeypatch.setattr(lesson12, "_run_answer", lambda fn, mode: (True, _epochs_reports(training)))
    got, text = lesson12._check_epochs(lambda *a: None)
    assert got is ok and ("called the model without training=True" in text) is not ok, text


def test_12_2_unattempted_starts_nothing(monkeypatch):
    monkeypatch.setattr(lesson12.subproc, "run", lambda *a, **k: pytest.fail("a torchrun job was started"))
    ok, text = exercises.verdict("12.2", ...)
    assert not ok and text == f"Exercise 12.2: not attempted yet. Hint: {exercises.get('12.2').hint}"


# ---- a rank that waits forever: the job ends, and nothing is left -----------------------------------------

def rank_one_waits(ddp_model, optimizer, loss_fn, x, y):          # rank 0 waits for it in the all-reduce
    import time

    if torch.distributed.get_rank() == 1:
        time.sleep(3600)
    optimizer.zero_grad()
    loss_fn(y, ddp_model(x)).backward()
    optimizer.step()


def _interrupt(signum, frame):
    raise KeyboardInterrupt


@pytest.mark.slow  # reason: each case starts a 2-rank torchrun job with Keras on PyTorch (about 20 s here)
@pytest.mark.parametrize("ending", ["the job's timeout", "the check's time limit", "an interrupt"])
def test_12_1_a_rank_that_waits_forever_leaves_no_process_and_no_folder(ending, leftovers, monkeypatch):
    """Both ranks stayed alive (parent PID 1) until gloo's 30-minute timeout: now SIGTERM to torchrun, SIGKILL after
    the grace, and every rank found by its tag."""
    if ending == "the job's timeout":
        monkeypatch.setattr(lesson12, "TIMEOUT", 25)
        ok, text = _verdict("12.1", rank_one_waits)
        assert not ok and "the two ranks did not finish within 25 s" in text, text
    elif ending == "the check's time limit":
        ok, text = exercises.verdict("12.1", rank_one_waits, time_limit=25)
        assert not ok and "no verdict within 25 s" in text and "the check was in" in text, text
    else:
        previous = signal.signal(signal.SIGALRM, _interrupt)
        signal.setitimer(signal.ITIMER_REAL, 25)
        try:
            with pytest.raises(KeyboardInterrupt):
                exercises.verdict("12.1", rank_one_waits)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    assert leftovers.processes() == [] and leftovers.folders() == []
