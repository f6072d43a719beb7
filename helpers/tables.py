"""Plain-text tables (no pandas): lessons' small tables read the same in Jupyter, CI logs and a terminal."""

from __future__ import annotations

from typing import Iterable, Mapping, Optional, Sequence

from .checks import is_int


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.1f}"
    if is_int(value):
        return f"{value:,}"
    return str(value)


def format_table(rows: Iterable[Mapping[str, object]], columns: Optional[Sequence[str]] = None) -> str:
    """Dict rows as an aligned text table: numbers right-aligned, None and missing keys as '-'; ``columns``: the
    column order (default: the rows' keys in first-seen order)."""
    rows = list(rows)
    if not all(isinstance(r, Mapping) for r in rows):
        raise ValueError(f"each row must be a dict, got {[type(r).__name__ for r in rows]}")
    columns = [str(c) for c in (dict.fromkeys(k for r in rows for k in r) if columns is None else columns)]
    if not columns:
        raise ValueError("nothing to show: no rows and no columns")
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    filled = [[r[c] for r in rows if r.get(c) is not None] for c in columns]
    numeric = [bool(vs) and all(is_int(v) or isinstance(v, float) for v in vs) for vs in filled]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric)).rstrip()

    out = [line(columns), "  ".join("-" * w for w in widths)]
    out += [line(row) for row in cells]
    return "\n".join(out)


def print_table(rows: Iterable[Mapping[str, object]], columns: Optional[Sequence[str]] = None) -> None:
    """Print :func:`format_table` of ``rows``."""
    print(format_table(rows, columns))
