"""``make capsule-record``: re-record the time capsule's transcripts from live runs (maintainers; needs Python 3.6).

Lessons 04 and 05 replay ``helpers/transcripts/<name>.txt`` where no capsule exists; this writes those files from
a live run of each 2017 script, and refuses a run that lacks the error it is meant to show.
"""

from __future__ import annotations

import datetime as _dt
import os
import sys
from pathlib import Path
from typing import Optional, Sequence

from helpers import capsule


def record(run: capsule.CapsuleRun, directory: Optional[os.PathLike] = None) -> Path:
    """Write a live run as ``<directory>/<name>.txt``; refuses runs that are not live or lack the expected line."""
    if run.source != capsule.LIVE:
        raise ValueError(f"only live runs can be recorded, this one is a {run.source}")
    if not run.ok:
        raise ValueError(f"the run of {run.name!r} lacks its expected line {run.expected!r}; not recording")
    path = capsule.transcript_path(run.name, directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    stamp = _dt.date.today().isoformat()
    versions = " | ".join(f"{k} {v}" for k, v in run.versions.items())
    header = (f"# time capsule transcript: {run.name}\n"
              f"# recorded on {stamp} by `make capsule-record` from a live run\n"
              f"# versions: {versions}\n# command: {run.command}\n# exit code: {run.returncode}\n")
    path.write_text(header + capsule.OUTPUT_MARK + "\n" + run.output)
    return path


def main(argv: Sequence[str]) -> int:
    """``python tools/capsule_record.py [name ...]``: re-record the transcripts from live runs."""
    if capsule.find_capsule() is None:
        print("usage: python tools/capsule_record.py [name ...] needs the capsule: `make capsule`; "
              f"scripts: {', '.join(sorted(capsule.SCRIPTS))}", file=sys.stderr)
        return 2
    for name in argv or sorted(capsule.SCRIPTS):
        print(f"recorded {record(capsule.run_live(name))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
