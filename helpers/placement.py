"""Short device names (lesson 01's checkers): ``/job:localhost/replica:0/task:0/device:CPU:1`` -> ``CPU:1``.

Why: a checker names devices the way a learner reads them. Lesson 01 itself writes its split model in a cell and
reads ``.device`` where TensorFlow gives it, so nothing else about placement lives here.
"""

from __future__ import annotations

import re

_DEVICE_RE = re.compile(r"(?:^|/)(?:device:)?(CPU|GPU|TPU)(?::(\d+))?$", re.IGNORECASE)


def short_device(name: str) -> str:
    """``/job:localhost/replica:0/task:0/device:CPU:1`` -> ``CPU:1`` ('' stays '': not pinned)."""
    if not isinstance(name, str):
        raise ValueError(f"device name must be a string, got {name!r}")
    if name == "":
        return ""
    m = _DEVICE_RE.search(name)
    if not m:
        raise ValueError(f"not a TensorFlow device name: {name!r}")
    return f"{m.group(1).upper()}:{m.group(2) or 0}"
