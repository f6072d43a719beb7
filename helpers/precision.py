"""The one rule that picks the mixed-precision policy from what the devices can do (lessons 06 and 10).

Why: float16 tensor cores start at compute capability 7.0 (V100), and bfloat16 ones at 8.0 (A100). So from 7.0 to
below 8.0 (V100, T4) ``mixed_float16`` (with Keras's loss scaling); from 8.0 (A100, H100) and on CPUs
``mixed_bfloat16`` (float32's range, no loss scaling); below 7.0 ``float32``: a P100 (6.0) has no tensor cores, so
no math speed-up (TensorFlow's mixed-precision guide), and on a P4 or P40 (6.1) float16 is slower. Capabilities come in as plain tuples, so nothing here imports a framework.
"""

from __future__ import annotations

from typing import Optional, Sequence

from .checks import is_int

#: From this compute capability (Volta: V100; Turing: T4) float16 runs on tensor cores.
FP16_FROM = (7, 0)
#: From this compute capability (Ampere: A100, A10, RTX 30xx) bfloat16 runs on tensor cores.
BF16_FROM = (8, 0)
Capability = Optional[tuple[int, int]]


def mixed_policy(capabilities: Sequence[Capability]) -> str:
    """The dtype policy for replicas with these compute capabilities (the weakest GPU decides): ``"float32"`` if a
    GPU is below 7.0, ``"mixed_float16"`` if one is below 8.0, else ``"mixed_bfloat16"`` (also for CPUs only); one
    entry per replica: ``(major, minor)`` for a GPU, None for a CPU."""
    if not capabilities:
        raise ValueError("capabilities must list at least one device ((major, minor) or None for a CPU)")
    for cap in capabilities:
        if cap is not None and not (isinstance(cap, tuple) and len(cap) == 2
                                    and all(is_int(v) and v >= 0 for v in cap)):
            raise ValueError(f"a capability is (major, minor) ints or None, got {cap!r}")
    gpus = [cap for cap in capabilities if cap is not None]
    if gpus and min(gpus) < FP16_FROM:
        return "float32"
    return "mixed_float16" if gpus and min(gpus) < BF16_FROM else "mixed_bfloat16"


def jax_capabilities(devices: Sequence[object]) -> list[Capability]:
    """Each JAX device's compute capability (its ``compute_capability``, e.g. ``"7.5"``); None for a CPU."""
    out = []
    for d in devices:
        value = getattr(d, "compute_capability", None) if getattr(d, "platform", "") == "gpu" else None
        major, _, minor = str(value).partition(".")
        if value is not None and not (major.isdigit() and minor.isdigit()):
            raise ValueError(f"not a compute capability: {value!r} (expected a string like '7.5')")
        out.append(None if value is None else (int(major), int(minor)))
    return out
