"""The course's registry: each lesson described once, in its own notebook's metadata (``metadata.course``).

Why: a lesson's title, summary, Kaggle banner, workshop minutes and prose budget used to be written in seven lists
kept equal by tests. Now each notebook carries its own entry, and every list a reader sees is generated from it
(``make sync-notebooks``, tools/generate.py): README's lesson table, the course map lesson 00 prints, the workshop
guide's tables, the website's table of contents, and each notebook's badges and Kaggle line.

An entry (the lesson's number is its file name's ``NN``)::

    "course": {
      "title": "Start here",                       # short title: tables, the course map, the website's contents
      "summary": "course map, how to launch ...",  # README's "what you learn" (markdown)
      "kaggle": "The lesson uses both GPUs ...",   # what it uses on Kaggle's T4 x2, after "On Kaggle, choose ..."
      "words": 2600,                               # its prose budget (tools/wordcount.py; never over 2,600)
      "dominates": "importing TensorFlow, ...",    # what its run time is spent on (the guide's timing table)
      "workshop": [{"session": 1, "minutes": 10, "part": "the quick start", "notes": "..."}],
      "taught": ["tf.distribute.MirroredStrategy(", ...],  # the calls it teaches, each written in a cell (nblint)
      "stacks": ["pinned", "hosted", "kaggle", "latest"],  # the stacks whose `make test` runs it
      "jax": false,                                # it runs Keras on JAX (setup_notebook(backend="jax"))
      "slurm": ["mwms_job.sbatch", ...]            # the %%writefile files `make slurm-check` submits ([]: none)
    }

``session`` is 1, 2 or ``"optional"`` (listed after session 2, outside the two sessions' clocks); ``part`` names
a block when a lesson has several (``"the quick start"``, ``"(sections 1-2)"``), else it is ``""``.

Nothing else lists the lessons: the taught-calls rule (tools/nblint.py), the course's word budgets (the sum of the
lessons' ``words``, tools/wordcount.py), the JAX boxes' test (tests/test_copy_boxes.py), the Slurm check's jobs
(tools/slurm/check.py) and which notebooks each stack runs (tools/pytest_course.py) all read these entries.
Standard library only: ``make lint`` and the website's environment run it without the course's stack.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIELDS = ("title", "summary", "kaggle", "words", "dominates", "workshop", "taught", "stacks", "jax", "slurm")
BLOCK_FIELDS = ("session", "minutes", "part", "notes")
SESSIONS = (1, 2, "optional")
MAX_WORDS = 2_600
#: The stacks a lesson can run on (the Makefile's STACK=...): nightly runs only what needs Keras's main branch.
STACKS = ("pinned", "hosted", "kaggle", "latest", "nightly")


@dataclass(frozen=True)
class Block:
    """One workshop block of a lesson."""

    session: int | str
    minutes: int
    part: str
    notes: str


@dataclass(frozen=True)
class Lesson:
    """A lesson as the registry describes it."""

    number: str          # "00"
    path: str            # "notebooks/00_start_here.ipynb"
    title: str
    summary: str
    kaggle: str
    words: int
    dominates: str
    workshop: tuple[Block, ...]
    taught: tuple[str, ...] = ()
    stacks: tuple[str, ...] = STACKS
    jax: bool = False
    slurm: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The notebook's file name."""
        return Path(self.path).name


def _text(value, what: str) -> list[str]:
    if not isinstance(value, str) or not value.strip():
        return [f"{what} must be a non-empty string"]
    if "\n" in value or value.strip().upper() == "TODO":
        return [f"{what} must be one line of real text, got {value!r}"]
    return []


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def entry_problems(entry) -> list[str]:
    """Every way one ``metadata.course`` entry departs from the registry's shape (empty when it is right)."""
    if not isinstance(entry, dict):
        return ["the notebook has no metadata.course entry (see tools/registry.py for its fields)"]
    found = [f"metadata.course has no {k!r}" for k in FIELDS if k not in entry]
    found += [f"metadata.course has an unknown field {k!r}" for k in entry if k not in FIELDS]
    for key in ("title", "summary", "kaggle", "dominates"):
        if key in entry:
            found += _text(entry[key], f"metadata.course.{key}")
    words = entry.get("words")
    if "words" in entry and not (_whole(words) and 0 < words <= MAX_WORDS):
        found.append(f"metadata.course.words must be a whole number from 1 to {MAX_WORDS:,d}, got {words!r}")
    blocks = entry.get("workshop")
    if "workshop" in entry and not (isinstance(blocks, list) and blocks):
        found.append("metadata.course.workshop must be a list of at least one block")
        blocks = []
    for i, block in enumerate(blocks or []):
        where = f"metadata.course.workshop[{i}]"
        if not isinstance(block, dict) or set(block) != set(BLOCK_FIELDS):
            found.append(f"{where} must have exactly the fields {', '.join(BLOCK_FIELDS)}")
            continue
        if block["session"] not in SESSIONS or isinstance(block["session"], bool):
            found.append(f"{where}.session must be 1, 2 or 'optional', got {block['session']!r}")
        if not (_whole(block["minutes"]) and block["minutes"] > 0):
            found.append(f"{where}.minutes must be a whole number > 0, got {block['minutes']!r}")
        if not isinstance(block["part"], str) or "\n" in block["part"]:
            found.append(f"{where}.part must be one line ('' when the lesson has one block)")
        found += _text(block["notes"], f"{where}.notes")
    found += _strings(entry, "taught", "a call as a cell writes it", allow_empty=True)
    found += _strings(entry, "slurm", "a file name one of its %%writefile cells writes", allow_empty=True)
    found += _strings(entry, "stacks", f"one of {', '.join(STACKS)}", allow_empty=False)
    stacks = entry.get("stacks")
    if isinstance(stacks, list) and not set(stacks) <= set(STACKS):
        found.append(f"metadata.course.stacks may name only {', '.join(STACKS)}, got {stacks!r}")
    if "jax" in entry and not isinstance(entry["jax"], bool):
        found.append(f"metadata.course.jax must be true or false, got {entry['jax']!r}")
    return found


def _strings(entry: dict, key: str, what: str, allow_empty: bool) -> list[str]:
    """Problems of a field that is a list of distinct one-line strings (each ``what``)."""
    if key not in entry:
        return []
    value = entry[key]
    if not (isinstance(value, list) and all(isinstance(v, str) and v.strip() and v.strip().upper() != "TODO"
                                             for v in value) and len(set(value)) == len(value)):
        return [f"metadata.course.{key} must be a list of distinct strings, each {what}, got {value!r}"]
    if not value and not allow_empty:
        return [f"metadata.course.{key} must name at least one: {what}"]
    return []


def lesson(path: Path) -> Lesson:
    """The registry entry of one notebook; ValueError listing every problem when it is incomplete."""
    path = Path(path)
    nb = json.loads(path.read_text(encoding="utf-8"))
    entry = nb.get("metadata", {}).get("course")
    found = entry_problems(entry)
    if found:
        raise ValueError(f"{path.name}: " + "; ".join(found))
    blocks = tuple(Block(**b) for b in entry["workshop"])
    return Lesson(number=path.name[:2], path=f"notebooks/{path.name}", title=entry["title"],
                  summary=entry["summary"], kaggle=entry["kaggle"], words=entry["words"],
                  dominates=entry["dominates"], workshop=blocks, taught=tuple(entry["taught"]),
                  stacks=tuple(entry["stacks"]), jax=entry["jax"], slurm=tuple(entry["slurm"]))


def notebook_paths(root: Path = ROOT) -> list[Path]:
    """The numbered lessons on disk, in lesson order."""
    return sorted((Path(root) / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def load(root: Path = ROOT) -> list[Lesson]:
    """Every lesson's entry, in lesson order (any number of lessons: 00-12 and later)."""
    lessons, found = [], []
    for path in notebook_paths(root):
        try:
            lessons.append(lesson(path))
        except ValueError as err:
            found.append(str(err))
    if found:
        raise ValueError("the registry is incomplete:\n" + "\n".join(found))
    return lessons

