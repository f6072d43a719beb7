"""Docs that must stay true: the workshop guide names only lessons that exist.

The guide's tables are generated from the lessons' registry (tools/generate.py; tests/test_registry.py fails when
they are stale).
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_workshop_guide_mentions_only_lessons_that_exist():
    """A planned lesson appears in the guide only once its notebook exists."""
    guide = (ROOT / "docs" / "workshop.md").read_text()
    existing = {nb.name[:2] for nb in NOTEBOOKS}
    referenced = set(re.findall(r"\*\*(\d\d) ", guide))
    referenced |= set(re.findall(r"\b[Ll]essons? (\d\d)\b", guide))
    referenced |= set(re.findall(r"\b[Ll]essons? \d\d(?:, \d\d)* and (\d\d)\b", guide))
    assert referenced and referenced <= existing, f"lessons with no notebook: {sorted(referenced - existing)}"

