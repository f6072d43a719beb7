"""The error index (TROUBLESHOOTING.md) as data, and the check that keeps it honest.

Why: an index of error messages rots silently - a library changes a word and the
page still claims it. Each entry in TROUBLESHOOTING.md carries its message in a
fenced block right after a ``**Message:**`` line; ``make test`` collects every
output the notebooks and tests produce and fails if any indexed message was not
produced in that run.  ``...`` inside a message stands for a part that varies
(addresses, paths), and whitespace differences are ignored.

A run split in sessions (CI: the tests in shards, the lessons apart) checks the same with
``python3 tools/error_index.py check FILE...`` once every session wrote what it printed
(``pytest --outputs-file=FILE``, tools/pytest_course.py).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

_BLOCK = re.compile(r"\*\*Message:\*\*[^\n]*\n\s*```[a-z]*\n(.*?)\n\s*```", re.S)


@dataclass(frozen=True)
class Entry:
    heading: str
    message: str


def parse(text: str) -> list[Entry]:
    """Entries of an index: the ``### heading`` each ``**Message:**`` block sits under. ValueError for an empty
    message block or a message indexed twice (one entry per message: Ctrl-F must land on one place)."""
    entries, heading = [], ""
    pos = 0
    for m in _BLOCK.finditer(text):
        before = text[pos:m.start()]
        heads = re.findall(r"^### (.+)$", before, re.M)
        heading = heads[-1].strip() if heads else heading
        message = " ".join(m.group(1).split())
        if not message:
            raise ValueError(f"empty message block under {heading!r}")
        twice = [e.heading for e in entries if e.message == message]
        if twice:
            raise ValueError(f"the message under {heading!r} is indexed twice (also under {twice[0]!r}): {message}")
        entries.append(Entry(heading, message))
        pos = m.end()
    return entries


def load(path: Path) -> list[Entry]:
    """Parse the index file at ``path``."""
    return parse(Path(path).read_text(encoding="utf-8"))


def produced(message: str, output: str) -> bool:
    """True if ``message`` (with ``...`` wildcards) occurs in ``output``, whitespace-insensitively."""
    if not message.strip():
        raise ValueError("message must not be empty")
    flat = " ".join(output.split())
    parts = [re.escape(" ".join(p.split())) for p in message.split("...")]
    pattern = r"\s*.*?\s*".join(p for p in parts)
    return re.search(pattern, flat, re.S) is not None


def missing(entries: list[Entry], output: str) -> list[Entry]:
    """The entries whose message does not occur in ``output``."""
    return [e for e in entries if not produced(e.message, output)]


def section(text: str, title: str) -> str:
    """The part of an index under its ``## <title>`` heading, up to the next ``## `` heading. ValueError if the
    index has no such heading, or has it twice."""
    starts = [m.end() for m in re.finditer(rf"^## {re.escape(title)}[ \t]*$", text, re.M)]
    if len(starts) != 1:
        raise ValueError(f"expected one '## {title}' heading, found {len(starts)}")
    end = re.search(r"^## ", text[starts[0]:], re.M)
    return text[starts[0]:starts[0] + end.start()] if end else text[starts[0]:]


#: The index: every message in it must be produced by the course's own run.
INDEX = Path(__file__).resolve().parent.parent / "TROUBLESHOOTING.md"


def unproduced(index_text: str, output: str) -> list[Entry]:
    """The entries of ``index_text`` that ``output`` does not produce, less its ``## Slurm`` section's, which come
    from a real Slurm (``make slurm-check`` produces and checks them)."""
    slurm = set(parse(section(index_text, "Slurm")))
    return missing([e for e in parse(index_text) if e not in slurm], output)


def main(argv: list[str]) -> int:
    """``check FILE...``: every indexed message (TROUBLESHOOTING.md, less the Slurm section) occurs in the files
    together (each what one session of a split run printed); exit 1 naming each that does not."""
    if len(argv) < 2 or argv[0] != "check":
        print("usage: python3 tools/error_index.py check FILE...  (what each session of a split run printed)")
        return 2
    files = [Path(a) for a in argv[1:]]
    absent = [str(f) for f in files if not f.is_file()]
    if absent:
        print(f"no such file: {', '.join(absent)} (pytest --outputs-file=FILE writes it)")
        return 2
    not_made = unproduced(INDEX.read_text(encoding="utf-8"),
                          "\n".join(f.read_text(encoding="utf-8") for f in files))
    if not_made:
        print(f"TROUBLESHOOTING.md: messages not produced by any notebook or test ({len(files)} sessions):")
        for e in not_made:
            print(f"- {e.heading}: {e.message}")
        return 1
    print(f"TROUBLESHOOTING.md: every indexed message was produced in this run ({len(files)} sessions).")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
