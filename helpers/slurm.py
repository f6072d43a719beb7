"""What TensorFlow's ``SlurmClusterResolver`` makes of a Slurm job's variables (lesson 07).

Why: on a Slurm cluster ``srun`` starts one process per task and the resolver derives each
task's ``TF_CONFIG`` and GPUs from Slurm's variables.  :func:`slurm_tf_config` runs the real
resolver on given variables, so a lesson shows that arithmetic without Slurm.
"""

from __future__ import annotations

import os
from typing import Mapping

from .checks import positive_int

#: Slurm variables SlurmClusterResolver reads (plus CUDA_VISIBLE_DEVICES, which it sets).
SLURM_VARS = ("SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE")


def slurm_tf_config(slurm_env: Mapping[str, str], gpus_per_node: int, port_base: int = 8888) -> dict:
    """What ``tf.distribute.cluster_resolver.SlurmClusterResolver`` makes of Slurm's variables.

    Returns ``{"cluster": ..., "task": {"type", "index"}, "CUDA_VISIBLE_DEVICES": ...}``: the
    TF_CONFIG (and GPU choice) the resolver derives for the task whose ``SLURM_PROCID``
    is given - no Slurm needed.  Runs the real resolver with the variables set
    temporarily (this process's environment is restored afterwards).
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
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return {"cluster": spec, "task": {"type": resolver.task_type, "index": resolver.task_id},
            "CUDA_VISIBLE_DEVICES": cuda}
