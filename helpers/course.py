"""The course map: the lessons in order, each with its title and one line (``00_start_here`` prints it).

Why: README and lesson 00 list the lessons; a test keeps ``LESSONS``, the notebooks and README in step.
The repository's address and the launch badges are maintainer code: ``tools/links.py``.
"""

from __future__ import annotations

#: The course map: (notebook file, title, one line). README and 00_start_here show it; a test keeps all three in sync.
LESSONS = [
    ("00_start_here.ipynb", "Start here",
     "course map, how to launch, environment and device check"),
    ("01_data_vs_device_parallelism.ipynb", "Data vs device parallelism",
     "replicas and all-reduce vs splitting one model across devices, runnable on any machine"),
    ("02_picking_gpus.ipynb", "Picking GPUs",
     "nvidia-smi, CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER and TensorFlow's own device controls"),
    ("03_from_multi_gpu_model_to_mirrored_strategy.ipynb", "From multi_gpu_model to MirroredStrategy",
     "the 2017 API re-implemented, then strategy.scope() and its three classic mistakes"),
    ("04_batchnorm_variable_error.ipynb", "The BatchNorm variable error",
     "'moving_mean/biased already exists': reproduced, explained, fixed; SyncBatchNorm today"),
    ("05_pickling_checkpoint_error.ipynb", "The pickling / checkpoint error",
     "'can't pickle module objects' and ParallelModelCheckpoint; checkpoints under a strategy, BackupAndRestore after a kill"),
    ("06_scaling_and_performance.ipynb", "Does it get faster?",
     "a scaling benchmark, batch and learning-rate scaling, mixed precision, input pipelines"),
    ("07_multi_worker_and_fault_tolerance.ipynb", "Beyond one machine",
     "MultiWorkerMirroredStrategy with two workers, a killed run that resumes"),
    ("08_keras3_distribution_api.ipynb", "Keras 3's distribution API",
     "DataParallel and ModelParallel with DeviceMesh and LayoutMap on JAX; a 2-process JAX job"),
    ("09_when_it_goes_wrong.ipynb", "When multi-GPU training goes wrong",
     "hangs, uneven batches, replica metrics, NaNs, clipping, OOM and warnings: symptom, diagnosis, fix"),
    ("10_memory_and_profiling.ipynb", "Memory and where the time goes",
     "per-device bytes measured, accumulation, remat, bf16, sharded weights; a profile split"),
    ("11_finetune_llm_across_devices.ipynb", "Fine-tune a language model across devices",
     "a KerasHub Gemma with LoRA and ModelParallel: layout traps, bytes per device, Gemma 2B on T4 x2"),
]


def print_course_map() -> None:
    """Print the lessons in order, one line each."""
    for name, title, line in LESSONS:
        print(f"{name[:2]}  {title:<42} {line}")
