"""Show errors on purpose, and fail loudly the day they stop happening.

Why: half of this course is about errors (the 2017 ones and today's).  A cell
that demonstrates an error must (a) let "Run All" continue, (b) print the error
readably, and (c) break CI if the error no longer occurs - otherwise the lesson
silently teaches something false.  ``expect_error`` does all three::

    with expect_error(RuntimeError, match="Mixing different"):
        model.compile(...)

It is deliberately stricter than nbval's ``raises-exception`` tag, which passes
when nothing is raised.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Optional, Union

ExcTypes = Union[type, tuple]


@dataclass
class CaughtError:
    """What :func:`expect_error` caught; ``exception`` is None until the block ends."""

    exception: Optional[BaseException] = None
    message: str = ""
    type_name: str = ""
    lines: list = field(default_factory=list)


def format_error(exc: BaseException, max_lines: int = 6, max_chars: int = 600) -> str:
    """``ExcType: message``, trimmed to a few lines and characters for reading."""
    if max_lines < 1 or max_chars < 20:
        raise ValueError("max_lines must be >= 1 and max_chars >= 20")
    text = str(exc).strip()
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()] or [""]
    shown = lines[:max_lines]
    out = f"{type(exc).__name__}: " + "\n    ".join(shown)
    if len(out) > max_chars:
        out = out[: max_chars - 3].rstrip() + "..."
    elif len(lines) > max_lines:
        out += f"\n    ... ({len(lines) - max_lines} more lines)"
    return out


def _check_types(exc_type: ExcTypes) -> tuple:
    types = exc_type if isinstance(exc_type, tuple) else (exc_type,)
    if not types or not all(isinstance(t, type) and issubclass(t, BaseException) for t in types):
        raise ValueError(f"exc_type must be an exception class or a tuple of them, got {exc_type!r}")
    return types


@contextmanager
def expect_error(
    exc_type: ExcTypes, match: Optional[str] = None, quiet: bool = False
) -> Iterator[CaughtError]:
    """Run a block that must raise ``exc_type`` (and match ``match``, a regex searched in the message).

    On the expected error: prints ``ExcType: message`` (unless ``quiet``), swallows it
    and fills the yielded :class:`CaughtError`.
    Raises ``AssertionError`` when the block raises nothing, raises another type, or
    the message does not match - the original error is chained for debugging.
    """
    types = _check_types(exc_type)
    if match is not None and not isinstance(match, str):
        raise ValueError(f"match must be a regex string or None, got {match!r}")
    expected = " or ".join(t.__name__ for t in types)
    caught = CaughtError()
    try:
        yield caught
    except types as exc:  # noqa: B902 - the expected case
        message = str(exc)
        if match is not None and not re.search(match, message, flags=re.S):
            raise AssertionError(
                f"expected {expected} matching {match!r}, but the message was:\n{format_error(exc)}"
            ) from exc
        caught.exception, caught.message, caught.type_name = exc, message, type(exc).__name__
        caught.lines = message.splitlines()
        if not quiet:
            print(f"[expected error] {format_error(exc)}")
        return
    except BaseException as exc:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise AssertionError(
            f"expected {expected}, but got a different error:\n{format_error(exc)}"
        ) from exc
    raise AssertionError(
        f"expected {expected}{f' matching {match!r}' if match else ''}, but no error was raised. "
        "The behaviour this cell demonstrates has changed: update the lesson."
    )
