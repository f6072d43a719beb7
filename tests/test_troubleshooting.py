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
