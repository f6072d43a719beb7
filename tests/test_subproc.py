"""helpers.subproc.run_python."""

import pytest

from helpers.subproc import Result, run_python


def test_env_is_passed_and_scrubbed(monkeypatch, capsys):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    r = run_python("import os; print(os.environ.get('CUDA_VISIBLE_DEVICES'), os.environ['X'])", env={"X": 5})
    assert r.ok and r.stdout.strip() == "None 5"
    assert "None 5" in capsys.readouterr().out


def test_failure_reports_last_error_line(capsys):
    r = run_python("raise KeyError('boom')")
    assert not r.ok and r.last_error_line() == "KeyError: 'boom'"
    assert "[exit code 1] KeyError: 'boom'" in capsys.readouterr().out


def test_bad_arguments():
    with pytest.raises(ValueError):
        run_python("   ")
    with pytest.raises(ValueError):
        run_python("print(1)", timeout=0)


def test_last_error_line_empty():
    assert Result(0, "", "just text\n").last_error_line() == ""
