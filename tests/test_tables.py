"""helpers.tables: aligned plain-text tables."""

import pytest

from helpers.tables import format_table, print_table


def test_alignment_numbers_right_text_left():
    text = format_table([{"name": "a", "n": 5}, {"name": "long", "n": 12345, "x": None}])
    lines = text.splitlines()
    assert lines[0].split() == ["name", "n", "x"]
    assert lines[2].split() == ["a", "5", "-"] and lines[2].startswith("a   ")
    assert lines[2].index("5") == lines[3].index("12,345") + len("12,345") - 1  # right-aligned
    assert "12,345" in lines[3] and lines[3].rstrip().endswith("-")
    assert len(lines) == 4


def test_columns_and_floats(capsys):
    print_table([{"a": 1.23456, "b": "x"}], columns=["b", "a"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["b", "a"] and "1.235" in out[2]


def test_bad_rows():
    with pytest.raises(ValueError, match="dict"):
        format_table([1, 2])
    with pytest.raises(ValueError, match="nothing"):
        format_table([])
