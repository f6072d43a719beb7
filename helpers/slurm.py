"""What TensorFlow's ``SlurmClusterResolver`` makes of a Slurm job's variables (lesson 07), without Slurm.

Why: under ``srun`` the resolver derives each task's ``TF_CONFIG`` and GPUs from Slurm's variables.
"""

from __future__ import annotations

import os
from typing import Mapping

from .checks import positive_int

#: Slurm variables SlurmClusterResolver reads (plus CUDA_VISIBLE_DEVICES, which it sets).
SLURM_VARS = ("SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE")


def slurm_tf_config(slurm_env: Mapping[str, str], gpus_per_node: int, port_base: int = 8888) -> dict:
    """``{"cluster", "task": {"type", "index"}, "CUDA_VISIBLE_DEVICES"}`` for the task ``SLURM_PROCID`` names.

    Runs the real resolver with ``slurm_env`` set for the call (this process's environment is restored).
    """
    missing = [v for v in ("SLURM_PROCID", "SLURM_STEP_NODELIST") if v not in slurm_env]
    if missing:
        raise ValueError(f"slurm_env needs {', '.join(missing)} (e.g. SLURM_STEP_NODELIST='node[01-02]')")
    unknown = [k for k in slurm_env if k not in SLURM_VARS]
    if unknown:
        raise ValueError(f"unexpected variable(s) {unknown}; SlurmClusterResolver reads {', '.join(SLURM_VARS)}")
    positive_int("gpus_per_node", gpus_per_node, why="SlurmClusterResolver hands GPUs to tasks and cannot lay "
                 "out CPU-only nodes: write TF_CONFIG yourself there")
    import tensorflow as tf

    keys = (*SLURM_VARS, "CUDA_VISIBLE_DEVICES")
    saved = {k: os.environ.get(k) for k in keys}
    try:
        for k in SLURM_VARS:
            os.environ.pop(k, None)
        os.environ.update({k: str(v) for k, v in slurm_env.items()})
        resolver = tf.distribute.cluster_resolver.SlurmClusterResolver(
            port_base=port_base, gpus_per_node=gpus_per_node)
        spec = resolver.cluster_spec().as_dict()
        cuda = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    finally:
        for k in keys:
            os.environ.pop(k, None)
        os.environ.update({k: v for k, v in saved.items() if v is not None})
    return {"cluster": spec, "task": {"type": resolver.task_type, "index": resolver.task_id},
            "CUDA_VISIBLE_DEVICES": cuda}
