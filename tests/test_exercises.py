"""Every exercise: its solution passes its checker; unattempted and wrong answers do not raise."""

import pytest

from helpers import exercises

KEYS = exercises.all_keys()


def test_registry_not_empty():
    assert KEYS, "no exercises registered"


@pytest.mark.parametrize("key", KEYS)
def test_solution_passes_checker(key, replicas, capsys):
    ex = exercises.get(key)
    ok, message = ex.checker(ex.solution())
    assert ok, f"{key}: solution rejected: {message}"
    assert isinstance(message, str) and message


@pytest.mark.parametrize("key", KEYS)
def test_unattempted_and_garbage_answers(key, capsys):
    assert exercises.check(key, ...) is False
    assert "not attempted" in capsys.readouterr().out
    assert exercises.check(key, object()) is False
    out = capsys.readouterr().out
    assert "not yet" in out and len(out.split(":", 1)[1].strip()) > 3


def test_register_validates():
    with pytest.raises(ValueError):
        exercises.register("1.1", title="t", checker=lambda a: (True, "ok"), solution=lambda: 1)
    with pytest.raises(ValueError):
        exercises.register("99.1", title="t", checker=None, solution=lambda: 1)
    with pytest.raises(ValueError, match="no exercise"):
        exercises.get("98.7")


def test_show_solution_prints_source(capsys):
    exercises.register("99.9", title="demo", checker=lambda a: (a == 42, f"got {a}"), solution=lambda: 42)
    try:
        assert exercises.show_solution("99.9") == 42
        out = capsys.readouterr().out
        assert "lambda: 42" in out and "correct" in out
    finally:
        exercises.REGISTRY.pop("99.9")
