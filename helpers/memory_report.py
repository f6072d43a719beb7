"""Per-device memory figures of a compiled JAX step (exercise 10.1's checker).

Why: "several GPUs solve out-of-memory problems" is a claim about bytes *per device*, which XLA plans before a
step runs (``jax.jit(f).lower(...).compile().memory_analysis()``). Lessons 10 and 11 write their own short
``bytes_per_device``; the checker reads the same figures here.
"""

from __future__ import annotations

from typing import Any, Iterable

#: Fields of ``CompiledMemoryStats`` (JAX 0.7-0.12) this module reads, without the ``_size_in_bytes`` suffix.
FIELDS = ("argument", "output", "alias", "temp", "generated_code")


def compiled_memory(compiled: Any) -> dict[str, int]:
    """Bytes per device of ``jax.jit(f).lower(...).compile()``: argument, output, alias (reused donated buffers),
    temp, generated_code. ``ValueError`` where the backend gives no memory analysis (some plugins return None)."""
    if not hasattr(compiled, "memory_analysis"):
        raise ValueError(f"expected a compiled JAX program (jit(f).lower(...).compile()), "
                         f"got {type(compiled).__name__}")
    stats = compiled.memory_analysis()
    if stats is None:
        raise ValueError("this backend returns no memory analysis for compiled programs")
    return {name: int(getattr(stats, f"{name}_size_in_bytes", 0) or 0) for name in FIELDS}


def bytes_on_device(arrays: Iterable[Any]) -> int:
    """Bytes of ``arrays`` (or Keras variables) one device holds: each array's largest shard (a replicated array
    counts in full, an array split N ways one N-th)."""
    total = 0
    for a in arrays:
        a = getattr(a, "value", a)
        shards = getattr(a, "addressable_shards", None)
        if shards is None:
            raise ValueError(f"expected JAX arrays or Keras variables, got {type(a).__name__}")
        total += max(s.data.nbytes for s in shards)
    return total
