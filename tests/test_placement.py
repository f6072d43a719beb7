"""helpers.placement: short device names, as the checkers print them."""

import pytest

from helpers import placement


@pytest.mark.parametrize("raw, short", [("/job:localhost/replica:0/task:0/device:CPU:1", "CPU:1"),
                                        ("/device:GPU:0", "GPU:0"), ("/cpu:0", "CPU:0"), ("GPU:3", "GPU:3"),
                                        ("", "")])
def test_short_device(raw, short):
    assert placement.short_device(raw) == short


@pytest.mark.parametrize("bad", ["/device:XPU:0", "banana", None])
def test_short_device_bad(bad):
    with pytest.raises(ValueError):
        placement.short_device(bad)
