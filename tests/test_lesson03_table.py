"""Lesson 03's seed-line -> today's-line table says only what the lesson's code ran and what its box runs.

The table in lesson 03's "Copy this" box answers "I have 2 GPUs: what do I change?". Its right column names calls
(``tf.distribute.MirroredStrategy(``, ``strategy.scope(``, ``model.compile(``, ``save_best_only=``...). Each one must
appear in the lesson's code cells (the lesson ran it) and in the box's python block (the script does it), so the
table cannot drift from the code.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LESSON = ROOT / "notebooks" / "03_from_multi_gpu_model_to_mirrored_strategy.ipynb"
_SPAN = re.compile(r"`([^`]+)`")
#: a call head (``model.fit(``), a keyword argument (``monitor=``) or a dotted name (``strategy.num_replicas_in_sync``)
_TOKEN = re.compile(r"[A-Za-z_][\w.]*\(|\b[A-Za-z_]\w*=(?!=)|\b[A-Za-z_]\w*(?:\.\w+)+\b")


def tokens(cell_text: str) -> list[str]:
    """The calls, keywords and dotted names written in the backticked spans of one table cell."""
    found = []
    for span in _SPAN.findall(cell_text):
        found += [t for t in _TOKEN.findall(span) if t not in found]
    return found


def right_column(markdown: str) -> list[str]:
    """The right-hand cells of a two-column markdown table (header and rule rows left out)."""
    rows = [ln for ln in markdown.splitlines() if ln.startswith("|")]
    return [row.strip().strip("|").split("|")[-1] for row in rows[2:]]


def _lesson():
    cells = json.loads(LESSON.read_text(encoding="utf-8"))["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    [box] = [("".join(c["source"])) for c in cells if c["cell_type"] == "markdown"
             and "".join(c["source"]).startswith("## Copy this\n")]
    [script] = re.findall(r"```python\n(.*?)```", box, re.S)
    return code, box, script


def test_tokens_of_a_table_cell():
    cell = "`hist = model.fit(x, batch_size=b)` anywhere; per-replica × `strategy.num_replicas_in_sync`"
    assert tokens(cell) == ["model.fit(", "batch_size=", "strategy.num_replicas_in_sync"]
    assert tokens("`ModelCheckpoint('best.keras', save_best_only=True)`") == [
        "ModelCheckpoint(", "best.keras", "save_best_only="]
    assert tokens("nothing to wrap") == [] and tokens("`CUDA_VISIBLE_DEVICES`") == []


def test_right_column_skips_the_header_and_the_rule():
    table = "| old | new |\n|---|---|\n| `a()` | `b()` |\n| `c` | `d(x=1)` |"
    assert right_column(table) == [" `b()` ", " `d(x=1)` "]


def test_every_call_of_the_right_column_is_in_the_lesson_code_and_in_the_box():
    code, box, script = _lesson()
    cells = right_column(box.split("```python")[0])
    assert len(cells) >= 7, "the table lost rows"
    names = [t for cell in cells for t in tokens(cell)]
    for must in ("tf.distribute.MirroredStrategy(", "strategy.scope(", "model.compile(", "model.fit(",
                 "strategy.num_replicas_in_sync", "ModelCheckpoint(", "model.save("):
        assert any(must in t for t in names), f"the table no longer names {must}"
    not_run = [t for t in names if t not in code]
    not_boxed = [t for t in names if t not in script]
    assert not not_run, f"the table names calls that lesson 03's code cells never run: {not_run}"
    assert not not_boxed, f"the table names calls that the 'Copy this' script does not make: {not_boxed}"
