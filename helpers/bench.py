"""Does it get faster? Lesson 06's benchmark in one call: samples/s per way and replica count, and the report.

Three ways train one model on the same global batch: ``one_device`` (the control: what the bigger batch alone
buys), ``towers`` (Keras 2's tower model) and ``mirrored``. :data:`SCRIPT` measures them; a replica count the
kernel has no devices for runs in a fresh process, as TensorFlow fixes its devices at start. The table and plot
name the real hardware. ``make bench``: tools/benchmark.py.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Mapping, Optional, Sequence

from . import config
from .checks import is_int, positive_int, positive_number
from .devices import KIND_GPUS, KIND_SPLIT_GPU, hardware_label
from .subproc import child_env, load_script, run

#: The benchmark script: one process measures every way at one replica count (``python SCRIPT N SETTINGS_JSON``).
SCRIPT = Path(__file__).resolve().parent / "scripts" / "bench_child.py"
WAYS = ("one_device", "towers", "mirrored")
WAY_LABELS = {"one_device": "one device (same global batch)", "towers": "towers (multi_gpu_model)",
              "mirrored": "MirroredStrategy"}
#: Keys every result of the benchmark script has (one JSON object per way and replica count).
RESULT_KEYS = ("way", "replicas", "devices", "global_batch", "samples_per_s", "kind", "gpus", "policy")
TOWERS_NA = "n/a: multi_gpu_model needs >= 2 replicas"


@dataclass(frozen=True)
class BenchConfig:
    """What to measure, checked when made (the global batch is ``batch_per_replica * replicas``)."""

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

    def __post_init__(self) -> None:
        """Raise ``ValueError`` saying which setting is wrong."""
        reps, ways, shape = tuple(self.replicas), tuple(self.ways), tuple(self.input_shape)
        if not reps or len(set(reps)) != len(reps):
            raise ValueError(f"replicas must name distinct replica counts, e.g. (1, 2, 4), got {reps}")
        for n in reps:
            positive_int("each replica count", n)
        if not ways or len(set(ways)) != len(ways) or not set(ways) <= set(WAYS) or "one_device" not in ways:
            raise ValueError(f"ways must be distinct names from {', '.join(WAYS)}, with 'one_device' "
                             f"(the baseline of the speed-up), got {ways}")
        for name in ("steps", "warmup", "batch_per_replica", "width"):
            positive_int(name, getattr(self, name))
        positive_int("num_classes", self.num_classes, minimum=2)
        if len(shape) != 3 or not all(is_int(d) and d >= 1 for d in shape):
            raise ValueError(f"input_shape must be (height, width, channels) of positive ints, got {shape}")
        if self.policy is not None and not isinstance(self.policy, str):
            raise ValueError(f"policy must be a Keras dtype policy name or None, got {self.policy!r}")
        positive_number("timeout", self.timeout, unit="seconds")

    def to_dict(self) -> dict:
        """The settings as a JSON-ready dict: what the benchmark script reads (``settings["steps"]`` ...)."""
        return json.loads(json.dumps(asdict(self)))


def make_config(**overrides) -> BenchConfig:
    """A validated :class:`BenchConfig` with quick/full-mode defaults, updated by ``overrides``."""
    unknown = sorted(set(overrides) - {f.name for f in fields(BenchConfig)})
    if unknown:
        raise ValueError(f"unknown setting(s) {unknown}")
    base = BenchConfig(steps=config.pick(quick=15, full=30), warmup=config.pick(quick=3, full=5),
                       batch_per_replica=config.pick(quick=64, full=256),
                       input_shape=config.pick(quick=(8, 8, 1), full=(32, 32, 3)),
                       width=config.pick(quick=16, full=64))
    return replace(base, **{k: tuple(v) if isinstance(v, list) else v for k, v in overrides.items()})


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


def check_result(result: dict) -> dict:
    """``result`` if it has :data:`RESULT_KEYS`, a known way and positive samples/s, else ``ValueError``."""
    missing = [k for k in RESULT_KEYS if k not in result] if isinstance(result, dict) else list(RESULT_KEYS)
    if missing:
        raise ValueError(f"a benchmark result is a dict with {', '.join(RESULT_KEYS)}; {result!r} lacks {missing}")
    if result["way"] not in WAYS:
        raise ValueError(f"unknown way {result['way']!r}; choose from {', '.join(WAYS)}")
    rates = result["samples_per_s"]
    if not rates or not all(isinstance(r, (int, float)) and math.isfinite(r) and r > 0 for r in rates):
        raise ValueError(f"samples_per_s must be a non-empty list of positive numbers, got {rates!r}")
    return result


def to_measurement(result: dict) -> Measurement:
    """One script result -> :class:`Measurement`: median samples/s of the timed steps, with min and max."""
    r = check_result(result)
    rates, used, gpus = list(r["samples_per_s"]), list(r["devices"]), list(r["gpus"] or [])
    if r["kind"] == KIND_SPLIT_GPU and len(used) == 1:
        hardware = f"a part of 1 x {gpus[0] if gpus else 'GPU'}"
    else:
        hardware = hardware_label(r["kind"], len(used), gpus)
    return Measurement(r["way"], int(r["replicas"]), len(used), int(r["global_batch"]),
                       statistics.median(rates), min(rates), max(rates), len(rates), used,
                       str(r["kind"]), str(r["policy"]), "", hardware)


def make_report(results: Sequence[dict], cfg: BenchConfig, seconds: float = 0.0) -> "BenchReport":
    """A :class:`BenchReport` from script results; every (way, replicas) of ``cfg`` not measured is n/a."""
    rows = [to_measurement(r) for r in results]
    seen, nan = {(m.way, m.replicas) for m in rows}, float("nan")
    for n in cfg.replicas:
        for way in cfg.ways:
            if (way, n) not in seen:
                note = TOWERS_NA if way == "towers" and n < 2 else "n/a: not measured"
                rows.append(Measurement(way, n, 0, cfg.batch_per_replica * n, nan, nan, nan, 0,
                                        [], "", cfg.policy or "", note))
    return BenchReport(rows, cfg, seconds)


def run_script(script, replicas: int, cfg: BenchConfig) -> list[dict]:
    """Run ``python script REPLICAS SETTINGS_JSON`` in a fresh process (one at a time: nothing competes for the
    cores); echo its other lines, return its JSON results. ``RuntimeError`` with the child's last error line when it
    fails or outlives ``cfg.timeout``."""
    positive_int("replicas", replicas)
    script = Path(script)
    if not script.is_file():
        raise ValueError(f"no script at {script}")
    print(f"[bench] {replicas} replica(s): a fresh process runs {script.name} ...", flush=True)
    cmd = [sys.executable, str(script), str(replicas), json.dumps(cfg.to_dict())]
    try:
        proc = run(cmd, child_env({"TF_CPP_MIN_LOG_LEVEL": "3", "KERAS_BACKEND": "tensorflow"}), timeout=cfg.timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"benchmark process for {replicas} replica(s) ran longer than "
                           f"timeout={cfg.timeout} s and was stopped") from None
    results = []
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            results.append(json.loads(line))
            print(progress_line(to_measurement(results[-1])), flush=True)   # checks the result
        elif line.strip():
            print(line, flush=True)
    if proc.returncode != 0 or not results:
        last = proc.last_error_line() or (proc.stderr.strip().splitlines() or ["no error output"])[-1]
        raise RuntimeError(f"benchmark process for {replicas} replica(s) failed (exit code "
                           f"{proc.returncode}, {len(results)} result(s)): {last}")
    return results


def run_benchmark(cfg: Optional[BenchConfig] = None, strategies: Optional[Mapping[int, object]] = None) -> "BenchReport":
    """Every way at every replica count of ``cfg`` (default :func:`make_config`): measured here with
    ``strategies[n]`` where given (a kernel keeps its one multi-replica strategy: lesson 04), else by :data:`SCRIPT`
    in a fresh process. Prints one line per run; returns the :class:`BenchReport`."""
    cfg = cfg or make_config()
    strategies = dict(strategies or {})
    for n, strategy in strategies.items():
        if getattr(strategy, "num_replicas_in_sync", None) != n:
            raise ValueError(f"strategies[{n}] must be a tf.distribute strategy with {n} replica(s), got {strategy!r}")
    start, results, child = time.perf_counter(), [], None
    for n in cfg.replicas:
        if n not in strategies:
            results += run_script(SCRIPT, n, cfg)
            continue
        child = child or load_script(SCRIPT)
        for way in cfg.ways:
            if way != "towers" or n > 1:                 # a tower model needs >= 2 devices
                results.append(child.run(way, strategies[n], cfg.to_dict()))
                print(progress_line(to_measurement(results[-1])), flush=True)
    return make_report(results, cfg, time.perf_counter() - start)


def speedup_limit(kind: str, replicas: int) -> int:
    """The best speed-up possible: ``replicas`` on real GPUs, 1 on logical devices sharing one CPU or GPU."""
    return positive_int("replicas", replicas) if kind == KIND_GPUS else 1


def explain_hardware(kind: str, replicas: int) -> str:
    """A sentence saying what a measured speed-up can mean on this hardware (logical devices: either side of 1x)."""
    limit = speedup_limit(kind, replicas)
    if kind == KIND_GPUS:
        return (f"{replicas} real GPU(s): each replica has its own chip, so up to {limit}x is "
                "physically possible; the gap to it is communication and input cost.")
    what, share, idle = (("logical GPU(s) split out of ONE GPU", "chip", "idle parts of the same chip")
                         if "GPU" in kind else
                         ("logical CPU device(s) split out of ONE CPU", "cores", "idle cores of the same CPU"))
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

    def _baseline(self, replicas: int) -> float:
        value = self.get("one_device", replicas).samples_per_s
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"the one-device baseline at {replicas} replica(s) is not a positive throughput: {value}")
        return value

    def rows(self) -> list[dict]:
        """One dict per (way, replicas). ``speed_up``: over one device on the same global batch (replication
        only); ``efficiency``: speed-up / devices; ``vs_1_replica``: over one device at 1 replica (the naive figure,
        which holds the bigger batch's effect too)."""
        nan, order = float("nan"), {w: i for i, w in enumerate(WAYS)}
        first = self._baseline(1) if any(m.replicas == 1 for m in self.measurements) else nan
        out = []
        for m in sorted(self.measurements, key=lambda m: (order[m.way], m.replicas)):
            speed_up = m.samples_per_s / self._baseline(m.replicas) if m.available else nan
            out.append({
                "way": m.way, "replicas": m.replicas, "devices_used": m.devices_used,
                "global_batch": m.global_batch, "samples_per_s": m.samples_per_s,
                "min_samples_per_s": m.min_samples_per_s, "max_samples_per_s": m.max_samples_per_s,
                "speed_up": speed_up, "efficiency": speed_up / m.devices_used if m.available else nan,
                "speedup_limit": speedup_limit(m.replica_kind, m.devices_used) if m.available else "",
                "vs_1_replica": m.samples_per_s / first if m.available else nan,
                "timed_steps": m.steps, "replica_kind": m.replica_kind, "policy": m.policy,
                "devices": " ".join(m.devices), "hardware": m.hardware, "note": m.note,
            })
        return out

    def mirrored_vs_towers(self) -> dict:
        """``{replicas: MirroredStrategy samples/s / towers samples/s}`` where both were measured."""
        found = {(m.way, m.replicas): m.samples_per_s for m in self.measurements if m.available}
        return {n: found["mirrored", n] / found["towers", n] for n in sorted(self.config.replicas)
                if ("mirrored", n) in found and ("towers", n) in found}

    def _widest(self) -> dict[int, Measurement]:
        """Per replica count measured, in order, the measurement that used the most devices."""
        done = sorted((m for m in self.measurements if m.available), key=lambda m: (m.replicas, len(m.devices)))
        return {m.replicas: m for m in done}

    def hardware_title(self) -> str:
        """The real hardware behind each replica count, e.g. "1 replica: 1 CPU; 2 replicas: 1 CPU split in 2"."""
        parts = [f"{n} replica{'s' if n > 1 else ''}: {w.hardware or w.replica_kind or 'unknown'}"
                 for n, w in self._widest().items()]
        return "; ".join(parts) or "nothing measured"

    def table(self) -> str:
        """The results as a fixed-width text table."""
        head = (f"{'way':<31} {'replicas':>8} {'batch':>6} {'samples/s':>10} {'min-max':>15} "
                f"{'speed-up':>8} {'efficiency':>10} {'limit':>6} {'vs 1 replica':>12}")
        lines = [head, "-" * len(head)]
        for r in self.rows():
            label = WAY_LABELS[r["way"]]
            if not math.isfinite(r["samples_per_s"]):
                lines.append(f"{label:<31} {r['replicas']:>8} {r['global_batch']:>6} {'n/a':>10}   {r['note']}")
                continue
            rng = f"{r['min_samples_per_s']:.0f}-{r['max_samples_per_s']:.0f}"
            lines.append(f"{label:<31} {r['replicas']:>8} {r['global_batch']:>6} {r['samples_per_s']:>10.0f} "
                         f"{rng:>15} {r['speed_up']:>7.2f}x {r['efficiency']:>10.2f} {r['speedup_limit']:>5}x "
                         f"{r['vs_1_replica']:>11.2f}x")
        return "\n".join(lines)

    def summary(self) -> str:
        """Table, where each replica count ran, the MirroredStrategy / towers ratio and what the hardware allows."""
        widest = self._widest()
        parts = [self.table(), "", "where each replica count ran (reported by the process that measured it):"]
        parts += [f"  {n} replica(s): {w.hardware or w.replica_kind} ({w.replica_kind}) -> {', '.join(w.devices)}"
                  for n, w in widest.items()]
        ratio = self.mirrored_vs_towers()
        if ratio:
            parts.append("MirroredStrategy / towers throughput: " +
                         ", ".join(f"{r:.2f}x at {n} replicas" for n, r in ratio.items()))
        parts += [explain_hardware(w.replica_kind, n) for n, w in widest.items() if n > 1]
        return "\n".join(parts)

    def plot(self):
        """Samples/s and speed-up against replicas, one line per way, with the ideal lines; returns the Figure."""
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        rows = [r for r in self.rows() if math.isfinite(r["samples_per_s"])]
        reps = sorted(self.config.replicas)
        for way in WAYS:
            mine = [r for r in rows if r["way"] == way]
            if mine:
                xs, ys = [r["replicas"] for r in mine], [r["samples_per_s"] for r in mine]
                err = [[y - r["min_samples_per_s"] for y, r in zip(ys, mine)],
                       [r["max_samples_per_s"] - y for y, r in zip(ys, mine)]]
                axes[0].errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=WAY_LABELS[way])
                axes[1].plot(xs, [r["speed_up"] for r in mine], marker="o", label=WAY_LABELS[way])
        axes[1].plot(reps, reps, "k--", lw=1, label="ideal on N real GPUs (Nx)")
        if any(m.replica_kind != KIND_GPUS for m in self.measurements):
            axes[1].axhline(1.0, color="grey", ls=":", lw=1.5, label="limit on shared hardware (1x)")
        axes[0].set(title="Training throughput (median, min-max)", xlabel="replicas", ylabel="samples / s")
        axes[1].set(title="Speed-up vs one device on the same global batch", xlabel="replicas", ylabel="speed-up")
        for ax in axes:
            ax.set_xscale("log", base=2)
            ax.set_xticks(reps, [str(n) for n in reps])
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle(f"Does it get faster? Measured on {self.hardware_title()}", fontsize=9)
        fig.tight_layout()
        return fig


