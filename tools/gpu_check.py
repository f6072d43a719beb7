"""`make gpu-check`: run every notebook on a GPU machine, in the shapes learners have, and write a report.

Usage:
    python tools/gpu_check.py probe                  # which shapes this machine can run; exit 2 without a GPU
    python tools/gpu_check.py run SHAPE --out DIR    # every notebook in that shape; DIR/report-SHAPE.md (+ .json)

The shapes:
- ``split``: one GPU (``CUDA_VISIBLE_DEVICES=0``), which the lessons split into 2 logical GPUs, as on Colab;
- ``two``: two real GPUs (``CUDA_VISIBLE_DEVICES=0,1``), as on Kaggle's GPU T4 x2.

A machine with one GPU runs ``split``; one with two or more runs both (``GPU_CHECK_SHAPES=two`` picks one). The
probe reads ``nvidia-smi`` only, before anything is installed, so on a GPU-less machine it stops with a clear
message and touches nothing. The report (GPU model, replicas, seconds and peak GPU memory per notebook) is the
table a maintainer pastes into docs/workshop.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helpers import config  # noqa: E402  (standard library only)
from helpers import gpus as gpu_info  # noqa: E402  (standard library + numpy only: no framework starts)

MEMORY_QUERY = ["--query-gpu=index,memory.used", "--format=csv,noheader,nounits"]


@dataclass(frozen=True)
class Shape:
    """One way learners meet GPUs: which GPUs the notebooks see, and how many replicas the lessons make."""

    name: str
    visible: str        # CUDA_VISIBLE_DEVICES for the run
    replicas: int
    description: str


SHAPES = {
    "split": Shape("split", "0", 2, "one GPU split into 2 logical GPUs (Colab's T4)"),
    "two": Shape("two", "0,1", 2, "two real GPUs, NCCL between them (Kaggle's GPU T4 x2)"),
}


def plan(gpus: Sequence[gpu_info.GpuInfo], wanted: Optional[str] = None) -> list[Shape]:
    """The shapes this machine can run, in order; ``wanted`` ("split,two" or one of them) narrows them.

    Raises:
        ValueError: no GPU (the message says nothing was installed or run), an unknown shape, or a shape that needs
            more GPUs than there are.
    """
    if not gpus:
        raise ValueError("make gpu-check needs a machine with an NVIDIA GPU, and nvidia-smi lists none here. "
                         "Nothing was installed or run. On Kaggle: Settings > Accelerator > GPU T4 x2.")
    possible = [SHAPES["split"]] + ([SHAPES["two"]] if len(gpus) >= 2 else [])
    if not wanted:
        return possible
    names = [w.strip() for w in wanted.split(",") if w.strip()]
    unknown = [n for n in names if n not in SHAPES]
    if unknown:
        raise ValueError(f"unknown gpu-check shape(s) {unknown}: use {', '.join(SHAPES)}")
    missing = [n for n in names if SHAPES[n] not in possible]
    if missing:
        raise ValueError(f"shape(s) {missing} need 2 GPUs; this machine has {len(gpus)}")
    return [SHAPES[n] for n in names]


def parse_memory(text: str) -> dict[int, int]:
    """``nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits`` -> {index: MiB used}."""
    used: dict[int, int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 2 or not parts[0].isdigit() or not parts[1].isdigit():
            raise ValueError(f"line {lineno}: expected 'index, MiB', got {line.strip()[:60]!r}")
        used[int(parts[0])] = int(parts[1])
    return used


class PeakMemory:
    """Samples nvidia-smi every ``interval`` seconds in a thread; ``peak`` is the highest sum over ``indices``."""

    def __init__(self, indices: Sequence[int], interval: float = 1.0):
        if interval <= 0:
            raise ValueError(f"interval must be > 0 seconds, got {interval}")
        self.indices, self.interval, self.peak = list(indices), interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                out = subprocess.run(["nvidia-smi", *MEMORY_QUERY], capture_output=True, text=True, timeout=10)
                used = parse_memory(out.stdout)
                self.peak = max(self.peak, sum(used.get(i, 0) for i in self.indices))
            except (OSError, subprocess.TimeoutExpired, ValueError):
                pass  # a missed sample only lowers the peak's precision
            self._stop.wait(self.interval)

    def __enter__(self) -> "PeakMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def render_report(gpu_name: str, shape: Shape, rows: Sequence[dict]) -> str:
    """The markdown report: one line of context, then one row per notebook."""
    if not rows:
        raise ValueError("no notebook rows to report")
    lines = [f"**gpu-check, {shape.name}**: {shape.description}; GPU model {gpu_name}; "
             f"{shape.replicas} replicas; CUDA_VISIBLE_DEVICES={shape.visible}", "",
             "| notebook | result | seconds | peak GPU memory (MiB) |", "|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['notebook']} | {r['result']} | {r['seconds']:.0f} | {r['peak_mib']} |")
    return "\n".join(lines) + "\n"


def _probe() -> int:
    text, why = gpu_info.read_nvidia_smi()
    try:
        shapes = plan(gpu_info.parse_nvidia_smi_csv(text) if text else [], os.environ.get("GPU_CHECK_SHAPES"))
    except ValueError as exc:
        print(f"gpu-check: {exc}" + ("" if text else f" ({why})"))
        return 2
    print(" ".join(s.name for s in shapes))
    return 0


def _run(shape_name: str, out: Path) -> int:
    shape = SHAPES[shape_name]
    text, _ = gpu_info.read_nvidia_smi()
    rows_smi = gpu_info.parse_nvidia_smi_csv(text or "index\n")
    gpu_name = rows_smi[0].name if rows_smi else "unknown"
    indices = [int(i) for i in shape.visible.split(",")]
    # A GPU machine trains for real unless told otherwise: full is this check's default mode.
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=shape.visible, MULTIGPU_MODE=config.mode(default="full"))
    rows = []
    for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        start = time.time()
        with PeakMemory(indices) as mem:
            proc = subprocess.run([sys.executable, "-m", "pytest", str(nb), "--nbval-lax", "--nbval-current-env",
                                   "-p", "no:cacheprovider", "-q"], env=env, cwd=ROOT)
        rows.append({"notebook": nb.name, "result": "ok" if proc.returncode == 0 else "FAILED",
                     "seconds": time.time() - start, "peak_mib": mem.peak})
    out.mkdir(parents=True, exist_ok=True)
    report = render_report(gpu_name, shape, rows)
    (out / f"report-{shape.name}.md").write_text(report)
    (out / f"report-{shape.name}.json").write_text(json.dumps({"gpu": gpu_name, "shape": shape.name, "rows": rows}))
    print(report)
    return 0 if all(r["result"] == "ok" for r in rows) else 1


def main(argv: list[str]) -> int:
    if argv[:1] == ["probe"]:
        return _probe()
    if len(argv) == 4 and argv[0] == "run" and argv[1] in SHAPES and argv[2] == "--out":
        return _run(argv[1], Path(argv[3]))
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
