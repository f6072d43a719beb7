"""slurm_tf_config.py - TF_CONFIG for a task that srun started, from Slurm's own variables (CPU or GPU nodes).

Lesson 07's draft: the worker calls ``tf_config_from_slurm()`` before it creates its strategy. Standard library only.
"""
import json
import os
import subprocess


def slurm_hostnames(nodelist):
    """Slurm's compact node list ('node[01-02],gpu7') as host names, expanded by Slurm itself."""
    out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True)
    return out.stdout.split()


def tf_config_from_slurm(env=os.environ, hostnames=slurm_hostnames):
    """This task's TF_CONFIG: every task of the job step as host:port in rank order, and this task's index.

    srun puts tasks on the nodes in blocks (ranks 0 and 1 on the first node, ...). The ports come from the job id,
    the same in every task, so two jobs that share a node do not collide.
    """
    if "SLURM_STEP_NODELIST" not in env:
        raise RuntimeError("SLURM_STEP_NODELIST is not set: start every task with srun (the batch script "
                           "itself is one process, not the job's tasks)")
    hosts = hostnames(env["SLURM_STEP_NODELIST"])
    tasks_per_node = []
    for part in env["SLURM_STEP_TASKS_PER_NODE"].split(","):   # "2(x3),1": 2 tasks on each of 3 nodes, then 1
        tasks, _, nodes = part.partition("(x")
        tasks_per_node += [int(tasks)] * int(nodes.rstrip(")") or 1)
    port = 12000 + int(env["SLURM_JOB_ID"]) % 1000 * 16       # 16 ports per job and node: 12000-27999
    workers = [f"{host}:{port + i}" for host, n in zip(hosts, tasks_per_node) for i in range(n)]
    rank = int(env["SLURM_PROCID"])
    if workers[rank] != f"{env['SLURMD_NODENAME']}:{port + int(env['SLURM_LOCALID'])}":
        raise RuntimeError(f"task {rank} runs on {env['SLURMD_NODENAME']}, not where rank order puts it "
                           f"({workers[rank]}): use srun's default --distribution=block")
    return json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": rank}})


if __name__ == "__main__":
    print(tf_config_from_slurm())
