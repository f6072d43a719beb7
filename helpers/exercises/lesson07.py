"""Exercises of 07_multi_worker_and_fault_tolerance."""

from __future__ import annotations

import json

from .. import cluster
from ..cluster import ClusterSpecError, parse_tf_config, slurm_tf_config
from . import register

# ---- 07.1: TF_CONFIG for one host of a three-host cluster ---------------------------------------

HOSTS_07_1 = ["node-a:23456", "node-b:23456", "node-c:23456"]


def _check_tf_config(answer):
    if isinstance(answer, dict):
        answer = json.dumps(answer)
    try:
        spec, task_type, index = parse_tf_config(answer)
    except ClusterSpecError as exc:
        return False, f"TensorFlow would reject this TF_CONFIG: {exc}"
    if spec != {"worker": HOSTS_07_1}:
        return False, (f"cluster is {spec}; every host gets the *same* cluster: "
                       f"{{'worker': {HOSTS_07_1}}} in this order")
    if (task_type, index) != ("worker", 2):
        return False, (f"task is {task_type} {index}; node-c's task is its own entry of the worker "
                       "list: which type, and which position (indices start at 0)?")
    return True, ("node-c exports the shared cluster plus its own task (worker 2); only 'task' differs "
                  "between the three hosts, and worker 0 (node-a) is the chief")


def _solve_tf_config():
    return cluster.tf_config({"worker": HOSTS_07_1}, "worker", 2)


register("07.1", title="write TF_CONFIG for one host of a real cluster", checker=_check_tf_config,
         solution=_solve_tf_config, expects=("str", "dict"), wants="the TF_CONFIG as a JSON string or a dict",
         hint="TF_CONFIG has two parts: the cluster, the same on every host, and this host's own task "
              "(helpers.cluster.tf_config writes the JSON for you).")

# ---- 07.2: the batch arithmetic of a multi-worker, multi-GPU job --------------------------------

EXAMPLES_07_2, GLOBAL_BATCH_07_2, WORKERS_07_2, GPUS_07_2 = 50_000, 256, 2, 4


def _expected_batch_math():
    replicas = WORKERS_07_2 * GPUS_07_2
    per_worker = GLOBAL_BATCH_07_2 // WORKERS_07_2
    return {"replicas": replicas, "per_replica_batch": GLOBAL_BATCH_07_2 // replicas,
            "steps_per_epoch": (EXAMPLES_07_2 // WORKERS_07_2) // per_worker}


def _check_batch_math(answer):
    want = _expected_batch_math()
    missing = sorted(set(want) - set(answer))
    if missing:
        return False, f"missing key(s) {missing}"
    wrong = []
    if answer["replicas"] != want["replicas"]:
        wrong.append(f"replicas={answer['replicas']}: num_replicas_in_sync counts every GPU of every "
                     f"worker ({WORKERS_07_2} x {GPUS_07_2})")
    if answer["per_replica_batch"] != want["per_replica_batch"]:
        wrong.append(f"per_replica_batch={answer['per_replica_batch']}: the global batch is shared by all "
                     "replicas of all workers")
    if answer["steps_per_epoch"] != want["steps_per_epoch"]:
        wrong.append(f"steps_per_epoch={answer['steps_per_epoch']}: each worker reads its shard of "
                     f"{EXAMPLES_07_2 // WORKERS_07_2} examples in batches of "
                     f"{GLOBAL_BATCH_07_2 // WORKERS_07_2} (drop_remainder), all workers the same count")
    if wrong:
        return False, "; ".join(wrong)
    return True, (f"{want['replicas']} replicas x {want['per_replica_batch']} = {GLOBAL_BATCH_07_2} examples "
                  f"per step, {want['steps_per_epoch']} steps per epoch on every worker")


def _solve_batch_math():
    replicas = WORKERS_07_2 * GPUS_07_2                      # strategy.num_replicas_in_sync
    per_replica = GLOBAL_BATCH_07_2 // replicas               # ctx.get_per_replica_batch_size(256)
    per_worker = GLOBAL_BATCH_07_2 // WORKERS_07_2            # what one input pipeline batches
    steps = (EXAMPLES_07_2 // WORKERS_07_2) // per_worker      # shard, then drop the remainder
    return {"replicas": replicas, "per_replica_batch": per_replica, "steps_per_epoch": steps}


register("07.2", title="batch arithmetic of 2 workers x 4 GPUs", checker=_check_batch_math,
         solution=_solve_batch_math, expects="dict",
         wants="a dict with the keys 'replicas', 'per_replica_batch', 'steps_per_epoch'",
         hint="count replicas over every worker; the global batch is shared by all of them; each "
              "worker reads only its own shard of the examples, batched as dataset_fn does.")

# ---- 07.3: what SlurmClusterResolver gives one Slurm task ----------------------------------------

SLURM_07_3 = {"SLURM_PROCID": "5", "SLURM_STEP_NUM_TASKS": "8",
              "SLURM_STEP_NODELIST": "gpu[07-10]", "SLURM_STEP_TASKS_PER_NODE": "2(x4)"}
GPUS_PER_NODE_07_3 = 4


def _check_slurm(answer):
    if not {"task_index", "host", "cuda_visible_devices"} <= set(answer):
        return False, ("expected the keys 'task_index', 'host', 'cuda_visible_devices', "
                       f"got {sorted(map(repr, answer))}")

    want = slurm_tf_config(SLURM_07_3, gpus_per_node=GPUS_PER_NODE_07_3)
    index = want["task"]["index"]
    host = want["cluster"]["worker"][index]
    wrong = []
    if answer["task_index"] != index:
        wrong.append(f"task_index={answer['task_index']}: the task index is the Slurm rank (SLURM_PROCID)")
    if str(answer["host"]) != host:
        wrong.append(f"host={answer['host']!r}: 2 tasks per node, nodes in order, ports from 8888 "
                     "counted per node")
    if str(answer["cuda_visible_devices"]).replace(" ", "") != want["CUDA_VISIBLE_DEVICES"]:
        wrong.append(f"cuda_visible_devices={answer['cuda_visible_devices']!r}: 4 GPUs per node shared by "
                     "2 tasks, in the order of the tasks on that node")
    if wrong:
        return False, "; ".join(wrong)
    return True, (f"rank {index} is worker {index} at {host} and sees GPUs {want['CUDA_VISIBLE_DEVICES']}: "
                  "the same TF_CONFIG you would write by hand, derived from Slurm's variables")


def _solve_slurm():
    cfg = slurm_tf_config(SLURM_07_3, gpus_per_node=GPUS_PER_NODE_07_3)
    index = cfg["task"]["index"]
    return {"task_index": index, "host": cfg["cluster"]["worker"][index],
            "cuda_visible_devices": cfg["CUDA_VISIBLE_DEVICES"]}


register("07.3", title="what SlurmClusterResolver gives one Slurm task", checker=_check_slurm,
         solution=_solve_slurm, expects="dict",
         wants="a dict with the keys 'task_index', 'host', 'cuda_visible_devices'",
         hint="ranks fill the nodes in order, 2 per node; on each node every task gets its own port "
              "and its own share of the node's 4 GPUs. Then confirm with cluster.slurm_tf_config.")
