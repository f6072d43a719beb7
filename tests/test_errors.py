"""helpers.errors.expect_error: prints the expected error, fails when it stops happening."""

import pytest

from helpers.errors import expect_error, format_error


def test_expected_error_is_printed_and_swallowed(capsys):
    with expect_error(ValueError, match="bad thing") as caught:
        raise ValueError("a bad thing happened\nsecond line")
    assert isinstance(caught.exception, ValueError)
    assert caught.message.startswith("a bad") and caught.lines[1] == "second line"
    assert "[expected error] ValueError: a bad thing happened" in capsys.readouterr().out


def test_no_error_fails():
    with pytest.raises(AssertionError, match="no error was raised"):
        with expect_error(KeyError):
            pass


def test_other_error_fails_and_chains():
    with pytest.raises(AssertionError, match="different error") as info:
        with expect_error(KeyError):
            raise TypeError("nope")
    assert isinstance(info.value.__cause__, TypeError)


def test_message_mismatch_fails():
    with pytest.raises(AssertionError, match="matching"):
        with expect_error(ValueError, match="^exact words$"):
            raise ValueError("other words")


def test_subclass_and_tuple_accepted(capsys):
    with expect_error((KeyError, ValueError)):
        raise KeyError("k")
    with expect_error(LookupError):
        raise IndexError("i")
    with expect_error(ImportError, quiet=True):
        raise ModuleNotFoundError("m")
    assert capsys.readouterr().out.count("[expected error]") == 2


@pytest.mark.parametrize("bad", [ValueError("x"), "ValueError", (), (ValueError, 3), int])
def test_bad_exc_type(bad):
    with pytest.raises(ValueError, match="exc_type"):
        with expect_error(bad):
            pass


def test_bad_match():
    with pytest.raises(ValueError, match="match"):
        with expect_error(ValueError, match=3):
            pass


def test_keyboard_interrupt_not_swallowed():
    with pytest.raises(KeyboardInterrupt):
        with expect_error(ValueError):
            raise KeyboardInterrupt


def test_format_error_trims():
    long = ValueError("\n".join(f"line {i}" for i in range(20)))
    text = format_error(long)
    assert text.startswith("ValueError: line 0") and "14 more lines" in text
    assert len(format_error(ValueError("x" * 5000))) == 600
