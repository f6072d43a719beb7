"""helpers.memory_report: XLA's per-device memory figures and the step timer (lesson 10's plumbing)."""

from types import SimpleNamespace

import numpy as np
import pytest

from helpers import memory_report


class _Compiled:
    def __init__(self, stats):
        self._stats = stats

    def memory_analysis(self):
        return self._stats


def _stats(**sizes):
    return SimpleNamespace(**{f"{k}_size_in_bytes": v for k, v in sizes.items()})


def test_compiled_memory_reads_the_fields():
    mem = memory_report.compiled_memory(_Compiled(_stats(argument=10, output=4, alias=2, temp=7,
                                                         generated_code=0)))
    assert mem == {"argument": 10, "output": 4, "alias": 2, "temp": 7, "generated_code": 0}


def test_compiled_memory_missing_field_is_zero():
    mem = memory_report.compiled_memory(_Compiled(_stats(argument=3, temp=5)))
    assert mem["argument"] == 3 and mem["temp"] == 5 and mem["alias"] == 0


@pytest.mark.parametrize("obj, words", [(object(), "expected a compiled JAX program"),
                                        (_Compiled(None), "no memory analysis")])
def test_compiled_memory_errors(obj, words):
    with pytest.raises(ValueError, match=words):
        memory_report.compiled_memory(obj)


def test_real_compiled_program():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    compiled = jax.jit(lambda x: jnp.tanh(x) * 2).lower(jnp.ones((256,), jnp.float32)).compile()
    mem = memory_report.compiled_memory(compiled)
    assert mem["argument"] == 256 * 4 and mem["output"] == 256 * 4


def _array(*shard_bytes):
    return SimpleNamespace(addressable_shards=[SimpleNamespace(data=np.zeros(n, np.uint8)) for n in shard_bytes])


def test_bytes_on_device_counts_the_largest_shard_and_unwraps_variables():
    replicated = _array(100, 100)
    split = _array(25, 25, 25, 25)
    variable = SimpleNamespace(value=_array(8))
    assert memory_report.bytes_on_device([replicated, split, variable]) == 133
    assert memory_report.bytes_on_device([]) == 0


def test_bytes_on_device_rejects_plain_numpy():
    with pytest.raises(ValueError, match="expected JAX arrays or Keras variables"):
        memory_report.bytes_on_device([np.zeros(3)])


def test_mib():
    assert memory_report.mib(2 ** 20) == 1.0 and memory_report.mib(3 * 2 ** 19) == 1.5


def test_memory_row_and_time_steps_on_a_real_step():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    def step(w, x):
        return jnp.sum(x @ w), w - 0.1 * jnp.ones_like(w)

    w, x = jnp.ones((64, 32), jnp.float32), jnp.ones((16, 64), jnp.float32)
    compiled = jax.jit(step, donate_argnums=(0,)).lower(w, x).compile()
    row = memory_report.memory_row("one device", compiled, [w], [], [x])
    assert row["setup"] == "one device"
    assert row["bytes"]["weights"] == row["bytes"]["gradients"] == 64 * 32 * 4
    assert row["bytes"]["input batch"] == 16 * 64 * 4 and row["bytes"]["optimizer slots"] == 0
    assert row["bytes"]["argument + temp"] == row["bytes"]["argument"] + row["bytes"]["temp"]
    assert row["bytes"]["argument"] >= (64 * 32 + 16 * 64) * 4
    seconds = memory_report.time_steps(compiled, [w], [x], steps=2)
    assert 0 < seconds < 10
    assert float(w[0, 0]) == 1.0            # the caller's state was copied, not donated


def test_time_steps_rejects_zero_steps():
    with pytest.raises(ValueError, match="steps must be an int >= 1"):
        memory_report.time_steps(lambda *a: a, [], [], steps=0)
