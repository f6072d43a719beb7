"""helpers.input_pipeline: the slow pipeline, its call counter, the comparison and its plot."""

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
    ds = ip.make_pipeline(x, y, batch_size=4, cache=True, prefetch=True, counter=counter)
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


def _model():
    import keras

    from helpers.models import small_cnn

    model = small_cnn((2, 2, 1), 3, width=2)
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    return model


def test_compare_pipelines_and_plot(capsys):
    import matplotlib.pyplot as plt

    x, y = _data(12)
    rows = ip.compare_pipelines(_model(), x, y, batch_size=4, delay_s=0.01, epochs=2)
    plain, cached = rows
    assert plain["batches"] == 3 and plain["map_calls"] == 6 and cached["map_calls"] == 3
    assert plain["slow_work_s"] == pytest.approx(0.06) and plain["seconds"] >= 0.06
    assert "[pipeline] plain" in capsys.readouterr().out
    ax = ip.plot_pipelines(rows)
    assert len(ax.patches) == 4
    plt.close(ax.figure)


def test_compare_pipelines_bad_arguments():
    import keras

    x, y = _data()
    with pytest.raises(ValueError, match="epochs"):
        ip.compare_pipelines(_model(), x, y, 4, 0.0, epochs=0)
    with pytest.raises(ValueError, match="variants"):
        ip.compare_pipelines(_model(), x, y, 4, 0.0, epochs=1, variants=())
    with pytest.raises(ValueError, match="compiled"):
        ip.compare_pipelines(keras.Sequential([keras.Input((2, 2, 1)), keras.layers.Flatten()]),
                             x, y, 4, 0.0, epochs=1)
    with pytest.raises(ValueError, match="compare_pipelines"):
        ip.plot_pipelines([{"label": "x"}])
