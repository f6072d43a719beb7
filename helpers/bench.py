"""Does it get faster? A training-throughput benchmark over replica counts.

Why: the 2017 blog post promised that ``multi_gpu_model`` makes training faster
with more GPUs.  This module measures it, honestly, on whatever the learner
has, for three ways of training the same model on the same global batch:

* ``one_device``: the whole global batch on a single device (the control:
  what a bigger batch alone buys);
* ``towers``: the Keras 2 style tower model (the script's ``Towers``, a minimal ``multi_gpu_model``)
  (needs >= 2 replicas, so it is "n/a" at 1);
* ``mirrored``: ``tf.distribute.MirroredStrategy`` over the replica devices.

Throughput is samples per second: the median of the timed steps after some
warm-up steps (which include tracing), with the min and max.  Speed-up is the
throughput divided by ``one_device``'s on the *same global batch*, so the effect
of a bigger batch cancels out and only replication is compared; scaling
efficiency is the speed-up divided by the number of devices the way used.  The
naive "vs 1 replica" figure (divided by one device at 1 replica) is reported
too: the difference between the two is what a bigger batch alone buys.

The measuring code is lesson 06's: its ``%%writefile`` cells write a benchmark
script in two files (``bench_lib.py``: replica devices, dtype policy, the models;
``bench_child.py``: a ``StepTimer`` callback, a timed ``fit``, the three ways, one JSON line
per way), which imports nothing from ``helpers``.  The kernel imports that script
(:func:`helpers.subproc.load_script`) for the replica counts it has devices for; the replica count is
fixed once TensorFlow initialised its devices, so :func:`run_script` runs it in a fresh process for the
others - one process at a time, so nothing is timed while another process is busy
and memory stays at two TensorFlow processes.  :func:`to_measurement` and
:func:`make_report` turn the per-step samples/s into statistics, and
:class:`BenchReport` into a table, CSV and a plot labelled with the real hardware.
``make bench`` runs the same script for every replica count: it reads the files from the
lesson's ``%%writefile`` cells (:func:`notebook_scripts`), so there is no second copy.

CLI (``make bench``)::

    python -m helpers.bench --out _output/bench [--replicas 1 2 4 8] [--steps 30] [--policy mixed]

Be honest about the hardware: replicas that are logical devices carved out of
one CPU or one GPU share the same cores, so the best possible speed-up is 1x
and what you measure is the cost of replication; only N real GPUs can reach Nx
(see :func:`speedup_limit`).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Optional, Sequence

from . import config, devices
from .checks import is_int, positive_int, positive_number
from .devices import GPU_MEMORY_ENV, KIND_SPLIT_GPU, hardware_label
from .subproc import child_env, run

WAYS = ("one_device", "towers", "mirrored")
WAY_LABELS = {
    "one_device": "one device (same global batch)",
    "towers": "towers (multi_gpu_model)",
    "mirrored": "MirroredStrategy",
}
#: How replica devices were made (helpers.devices.replica_kind) when they are real, separate devices.
REAL_KIND = "GPUs"
#: Memory (MiB) of each logical GPU a child may carve out of one GPU while this process holds a share.
CHILD_GPU_MEMORY_MB = "1024"


@dataclass(frozen=True)
class BenchConfig:
    """What to measure.  Build one with :func:`make_config` (mode-aware defaults).

    Attributes:
        replicas: replica counts to measure (include 1 for the 'vs 1 replica' column).
        ways: a subset of :data:`WAYS`; must contain ``"one_device"`` (the baseline).
        steps: timed training steps per run (>= 1).
        warmup: untimed steps first (>= 1; the first one traces the graph).
        batch_per_replica: samples per replica per step; the global batch is
            ``batch_per_replica * replicas``.
        input_shape: image shape of the synthetic data (H, W, C).
        width: filters of the small CNN (:func:`helpers.models.small_cnn`).
        num_classes: classes of the synthetic labels.
        policy: Keras dtype policy for the runs (``None``: leave the default).
        timeout: seconds allowed for each child process.
    """

    replicas: tuple = (1, 2, 4)
    ways: tuple = WAYS
    steps: int = 15
    warmup: int = 3
    batch_per_replica: int = 64
    input_shape: tuple = (8, 8, 1)
    width: int = 16
    num_classes: int = 10
    policy: Optional[str] = None
    timeout: float = 600.0

    def validate(self) -> "BenchConfig":
        """Return self, or raise ``ValueError`` saying which setting is wrong."""
        reps = tuple(self.replicas)
        if not reps:
            raise ValueError("replicas must name at least one replica count, e.g. (1, 2, 4)")
        bad = [n for n in reps if not is_int(n) or n < 1]
        if bad:
            raise ValueError(f"replica counts must be ints >= 1, got {bad[0]!r} in replicas={reps}")
        if len(set(reps)) != len(reps):
            raise ValueError(f"replica counts must not repeat, got {reps}")
        ways = tuple(self.ways)
        unknown = [w for w in ways if w not in WAYS]
        if unknown or not ways:
            raise ValueError(f"unknown way(s) {unknown or ways!r}; choose from {', '.join(WAYS)}")
        if len(set(ways)) != len(ways):
            raise ValueError(f"ways must not repeat, got {ways}")
        if "one_device" not in ways:
            raise ValueError("ways must include 'one_device': it is the baseline of the speed-up")
        positive_int("steps", self.steps, why="timed steps (no steps, no measurement)")
        positive_int("warmup", self.warmup, why="warm-up steps (the first step traces the graph)")
        positive_int("batch_per_replica", self.batch_per_replica, why="samples per replica")
        positive_int("width", self.width, why="filters")
        positive_int("num_classes", self.num_classes, minimum=2)
        shape = tuple(self.input_shape)
        if len(shape) != 3 or not all(is_int(d) and d >= 1 for d in shape):
            raise ValueError(f"input_shape must be (height, width, channels) of positive ints, got {shape}")
        if self.policy is not None and not isinstance(self.policy, str):
            raise ValueError(f"policy must be a Keras dtype policy name or None, got {self.policy!r}")
        positive_number("timeout", self.timeout, unit="seconds")
        return self

    def to_dict(self) -> dict:
        """The settings as a JSON-ready dict: what a benchmark script reads (``settings["steps"]`` ...)."""
        return json.loads(json.dumps(asdict(self)))


def make_config(**overrides) -> BenchConfig:
    """A validated :class:`BenchConfig` with quick/full defaults, updated by ``overrides``.

    Quick mode: an 8x8 input, 16 filters, 15 timed steps (seconds on 2 cores).
    Full mode: a 32x32x3 input, 64 filters, 30 timed steps (a real GPU workload).
    """
    names = {f.name for f in fields(BenchConfig)}
    bad = sorted(set(overrides) - names)
    if bad:
        raise ValueError(f"unknown setting(s) {bad}; known: {', '.join(sorted(names))}")
    base = BenchConfig(
        steps=config.pick(quick=15, full=30),
        warmup=config.pick(quick=3, full=5),
        batch_per_replica=config.pick(quick=64, full=256),
        input_shape=config.pick(quick=(8, 8, 1), full=(32, 32, 3)),
        width=config.pick(quick=16, full=64),
    )
    for key in ("replicas", "ways", "input_shape"):
        if key in overrides and overrides[key] is not None and not isinstance(overrides[key], str):
            overrides[key] = tuple(overrides[key])
    return replace(base, **overrides).validate()


# ---------------------------------------------------------------------------------------------
# One measurement (runs in the process whose devices are already configured)
# ---------------------------------------------------------------------------------------------

@dataclass
class Measurement:
    """Throughput of one way at one replica count (``samples_per_s`` is NaN when n/a)."""

    way: str
    replicas: int
    devices_used: int
    global_batch: int
    samples_per_s: float
    min_samples_per_s: float
    max_samples_per_s: float
    steps: int
    devices: list = field(default_factory=list)
    replica_kind: str = ""
    policy: str = ""
    note: str = ""
    hardware: str = ""

    @property
    def available(self) -> bool:
        return math.isfinite(self.samples_per_s)


def progress_line(m: Measurement) -> str:
    """One human line for a finished run."""
    head = f"[bench] {m.replicas} replica(s) | {WAY_LABELS.get(m.way, m.way):<31}"
    if not m.available:
        return f"{head} | {m.note}"
    return (f"{head} | {m.samples_per_s:9.0f} samples/s (min {m.min_samples_per_s:.0f}, "
            f"max {m.max_samples_per_s:.0f}) | global batch {m.global_batch} | {m.replica_kind} "
            f"{', '.join(m.devices)}")


def _child_env() -> dict:
    env = child_env({"TF_CPP_MIN_LOG_LEVEL": "3", "KERAS_BACKEND": "tensorflow"})
    if configured_replicas() is not None:
        # This process (a notebook kernel) already holds its replica devices. If they are one GPU
        # split in two, that share stays allocated while a child splits the same GPU again (e.g.
        # 4 x 3 GiB next to the kernel's 2 x 4 GiB on a 15 GiB Colab T4): cap the child's split.
        # No effect on CPUs or when there are enough whole GPUs (those use memory growth).
        env.setdefault(GPU_MEMORY_ENV, CHILD_GPU_MEMORY_MB)
    return env


def configured_replicas() -> Optional[int]:
    """How many replica devices ``ensure_devices`` configured in this process (None if it did not run)."""

    names = devices.configured_devices()
    return None if names is None else len(names)


# ---------------------------------------------------------------------------------------------
# The notebook's side: a benchmark *script* the learner wrote, run here or in fresh processes
# ---------------------------------------------------------------------------------------------

#: Keys every result of a benchmark script has (one JSON object per way and replica count).
RESULT_KEYS = ("way", "replicas", "devices", "global_batch", "samples_per_s", "kind", "gpus", "policy")
#: Why a (way, replica count) that a report expects can be missing.
TOWERS_NA = "n/a: multi_gpu_model needs >= 2 replicas"


#: The lesson whose ``%%writefile`` cells write the benchmark script (``make bench`` reads them there).
LESSON_NOTEBOOK = "notebooks/06_scaling_and_performance.ipynb"
#: The file of that script that a process runs (``python bench_child.py REPLICAS SETTINGS_JSON``).
SCRIPT_NAME = "bench_child.py"


def lesson_notebook() -> Path:
    """Lesson 06's notebook: next to this package (a git checkout), else under the current folder."""
    for root in (Path(__file__).resolve().parent.parent, Path.cwd()):
        if (root / LESSON_NOTEBOOK).is_file():
            return root / LESSON_NOTEBOOK
    raise ValueError(f"{LESSON_NOTEBOOK} not found: run this from the course's folder or pass --notebook")


def notebook_scripts(notebook=None) -> dict:
    """``{file name: text}`` of every file a notebook writes with ``%%writefile`` (default: lesson 06).

    Why: the benchmark script lives in one place, lesson 06's cells; ``make bench`` and the tests
    read it from there, so the command line runs exactly the code the lesson teaches.  Each file
    must be written by one cell (``%%writefile -a`` is refused: running it twice corrupts the file).
    """
    path = Path(notebook) if notebook is not None else lesson_notebook()
    files = {}
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] != "code" or not src.startswith("%%writefile"):
            continue
        first, _, body = src.partition("\n")
        args = first.split()[1:]
        name = Path(args[-1]).name if args else ""
        if not name or "-a" in args or "--append" in args or name in files:
            raise ValueError(f"{path.name}: every file must be written by one plain %%writefile cell, "
                             f"got {first!r}")
        files[name] = body if body.endswith("\n") else body + "\n"
    return files


def write_scripts(folder, notebook=None) -> Path:
    """Write :func:`notebook_scripts` into ``folder``; return the path of :data:`SCRIPT_NAME` there."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = notebook_scripts(notebook)
    if SCRIPT_NAME not in files:
        raise ValueError(f"the notebook writes no {SCRIPT_NAME} (it writes {sorted(files) or 'nothing'})")
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder / SCRIPT_NAME


def check_result(result: dict) -> dict:
    """Return ``result`` if it has :data:`RESULT_KEYS` and at least one positive samples/s, else raise ValueError."""
    if not isinstance(result, dict):
        raise ValueError(f"a benchmark result must be a dict, got {type(result).__name__}")
    missing = [k for k in RESULT_KEYS if k not in result]
    if missing:
        raise ValueError(f"benchmark result lacks {missing}; it needs {', '.join(RESULT_KEYS)}")
    if result["way"] not in WAYS:
        raise ValueError(f"unknown way {result['way']!r}; choose from {', '.join(WAYS)}")
    rates = result["samples_per_s"]
    if not rates or not all(isinstance(r, (int, float)) and math.isfinite(r) and r > 0 for r in rates):
        raise ValueError(f"samples_per_s must be a non-empty list of positive numbers, got {rates!r}")
    return result


def to_measurement(result: dict) -> Measurement:
    """One script result -> :class:`Measurement`: median samples/s of the timed steps, with min and max."""
    r = check_result(result)
    rates, used = list(r["samples_per_s"]), list(r["devices"])
    gpus = list(r.get("gpus") or [])
    try:
        if r["kind"] == KIND_SPLIT_GPU and len(used) == 1:
            hardware = f"a part of 1 x {gpus[0] if gpus else 'GPU'}"
        else:
            hardware = hardware_label(r["kind"], len(used), gpus)
    except ValueError:
        hardware = str(r["kind"])
    return Measurement(r["way"], int(r["replicas"]), len(used), int(r["global_batch"]),
                       statistics.median(rates), min(rates), max(rates), len(rates), used,
                       str(r["kind"]), str(r["policy"]), "", hardware)


def make_report(results: Sequence[dict], cfg: BenchConfig, seconds: float = 0.0) -> "BenchReport":
    """A :class:`BenchReport` from script results; every (way, replicas) of ``cfg`` not measured is n/a."""
    cfg.validate()
    rows = [to_measurement(r) for r in results]
    seen = {(m.way, m.replicas) for m in rows}
    for n in cfg.replicas:
        for way in cfg.ways:
            if (way, n) not in seen:
                note = TOWERS_NA if way == "towers" and n < 2 else "n/a: not measured"
                nan = float("nan")
                rows.append(Measurement(way, n, 0, cfg.batch_per_replica * n, nan, nan, nan, 0,
                                        [], "", cfg.policy or "", note))
    return BenchReport(rows, cfg, seconds)


def run_script(script, replicas: int, cfg: BenchConfig, echo: bool = True) -> list[dict]:
    """Run ``python script REPLICAS SETTINGS_JSON`` in a fresh process; return the JSON dicts it printed.

    Why a fresh process: the replica count is fixed once TensorFlow set up its devices.
    One process at a time, so no measurement competes with another TensorFlow process
    for the cores (and memory stays at this process + one child).  Lines that are not
    JSON objects are echoed.  Raises ``RuntimeError`` with the child's last error line
    when it fails or runs longer than ``cfg.timeout`` seconds.
    """
    positive_int("replicas", replicas, why="replica devices; 0 replicas cannot train")
    cfg.validate()
    script = Path(script)
    if not script.is_file():
        raise ValueError(f"no script at {script}: run the %%writefile cells first")
    if echo:
        print(f"[bench] {replicas} replica(s): a fresh process runs {script.name} ...", flush=True)
    cmd = [sys.executable, str(script), str(replicas), json.dumps(cfg.to_dict())]
    try:
        proc = run(cmd, _child_env(), timeout=cfg.timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"benchmark process for {replicas} replica(s) ran longer than "
                           f"timeout={cfg.timeout} s and was stopped") from None
    results = []
    for line in proc.stdout.splitlines():
        try:
            value = json.loads(line) if line.startswith("{") else None
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            results.append(check_result(value))
            if echo:
                print(progress_line(to_measurement(value)), flush=True)
        elif echo and line.strip():
            print(line, flush=True)
    if proc.returncode != 0 or not results:
        last = proc.last_error_line() or (proc.stderr.strip().splitlines() or ["no error output"])[-1]
        raise RuntimeError(f"benchmark process for {replicas} replica(s) failed (exit code "
                           f"{proc.returncode}, {len(results)} result(s)): {last}")
    return results


# ---------------------------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------------------------

def speedup_limit(kind: str, replicas: int) -> int:
    """The best speed-up physically possible with ``replicas`` replicas made as ``kind``.

    Real separate GPUs (``"GPUs"``): ``replicas``.  Logical devices split out of
    one CPU or one GPU share the same hardware: 1.
    """
    positive_int("replicas", replicas, why="replica devices")
    return replicas if kind == REAL_KIND else 1


def explain_hardware(kind: str, replicas: int) -> str:
    """A plain sentence saying what the measured speed-up can mean on this hardware.

    On logical devices the measurement can land on either side of 1x: below it is the
    cost of replication, above it is one device having left cores (or parts of the chip)
    idle that N replicas put to work - never extra hardware.
    """
    limit = speedup_limit(kind, replicas)
    if kind == REAL_KIND:
        return (f"{replicas} real GPU(s): each replica has its own chip, so up to {limit}x is "
                "physically possible; the gap to it is communication and input cost.")
    what, share, idle = (("logical GPU(s) split out of ONE GPU", "chip", "idle parts of the same chip")
                         if "GPU" in kind else
                         ("logical CPU device(s) split out of ONE CPU", "cores",
                          "idle cores of the same CPU"))
    return (f"{replicas} {what}: they share the same {share}, so the physical limit is 1x; values "
            f"below it are the cost of replication, values above it come from using {idle}, "
            "not from extra hardware.")


@dataclass
class BenchReport:
    """All measurements of one benchmark plus the derived speed-up and efficiency."""

    measurements: list
    config: BenchConfig
    seconds: float = 0.0

    def get(self, way: str, replicas: int) -> Measurement:
        for m in self.measurements:
            if m.way == way and m.replicas == replicas:
                return m
        raise ValueError(f"no measurement for way={way!r}, replicas={replicas}")

    def baseline(self, replicas: int) -> float:
        """Samples/s of ``one_device`` on the global batch of ``replicas`` replicas."""
        value = self.get("one_device", replicas).samples_per_s
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"the one-device baseline at {replicas} replica(s) is not a positive "
                             f"throughput: {value}")
        return value

    def rows(self) -> list[dict]:
        """One dict per (way, replicas), ordered by way then replicas.

        ``speed_up``: samples/s divided by one device's on the same global batch (so the
        batch size cancels out and only replication is compared); ``efficiency``:
        speed-up / devices used; ``vs_1_replica``: samples/s divided by one device's at
        1 replica (the naive figure, which also contains the effect of a bigger batch).
        """
        order = {w: i for i, w in enumerate(WAYS)}
        try:
            first = self.baseline(1)
        except ValueError:
            first = float("nan")
        out = []
        for m in sorted(self.measurements, key=lambda m: (order.get(m.way, 99), m.replicas)):
            nan = float("nan")
            speed_up = m.samples_per_s / self.baseline(m.replicas) if m.available else nan
            out.append({
                "way": m.way, "replicas": m.replicas, "devices_used": m.devices_used,
                "global_batch": m.global_batch, "samples_per_s": m.samples_per_s,
                "min_samples_per_s": m.min_samples_per_s, "max_samples_per_s": m.max_samples_per_s,
                "speed_up": speed_up,
                "efficiency": speed_up / m.devices_used if m.available else nan,
                "speedup_limit": speedup_limit(m.replica_kind, m.devices_used) if m.available else "",
                "vs_1_replica": m.samples_per_s / first if m.available else nan,
                "timed_steps": m.steps, "replica_kind": m.replica_kind, "policy": m.policy,
                "devices": " ".join(m.devices), "hardware": m.hardware, "note": m.note,
            })
        return out

    def mirrored_vs_towers(self) -> dict:
        """``{replicas: MirroredStrategy samples/s / towers samples/s}`` where both were measured."""
        out = {}
        for n in sorted(self.config.replicas):
            try:
                mir, tow = self.get("mirrored", n), self.get("towers", n)
            except ValueError:
                continue
            if mir.available and tow.available:
                out[n] = mir.samples_per_s / tow.samples_per_s
        return out

    def device_lines(self) -> list[str]:
        """Where each replica count ran, as reported by its child process."""
        out = []
        for n in sorted({m.replicas for m in self.measurements}):
            mine = [m for m in self.measurements if m.replicas == n]
            widest = max(mine, key=lambda m: len(m.devices))
            what = widest.hardware or widest.replica_kind
            out.append(f"{n} replica(s): {what} ({widest.replica_kind}) -> {', '.join(widest.devices)}")
        return out

    def hardware_title(self) -> str:
        """The real hardware behind each replica count, for figure titles.

        E.g. "1 replica: 1 CPU; 2 replicas: 1 CPU split in 2" or "2 replicas: 2 x Tesla T4".
        """
        parts = []
        for n in sorted({m.replicas for m in self.measurements}):
            mine = [m for m in self.measurements if m.replicas == n and m.available]
            if mine:
                widest = max(mine, key=lambda m: len(m.devices))
                parts.append(f"{n} replica{'s' if n > 1 else ''}: "
                             f"{widest.hardware or widest.replica_kind or 'unknown'}")
        return "; ".join(parts) or "nothing measured"

    def table(self) -> str:
        """The results as a fixed-width text table."""
        head = (f"{'way':<31} {'replicas':>8} {'batch':>6} {'samples/s':>10} {'min-max':>15} "
                f"{'speed-up':>8} {'efficiency':>10} {'limit':>6} {'vs 1 replica':>12}")
        lines = [head, "-" * len(head)]
        for r in self.rows():
            label = WAY_LABELS.get(r["way"], r["way"])
            if not math.isfinite(r["samples_per_s"]):
                lines.append(f"{label:<31} {r['replicas']:>8} {r['global_batch']:>6} {'n/a':>10}   {r['note']}")
                continue
            rng = f"{r['min_samples_per_s']:.0f}-{r['max_samples_per_s']:.0f}"
            lines.append(f"{label:<31} {r['replicas']:>8} {r['global_batch']:>6} {r['samples_per_s']:>10.0f} "
                         f"{rng:>15} {r['speed_up']:>7.2f}x {r['efficiency']:>10.2f} {r['speedup_limit']:>5}x "
                         f"{r['vs_1_replica']:>11.2f}x")
        return "\n".join(lines)

    def summary(self) -> str:
        """Table, devices, the MirroredStrategy / towers ratio and what the hardware allows."""
        parts = [self.table(), "", "where each replica count ran (reported by the process that measured it):"]
        parts += [f"  {line}" for line in self.device_lines()]
        ratio = self.mirrored_vs_towers()
        if ratio:
            parts.append("MirroredStrategy / towers throughput: " +
                         ", ".join(f"{r:.2f}x at {n} replicas" for n, r in ratio.items()))
        for n in sorted({m.replicas for m in self.measurements if m.replicas > 1}):
            kind = next((m.replica_kind for m in self.measurements if m.replicas == n and m.available), "")
            if not kind:
                continue
            parts.append(explain_hardware(kind, n))
        return "\n".join(parts)

    def to_csv(self, path) -> Path:
        """Write :meth:`rows` as CSV (creating the folder) and return the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = self.rows()
        with path.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        return path

    def plot(self, axes=None):
        """Samples/s and speed-up against replicas, one line per way, with the ideal lines.

        Returns the matplotlib Figure.
        """
        import matplotlib.pyplot as plt

        if axes is None:
            fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        fig = axes[0].figure
        rows = [r for r in self.rows() if math.isfinite(r["samples_per_s"])]
        reps = sorted(self.config.replicas)
        for way in WAYS:
            mine = [r for r in rows if r["way"] == way]
            if not mine:
                continue
            xs = [r["replicas"] for r in mine]
            ys = [r["samples_per_s"] for r in mine]
            err = [[y - r["min_samples_per_s"] for y, r in zip(ys, mine)],
                   [r["max_samples_per_s"] - y for y, r in zip(ys, mine)]]
            axes[0].errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=WAY_LABELS[way])
            axes[1].plot(xs, [r["speed_up"] for r in mine], marker="o", label=WAY_LABELS[way])
        axes[1].plot(reps, reps, "k--", lw=1, label="ideal on N real GPUs (Nx)")
        if any(m.replica_kind != REAL_KIND for m in self.measurements):
            axes[1].axhline(1.0, color="grey", ls=":", lw=1.5, label="limit on shared hardware (1x)")
        axes[0].set(title="Training throughput (median, min-max)", xlabel="replicas",
                    ylabel="samples / s")
        axes[1].set(title="Speed-up vs one device on the same global batch", xlabel="replicas",
                    ylabel="speed-up")
        for ax in axes:
            ax.set_xscale("log", base=2)
            ax.set_xticks(reps, [str(n) for n in reps])
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle(f"Does it get faster? Measured on {self.hardware_title()}", fontsize=9)
        fig.tight_layout()
        return fig


def write_outputs(report: BenchReport, out_dir) -> dict:
    """Write ``bench.csv`` and ``bench.png`` into ``out_dir``; return both paths."""
    import matplotlib

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path = report.to_csv(out / "bench.csv")
    if "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = report.plot()
    png_path = out / "bench.png"
    fig.savefig(png_path, dpi=120)
    plt.close(fig)
    return {"csv": csv_path, "png": png_path}


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m helpers.bench",
                                description="Training throughput: one device vs towers vs MirroredStrategy.")
    p.add_argument("--out", help="folder for bench.csv and bench.png (e.g. _output/bench)")
    p.add_argument("--replicas", type=int, nargs="+", help="replica counts (must include 1); default 1 2 4")
    p.add_argument("--ways", nargs="+", help=f"subset of {' '.join(WAYS)} (one_device is required)")
    p.add_argument("--steps", type=int, help="timed steps per run")
    p.add_argument("--warmup", type=int, help="untimed warm-up steps per run")
    p.add_argument("--batch-per-replica", type=int, help="samples per replica per step")
    p.add_argument("--policy", help="Keras dtype policy, e.g. mixed_float16; 'mixed' picks the script's choice")
    p.add_argument("--quick", action="store_true", help="force quick-mode defaults (small and short)")
    p.add_argument("--notebook", help=f"the notebook whose %%%%writefile cells write the script "
                                      f"(default {LESSON_NOTEBOOK})")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``make bench``: run lesson 06's script (:func:`notebook_scripts`) per replica count, write CSV + PNG."""
    args = _parser().parse_args(argv)
    if not args.out:
        raise SystemExit("error: --out DIR is required (where bench.csv and bench.png go)")
    if args.quick:
        os.environ[config.ENV_VAR] = "quick"
    overrides = {k: v for k, v in {
        "replicas": args.replicas, "ways": args.ways, "steps": args.steps, "warmup": args.warmup,
        "batch_per_replica": args.batch_per_replica, "policy": args.policy}.items() if v is not None}
    try:
        cfg = make_config(**overrides)
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None
    print(f"[bench] mode {config.mode()}: replicas {cfg.replicas}, ways {', '.join(cfg.ways)}, "
          f"{cfg.steps} timed steps after {cfg.warmup} warm-up, {cfg.batch_per_replica} samples per replica")
    start, results = time.perf_counter(), []
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        try:
            script = write_scripts(tmp, args.notebook)
        except (OSError, ValueError) as err:
            raise SystemExit(f"error: {err}") from None
        for n in sorted(cfg.replicas):  # one fresh process at a time: nothing competes for the cores
            results += run_script(script, n, cfg)
    report = make_report(results, cfg, time.perf_counter() - start)
    print(report.summary())
    paths = write_outputs(report, args.out)
    print(f"wrote {paths['csv']} and {paths['png']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
