"""helpers.scaling: the linear rule, the batch/LR sweep and its plot."""

import numpy as np
import pytest

from helpers import scaling


def _toy(n=96, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    x = (rng.normal(size=(n, 2, 2, 1)) + y[:, None, None, None] * 2).astype("float32")
    return x, y


def test_sweep_rows_and_plot(capsys):
    import matplotlib.pyplot as plt

    x, y = _toy()
    rows = scaling.batch_lr_sweep(x[:64], y[:64], x[64:], y[64:], batch_sizes=(32, 8), base_lr=0.1, epochs=1)
    assert [(r["batch"], r["lr_scaled"]) for r in rows] == [(8, False), (32, False), (32, True)]
    assert rows[2]["lr"] == pytest.approx(0.4) and rows[1]["lr"] == pytest.approx(0.1)
    assert [r["steps"] for r in rows] == [8, 2, 2]
    assert all(0.0 <= r["accuracy"] <= 1.0 for r in rows)
    assert "[sweep] global batch" in capsys.readouterr().out
    ax = scaling.plot_sweep(rows)
    assert len(ax.get_lines()) == 2 and ax.get_xlabel() == "global batch size"
    plt.close(ax.figure)


def test_sweep_same_start_gives_same_result():
    x, y = _toy()
    kwargs = dict(batch_sizes=(8, 16), base_lr=0.1, epochs=1, echo=False)
    a = scaling.batch_lr_sweep(x[:64], y[:64], x[64:], y[64:], **kwargs)
    b = scaling.batch_lr_sweep(x[:64], y[:64], x[64:], y[64:], **kwargs)
    assert [r["accuracy"] for r in a] == [r["accuracy"] for r in b]


def test_sweep_under_a_strategy(replicas):
    from helpers.bench import mirrored_strategy  # own collective keys: safe in a shared test process

    x, y = _toy()
    rows = scaling.batch_lr_sweep(x[:64], y[:64], x[64:], y[64:], batch_sizes=(16, 32), base_lr=0.1,
                                  epochs=1, strategy=mirrored_strategy(replicas), echo=False)
    assert len(rows) == 3


@pytest.mark.parametrize("kwargs, match", [
    (dict(batch_sizes=(16, 16)), "at least 2 different"),
    (dict(batch_sizes=(16, 0)), "batch size"),
    (dict(batch_sizes=(8, 16), epochs=0), "epochs"),
    (dict(batch_sizes=(8, 16), base_lr=-1.0), "base_lr"),
])
def test_sweep_bad_arguments(kwargs, match):
    x, y = _toy()
    args = dict(base_lr=0.1, epochs=1, echo=False)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        scaling.batch_lr_sweep(x[:64], y[:64], x[64:], y[64:], **args)
    with pytest.raises(ValueError, match="same length"):
        scaling.batch_lr_sweep(x[:64], y[:10], x[64:], y[64:], batch_sizes=(8, 16), base_lr=0.1, epochs=1)


def test_plot_sweep_rejects_other_rows():
    with pytest.raises(ValueError, match="batch_lr_sweep"):
        scaling.plot_sweep([])
    with pytest.raises(ValueError, match="batch_lr_sweep"):
        scaling.plot_sweep([{"batch": 8}])
