"""``make bench``: lesson 06's benchmark from the command line, one fresh process per replica count; CSV + PNG.

``python tools/benchmark.py --out _output/bench [--replicas 1 2 4 8] [--steps 30] [--policy mixed_float16]``.
The script it runs is :data:`helpers.bench.SCRIPT`, the one lesson 06's ``bench.run_benchmark`` runs, so there is
no second copy to keep equal; the measuring and the report are :mod:`helpers.bench`.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Optional, Sequence

from helpers import bench, config


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
    report = bench.run_benchmark(cfg)  # one fresh process per replica count, one at a time
    print(report.summary())
    paths = write_outputs(report, args.out)
    print(f"wrote {paths['csv']} and {paths['png']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
