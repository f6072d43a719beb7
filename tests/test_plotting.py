"""helpers.plotting: the diagrams draw what they say, for any device count, and reject bad input."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from helpers import plotting  # noqa: E402


def _texts(fig):
    return " | ".join(t.get_text() for ax in fig.axes for t in ax.texts + [ax.title])


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


@pytest.mark.parametrize("n", [1, 2, 4])
def test_data_parallel_has_one_box_per_replica(n):
    fig = plotting.draw_data_parallel(n, global_batch=10)
    text = _texts(fig)
    assert all(f"replica {k}" in text for k in range(n)) and f"replica {n}" not in text
    assert "all-reduce" in text and "global batch of 10" in text
    # slices cover the batch exactly: 10 over 4 replicas -> 3,3,2,2
    if n == 4:
        assert "examples 0..2" in text and "examples 8..9" in text


def test_model_parallel_one_part_per_device():
    text = _texts(plotting.draw_model_parallel(3))
    assert "device 2" in text and "part 2" in text and "activations" in text and "device 3" not in text


def test_pipeline_schedule_and_bubble():
    work = plotting.pipeline_schedule(2, 4)
    assert len(work) == 2 * 2 * 4
    slots = {(d, t) for d, t, _, _ in work}
    assert len(slots) == len(work), "a device never does two things at once"
    # each micro-batch goes forward on device 0 before device 1, backward the other way
    f = {(d, m): t for d, t, m, k in work if k == "F"}
    b = {(d, m): t for d, t, m, k in work if k == "B"}
    assert all(f[(0, m)] < f[(1, m)] < b[(1, m)] < b[(0, m)] for m in range(4))
    assert plotting.bubble_fraction(2, 4) == pytest.approx(1 / 5)
    assert plotting.bubble_fraction(1, 4) == 0
    span = max(t for _, t, _, _ in work) + 1
    assert 1 - 2 * 2 * 4 / (2 * span) == pytest.approx(plotting.bubble_fraction(2, 4))


def test_draw_pipeline_titles_show_idle_share():
    text = _texts(plotting.draw_pipeline(2, 4))
    assert "idle share 50%" in text and "idle share 20%" in text


def test_visible_devices_figure():
    text = _texts(plotting.draw_visible_devices("3,5", 8))
    assert "/GPU:0" in text and "/GPU:1" in text and "/GPU:2" not in text
    assert "no GPU visible" in _texts(plotting.draw_visible_devices("", 8))
    assert "dropped [3, 5]" in _texts(plotting.draw_visible_devices("3,5", 2))


@pytest.mark.parametrize("call", [
    lambda: plotting.draw_data_parallel(0),
    lambda: plotting.draw_data_parallel(2.0),
    lambda: plotting.draw_data_parallel(4, global_batch=3),
    lambda: plotting.draw_model_parallel(True),
    lambda: plotting.draw_pipeline(2, 0),
    lambda: plotting.pipeline_schedule(0, 2),
    lambda: plotting.draw_visible_devices("3,,5"),
])
def test_bad_arguments(call):
    with pytest.raises(ValueError):
        call()
