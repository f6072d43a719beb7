"""helpers.memory_report: XLA's per-device memory figures (exercise 10.1's checker)."""

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
