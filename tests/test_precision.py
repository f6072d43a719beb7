"""helpers.precision: the mixed-precision policy from the devices' compute capability (faked devices)."""

from types import SimpleNamespace

import pytest

from helpers import precision

P100, P40, T4, V100, A100, H100 = (6, 0), (6, 1), (7, 5), (7, 0), (8, 0), (9, 0)


@pytest.mark.parametrize("caps, policy", [
    ([T4, T4], "mixed_float16"),          # Kaggle T4 x2: float16 tensor cores, no fast bfloat16
    ([T4], "mixed_float16"),              # Colab's T4
    ([V100] * 4, "mixed_float16"),
    ([A100] * 8, "mixed_bfloat16"),       # bfloat16 as fast, no loss scaling
    ([H100, H100], "mixed_bfloat16"),
    ([None, None], "mixed_bfloat16"),     # CPUs: no float16 arithmetic
    ([A100, T4], "mixed_float16"),        # replicas run one policy: the weakest GPU decides
    ([P100, P100], "float32"),            # Kaggle's P100: no tensor cores, no speed-up from float16
    ([P40], "float32"),                   # 6.1: float16 is slower than float32
    ([(6, 9)], "float32"),                # the lower bound is 7.0 itself
    ([T4, P100], "float32"),
])
def test_mixed_policy(caps, policy):
    assert precision.mixed_policy(caps) == policy


@pytest.mark.parametrize("bad", [[], [(7,)], [("7", "5")], [(7, -1)], [(True, 0)], ["7.5"]])
def test_mixed_policy_refuses_bad_input(bad):
    with pytest.raises(ValueError):
        precision.mixed_policy(bad)


def test_capabilities_from_jax_devices():
    jax_devices = [SimpleNamespace(platform="gpu", compute_capability="7.5"),
                   SimpleNamespace(platform="gpu", compute_capability="8.0"), SimpleNamespace(platform="cpu")]
    assert precision.jax_capabilities(jax_devices) == [T4, A100, None]
    for bad in ("7", "x.y", "7.5.0", "-7.5"):
        with pytest.raises(ValueError, match="compute capability"):
            precision.jax_capabilities([SimpleNamespace(platform="gpu", compute_capability=bad)])
