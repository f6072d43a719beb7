"""The Setup line's pointer to TROUBLESHOOTING.md's table of Keras versions that break multi-replica training.

Why: a learner on an old image (a cluster module, an old Colab notebook) reads only the Setup line; it must send
them to the table, and the table must exist and agree with the release the line names.
"""

import re
from pathlib import Path

from helpers import versions

TROUBLESHOOTING = Path(__file__).resolve().parent.parent / "TROUBLESHOOTING.md"
STACK = {"python": "3.11.7", "tensorflow": "2.17.1", "numpy": "1.26.4"}


def _table() -> list[list[str]]:
    text = TROUBLESHOOTING.read_text(encoding="utf-8")
    section = text.split(f"## {versions.VERSION_TABLE}\n", 1)[1].split("\n## ", 1)[0]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| Keras")]


def test_a_keras_with_known_bugs_gets_a_warning_and_the_table():
    line = versions.stack_line({**STACK, "keras": "3.9.2"})
    assert f'TROUBLESHOOTING.md, "{versions.VERSION_TABLE}"' in line and "preflight.py" in line
    assert "keras 3.9.2 has known multi-replica training bugs, fixed by 3.10" in line


def test_outside_the_range_without_known_bugs_points_to_the_table_only():
    line = versions.stack_line({**STACK, "keras": "3.12.1"})
    assert versions.VERSION_TABLE in line and "known multi-replica training bugs" not in line


def test_inside_the_range_says_nothing_more():
    line = versions.stack_line({**STACK, "tensorflow": "2.21.0", "keras": "3.15.1"})
    assert line.endswith("(inside the supported range)") and versions.VERSION_TABLE not in line


def test_the_table_exists_and_its_last_fix_is_the_release_the_line_names():
    rows = _table()
    fixed = [re.fullmatch(r"(\d+\.\d+)\.\d+", row[2]) for row in rows]
    assert len(rows) >= 5 and all(len(row) == 4 for row in rows), rows
    assert max(versions.version_tuple(m.group(1)) for m in fixed if m) == versions.version_tuple(
        versions.MULTI_REPLICA_FIXED)
    assert any(row[2] == "open" and "tensorflow/tensorflow#90686" in row[3] for row in rows)   # still open upstream
    low, _ = versions.SUPPORTED["keras"]
    assert versions.version_tuple(versions.MULTI_REPLICA_FIXED) <= versions.version_tuple(low)  # the range is past them
