"""The course map: the lessons in order, each with its title and what you learn (``00_start_here`` prints it).

Why: lesson 00 prints it on Colab and Kaggle too, where the helpers are pip-installed without the notebooks, so
it reads ``course_map.json``, package data written from the notebooks' own registry entries by
``make sync-notebooks`` (tools/generate.py; a test fails when it is stale).
"""

from __future__ import annotations

import json
from importlib import resources


def lessons() -> list[dict]:
    """The lessons in order: ``{"number", "notebook", "title", "summary"}`` each."""
    return json.loads(resources.files(__package__).joinpath("course_map.json").read_text(encoding="utf-8"))


def print_course_map() -> None:
    """Print the lessons in order, one line each."""
    rows = lessons()
    width = max(len(row["title"]) for row in rows)
    for row in rows:
        print(f"{row['number']}  {row['title']:<{width}}  {row['summary']}")
