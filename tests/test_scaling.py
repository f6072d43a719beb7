"""helpers.scaling: the plot of lesson 06's batch/learning-rate sweep (the sweep itself is in the lesson)."""

import pytest

from helpers import scaling

ROWS = [  # what lesson 06's sweep cell produces: one dict per run
    {"batch": 16, "lr": 0.05, "lr_scaled": False, "accuracy": 0.9},
    {"batch": 64, "lr": 0.05, "lr_scaled": False, "accuracy": 0.7},
    {"batch": 64, "lr": 0.2, "lr_scaled": True, "accuracy": 0.88},
    {"batch": 256, "lr": 0.05, "lr_scaled": False, "accuracy": 0.4},
    {"batch": 256, "lr": 0.8, "lr_scaled": True, "accuracy": 0.85},
]


def test_plot_sweep_draws_both_lines_through_the_base_batch():
    import matplotlib.pyplot as plt

    ax = scaling.plot_sweep(ROWS)
    same, scaled = ax.get_lines()
    assert list(same.get_xdata()) == [16, 64, 256] and list(same.get_ydata()) == [0.9, 0.7, 0.4]
    assert list(scaled.get_xdata()) == [16, 64, 256] and list(scaled.get_ydata()) == [0.9, 0.88, 0.85]
    assert ax.get_xlabel() == "global batch size" and ax.get_xscale() == "log"
    plt.close(ax.figure)


def test_plot_sweep_rejects_other_rows():
    with pytest.raises(ValueError, match="batch, accuracy and lr_scaled"):
        scaling.plot_sweep([])
    with pytest.raises(ValueError, match="batch, accuracy and lr_scaled"):
        scaling.plot_sweep([{"batch": 8}])
