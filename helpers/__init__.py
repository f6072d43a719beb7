"""Helpers for the Keras multi-GPU course (distribution: keras-multigpu-course-helpers).

Modules, by concept:
    config     the quick/full switch (``MULTIGPU_MODE``)
    versions   the running stack and the supported range (``at_least("keras", "3.14")``)
    quiet      TensorFlow's harmless start-up lines kept out of the notebook
    course     repository URL, badges
    devices    replica devices on 0, 1 or N GPUs (``ensure_devices``)
    errors     ``expect_error`` for errors shown on purpose
    data       offline digits / CIFAR-10 loader
    notebook   ``setup_notebook``, ``scratch_dir``
    exercises  self-checks and solutions (one module per lesson)
    checks     argument checks (``positive_int`` ...): one clear ValueError
    subproc    child processes: environment, start/stop/run, their errors; ``load_script``
    models     the small models every lesson trains
    tables     plain-text tables
    plotting   diagrams (data/model/pipeline parallelism, visible GPUs)      - lesson 01/02
    placement  SplitModel; evidence of where weights live and ops run         - lesson 01
    gpus       nvidia-smi parsing, CUDA_VISIBLE_DEVICES checks, CUDA probe    - lesson 02
    legacy     multi_gpu_model re-implemented on Keras 3 (for teaching)       - lesson 03
    replica_checks  scope checks, replica splits, batch/learning-rate arithmetic - lesson 03
    capsule    the 2017 time capsule (Python 3.6 + TF 1.3 + Keras 2.1.3)      - lessons 04/05
    batchnorm  TF 1.3's zero-debias naming, per-replica BatchNorm drift       - lesson 04
    callbacks  ParallelModelCheckpoint                                        - lesson 05
    bench      the scaling benchmark (also `make bench`)                      - lesson 06
    precision  the mixed-precision policy from compute capability             - lessons 06/10
    scaling, input_pipeline   batch/LR sweep; cache/prefetch measurements     - lesson 06
    cluster    local multi-worker launcher (CLI: `python -m helpers.cluster_cli`) - lesson 07
    slurm      what SlurmClusterResolver makes of Slurm's variables          - lesson 07
    resume     kill a fit job for real, restart it (BackupAndRestore)         - lesson 05
    meshes     JAX device choice, keras.distribution on TensorFlow (a report)  - lesson 08
    clinic     weights per step, activation bytes, worker logs                - lesson 09
    memory_report, trace_split   per-device bytes; a profile's time split     - lesson 10
    exercises.lesson11  the tiny Gemma of lesson 11 and its on-device layout checks - lesson 11

Maintainer tools (the notebook template, the error-index check, memcheck, timings, the book) live in
tools/, not here.

The import rule (tests/test_import_rule.py checks it): the setup chain - ``import helpers``,
config, versions, quiet, course, errors, checks, subproc, devices, gpus, meshes, precision, models,
data, notebook, the exercises registry - and the launchers (cluster, cluster_cli, slurm, resume) import the frameworks
(tensorflow, keras, tf_keras, jax, jaxlib, matplotlib, sklearn, scipy, torch) only inside the
function that uses them, never at module level. Why: lesson 08 picks the Keras backend after
importing helpers, the device variables (CUDA_VISIBLE_DEVICES, logical devices) must be set before
a framework starts, and ``python -m helpers.cluster_cli`` and its worker processes should not pay
seconds of TensorFlow import they do not need. Modules used only after the Setup cells (placement,
callbacks, ...) may import Keras at the top and define plain subclasses (``SplitModel??`` shows the
source). In every module everything else (the standard library, numpy, sibling helpers modules) is
imported at the top, never inside a function.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "setup_notebook": ("notebook", "setup_notebook"),
    "scratch_dir": ("notebook", "scratch_dir"),
    "expect_error": ("errors", "expect_error"),
    "ensure_devices": ("devices", "ensure_devices"),
    "show_devices": ("devices", "show_devices"),
    "load_dataset": ("data", "load_dataset"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        return getattr(importlib.import_module(f"{__name__}.{module}"), attr)
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"{__name__}.{name}":
            raise AttributeError(f"module 'helpers' has no attribute {name!r}") from None
        raise


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_LAZY))
