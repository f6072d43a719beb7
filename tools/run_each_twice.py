"""Run lessons with each code cell executed twice in a row, as a learner pressing Shift+Enter twice does; or, with
``--all-twice``, top to bottom twice in one kernel ("Run All", then "Run All" again).

Usage: python tools/run_each_twice.py [--cell-timeout S] [--all-twice] [notebooks/NN_x.ipynb ...]
(default: every lesson). The same run as ``make rerun-each`` (``RERUN=all``): the course's nbval run with the
re-runs of its pytest plugin (tools/pytest_course.py, ``NB_RERUN``), each notebook in a fresh kernel started from a
temporary folder, with the time table of the first runs. Cells that refuse a re-run on purpose are listed in
tools/pytest_course.py's ``REFUSALS``. ``make test`` on the pinned stack runs the lessons this way.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def command(paths: list[str], all_twice: bool = False, cell_timeout: int = 120) -> tuple[list[str], dict]:
    """The pytest command line and environment of the run."""
    if cell_timeout <= 0:
        raise ValueError(f"cell_timeout must be > 0 seconds, got {cell_timeout}")
    args = [sys.executable, "-m", "pytest", *paths, "--nbval-lax", "--nbval-current-env",
            f"--nbval-cell-timeout={cell_timeout}", "-p", "no:cacheprovider", "-q"]
    return args, {**os.environ, "NB_RERUN": "all" if all_twice else "each", "PYTHONHASHSEED": "0"}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cell-timeout", type=int, default=120)
    parser.add_argument("--all-twice", action="store_true", help='"Run All" twice in one kernel instead')
    parser.add_argument("notebooks", nargs="*")
    args = parser.parse_args(argv)
    paths = [str(Path(p).resolve()) for p in args.notebooks] or \
        [str(p) for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))]
    cmd, env = command(paths, args.all_twice, args.cell_timeout)
    return subprocess.run(cmd, cwd=ROOT, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
