"""Docs that must stay true: the workshop guide's sections and lesson references; `make html` writes executed copies.

The guide's timing table is checked against its measured data in tests/test_timings.py.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_workshop_guide_keeps_its_sections():
    guide = (ROOT / "docs" / "workshop.md").read_text()
    for words in ("restart", "Colab", "Kaggle", "GPU T4 x2", "Pre-flight checklist", "Common questions",
                  "optional deep-dive", "3.0 GB", "0.5 GB"):
        assert words in guide, f"docs/workshop.md lost {words!r}"


def test_workshop_guide_mentions_only_lessons_that_exist():
    """A planned lesson appears in the guide only once its notebook exists."""
    guide = (ROOT / "docs" / "workshop.md").read_text()
    existing = {nb.name[:2] for nb in NOTEBOOKS}
    referenced = set(re.findall(r"\*\*(\d\d) ", guide))
    referenced |= set(re.findall(r"\b[Ll]essons? (\d\d)\b", guide))
    referenced |= set(re.findall(r"\b[Ll]essons? \d\d(?:, \d\d)* and (\d\d)\b", guide))
    assert referenced and referenced <= existing, f"lessons with no notebook: {sorted(referenced - existing)}"
