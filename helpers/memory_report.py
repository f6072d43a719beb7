"""Per-device memory figures of a compiled JAX step, and a step timer (lesson 10's plumbing).

Why: "several GPUs solve out-of-memory problems" is a claim about bytes *per device*, which XLA states exactly
(``jax.jit(f).lower(...).compile().memory_analysis()``); this module turns them into table rows.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Sequence

from .checks import positive_int

#: Fields of ``CompiledMemoryStats`` (JAX 0.7-0.10) this module reads, without the ``_size_in_bytes`` suffix.
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


def mib(n: float) -> float:
    """Bytes -> MiB, rounded to 3 decimals (for printing)."""
    return round(n / 2 ** 20, 3)


def memory_row(label: str, compiled: Any, weights: Sequence[Any], slots: Sequence[Any],
               batch: Sequence[Any]) -> dict[str, Any]:
    """One table row, in MiB per device: weights, gradients, optimizer slots, input batch, XLA temp and total.

    ``gradients`` has the weights' bytes (they live inside ``temp``, with activations and scratch);
    ``argument + temp`` is what the step needs at once. The exact byte counts are kept under ``"bytes"``.
    """
    mem, weight_bytes = compiled_memory(compiled), bytes_on_device(weights)
    exact = {"weights": weight_bytes, "gradients": weight_bytes, "optimizer slots": bytes_on_device(slots),
             "input batch": bytes_on_device(batch), "temp": mem["temp"],
             "argument + temp": mem["argument"] + mem["temp"]}
    row: dict[str, Any] = {"setup": label, **{key: mib(n) for key, n in exact.items()}}
    row["bytes"] = dict(exact, argument=mem["argument"])
    return row


def time_steps(step: Callable, state: Sequence[Any], batch: Sequence[Any], steps: int = 3) -> float:
    """Median seconds per call of ``step(*state, *batch) -> (loss, *new_state)`` over ``steps`` calls, after a warm-up.

    Works on copies of ``state`` (``donate_argnums`` deletes its inputs) and feeds each new state to the next call.
    """
    positive_int("steps", steps)
    import jax

    state = tuple(jax.tree_util.tree_map(lambda a: a.copy(), tuple(state)))

    def once(state):
        out = step(*state, *batch)
        jax.block_until_ready(out)
        return tuple(out[1:])

    state = once(state)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        state = once(state)
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]
