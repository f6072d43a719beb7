"""Lesson 12's Setup (Keras on PyTorch). Why: PyTorch is an extra (requirements-torch.txt), so a missing install
says how to get it; one process drives one device, so Setup prints a job's processes, not replicas; and TensorFlow
and JAX stay out of the kernel, which Keras would import when installed (set_random_seed, model.save, the Orbax
callback): 0.5 GiB that a kernel beside two workers cannot spare on Binder. The lesson runs them in processes of
their own."""

from __future__ import annotations

import sys
from typing import Callable

from . import config
from .versions import installed, stack_line

INSTALL = ("PyTorch is not installed here; lesson 12 needs it (Colab and Kaggle have it). On a laptop without a "
           "GPU: pip install torch --index-url https://download.pytorch.org/whl/cpu (a CPU build, a few hundred "
           "MB), then restart the kernel.")


def process_plan(n_gpus: int) -> tuple[list[str], str]:
    """(a device per process, collective), as lesson 12's ``NPROC`` line and worker decide: 2+ GPUs: one process on
    each of the first 2**k (the largest power of two <= n_gpus, so the global batch of 64 divides: 3 GPUs -> 2,
    6 -> 4), NCCL; else 2 CPU processes, gloo (NCCL never puts 2 processes on 1 GPU)."""
    if isinstance(n_gpus, bool) or not isinstance(n_gpus, int) or n_gpus < 0:
        raise ValueError(f"n_gpus must be a whole number >= 0, got {n_gpus!r}")
    if n_gpus < 2:
        return ["cpu", "cpu"], "gloo"
    return [f"cuda:{i}" for i in range(1 << (n_gpus.bit_length() - 1))], "nccl"


def setup(where: str, advice: Callable[[str, int], str]) -> list[str]:
    """Keep TF and JAX out, import PyTorch, seed; print versions, mode, a job's processes, ``advice``; their devices."""
    for name in ("tensorflow", "jax"):
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]  # Python's marker: `import name` fails
    if installed("torch") is None:
        raise ModuleNotFoundError(INSTALL, name="torch")
    import keras
    import torch

    keras.utils.set_random_seed(42)
    names, collective = process_plan(torch.cuda.device_count())
    print(stack_line())
    print(f"PyTorch {torch.__version__} | Keras backend: {keras.backend.backend()} | mode: {config.mode()} "
          f"(set {config.ENV_VAR}=full to train for real) | running on: {where}")
    kind = "one per GPU" if collective == "nccl" else "on the CPU (fewer than 2 GPUs)"
    tip = advice(where, torch.cuda.device_count())
    print(f"a job here: {len(names)} processes, {kind}, {collective} between them -> {names}" + f"\n{tip}" * bool(tip))
    return names
