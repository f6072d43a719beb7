"""The two-process harness of exercises 07 and 12 (helpers/exercises/harness.py), with a stand-in launcher: what
answer.py holds, how each answer's reports come back, and the errors, without starting a framework."""

import json
import runpy

import pytest

from helpers.exercises import harness, lesson07, lesson12

WORKER = "import answer\n"       # never run here: the stand-in launcher plays the processes


def first(x):
    return x + 1


def second(x):
    return x * 2


def launcher(outcome, seen):
    """A launcher that runs answer.py's ANSWERS as each of 2 processes would report them: out-K-I.json."""
    def launch(work):
        seen.append(sorted(p.name for p in work.iterdir()))
        answers = runpy.run_path(str(work / "answer.py"))["ANSWERS"]
        if outcome != "ok":
            return outcome
        for k, fn in enumerate(answers):
            for i in range(2):
                (work / f"out-{k}-{i}.json").write_text(json.dumps({"name": fn.__name__, "value": fn(i)}))
        return None
    return launch


def test_each_answer_gets_its_own_reports_in_order_and_the_folder_goes(tmp_path):
    (tmp_path / "worker.py").write_text(WORKER)
    seen = []
    got = harness.run_answers([first, second], tmp_path / "worker.py", "", launcher("ok", seen), where="the ranks")
    assert got == [(True, [{"name": "first", "value": 1}, {"name": "first", "value": 2}]),
                   (True, [{"name": "second", "value": 0}, {"name": "second", "value": 2}])]
    assert seen == [["answer.py", "worker.py"]]                          # one job for both


def test_a_failed_job_gives_every_answer_its_message(tmp_path):
    (tmp_path / "worker.py").write_text(WORKER)
    got = harness.run_answers([first, second], tmp_path / "worker.py", "", launcher("the ranks failed", []),
                              where="the ranks")
    assert got == [(False, "the ranks failed")] * 2


def test_a_missing_report_is_named(tmp_path):
    (tmp_path / "worker.py").write_text(WORKER)

    def launch(work):
        (work / "out-0-0.json").write_text("{}")
        return None
    [(ok, text)] = harness.run_answers([first], tmp_path / "worker.py", "", launch, where="the ranks")
    assert not ok and text.startswith("process 1 finished without writing its report")


def test_a_lambda_is_refused_with_the_learners_message(tmp_path):
    (tmp_path / "worker.py").write_text(WORKER)
    got = harness.run_answers([lambda x: x], tmp_path / "worker.py", "", launcher("ok", []), where="the workers")
    assert got == [(False, "write your answer with `def` in a cell, not lambda: the checker copies its source into "
                           "the workers' script")]


def test_bad_arguments_say_what_is_wrong(tmp_path):
    (tmp_path / "worker.py").write_text(WORKER)
    with pytest.raises(ValueError, match="at least one function"):
        harness.run_answers([], tmp_path / "worker.py", "", launcher("ok", []), where="the ranks")
    with pytest.raises(ValueError, match=r"a name of its own in one job, \['first'\]"):
        harness.run_answers([first, first], tmp_path / "worker.py", "", launcher("ok", []), where="the ranks")
    with pytest.raises(ValueError, match="mode must be 'step' or 'epochs'"):
        lesson12.run_answers([first], "data")
    with pytest.raises(ValueError, match="mode must be 'step' or 'data'"):
        lesson07.run_answers([first], "epochs")
