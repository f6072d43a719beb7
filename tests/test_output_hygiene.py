"""The root conftest's check of what a learner sees in a cell: noise lines and stray results fail the cell."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("root_conftest_hygiene", ROOT / "conftest.py")
root_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(root_conftest)


def _stream(text, name="stderr"):
    return {"output_type": "stream", "name": name, "text": text}


def _result(text):
    return {"output_type": "execute_result", "data": {"text/plain": text}}


def test_clean_outputs_pass():
    outs = [_stream("replicas: 2\n", "stdout"), _result("{'loss': 0.1}"), _stream("Falsetto\n", "stdout")]
    assert root_conftest.output_problems(outs, driver=False) == []


def test_noise_and_stray_results_are_named():
    outs = [_stream("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"),
            _stream("E0000 cuda_platform.cc:52] failed call to cuInit: UNKNOWN ERROR (303)\n"),
            _result("False"), _result("None"),
            _result("<function helpers.exercises.lesson03._solve_make_model.<locals>.make_model(strategy)>")]
    problems = root_conftest.output_problems(outs, driver=False)
    assert len(problems) == 5
    assert "absl::InitializeLog" in problems[0] and "Out[...]: False" in problems[2]


def test_a_line_quoted_on_stdout_is_the_lesson_not_noise():
    outs = [_stream("what TensorFlow said about CUDA:\n  E0000 failed call to cuInit: UNKNOWN ERROR (303)\n", "stdout")]
    assert root_conftest.output_problems(outs, driver=False) == []


def test_cuinit_counts_only_without_a_driver():
    outs = [_stream("E0000 failed call to cuInit: CUDA_ERROR_NO_DEVICE\n")]
    assert root_conftest.output_problems(outs, driver=True) == []
    assert root_conftest.output_problems(outs, driver=False)
