"""Execute notebooks twice in one kernel ("Run All", then "Run All" again) from a temp directory.

Usage: python tools/run_twice.py [notebooks/NN_x.ipynb ...]   (default: every notebook)

Why: learners re-run notebooks; a lesson that only works once (device set-up,
files left behind, a global counter) is broken even if CI's single pass is green.
Starting in a temporary working directory proves no cell depends on the cwd.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent


def run_twice(path: Path, timeout: int = 600) -> float:
    nb = nbformat.read(path, as_version=4)
    start = time.time()
    with tempfile.TemporaryDirectory() as cwd:
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                resources={"metadata": {"path": cwd}})
        with client.setup_kernel():
            for _run in (1, 2):
                for index, cell in enumerate(nb.cells):
                    if cell.cell_type == "code":
                        client.execute_cell(cell, index)
    return time.time() - start


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    failed = 0
    for p in paths:
        try:
            secs = run_twice(p)
            print(f"{p.name:<45} twice OK  {secs:6.1f} s", flush=True)
        except Exception as exc:  # report and continue with the others
            failed += 1
            print(f"{p.name:<45} FAILED: {type(exc).__name__}: {str(exc)[-800:]}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
