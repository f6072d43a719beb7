"""Kill a resumable job at a chosen write, for the tests of the course's jobs (the quick start, lesson 05's job, the
capstone): "a kill at any moment loses at most the epoch in progress, a kill during a write included".

Why here: the instrument lives in the test only; the job's script runs unchanged. ``command(...)`` gives the argv
of a Python process that patches the write (or the rename) in itself, runs the script with ``runpy`` as
``__main__`` and SIGKILLs itself at the chosen moment:

- ``how="mid"``: the ``nth`` call of ``keras.Model.save`` or ``keras.Model.save_weights`` whose file name ends in
  ``name`` writes the whole file, then cuts it to half its size (what a kill in the middle of the write leaves on
  disk) and the process SIGKILLs itself before returning. Whether the job writes that file in place (then the
  file it resumes from is the one cut) or under a temporary name (then only the temporary file is), the kill falls
  where it would hurt.
- ``how="after"``: the process SIGKILLs itself right after the ``nth`` ``os.replace`` onto a file whose name ends in
  ``name``: the file is whole and in place, and nothing after it (the epoch's line) ran.

``epochs(log)`` reads Keras's ``verbose=2`` lines back: ``[(epoch, val_accuracy), ...]``.
"""

from __future__ import annotations

import re
import sys

_PRELUDE = r"""
import os, runpy, signal, sys
sys.modules["helpers"] = None                      # the job runs as a learner runs it: no course helpers
name, nth, how, script = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
sys.argv = [script, *sys.argv[5:]]
seen = [0]

def hit(path):
    if str(path).endswith(name):
        seen[0] += 1
        return seen[0] == nth
    return False

if how == "mid":
    import keras
    def cut(method):
        original = getattr(keras.Model, method)
        def write(self, filepath, *args, **kwargs):
            original(self, filepath, *args, **kwargs)
            if hit(filepath):
                os.truncate(filepath, os.path.getsize(filepath) // 2)
                print(f"KILLED while writing {filepath}", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
        setattr(keras.Model, method, write)
    cut("save")
    cut("save_weights")
elif how == "after":
    rename = os.replace
    def replace(src, dst, *args, **kwargs):
        rename(src, dst, *args, **kwargs)
        if hit(dst):
            print(f"KILLED after renaming onto {dst}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
    os.replace = replace
else:
    raise SystemExit(f"how must be 'mid' or 'after', not {how!r}")
runpy.run_path(script, run_name="__main__")
"""


def command(script: str, name: str, nth: int, how: str, *args: str) -> list[str]:
    """argv: run ``script`` (with ``args``) and SIGKILL it at the ``nth`` write (``how="mid"``) or rename
    (``how="after"``) of a file whose name ends in ``name``."""
    if how not in ("mid", "after"):
        raise ValueError(f"how must be 'mid' or 'after', not {how!r}")
    if not isinstance(nth, int) or nth < 1:
        raise ValueError(f"nth must be a positive int, not {nth!r}")
    return [sys.executable, "-c", _PRELUDE, name, str(nth), how, str(script), *args]


def epochs(log: str) -> list[tuple[int, float]]:
    """(epoch, val_accuracy) of each epoch a Keras ``verbose=2`` log printed in full: its "Epoch k/N" line, then a
    line with ``val_accuracy: x`` (other lines, such as TensorFlow's warnings on stderr, may come between)."""
    found, epoch = [], None
    for line in log.splitlines():
        started = re.match(r"Epoch (\d+)/\d+$", line.strip())
        if started:
            epoch = int(started.group(1))
        elif epoch is not None and (score := re.search(r" val_accuracy: ([0-9.]+)", line)):
            found.append((epoch, float(score.group(1))))
            epoch = None
    return found
