"""The one quick/full switch of the course, read in exactly one place.

Why: every notebook must run in well under a minute on a 2-core laptop or CI
runner ("quick"), and the same cells must train for real on GPUs ("full"),
without editing a single cell.  Set the environment variable
``MULTIGPU_MODE`` to ``quick`` (default) or ``full`` before starting Jupyter:

    MULTIGPU_MODE=full make lab

Notebooks never read the variable themselves; they ask :func:`mode`,
:func:`is_quick` or :func:`pick`.  :func:`validate_environment` checks every
course setting read from the environment in milliseconds, before TensorFlow
is imported, so a typo fails at once instead of after a ten-second import.
"""

from __future__ import annotations

import os
from typing import TypeVar

ENV_VAR = "MULTIGPU_MODE"
MODES = ("quick", "full")
#: Per-logical-GPU memory cap in MiB (read by helpers.devices; same name as devices.GPU_MEMORY_ENV).
GPU_MEMORY_ENV = "MULTIGPU_GPU_MEMORY_MB"
MIN_GPU_MEMORY_MB = 64
#: Folder for the lessons' scratch files (read by helpers.notebook.scratch_dir).
SCRATCH_ENV = "MULTIGPU_SCRATCH"
#: How many XLA devices the JAX lessons (08, 10, 11) split the host CPU into when fewer than 2 GPUs are
#: visible (read by helpers.meshes.jax_device_plan). Default 4 (a 2x2 mesh); 2 is what Kaggle's T4 x2 gives.
JAX_DEVICES_ENV = "MULTIGPU_JAX_DEVICES"
T = TypeVar("T")


def mode() -> str:
    """Return the current mode, ``"quick"`` or ``"full"``.

    Raises ``ValueError`` when ``MULTIGPU_MODE`` holds anything else, so a typo
    such as ``MULTIGPU_MODE=ful`` fails loudly instead of silently running quick.
    """
    value = os.environ.get(ENV_VAR, "quick").strip().lower() or "quick"
    if value not in MODES:
        raise ValueError(
            f"{ENV_VAR}={value!r} is not a mode; use one of {', '.join(MODES)}."
        )
    return value


def is_quick() -> bool:
    """True in quick mode (CI, laptops): train for seconds, not minutes."""
    return mode() == "quick"


def pick(quick: T, full: T) -> T:
    """Return ``quick`` or ``full`` depending on the mode.

    Example: ``epochs = pick(quick=2, full=30)``.
    """
    return quick if is_quick() else full


def validate_environment() -> None:
    """Check the course settings read from the environment; ``ValueError`` with one clear line if one is bad.

    Checks ``MULTIGPU_MODE`` (``quick`` or ``full``, any case, blank = quick),
    ``MULTIGPU_GPU_MEMORY_MB`` (if set: a whole number of MiB, at least 64) and
    ``MULTIGPU_SCRATCH`` (if set: not an existing file) and ``MULTIGPU_JAX_DEVICES`` (if set: a
    whole number from 1 to 64, see :func:`jax_devices_requested`).  Imports nothing but the
    standard library, so it runs in milliseconds before TensorFlow, Keras or JAX.
    """
    mode()
    memory = os.environ.get(GPU_MEMORY_ENV)
    if memory:  # the same test as helpers.devices.default_gpu_memory_mb: empty = unset
        try:
            value = int(memory)
        except ValueError:
            raise ValueError(f"{GPU_MEMORY_ENV}={memory!r} is not a whole number of MiB "
                             f"(e.g. {GPU_MEMORY_ENV}=1024); unset it for the default.") from None
        if value < MIN_GPU_MEMORY_MB:
            raise ValueError(f"{GPU_MEMORY_ENV}={memory!r} is too small: each logical GPU needs at "
                             f"least {MIN_GPU_MEMORY_MB} MiB.")
    jax_devices_requested()
    scratch = os.environ.get(SCRATCH_ENV)
    if scratch and os.path.exists(scratch) and not os.path.isdir(scratch):
        raise ValueError(f"{SCRATCH_ENV}={scratch!r} is a file; point it at a folder (or unset it).")


def jax_devices_requested() -> "int | None":
    """``MULTIGPU_JAX_DEVICES`` as an int (1-64), or None when unset or blank; ``ValueError`` otherwise.

    Why: one switch sets how many devices the JAX lessons run on, so CI (and a learner) can rehearse
    Kaggle's two GPUs (``MULTIGPU_JAX_DEVICES=2``) on a CPU-only machine, as well as the default 4.
    """
    value = os.environ.get(JAX_DEVICES_ENV, "").strip()
    if not value:
        return None
    if not value.isdigit() or not 1 <= int(value) <= 64:
        raise ValueError(f"{JAX_DEVICES_ENV}={value!r} is not a device count; use a whole number "
                         f"from 1 to 64 (e.g. {JAX_DEVICES_ENV}=2), or unset it for the default.")
    return int(value)
