"""tools/error_index.py: parsing the error index and matching messages in outputs."""

import re
from pathlib import Path

import error_index as ts  # maintainer code: tools/error_index.py
import pytest

SAMPLE = """
## Lesson 03
### Mixing strategies
**Message:**
```
RuntimeError: Mixing different tf.distribute.Strategy objects: <... at 0x...> is not <...>
```
Cause: x.

### Another
**Message:**
```text
TypeError: can't pickle
   module objects
```
"""


def test_parse_sample():
    entries = ts.parse(SAMPLE)
    assert [e.heading for e in entries] == ["Mixing strategies", "Another"]
    assert entries[1].message == "TypeError: can't pickle module objects"


def test_produced_with_wildcards_and_whitespace():
    msg = ts.parse(SAMPLE)[0].message
    out = "noise\n[expected error] RuntimeError: Mixing different tf.distribute.Strategy objects: " \
          "<tensorflow.MirroredStrategy object at 0x7f00> is not <_Default object at 0x7f11>\nmore"
    assert ts.produced(msg, out)
    assert not ts.produced(msg, out.replace("Mixing", "Mixed"))
    assert ts.produced("can't pickle module objects", "TypeError: can't pickle\n  module objects")
    with pytest.raises(ValueError):
        ts.produced("  ", "x")


def test_missing():
    entries = ts.parse(SAMPLE)
    assert ts.missing(entries, "TypeError: can't pickle module objects") == [entries[0]]


def test_empty_block_rejected():
    with pytest.raises(ValueError, match="empty message"):
        ts.parse("### x\n**Message:**\n```\n \n```\n")


def test_a_message_indexed_twice_is_rejected():
    """nblint's error-index rule parses the real file with this (make lint)."""
    twice = SAMPLE + "\n### Again\n**Message:**\n```\nTypeError: can't pickle module objects\n```\n"
    with pytest.raises(ValueError, match="'Again' is indexed twice .also under 'Another'"):
        ts.parse(twice)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation other than - and _ dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_slug_of_headings():
    assert _slug("K.get_session, K.set_session, tf.Session") == "kget_session-kset_session-tfsession"
    assert _slug("`keras.backend` functions") == "kerasbackend-functions"


def test_every_link_inside_the_index_lands_on_a_heading():
    """The index links its entries to each other ('[history keys](#historyhistoryval_acc)'): none may dangle."""
    text = (Path(__file__).resolve().parent.parent / "TROUBLESHOOTING.md").read_text(encoding="utf-8")
    anchors = {_slug(h) for h in re.findall(r"^#{1,4} (.+)$", text, re.M)}
    links = re.findall(r"\]\(#([^)\s]+)\)", text)
    assert len(links) > 50
    assert not sorted(set(links) - anchors)


SLURM_SAMPLE = SAMPLE + """
## Slurm
### A Slurm one
**Message:**
```
srun: error: Unable to allocate resources
```

## After
### Last
**Message:**
```
ValueError: last one
```
"""


def test_unproduced_leaves_out_the_slurm_section_only():
    """make slurm-check produces the Slurm section's messages; every other one must come from the run."""
    said = "TypeError: can't pickle module objects"
    assert [e.heading for e in ts.unproduced(SLURM_SAMPLE, said)] == ["Mixing strategies", "Last"]
    assert [e.heading for e in ts.unproduced(SLURM_SAMPLE, said + "\nValueError: last one")] == ["Mixing strategies"]


def test_check_reads_every_sessions_file_together(tmp_path, monkeypatch, capsys):
    """CI's split run: each session wrote what it printed (--outputs-file); the check passes only on all of them."""
    index = tmp_path / "TROUBLESHOOTING.md"
    index.write_text(SLURM_SAMPLE, encoding="utf-8")
    monkeypatch.setattr(ts, "INDEX", index)
    tests_part, lessons_part = tmp_path / "tests.txt", tmp_path / "lessons.txt"
    tests_part.write_text("TypeError: can't pickle\n module objects\nValueError: last one", encoding="utf-8")
    lessons_part.write_text("RuntimeError: Mixing different tf.distribute.Strategy objects: <a at 0x1> is not <b>",
                            encoding="utf-8")
    assert ts.main(["check", str(tests_part)]) == 1
    assert "- Mixing strategies: RuntimeError: Mixing" in capsys.readouterr().out
    assert ts.main(["check", str(tests_part), str(lessons_part)]) == 0
    assert "every indexed message was produced in this run (2 sessions)" in capsys.readouterr().out
    assert ts.main(["check", str(tests_part), str(tmp_path / "absent.txt")]) == 2
    assert "no such file" in capsys.readouterr().out
    assert ts.main([]) == 2 and ts.main(["chek", str(tests_part)]) == 2
