"""Show errors on purpose, and fail loudly the day they stop happening.

Why: a cell that demonstrates an error must let "Run All" go on, print the error, and break CI once
the error no longer occurs (nbval's ``raises-exception`` tag passes when nothing is raised)::

    with expect_error(RuntimeError, match="Mixing different"):
        model.compile(...)
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Optional, Union

MAX_LINES, MAX_CHARS = 6, 600   # what format_error keeps of a message


@dataclass
class CaughtError:
    """What :func:`expect_error` caught; ``exception`` is None until the block ends."""

    exception: Optional[BaseException] = None
    message: str = ""
    lines: list = field(default_factory=list)


def format_error(exc: BaseException) -> str:
    """``ExcType: message``, trimmed to :data:`MAX_LINES` lines and :data:`MAX_CHARS` characters for reading."""
    lines = [ln.rstrip() for ln in str(exc).strip().splitlines() if ln.strip()] or [""]
    out = f"{type(exc).__name__}: " + "\n    ".join(lines[:MAX_LINES])
    if len(out) > MAX_CHARS:
        return out[: MAX_CHARS - 3].rstrip() + "..."
    return out + (f"\n    ... ({len(lines) - MAX_LINES} more lines)" if len(lines) > MAX_LINES else "")


@contextmanager
def expect_error(exc_type: Union[type, tuple], match: Optional[str] = None,
                 quiet: bool = False) -> Iterator[CaughtError]:
    """Run a block that must raise ``exc_type`` (and match ``match``, a regex searched in the message): the error is
    printed (unless ``quiet``), swallowed and put in the yielded :class:`CaughtError`. ``AssertionError`` (the
    original error chained) when the block raises nothing, another type, or a message that does not match."""
    types = exc_type if isinstance(exc_type, tuple) else (exc_type,)
    if not types or not all(isinstance(t, type) and issubclass(t, BaseException) for t in types):
        raise ValueError(f"exc_type must be an exception class or a tuple of them, got {exc_type!r}")
    if match is not None and not isinstance(match, str):
        raise ValueError(f"match must be a regex string or None, got {match!r}")
    expected = " or ".join(t.__name__ for t in types)
    caught = CaughtError()
    try:
        yield caught
    except types as exc:  # noqa: B902 - the expected case
        if match is not None and not re.search(match, str(exc), flags=re.S):
            raise AssertionError(
                f"expected {expected} matching {match!r}, but the message was:\n{format_error(exc)}") from exc
        caught.exception, caught.message, caught.lines = exc, str(exc), str(exc).splitlines()
        if not quiet:
            print(f"[expected error] {format_error(exc)}")
        return
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        raise AssertionError(f"expected {expected}, but got a different error:\n{format_error(exc)}") from exc
    raise AssertionError(
        f"expected {expected}{f' matching {match!r}' if match else ''}, but no error was raised. "
        "The behaviour this cell demonstrates has changed: update the lesson.")
