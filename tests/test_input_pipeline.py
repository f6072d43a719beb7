"""helpers.input_pipeline: the slow pipeline, its call counter and its plot (cache/prefetch are the lesson's)."""

import numpy as np
import pytest

from helpers import input_pipeline as ip


def _data(n=10):
    return np.arange(n * 4, dtype="float32").reshape(n, 2, 2, 1), np.arange(n, dtype="int64") % 3


def _epochs(ds, k):
    return [np.concatenate([yb.numpy() for _, yb in ds]) for _ in range(k)]


def test_pipeline_keeps_data_and_counts_slow_calls():
    x, y = _data()
    counter = ip.CallCounter()
    ds = ip.make_pipeline(x, y, batch_size=4, counter=counter)
    assert all(np.array_equal(e, y) for e in _epochs(ds, 2))
    assert counter.calls == 6                     # 3 batches x 2 epochs


def test_cache_runs_the_slow_work_once():
    x, y = _data()
    counter = ip.CallCounter()
    import tensorflow as tf

    ds = ip.make_pipeline(x, y, batch_size=4, counter=counter).cache().prefetch(tf.data.AUTOTUNE)
    assert all(np.array_equal(e, y) for e in _epochs(ds, 3))
    assert counter.calls == 3 and "Prefetch" in type(ds).__name__


def test_delay_is_really_spent():
    import time

    x, y = _data()
    ds = ip.make_pipeline(x, y, batch_size=5, delay_s=0.05)
    t0 = time.perf_counter()
    _epochs(ds, 1)
    assert time.perf_counter() - t0 >= 0.1       # 2 batches x 0.05 s at least


@pytest.mark.parametrize("kwargs, match", [
    (dict(batch_size=0), "batch_size"),
    (dict(batch_size=4, delay_s=-1), "delay_s"),
    (dict(batch_size=4, delay_s=float("inf")), "delay_s"),
])
def test_make_pipeline_bad_arguments(kwargs, match):
    x, y = _data()
    with pytest.raises(ValueError, match=match):
        ip.make_pipeline(x, y, **kwargs)
    with pytest.raises(ValueError, match="same length"):
        ip.make_pipeline(x, y[:3], batch_size=4)


def test_lesson_style_comparison_and_plot():
    """What lesson 06's cells do: time fit on a plain and a cache + prefetch pipeline, count, plot."""
    import time

    import matplotlib.pyplot as plt
    import tensorflow as tf

    from helpers.models import small_cnn

    x, y = _data(12)
    model = small_cnn((2, 2, 1), 3, width=2)
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    rows = []
    for label, cached in (("plain", False), ("cache + prefetch", True)):
        counter = ip.CallCounter()
        ds = ip.make_pipeline(x, y, batch_size=4, delay_s=0.01, counter=counter)
        ds = ds.cache().prefetch(tf.data.AUTOTUNE) if cached else ds
        start = time.perf_counter()
        model.fit(ds, epochs=2, verbose=0)
        rows.append({"label": label, "seconds": time.perf_counter() - start, "map_calls": counter.calls,
                     "slow_work_s": counter.calls * 0.01, "batches": int(ds.cardinality())})
    assert [r["map_calls"] for r in rows] == [6, 3] and rows[0]["batches"] == 3
    assert rows[0]["seconds"] >= 0.06
    ax = ip.plot_pipelines(rows)
    assert len(ax.patches) == 4
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="label, seconds and slow_work_s"):
        ip.plot_pipelines([{"label": "x"}])


_CACHE_UNDER_A_STRATEGY = """
import json, sys
import numpy as np
import tensorflow as tf
import keras
from helpers import input_pipeline as ip

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
strategy = tf.distribute.MirroredStrategy()
x = np.random.default_rng(0).normal(size=(32 * 16, 4)).astype("float32")
y = (x[:, 0] > 0).astype("int64")
calls = {}
for prefill in (False, True):
    counter = ip.CallCounter()
    ds = ip.make_pipeline(x, y, batch_size=16, counter=counter).cache().prefetch(tf.data.AUTOTUNE)
    if prefill:
        for _ in ds:                                  # one full pass: the cache is complete before fit
            pass
    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
        model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    model.fit(ds, verbose=0, shuffle=False)
    first = counter.calls
    model.fit(ds, epochs=2, verbose=0, shuffle=False)
    calls[str(prefill)] = [first, counter.calls]
    print("PREFILL DONE" if prefill else "FIRST DONE", file=sys.stderr, flush=True)
print(json.dumps(calls))
"""


@pytest.mark.slow
def test_a_cache_under_a_strategy_warns_once_and_still_caches():
    """TROUBLESHOOTING's "partially cached contents" entry: under a strategy fit reads a batch ahead of the epoch,
    the cache drops what it held (a few batches prepared twice, and TensorFlow's warning), later epochs read from
    the cache; a full pass before fit fills it first, with no warning. Lesson 06's Copy box meets it."""
    import json

    from helpers import subproc

    run = subproc.run_python(_CACHE_UNDER_A_STRATEGY, env={"TF_CPP_MIN_LOG_LEVEL": "0"}, timeout=240, echo=False)
    assert run.ok, run.stderr[-2000:]
    calls = json.loads(run.stdout.strip().splitlines()[-1])
    batches = 32
    assert batches < calls["False"][0] < 2 * batches and calls["False"][1] == calls["False"][0]   # then cached
    assert calls["True"] == [batches, batches]
    before, after = run.stderr.split("FIRST DONE")
    warning = [ln for ln in before.splitlines() if "did not fully read the dataset being cached" in ln]
    assert len(warning) == 1 and "did not fully read" not in after.split("PREFILL DONE")[0], run.stderr[-3000:]
    print(warning[0])                                 # the message, for the error index (TROUBLESHOOTING.md)
