"""Run every lesson with each code cell executed twice in a row, as a learner pressing Shift+Enter twice does;
or, with ``--all-twice``, top to bottom twice in one kernel ("Run All", then "Run All" again).

Usage: python tools/run_each_twice.py [--cell-timeout S] [--all-twice] [notebooks/NN_x.ipynb ...]
(default: every lesson; `make rerun-each`, `make rerun-each RERUN=all`)

Each notebook runs in a fresh kernel from a temporary working directory (so no cell depends on the folder it is
started from). Every code cell is executed, then executed again at once, then the run goes on to the next cell. A
notebook passes when it reaches its end.

Some cells cannot give the same result twice (a cell that trains a model once more, say). The house rule lets such
a cell make a later cell fail with a sentence that says what happened and which cell to re-run from. Those cells
are listed in ``REFUSALS``: the failing cell (by its cell id), the stable part of its explanatory message, and the
cell id to re-run from. When a listed cell fails with its listed message, the runner does what the message says
(re-runs from that cell, once each, up to the failed cell) and goes on. Any other failure, a listed cell that
fails with another message, or a dead kernel fails the notebook.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Refusal:
    """A cell that, after its predecessor (or itself) ran twice, fails on purpose with an explanation."""

    cell_id: str       # the cell that fails
    message: str       # the stable part of the sentence it prints
    rerun_from: str    # the cell id the message tells the learner to re-run from


#: notebook file name -> the listed refusals. Keep this list short: every entry is a cell a learner must re-run.
REFUSALS: dict[str, list[Refusal]] = {}


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def run_notebook(path: Path, cell_timeout: int = 120,
                 refusals: dict[str, list[Refusal]] | None = None, all_twice: bool = False) -> tuple[float, list[str]]:
    """Run one notebook with each code cell twice in a row (``all_twice``: the whole notebook twice in one
    kernel); return (seconds, notes on listed refusals met).

    Raises RuntimeError naming the cell when the notebook does not reach its end.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, DeadKernelError

    if cell_timeout <= 0:
        raise ValueError(f"cell_timeout must be > 0 seconds, got {cell_timeout}")
    listed = {r.cell_id: r for r in (REFUSALS if refusals is None else refusals).get(path.name, [])}
    nb = nbformat.read(path, as_version=4)
    ids = [c.get("id") for c in nb.cells]
    notes: list[str] = []
    start = time.time()
    with tempfile.TemporaryDirectory() as cwd:
        client = NotebookClient(nb, timeout=cell_timeout, kernel_name="python3",
                                resources={"metadata": {"path": cwd}})
        code = [(index, cell) for index, cell in enumerate(nb.cells) if cell.cell_type == "code"]
        order = [(i, c, run) for run in (1, 2) for i, c in code] if all_twice else \
            [(i, c, run) for i, c in code for run in (1, 2)]
        with client.setup_kernel():
            for index, cell, attempt in order:
                try:
                    client.execute_cell(cell, index)
                except DeadKernelError as exc:
                    raise RuntimeError(f"cell {index} (id {cell.get('id')}), run {attempt}: "
                                       f"the kernel died: {exc}") from exc
                except CellExecutionError as exc:
                    refusal = listed.get(cell.get("id"))
                    if refusal is None or refusal.message not in str(exc):
                        raise RuntimeError(f"cell {index} (id {cell.get('id')}), run {attempt}: "
                                           f"{_error_text(exc)[-1500:]}") from exc
                    first = ids.index(refusal.rerun_from)
                    notes.append(f"cell {index} refused as listed; re-ran from cell {first}")
                    for j in range(first, index + 1):
                        if nb.cells[j].cell_type == "code":
                            client.execute_cell(nb.cells[j], j)
    return time.time() - start, notes


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cell-timeout", type=int, default=120)
    parser.add_argument("--all-twice", action="store_true", help='"Run All" twice in one kernel instead')
    parser.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    what = "run all twice" if args.all_twice else "each cell twice"
    failed = 0
    for p in paths:
        try:
            secs, notes = run_notebook(p, args.cell_timeout, all_twice=args.all_twice)
            extra = f"  ({'; '.join(notes)})" if notes else ""
            print(f"{p.name:<50} {what}: OK {secs:6.1f} s{extra}", flush=True)
        except Exception as exc:  # report and go on with the other notebooks
            failed += 1
            print(f"{p.name:<50} {what}: FAILED at {exc}", flush=True)
    print(f"{len(paths) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
