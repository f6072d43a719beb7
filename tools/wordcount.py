"""The course's one word-counting rule: the prose budgets (nblint's ``words`` rule) and the workshop guide's
reading table use it.

Rule:
- prose is the markdown cells of the lessons, without fenced code blocks, badges and HTML tags;
- a word is a token that starts with a letter or a digit;
- "words before the first multi-replica fit" count prose from lesson 00's first cell, in lesson order, up to the
  first code cell that both opens a strategy's scope (``with strategy.scope():``) and calls ``.fit(``: the
  quick start's script cell. A cell that only calls ``fit`` cannot be told apart statically from a one-device
  ``fit``, so this rule can only find the first fit later than it is, never earlier.

Usage: python tools/wordcount.py [--json]   (prints words per notebook, the totals and the first-fit figure)
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"

#: Budgets of the house style: lessons 00-10, the whole course, one notebook, the first fit. A lesson's own budget
#: is the ``words`` of its registry entry (``metadata.course``, tools/registry.py), at most NOTEBOOK_BUDGET.
CORE_BUDGET = 18_000
COURSE_BUDGET = 24_000   # 21,800, then lesson 13 (+1,800) and lesson 11's Gemma 3 (+400)
NOTEBOOK_BUDGET = 2_600
FIRST_FIT_BUDGET = 700

_FENCE = re.compile(r"```.*?```", re.S)
_BADGE = re.compile(r"\[!\[[^\]]*\]\([^)]*\)\]\([^)]*\)")
_TAG = re.compile(r"<[^>]+>")
_WORD = re.compile(r"[A-Za-z0-9][\w'.-]*")
_FIT = re.compile(r"\.fit\(")
_STRATEGY = re.compile(r"with \w*\.?scope\(\):")


def prose_words(markdown: str) -> int:
    """Words of one markdown cell's prose, by the rule above."""
    if not isinstance(markdown, str):
        raise ValueError(f"markdown must be a str, got {type(markdown).__name__}")
    text = _TAG.sub(" ", _BADGE.sub(" ", _FENCE.sub(" ", markdown)))
    return len(_WORD.findall(text))


def _cells(path: Path) -> list[dict]:
    cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    return [{"type": c["cell_type"], "source": "".join(c["source"])} for c in cells]


def budget(path: Path) -> int:
    """A lesson's prose budget: its registry entry's ``words`` (lesson 02: 1,000), never over NOTEBOOK_BUDGET."""
    words = json.loads(Path(path).read_text(encoding="utf-8")).get("metadata", {}).get("course", {}).get("words")
    ok = isinstance(words, int) and not isinstance(words, bool) and words > 0
    return min(words, NOTEBOOK_BUDGET) if ok else NOTEBOOK_BUDGET


def notebook_words(path: Path) -> int:
    """Prose words of one notebook (fenced code blocks are not prose, so a code block in markdown is free)."""
    return sum(prose_words(c["source"]) for c in _cells(path) if c["type"] == "markdown")


def lessons(folder: Path = NOTEBOOKS) -> list[Path]:
    """The numbered lessons, in lesson order."""
    return sorted(Path(folder).glob("[0-9][0-9]_*.ipynb"))


def words_before_first_fit(paths: list[Path]) -> tuple[int, str]:
    """Prose words before the first multi-replica ``fit`` cell, and where that cell is ("03 cell 23")."""
    total = 0
    for path in paths:
        for index, cell in enumerate(_cells(path)):
            if cell["type"] == "markdown":
                total += prose_words(cell["source"])
                continue
            if _STRATEGY.search(cell["source"]) and _FIT.search(cell["source"]):
                return total, f"{path.name[:2]} cell {index}"
    raise ValueError("no code cell opens a strategy scope and calls .fit( in any lesson")


def report(folder: Path = NOTEBOOKS) -> dict:
    """Words per lesson, the core (00-10) and course totals, the first-fit figure, and any budget broken."""
    paths = lessons(folder)
    per = {p.name[:2]: notebook_words(p) for p in paths}
    budgets = {p.name[:2]: budget(p) for p in paths}
    core = sum(v for k, v in per.items() if k <= "10")
    first, where = words_before_first_fit(paths)
    over = [f"{k}: {v} words (budget {budgets[k]})" for k, v in per.items() if v > budgets[k]]
    if core > CORE_BUDGET:
        over.append(f"lessons 00-10: {core} words (budget {CORE_BUDGET})")
    if sum(per.values()) > COURSE_BUDGET:
        over.append(f"course: {sum(per.values())} words (budget {COURSE_BUDGET})")
    if first > FIRST_FIT_BUDGET:
        over.append(f"first multi-replica fit after {first} words, at {where} (budget {FIRST_FIT_BUDGET})")
    return {"per_notebook": per, "core": core, "course": sum(per.values()),
            "first_fit_words": first, "first_fit_at": where, "over_budget": over}


def main(argv: list[str]) -> int:
    rep = report()
    if "--json" in argv:
        print(json.dumps(rep, indent=1))
        return 0
    for k, v in rep["per_notebook"].items():
        print(f"{k}  {v:6,d}")
    print(f"00-10 {rep['core']:6,d}  (budget {CORE_BUDGET:,d})")
    print(f"all   {rep['course']:6,d}  (budget {COURSE_BUDGET:,d})")
    print(f"first multi-replica fit: {rep['first_fit_at']}, after {rep['first_fit_words']:,d} words")
    for line in rep["over_budget"]:
        print("OVER:", line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
