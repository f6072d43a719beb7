"""helpers.checks: each check returns a good value and names the argument in its ValueError."""

import math

import pytest

from helpers import checks


def test_is_int_refuses_bool_and_float():
    assert checks.is_int(3) and checks.is_int(-1)
    assert not checks.is_int(True) and not checks.is_int(2.0) and not checks.is_int("2")


def test_positive_and_nonneg_int():
    assert checks.positive_int("n", 1) == 1 and checks.positive_int("n", 2, minimum=2) == 2
    assert checks.nonneg_int("k", 0) == 0
    for bad in (0, -1, 2.0, "2", True, None):
        with pytest.raises(ValueError, match=r"^n must be an int >= 1, got "):
            checks.positive_int("n", bad)
    with pytest.raises(ValueError, match=r"^k must be an int >= 0 \(a count\), got -1$"):
        checks.nonneg_int("k", -1, why="a count")
    with pytest.raises(ValueError, match=r"^c must be an int >= 2, got 1$"):
        checks.positive_int("c", 1, minimum=2)


def test_int_between():
    assert checks.int_between("i", 3, 0, 3) == 3
    for bad in (-1, 4, 1.0, False):
        with pytest.raises(ValueError, match=r"^i must be a worker index from 0 to 3, got "):
            checks.int_between("i", bad, 0, 3, what="a worker index")


def test_numbers():
    assert checks.positive_number("t", 2) == 2.0 and isinstance(checks.positive_number("t", 2), float)
    assert checks.nonneg_number("d", 0) == 0.0
    for bad in (0, -1.0, math.nan, math.inf, True, "1"):
        with pytest.raises(ValueError, match=r"^t must be a number of seconds > 0, got "):
            checks.positive_number("t", bad, unit="seconds")
    for bad in (-0.5, math.nan, math.inf, False):
        with pytest.raises(ValueError, match=r"^d must be a number >= 0, got "):
            checks.nonneg_number("d", bad)
