"""The one rule that picks the mixed-precision policy from what the devices can do.

Why: ``mixed_float16`` and ``mixed_bfloat16`` are not interchangeable.  A T4 or
V100 (compute capability 7.x) has fast float16 tensor cores and no fast
bfloat16; float16's narrow range needs loss scaling, which Keras adds for
``mixed_float16``.  From compute capability 8.0 (A100, H100) bfloat16 is as
fast and needs no loss scaling (float32's exponent range).  CPUs have no
float16 arithmetic: ``mixed_bfloat16``.  Lessons 06 and 10 ask this module;
lesson 06's benchmark script writes the same rule as its own small function
(scripts import nothing from the course), and a test keeps the two equal.

Nothing here imports a framework: the capabilities come in as plain tuples, so
tests can feed a faked T4 x2, a single T4 or eight A100s.
"""

from __future__ import annotations

from typing import Optional, Sequence

#: From this compute capability (Ampere: A100, A10, RTX 30xx) bfloat16 runs on tensor cores.
BF16_FROM = (8, 0)
Capability = Optional[tuple[int, int]]


def mixed_policy(capabilities: Sequence[Capability]) -> str:
    """``"mixed_float16"`` if any replica is a GPU below compute capability 8.0, else ``"mixed_bfloat16"``.

    ``capabilities``: one entry per replica device, ``(major, minor)`` for a GPU and ``None`` for a CPU.
    A mixed set follows its weakest GPU (all replicas must run the same policy).
    """
    if not capabilities:
        raise ValueError("capabilities must list at least one device ((major, minor) or None for a CPU)")
    gpus = []
    for cap in capabilities:
        if cap is None:
            continue
        if (not isinstance(cap, tuple) or len(cap) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in cap)):
            raise ValueError(f"a capability is (major, minor) ints or None, got {cap!r}")
        gpus.append(cap)
    if gpus and min(gpus) < BF16_FROM:
        return "mixed_float16"
    return "mixed_bfloat16"


def parse_capability(value: object) -> Capability:
    """A compute capability as ``(major, minor)``: from JAX's ``"7.5"``, TF's ``(7, 5)``, or None (a CPU)."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        parts = value.strip().split(".")
        if len(parts) == 2 and all(p.isdigit() for p in parts):
            return int(parts[0]), int(parts[1])
    elif isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return int(value[0]), int(value[1])
    raise ValueError(f"not a compute capability: {value!r} (expected '7.5', (7, 5) or None)")


def jax_capabilities(devices: Sequence[object]) -> list[Capability]:
    """Each JAX device's compute capability (``None`` for CPU devices), read from ``device.compute_capability``."""
    return [parse_capability(getattr(d, "compute_capability", None)) if getattr(d, "platform", "") == "gpu"
            else None for d in devices]


def tf_capabilities(device_details: Sequence[dict]) -> list[Capability]:
    """Capabilities from ``tf.config.experimental.get_device_details(gpu)`` dicts (``{}`` for a CPU replica)."""
    return [parse_capability(d.get("compute_capability")) for d in device_details]
