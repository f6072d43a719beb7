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
