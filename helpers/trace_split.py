"""Read a profiler trace and split a training loop's time into input, compute and communication (lesson 10).

Why: "the GPUs are slow" is often "the GPUs wait". ``jax.profiler.trace(logdir)`` writes a Chrome trace-event
file (``<host>.trace.json.gz``); the lesson marks its input code ``TraceAnnotation("input")``, and XLA names its
events after the HLO ops (``fusion.3``, ``all-reduce``...). This module finds the trace and adds the events up.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional, Union

from .checks import positive_int

#: Collective (cross-device) XLA operations: the communication of a sharded step.
COLLECTIVE = re.compile(r"^(all-reduce|all-gather|reduce-scatter|collective-permute|all-to-all"
                        r"|collective-broadcast)(-start|-done)?([.\d]*)$")
#: An XLA operation name: lower case, no spaces (``fusion.3``, ``ynn_fusion``, ``dot``); runtime
#: wrappers such as ``ThunkExecutor::Execute (...)``, ``Rendezvous`` or ``Wait: ...`` do not match.
HLO_OP = re.compile(r"^[a-z][a-z0-9_.\-]*$")
CATEGORIES = ("input", "compute", "communication")


@dataclass(frozen=True)
class Event:
    """One complete trace event: name, thread (prefixed with the device for GPU streams), start and duration in µs."""

    name: str
    thread: str
    start_us: float
    dur_us: float


def find_trace(logdir: Union[str, Path]) -> Path:
    """The newest ``*.trace.json.gz`` under ``logdir``; ``FileNotFoundError`` when there is none."""
    found = sorted(Path(logdir).rglob("*.trace.json.gz"), key=lambda p: p.stat().st_mtime)
    found = [p for p in found if not p.name.startswith("perfetto_trace")] or found
    if not found:
        raise FileNotFoundError(f"no *.trace.json.gz under {logdir}: did jax.profiler.trace({str(logdir)!r}) run?")
    return found[-1]


def load_events(path: Union[str, Path]) -> list[Event]:
    """The complete events of a ``.trace.json.gz`` (or plain ``.json``) file, with thread names resolved."""
    path = Path(path)
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        data = json.load(f)
    raw = data.get("traceEvents", []) if isinstance(data, dict) else data
    if not isinstance(raw, list):
        raise ValueError(f"{path} is not a trace-event file (no traceEvents list)")
    threads = {(e.get("pid"), e.get("tid")): e.get("args", {}).get("name", "")
               for e in raw if e.get("ph") == "M" and e.get("name") == "thread_name"}
    processes = {e.get("pid"): e.get("args", {}).get("name", "")
                 for e in raw if e.get("ph") == "M" and e.get("name") == "process_name"}

    def thread(e: dict) -> str:  # a GPU's (TPU's) streams are device threads: "/device:GPU:0 stream 7"
        process, name = processes.get(e.get("pid"), ""), threads.get((e.get("pid"), e.get("tid")), "")
        return f"{process} {name}".strip() if process.startswith("/device:") else name

    return [Event(str(e.get("name", "")), thread(e), float(e.get("ts", 0)), float(e.get("dur", 0)))
            for e in raw if e.get("ph") == "X"]


def classify(name: str, thread: str) -> Optional[str]:
    """``"input"`` (the annotation), ``"communication"`` (a collective XLA op), ``"compute"`` (another XLA op, on
    an XLA thread or a device stream) or None (a wrapper or host event, not counted)."""
    if name == "input":
        return "input"
    if "XLA" not in thread and not thread.startswith("/device:"):
        return None  # host threads: Python, dispatch
    if COLLECTIVE.match(name):
        return "communication"
    return "compute" if HLO_OP.match(name) else None


def split(events: Iterable[Event], devices: int) -> dict[str, float]:
    """Seconds of input, compute and communication (per device: XLA runs one copy of each op per device), ``wall``
    (first to last counted event) and ``other`` (what the wall time leaves over; 0 when the parts overlap)."""
    positive_int("devices", devices)
    events = list(events)
    if not events:
        raise ValueError("the trace has no complete events")
    counted = [(kind, e) for e in events if (kind := classify(e.name, e.thread))]
    out = {k: sum(e.dur_us for kind, e in counted if kind == k) / 1e6 / (1 if k == "input" else devices)
           for k in CATEGORIES}
    spans = [(e.start_us, e.start_us + e.dur_us) for _, e in counted] or [(0.0, 0.0)]
    out["wall"] = (max(end for _, end in spans) - min(start for start, _ in spans)) / 1e6
    out["other"] = max(0.0, out["wall"] - sum(out[k] for k in CATEGORIES))
    return out


def shares(parts: dict[str, float]) -> dict[str, float]:
    """Input, compute and communication as fractions of their sum (not of the wall time: the parts can overlap)."""
    total = sum(parts.get(k, 0.0) for k in CATEGORIES)
    if total <= 0:
        raise ValueError("nothing was measured (input, compute and communication are all zero)")
    return {k: parts.get(k, 0.0) / total for k in CATEGORIES}


def split_row(label: str, parts: dict[str, float]) -> dict[str, object]:
    """A table row: the wall time, and milliseconds and share of input, compute and communication."""
    share = shares(parts)
    cells = {k: f"{parts.get(k, 0.0) * 1e3:7.1f} ms {share[k]:4.0%}" for k in CATEGORIES}
    return {"run": label, "wall ms": round(parts["wall"] * 1e3, 1), **cells}
