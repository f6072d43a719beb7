"""Docs that must stay true: the workshop guide's lesson references and reading times.

The guide's timing table is checked against its measured data in tests/test_timings.py.
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


def test_workshop_reading_times_are_the_notebooks_word_counts():
    """The guide's reading-time table is what tools/wordcount.py counts now, at 180 words a minute."""
    import math

    import wordcount  # tools/wordcount.py
    guide = (ROOT / "docs" / "workshop.md").read_text()
    table = guide.split("<!-- reading:begin -->")[1].split("<!-- reading:end -->")[0]
    rows = {m.group(1): (int(m.group(2).replace(",", "")), int(m.group(3)))
            for m in re.finditer(r"^\| (\d\d) [^|]*\| ([\d,]+) \| (\d+) min \|$", table, re.M)}
    per = wordcount.report()["per_notebook"]
    assert set(rows) == set(per), f"reading table covers {sorted(rows)}, notebooks are {sorted(per)}"
    for number, (words, minutes) in rows.items():
        assert words == per[number], f"lesson {number}: table says {words} words, the notebook has {per[number]}"
        assert minutes == math.ceil(words / 180), f"lesson {number}: {words} words is {math.ceil(words / 180)} min"
