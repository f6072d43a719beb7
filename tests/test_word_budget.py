"""The prose budgets of the house style, counted by the one rule in tools/wordcount.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import wordcount  # tools/wordcount.py

ROOT = Path(__file__).resolve().parent.parent


def test_the_rule_counts_prose_only():
    md = ("# Title\n\n[![Open](https://x/b.svg)](https://x) Two words.\n\n```python\nnot = counted\n```\n"
          "<img src='a.png'> -- 3 more ... words")
    assert wordcount.prose_words(md) == 6     # Title, Two, words., 3, more, words ("--" and "..." are not words)
    with pytest.raises(ValueError):
        wordcount.prose_words(None)


def test_first_fit_is_the_first_cell_that_opens_a_scope_and_fits(tmp_path):
    import json

    def nb(name, cells):
        (tmp_path / name).write_text(json.dumps({"cells": [
            {"cell_type": t, "source": s, "metadata": {}} for t, s in cells]}))

    nb("00_a.ipynb", [("markdown", "one two three"), ("code", "model.fit(x)")])
    nb("01_b.ipynb", [("markdown", "four five"), ("code", "with strategy.scope():\n    m = f()\nm.fit(x)")])
    assert wordcount.words_before_first_fit(wordcount.lessons(tmp_path)) == (5, "01 cell 1")



def test_a_lessons_budget_is_its_registry_entry_never_over_the_house_limit(tmp_path):
    import json

    def nb(name, words):
        course = {} if words is None else {"course": {"words": words}}
        (tmp_path / name).write_text(json.dumps({"metadata": course, "cells": [
            {"cell_type": "markdown", "source": "word " * 1200, "metadata": {}},
            {"cell_type": "code", "source": "with strategy.scope():\n    m = f()\nm.fit(x)", "metadata": {}}]}))

    nb("00_a.ipynb", None)        # no entry: the house limit, 2,600
    nb("01_b.ipynb", 1000)        # lesson 02's kind of budget
    nb("02_c.ipynb", 9000)        # an entry cannot lift the limit
    assert [wordcount.budget(p) for p in wordcount.lessons(tmp_path)] == [2600, 1000, 2600]
    report = wordcount.report(tmp_path)
    assert report["over_budget"][0] == "01: 1200 words (budget 1000)"
    assert report["core_budget"] == report["course_budget"] == 2600 + 1000 + 2600   # the sums of the lessons'
    assert "lessons 00-10: 3600 words (budget 6200)" not in report["over_budget"]


def test_the_course_budgets_are_the_sums_of_the_lessons_budgets(tmp_path):
    import json

    for i, words in enumerate([1000] * 11 + [500, 700]):
        (tmp_path / f"{i:02d}_x.ipynb").write_text(json.dumps({"metadata": {"course": {"words": words}}, "cells": [
            {"cell_type": "markdown", "source": "word " * (words + (i == 12)), "metadata": {}},
            {"cell_type": "code", "source": "with strategy.scope():\n    m = f()\nm.fit(x)", "metadata": {}}]}))
    report = wordcount.report(tmp_path)
    assert (report["core_budget"], report["course_budget"]) == (11_000, 12_200)
    assert [o for o in report["over_budget"] if "first multi-replica fit" not in o] == [
        "12: 701 words (budget 700)", "course: 12201 words (budget 12200)"]
