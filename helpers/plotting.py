"""Diagrams of the course's ideas (lessons 01, 02), drawn with matplotlib: no image files in the repo.

Why: data and model parallelism, the pipeline bubble and ``CUDA_VISIBLE_DEVICES`` are easier to see than to read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from .checks import int_between
from .gpus import resolve_visible

if TYPE_CHECKING:  # annotations only: matplotlib is imported where a figure is drawn
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: matplotlib's "tab10" colours, spelled out so that importing this module does not import matplotlib.
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
          "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
GREY = "#d0d0d0"


def _axes(size: tuple[float, float], ylim: tuple[float, float]) -> tuple[Figure, Axes]:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=size)
    ax.set_axis_off()
    ax.set(xlim=(0, 1), ylim=ylim)
    return fig, ax


def _box(ax: Axes, x: float, y: float, w: float, h: float, text: str, color, **kw) -> None:
    from matplotlib.patches import FancyBboxPatch

    pad = min(0.02, 0.08 * w, 0.08 * h)
    ax.add_patch(FancyBboxPatch((x + pad, y + pad), w - 2 * pad, h - 2 * pad, boxstyle=f"round,pad={pad}",
                                facecolor=color, edgecolor="black", linewidth=1, **kw))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=9, wrap=True)


def _arrow(ax: Axes, start: tuple[float, float], end: tuple[float, float], text: str = "") -> None:
    ax.annotate("", xy=end, xytext=start, arrowprops=dict(arrowstyle="->", color="black", lw=1.3))
    if text:
        mid_x, mid_y = (start[0] + end[0]) / 2, (start[1] + end[1]) / 2
        if abs(end[1] - start[1]) < 1e-9:  # horizontal: label above the arrow
            ax.text(mid_x, mid_y + 0.04, text, fontsize=8, ha="center", va="bottom")
        else:
            ax.text(mid_x + 0.02, mid_y, text, fontsize=8, va="center")


def draw_data_parallel(n_replicas: int = 2, global_batch: int = 8) -> Figure:
    """Data parallelism: a global batch split over full model copies, whose gradients are all-reduced."""
    n = int_between("n_replicas", n_replicas, 1, 8)
    int_between("global_batch", global_batch, n, 4096)
    fig, ax = _axes((2.4 + 2.2 * n, 4.6), (-0.08, 1.05))
    width = 1.0 / n
    ax.text(0.5, 1.0, f"global batch of {global_batch} examples", ha="center", fontsize=10)
    start = 0
    for k in range(n):
        per = global_batch // n + (1 if k < global_batch % n else 0)
        cx = k * width + width / 2
        _box(ax, k * width + 0.02, 0.86, width - 0.04, 0.1, f"examples {start}..{start + per - 1}", COLORS[k % 10],
             alpha=0.6)
        start += per
        _arrow(ax, (cx, 0.85), (cx, 0.69), f"{per} ex.")
        _box(ax, k * width + 0.04, 0.44, width - 0.08, 0.24,
             f"replica {k}\ndevice {k}\nfull model copy\n(same weights W)", COLORS[k % 10], alpha=0.35)
        _arrow(ax, (cx, 0.43), (cx, 0.27), f"grads g{k}")
        _arrow(ax, (cx - 0.06 * width, 0.12), (cx - 0.06 * width, 0.02))
    total = " + ".join(f"g{i}" for i in range(n)) if n <= 3 else f"g0 + ... + g{n - 1}"
    _box(ax, 0.04, 0.13, 0.92, 0.13, f"all-reduce: g = {total}  (sent to every replica)", "#fff2a8")
    ax.text(0.5, -0.04, "each replica applies the same update W <- W - lr * g, so all copies stay identical",
            ha="center", fontsize=9)
    ax.set_title(f"Data parallelism over {n} replica(s): faster epochs, same model size per device",
                 fontsize=10)
    return fig


def draw_model_parallel(n_devices: int = 2) -> Figure:
    """Device (model) parallelism: consecutive parts of one model, and their weights, on different devices."""
    n = int_between("n_devices", n_devices, 1, 8)
    fig, ax = _axes((3.0 + 3.0 * n, 3.0), (0, 0.95))
    width = 1.0 / (n + 1)
    _box(ax, 0.02, 0.4, width * 0.5, 0.2, "whole\nbatch", "#ffffff")
    prev_end = 0.02 + width * 0.5
    for k in range(n):
        x = (k + 0.9) * width
        _box(ax, x, 0.25, width * 0.7, 0.5,
             f"device {k}\npart {k} of the model\n(its layers and\nonly their weights)",
             COLORS[k % 10], alpha=0.35)
        _arrow(ax, (prev_end, 0.5), (x, 0.5), "batch" if k == 0 else "activations")
        prev_end = x + width * 0.7
    ax.text(0.5, 0.08, "backward pass runs the other way; one device works while the others wait",
            ha="center", fontsize=9)
    ax.set_title(f"Device (model) parallelism over {n} device(s): a model too big for one device",
                 fontsize=10)
    return fig


def pipeline_schedule(n_devices: int, n_microbatches: int) -> list[tuple[int, int, int, str]]:
    """GPipe-style schedule: ``(device, time step, micro-batch, "F"|"B")`` per unit of work (1 micro-batch: plain
    model parallelism); the backward passes start when the last forward is done."""
    d = int_between("n_devices", n_devices, 1, 16)
    m = int_between("n_microbatches", n_microbatches, 1, 64)
    work = []
    for dev in range(d):
        for mb in range(m):
            work.append((dev, dev + mb, mb, "F"))
            work.append((dev, (d - 1 + m) + (m - 1 - mb) + (d - 1 - dev), mb, "B"))
    return sorted(work)  # by device, then time step (unique per device)


def bubble_fraction(n_devices: int, n_microbatches: int) -> float:
    """Share of device time spent idle in :func:`pipeline_schedule`: (d - 1) / (m + d - 1)."""
    d = int_between("n_devices", n_devices, 1, 16)
    m = int_between("n_microbatches", n_microbatches, 1, 64)
    return (d - 1) / (m + d - 1)


def draw_pipeline(n_devices: int = 2, n_microbatches: int = 4) -> Figure:
    """Timelines of plain model parallelism vs a pipeline of micro-batches (same total work)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    d = int_between("n_devices", n_devices, 1, 8)
    m = int_between("n_microbatches", n_microbatches, 1, 16)
    fig, axes = plt.subplots(2, 1, figsize=(9, 1.2 + 0.9 * d), sharex=True)
    for panel, (title, micro, unit) in zip(axes, (
            ("model parallelism, whole batch at once", 1, float(m)),
            (f"pipeline, {m} micro-batches", m, 1.0))):
        for dev, step, mb, kind in pipeline_schedule(d, micro):
            color = COLORS[mb % 10]
            panel.add_patch(Rectangle((step * unit, dev - 0.4), unit, 0.8, facecolor=color,
                                      alpha=0.9 if kind == "F" else 0.45, edgecolor="black"))
            panel.text(step * unit + unit / 2, dev, f"{kind}{mb}" if micro > 1 else kind,
                       ha="center", va="center", fontsize=8)
        busy = 2 * d * m
        total = 2 * (micro + d - 1) * unit
        panel.set_title(f"{title}: {total:g} time units, idle share "
                        f"{1 - busy / (d * total):.0%}", fontsize=10)
        panel.set_yticks(range(d))
        panel.set_yticklabels([f"device {k}" for k in range(d)])
        panel.set_ylim(d - 0.5, -0.5)
        panel.set_xlim(0, 2 * d * m)
    axes[-1].set_xlabel("time (F = forward, B = backward; the number is the micro-batch)")
    fig.tight_layout()
    return fig


def draw_visible_devices(value: Optional[str], n_physical: int = 8) -> Figure:
    """Physical GPUs (nvidia-smi / PCI order) and the names a process sees with ``CUDA_VISIBLE_DEVICES=value``."""
    n = int_between("n_physical", n_physical, 0, 16)
    vis = resolve_visible(value, n)
    fig, ax = _axes((1.4 + 1.1 * max(n, 2), 3.0), (0, 0.9))
    w = 1.0 / max(n, 1)
    for i in range(n):
        visible = i in vis.visible
        _box(ax, i * w + 0.01, 0.62, w - 0.02, 0.22, f"GPU {i}\n(nvidia-smi)",
             COLORS[vis.visible.index(i) % 10] if visible else GREY, alpha=0.6)
    for k, phys in enumerate(vis.visible):
        x = k * w + 0.01
        _box(ax, x, 0.1, w - 0.02, 0.2, f"/GPU:{k}\n(TensorFlow)", COLORS[k % 10], alpha=0.6)
        _arrow(ax, (phys * w + w / 2, 0.61), (x + (w - 0.02) / 2, 0.31))
    if not vis.visible:
        ax.text(0.5, 0.2, "no GPU visible: TensorFlow runs on the CPU", ha="center", fontsize=10)
    label = "unset" if value is None else repr(value)
    note = f"; dropped {list(vis.dropped)}" if vis.dropped else ""
    ax.set_title(f"CUDA_VISIBLE_DEVICES={label} on {n} GPU(s){note}", fontsize=10)
    return fig
