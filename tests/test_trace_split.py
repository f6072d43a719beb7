"""helpers.trace_split: find a profiler trace, read its events, split the time into input/compute/communication."""

import gzip
import json
import time

import pytest

from helpers import trace_split
from helpers.trace_split import Event

XLA = "tf_XLAEigen/123"


def _write_trace(path, events, threads):
    meta = [{"ph": "M", "name": "thread_name", "pid": 2 if tid == 7 else 1, "tid": tid, "args": {"name": name}}
            for tid, name in threads.items()]   # thread 7 belongs to the GPU process
    meta.append({"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/host:CPU"}})
    meta.append({"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "/device:GPU:0"}})
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump({"traceEvents": meta + events}, f)


def _ev(name, tid, ts, dur, pid=1):
    return {"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "plugins" / "profile" / "run1" / "host.trace.json.gz"
    events = [_ev("input", 1, 0, 100), _ev("PjitFunction(step)", 1, 100, 50),
              _ev("fusion.1", 2, 110, 40), _ev("fusion.1", 3, 110, 40),
              _ev("all-reduce", 2, 150, 20), _ev("all-reduce", 3, 150, 20),
              _ev("ThunkExecutor::Execute (wait)", 2, 100, 90), _ev("Rendezvous", 2, 150, 19),
              _ev("dot.2", 7, 170, 30, pid=2)]
    _write_trace(path, events, {1: "python", 2: XLA, 3: "tf_XLAPjRtCpuClient/9", 7: "stream 7"})
    return tmp_path, path


def test_find_and_load(trace):
    logdir, path = trace
    (path.parent / "perfetto_trace.json.gz").write_bytes(path.read_bytes())
    assert trace_split.find_trace(logdir) == path        # the host trace, not Perfetto's copy
    events = trace_split.load_events(path)
    assert len(events) == 9 and events[0] == Event("input", "python", 0.0, 100.0)
    assert events[-1].thread == "/device:GPU:0 stream 7"


def test_find_trace_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="did jax.profiler.trace"):
        trace_split.find_trace(tmp_path)


def test_load_events_rejects_non_trace(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"traceEvents": 3}))
    with pytest.raises(ValueError, match="not a trace-event file"):
        trace_split.load_events(bad)


@pytest.mark.parametrize("name, thread, kind", [
    ("input", "python", "input"),
    ("all-reduce", XLA, "communication"), ("all-gather.3", XLA, "communication"),
    ("reduce-scatter-start", XLA, "communication"), ("all-reduce-done.1", XLA, "communication"),
    ("fusion.2", XLA, "compute"), ("ynn_fusion", XLA, "compute"), ("dot", "/device:GPU:0 s", "compute"),
    ("Rendezvous", XLA, None), ("ThunkExecutor::Execute (x)", XLA, None), ("Wait: pending_threads=1/4", XLA, None),
    ("fusion.2", "python", None), ("PjitFunction(step)", "python", None),
])
def test_classify(name, thread, kind):
    assert trace_split.classify(name, thread) == kind


def test_split_and_shares(trace):
    _, path = trace
    parts = trace_split.split(trace_split.load_events(path), devices=2)
    assert parts["input"] == pytest.approx(100e-6)
    assert parts["compute"] == pytest.approx((40 + 40 + 30) / 2 * 1e-6)
    assert parts["communication"] == pytest.approx(20e-6)
    assert parts["wall"] == pytest.approx(200e-6)
    assert parts["other"] == pytest.approx(200e-6 - 100e-6 - 55e-6 - 20e-6)
    share = trace_split.shares(parts)
    assert set(share) == {"input", "compute", "communication"}
    assert sum(share.values()) == pytest.approx(1.0) and share["input"] == pytest.approx(100 / 175)
    row = trace_split.split_row("fast", parts)
    assert row["run"] == "fast" and row["wall ms"] == 0.2 and row["input"].endswith("57%")
    assert "other" not in row


def test_split_errors():
    with pytest.raises(ValueError, match="devices must be an int >= 1"):
        trace_split.split([], devices=0)
    with pytest.raises(ValueError, match="no complete events"):
        trace_split.split([], devices=1)
    with pytest.raises(ValueError, match="nothing was measured"):
        trace_split.shares({"input": 0.0})


def test_a_real_jax_trace(tmp_path):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    step = jax.jit(lambda w, x: jnp.tanh(x @ w))
    w = jnp.ones((128, 128))
    step(w, w).block_until_ready()
    with jax.profiler.trace(str(tmp_path)):
        for _ in range(2):
            with jax.profiler.TraceAnnotation("input"):
                time.sleep(0.01)
                x = jnp.ones((128, 128))
            step(w, x).block_until_ready()
    parts = trace_split.split(trace_split.load_events(trace_split.find_trace(tmp_path)), devices=1)
    assert parts["input"] >= 0.02 and parts["compute"] > 0 and parts["communication"] == 0
