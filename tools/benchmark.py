"""``make bench``: lesson 06's benchmark from the command line, one fresh process per replica count; CSV + PNG.

``python tools/benchmark.py --out _output/bench [--replicas 1 2 4 8] [--steps 30] [--policy mixed_float16]``.
The script it runs is read from lesson 06's ``%%writefile`` cells, so there is no second copy to keep equal;
the measuring and the report are :mod:`helpers.bench`, which the lesson uses too.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

from helpers import bench, config

#: The lesson whose ``%%writefile`` cells write the benchmark script, and the file a process runs.
LESSON_NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "06_scaling_and_performance.ipynb"
SCRIPT_NAME = "bench_child.py"


def notebook_scripts(notebook=LESSON_NOTEBOOK) -> dict:
    """``{file name: text}`` of every ``%%writefile`` cell of a notebook (default: lesson 06).

    Why: ``make bench`` runs exactly the script the lesson teaches, with no second copy.
    """
    files = {}
    for cell in json.loads(Path(notebook).read_text(encoding="utf-8"))["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] == "code" and src.startswith("%%writefile"):
            first, _, body = src.partition("\n")
            files[Path(first.split()[-1]).name] = body if body.endswith("\n") else body + "\n"
    return files


def write_scripts(folder, notebook=LESSON_NOTEBOOK) -> Path:
    """Write :func:`notebook_scripts` into ``folder``; return the path of :data:`SCRIPT_NAME` there."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    for name, text in notebook_scripts(notebook).items():
        (Path(folder) / name).write_text(text)
    return Path(folder) / SCRIPT_NAME




def write_outputs(report: bench.BenchReport, out_dir) -> dict:
    """Write :meth:`BenchReport.rows` as ``bench.csv`` and the plot as ``bench.png`` into ``out_dir``."""
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = report.rows()
    with (out / "bench.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    fig = report.plot()
    fig.savefig(out / "bench.png", dpi=120)
    plt.close(fig)
    return {"csv": out / "bench.csv", "png": out / "bench.png"}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``make bench``: run lesson 06's script in one fresh process per replica count; write CSV + PNG."""
    p = argparse.ArgumentParser(prog="python tools/benchmark.py",
                                description="Training throughput: one device vs towers vs MirroredStrategy.")
    p.add_argument("--out", required=True, help="folder for bench.csv and bench.png (e.g. _output/bench)")
    p.add_argument("--replicas", type=int, nargs="+", help="replica counts (include 1); default 1 2 4")
    p.add_argument("--steps", type=int, help="timed steps per run")
    p.add_argument("--policy", help="Keras dtype policy, e.g. mixed_float16; 'mixed' picks the script's choice")
    args = p.parse_args(argv)
    try:
        cfg = bench.make_config(**{k: v for k, v in {"replicas": args.replicas, "steps": args.steps,
                                               "policy": args.policy}.items() if v is not None})
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None
    print(f"[bench] mode {config.mode()}: replicas {cfg.replicas}, {cfg.steps} timed steps after {cfg.warmup} "
          f"warm-up, {cfg.batch_per_replica} samples per replica")
    start, results = time.perf_counter(), []
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        script = write_scripts(tmp)
        for n in sorted(cfg.replicas):  # one fresh process at a time: nothing competes for the cores
            results += bench.run_script(script, n, cfg)
    report = bench.make_report(results, cfg, time.perf_counter() - start)
    print(report.summary())
    paths = write_outputs(report, args.out)
    print(f"wrote {paths['csv']} and {paths['png']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
