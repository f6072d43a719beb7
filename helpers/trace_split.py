"""Read a profiler trace and split a training loop's time into input, compute and communication.

Why: "the GPUs are slow" is often "the GPUs wait".  ``jax.profiler.trace(logdir)``
writes ``logdir/plugins/profile/<run>/<host>.trace.json.gz`` (the Chrome trace-event
format TensorBoard's profile plugin and Perfetto read) next to ``<host>.xplane.pb``.
Each complete event (``"ph": "X"``) has a name, a thread and a duration.  Lesson 10
marks its input code with ``jax.profiler.TraceAnnotation("input")``; XLA names its
operations after the HLO ops (``fusion.3``, ``dot.1``, ``all-reduce``...) on its own
threads.  This module finds the trace, reads those events and adds them up.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional, Union

#: Collective (cross-device) XLA operations: the communication of a sharded step.
COLLECTIVE = re.compile(r"^(all-reduce|all-gather|reduce-scatter|collective-permute|all-to-all"
                        r"|collective-broadcast)(-start|-done)?([.\d]*)$")
#: An XLA operation name: lower case, no spaces (``fusion.3``, ``ynn_fusion``, ``dot``); runtime
#: wrappers such as ``ThunkExecutor::Execute (...)``, ``Rendezvous`` or ``Wait: ...`` do not match.
HLO_OP = re.compile(r"^[a-z][a-z0-9_.\-]*$")
CATEGORIES = ("input", "compute", "communication")


@dataclass(frozen=True)
class Event:
    """One complete trace event: name, thread name (prefixed with the device for GPU/TPU streams), start and
    duration in microseconds."""

    name: str
    thread: str
    start_us: float
    dur_us: float


def find_trace(logdir: Union[str, Path]) -> Path:
    """The newest ``*.trace.json.gz`` under ``logdir`` (as written by ``jax.profiler.trace``).

    Raises:
        FileNotFoundError: no trace there (profiling never ran, or wrote elsewhere).
    """
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
    out = []
    for e in raw:
        if e.get("ph") != "X":
            continue
        thread = threads.get((e.get("pid"), e.get("tid")), "")
        process = processes.get(e.get("pid"), "")
        if process.startswith("/device:"):  # a GPU/TPU: its streams are device threads
            thread = f"{process} {thread}".strip()
        out.append(Event(str(e.get("name", "")), thread, float(e.get("ts", 0)), float(e.get("dur", 0))))
    return out


def classify(name: str, thread: str, input_name: str = "input") -> Optional[str]:
    """``"input"``, ``"communication"``, ``"compute"`` or None (a wrapper or host event we do not count).

    ``input``: the annotation the training loop puts around fetching a batch.
    ``communication``: a collective XLA op.  ``compute``: any other XLA op, on an XLA thread
    (XLA:CPU's ``tf_XLA...`` threads) or on a device's stream (``/device:GPU:0 ...``).
    """
    if name == input_name:
        return "input"
    if "XLA" not in thread and not thread.startswith("/device:"):
        return None  # host threads: Python, dispatch
    if COLLECTIVE.match(name):
        return "communication"
    if HLO_OP.match(name):
        return "compute"
    return None


def split(events: Iterable[Event], devices: int, input_name: str = "input") -> dict[str, float]:
    """Seconds of input, compute and communication, and ``wall`` (first to last event of the loop).

    XLA runs one copy of each op per device on its own thread; their durations are
    summed and divided by ``devices``, so compute and communication are per device.
    ``other`` is what the wall time leaves over (dispatch, Python, idle), 0 when the parts overlap.
    """
    if devices < 1:
        raise ValueError(f"devices must be >= 1, got {devices}")
    events = list(events)
    totals = dict.fromkeys(CATEGORIES, 0.0)
    for e in events:
        kind = classify(e.name, e.thread, input_name)
        if kind:
            totals[kind] += e.dur_us / (1 if kind == "input" else devices)
    if not events:
        raise ValueError("the trace has no complete events")
    loop = [e for e in events if classify(e.name, e.thread, input_name)]
    wall = (max(e.start_us + e.dur_us for e in loop) - min(e.start_us for e in loop)) if loop else 0.0
    out = {k: v / 1e6 for k, v in totals.items()}
    out["wall"] = wall / 1e6
    out["other"] = max(0.0, out["wall"] - sum(out[k] for k in CATEGORIES))
    return out


def shares(parts: dict[str, float]) -> dict[str, float]:
    """Input, compute and communication as fractions of their sum.

    Their sum, not the wall time: the host prepares the next batch while the devices
    still compute (JAX dispatches asynchronously), so the parts can overlap.
    """
    total = sum(parts.get(k, 0.0) for k in CATEGORIES)
    if total <= 0:
        raise ValueError("nothing was measured (input, compute and communication are all zero)")
    return {k: parts.get(k, 0.0) / total for k in CATEGORIES}


def split_row(label: str, parts: dict[str, float]) -> dict[str, object]:
    """A table row: the wall time, and milliseconds and share of input, compute and communication."""
    share = shares(parts)
    row: dict[str, object] = {"run": label, "wall ms": round(parts["wall"] * 1e3, 1)}
    for k in CATEGORIES:
        row[k] = f"{parts.get(k, 0.0) * 1e3:7.1f} ms {share[k]:4.0%}"
    return row
