"""tools/slurm/ without a Slurm: lesson 07's tf_config_from_slurm (from the notebook's own cell), what
SlurmClusterResolver and JAX do outside a Slurm step, the checks' verdicts right and wrong, the check of
TROUBLESHOOTING.md's Slurm section, and the scripts' one-line refusals.

The real jobs run in ``make slurm-check`` (tools/slurm/check.sh), the one place that starts Slurm; it also produces
every message of TROUBLESHOOTING.md's "Slurm" section, which the pytest error index therefore leaves out.
"""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SLURM = ROOT / "tools" / "slurm"


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check = load("slurm_check", SLURM / "check.py")
LESSONS = check.lesson_files(ROOT / "notebooks")     # what lessons 07, 08 and 12 write: the jobs check.py submits


def expand(nodelist: str) -> list[str]:
    """What ``scontrol show hostnames`` prints for the node lists used here."""
    return {"node[01-02]": ["node01", "node02"], "vm": ["vm"], "a,b[1-2]": ["a", "b1", "b2"],
            "node[9-10]": ["node9", "node10"]}[nodelist]


def fake_scontrol(cmd, **kw):
    assert cmd[:3] == ["scontrol", "show", "hostnames"] and kw.get("check"), cmd
    return subprocess.CompletedProcess(cmd, 0, stdout="\n".join(expand(cmd[3])) + "\n", stderr="")


#: Lesson 07's own function (mwms_lib.py's cell), with scontrol answered here.
tf_config_from_slurm = check.function_from(LESSONS["07"]["mwms_lib.py"], "tf_config_from_slurm", json=json, os=os,
                                           re=re, subprocess=types.SimpleNamespace(run=fake_scontrol))


def task_env(rank: int, nodelist="node[01-02]", per_node="2(x2)", job="4242") -> dict:
    """The variables srun sets in one task that tf_config_from_slurm reads (as the local Slurm's tasks show them)."""
    return {"SLURM_JOB_ID": job, "SLURM_STEP_NODELIST": nodelist, "SLURM_STEP_TASKS_PER_NODE": per_node,
            "SLURM_PROCID": str(rank)}


# --------------------------------------------------------------------------- lesson 07's tf_config_from_slurm

def test_two_nodes_two_tasks_each_rank_order_and_ports():
    configs = [json.loads(tf_config_from_slurm(task_env(rank))) for rank in range(4)]
    port = 12000 + 4242 % 1000 * 16
    workers = [f"node01:{port}", f"node01:{port + 1}", f"node02:{port}", f"node02:{port + 1}"]
    assert all(c["cluster"] == {"worker": workers} for c in configs)          # the same cluster in every task
    assert [c["task"] for c in configs] == [{"type": "worker", "index": i} for i in range(4)]


def test_one_node_and_uneven_nodes():
    one = json.loads(tf_config_from_slurm(task_env(1, "vm", "2", job="7")))
    assert one == {"cluster": {"worker": ["vm:12112", "vm:12113"]}, "task": {"type": "worker", "index": 1}}
    uneven = json.loads(tf_config_from_slurm(task_env(3, "a,b[1-2]", "2,2(x2)", job="1")))
    assert uneven["cluster"]["worker"] == ["a:12016", "a:12017", "b1:12016", "b1:12017", "b2:12016", "b2:12017"]
    assert uneven["task"]["index"] == 3


def test_jobs_get_distinct_ports():
    ports = {json.loads(tf_config_from_slurm(task_env(0, "vm", "2", job=str(j))))["cluster"]["worker"][0]
             for j in range(1, 40)}
    assert len(ports) == 39


def test_job_ids_1000_apart_share_ports():
    """The caveat the lesson's comment and TROUBLESHOOTING.md state: two such jobs on one node collide."""
    port = {j: json.loads(tf_config_from_slurm(task_env(0, "vm", "2", job=str(j))))["cluster"]["worker"][0]
            for j in (4242, 5242, 4243)}
    assert port[4242] == port[5242] != port[4243]


def test_without_srun_the_step_variables_are_missing():
    batch_script = {k: v for k, v in task_env(0, "vm", "2").items() if not k.startswith("SLURM_STEP_")}
    with pytest.raises(KeyError, match="SLURM_STEP_NODELIST"):
        tf_config_from_slurm(batch_script)


def test_the_lessons_write_what_the_checks_submit(tmp_path):
    assert all(set(check.LESSONS[n]) <= set(files) for n, files in LESSONS.items())
    assert "srun --kill-on-bad-exit=1 " in LESSONS["07"]["mwms_job.sbatch"]   # the failure checks remove these
    assert "unset TF_CONFIG" in LESSONS["07"]["mwms_job.sbatch"]
    script = tmp_path / "job.sbatch"
    script.write_text("#!/bin/bash\nsrun python w.py\n")
    with pytest.raises(check.CheckFailed, match="no longer has 'unset TF_CONFIG'"):
        check.edited(script, "unset TF_CONFIG", ":", "copy.sbatch")
    (tmp_path / "07_x.ipynb").write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    with pytest.raises(check.CheckFailed, match="07_x.ipynb writes no mwms_job.sbatch"):
        check.lesson_files(tmp_path)


# --------------------------------------------------------------------------- TensorFlow's and JAX's own Slurm paths

def test_slurm_cluster_resolver_on_a_cpu_only_node(monkeypatch, tmp_path):
    """The resolver assumes GPUs: without one it asks nvidia-smi, and with gpus_per_node=0 it divides by zero."""
    import tensorflow as tf

    for k, v in {**task_env(0, "vm", "2"), "SLURM_STEP_NUM_TASKS": "2"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))                     # a CPU node: no nvidia-smi
    resolver = tf.distribute.cluster_resolver.SlurmClusterResolver
    with pytest.raises(FileNotFoundError) as no_smi:
        resolver()
    with pytest.raises(ValueError) as zero:
        resolver(gpus_per_node=0).cluster_spec()
    monkeypatch.delenv("SLURM_STEP_NUM_TASKS")                    # the batch script itself, not an srun task
    with pytest.raises(RuntimeError) as no_step:
        resolver(gpus_per_node=2)
    assert [f"{c.type.__name__}: {c.value}" for c in (no_smi, zero, no_step)] == [
        "FileNotFoundError: [Errno 2] No such file or directory: 'nvidia-smi'",
        "ValueError: range() arg 3 must not be zero",
        "RuntimeError: SLURM_STEP_NUM_TASKS not found in environment. Not running inside a SLURM step?"]


def test_slurm_cluster_resolver_on_gpu_nodes_numbers_gpus_from_0_and_sorts_hosts_as_text(monkeypatch):
    """TROUBLESHOOTING.md's caveat, on TensorFlow's own resolver: a job that Slurm gave GPUs 2 and 3 of a shared node
    (no ConstrainDevices: CUDA_VISIBLE_DEVICES=2,3) sends its rank 0 to GPU 0, another job's; and node10 sorts before
    node9, so rank 0, which srun starts on node9 (Slurm's order, the lesson's tf_config_from_slurm's), is given
    node10's address."""
    import tensorflow as tf

    for k, v in {**task_env(0, "node[9-10]", "2(x2)"), "SLURM_STEP_NUM_TASKS": "4", "CUDA_VISIBLE_DEVICES": "2,3"}.items():
        monkeypatch.setenv(k, v)
    spec = tf.distribute.cluster_resolver.SlurmClusterResolver().cluster_spec().as_dict()
    assert spec == {"worker": ["node10:8888", "node10:8889", "node9:8888", "node9:8889"]}
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"                     # Slurm gave this task GPU 2
    lesson = json.loads(tf_config_from_slurm(task_env(0, "node[9-10]", "2(x2)")))["cluster"]["worker"]
    assert [w.split(":")[0] for w in lesson] == ["node9", "node9", "node10", "node10"]


def test_keras_distribution_initialize_outside_a_slurm_step():
    """No srun step (the batch script itself, or no cluster at all): JAX finds no coordinator."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "KERAS_DISTRIBUTION_", "JAX_COORDINATOR", "OMPI_", "PMI_"))}
    env.update(KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", "import keras; keras.distribution.initialize()"], env=env,
                          capture_output=True, text=True, timeout=120)
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and last == "ValueError: coordinator_address should be defined."


def test_jax_slurm_detection_gives_each_task_the_gpu_numbered_slurm_localid(monkeypatch):
    """The rule lesson 08's job follows, in this stack's JAX (0.7.2 and 0.10.2 alike): in a Slurm step JAX restricts
    each process to the GPU ``SLURM_LOCALID`` unless local_device_ids or JAX_LOCAL_DEVICE_IDS say otherwise, so one
    task on a node of 4 GPUs would use GPU 0 alone. (jax/_src/clusters/cluster.py,
    ``auto_detect_unset_distributed_params``; no coordinator is started here.)"""
    from jax._src import clusters
    for k in [k for k in os.environ if k.startswith("SLURM_")]:
        monkeypatch.delenv(k)
    for k, v in {"SLURM_JOB_ID": "4242", "SLURM_STEP_NODELIST": "node[01-02]", "SLURM_NTASKS": "8",
                 "SLURM_PROCID": "5", "SLURM_LOCALID": "1"}.items():
        monkeypatch.setenv(k, v)
    address, processes, process, local = clusters.ClusterEnv.auto_detect_unset_distributed_params(
        None, None, None, None, None, None)
    assert (address.split(":")[0], processes, process, list(local)) == ("node01", 8, 5, [1])
    mine = clusters.ClusterEnv.auto_detect_unset_distributed_params(None, None, None, [0, 1, 2, 3], None, None)
    assert list(mine[3]) == [0, 1, 2, 3]                # what JAX_LOCAL_DEVICE_IDS=0,1,2,3 becomes in initialize()


# --------------------------------------------------------------------------- the checks' verdicts

def gpu_report(localid, visible="0,1", jax="0", node="vm"):
    return {"node": node, "localid": localid, "cuda_visible_devices": visible, "jax_visible": jax}


def test_gpus_used_right():
    one_per_gpu = [gpu_report(0, jax="0"), gpu_report(1, jax="1")]
    assert check.gpus_used(one_per_gpu, 2).startswith("2 task(s) on 1 node(s) use all 2 GPUs of each, one task per")
    assert "use all 2 GPUs" in check.gpus_used([gpu_report(0, jax="0,1")], 2)        # JAX_LOCAL_DEVICE_IDS=0,1
    two_nodes = one_per_gpu + [gpu_report(0, node="vm2"), gpu_report(1, jax="1", node="vm2")]
    assert check.gpus_used(two_nodes, 2).startswith("4 task(s) on 2 node(s)")


@pytest.mark.parametrize("reports, words", [
    ([gpu_report(0)], "vm: its 1 task(s) use 1 of its 2 GPUs: under Slurm JAX gives each task only the GPU numbered"),
    ([gpu_report(0, visible="0"), gpu_report(1, visible="1", jax="1")],        # --gpus-per-task=1
     "task 1 on vm asks JAX for GPU ordinals [1] but sees 1 GPU(s) ('1')"),
    ([gpu_report(0, jax="all"), gpu_report(1, jax="all")], "two tasks share a GPU"),
    ([], "no task reported its GPUs"),
])
def test_gpus_used_catches(reports, words):
    with pytest.raises(check.CheckFailed, match=re.escape(words)):
        check.gpus_used(reports, 2)


def epochs(shares=((0.4, 0.3), (0.2, 0.1)), checksums=(11.5, 12.5), pid=1):
    """Two tasks' history rows: per epoch the all-reduced loss (the sum of the shares), shares and checksum."""
    rows = {f"worker-{i}": [] for i in range(2)}
    for e, (pair, c) in enumerate(zip(shares, checksums), start=1):
        for i, share in enumerate(pair):
            rows[f"worker-{i}"].append(dict(epoch=e, loss=sum(pair), own_share=share, checksum=c, pid=pid))
    return rows


SOLO = {"worker-0": [dict(epoch=e, loss=1.0, own_share=1.0, checksum=c, pid=3) for e, c in ((1, 11.0), (2, 12.0))]}


def test_trained_together_right():
    assert check.trained_together(epochs(), SOLO).startswith("2 tasks, 2 epochs, the same weights")


@pytest.mark.parametrize("history, solo, words", [
    ({"worker-0": epochs()["worker-0"]}, SOLO, "did not form one cluster"),
    ({}, SOLO, "got none"),
    ({"worker-0": epochs()["worker-0"], "worker-1": epochs()["worker-1"][:1]}, SOLO, "different or repeated epochs"),
    ({"worker-0": epochs()["worker-0"], "worker-1": [dict(r, checksum=9.0) for r in epochs()["worker-1"]]},
     SOLO, "different weights or losses"),
    (epochs(shares=((0.35, 0.35), (0.2, 0.1))), SOLO, "they saw the same data"),
    ({"worker-0": epochs()["worker-0"], "worker-1": [dict(r, own_share=0.9) for r in epochs()["worker-1"]]},
     SOLO, "do not add up"),
    (epochs(), {"worker-0": [dict(r, checksum=12.5) for r in SOLO["worker-0"]]}, "the weights of the 1-task job"),
])
def test_trained_together_catches(history, solo, words):
    with pytest.raises(check.CheckFailed, match=words):
        check.trained_together(history, solo)


def chief(pids=(1, 2, 2), resumed_after=1):
    rows = [dict(epoch=e, loss=1.0 / e, checksum=10.0 + e, pid=p) for e, p in enumerate(pids, start=1)]
    return rows, {"resumed_after": resumed_after}


def test_resumed_right_and_wrong():
    reference = chief(pids=(9, 9, 9))[0]
    assert check.resumed(*chief(), 1, reference).startswith("cancelled after epoch 1, resumed there")
    with pytest.raises(check.CheckFailed, match="started from epoch 0, not after epoch 1"):
        check.resumed(*chief(resumed_after=0), 1, reference)
    with pytest.raises(check.CheckFailed, match="nothing to resume from"):
        check.resumed(*chief(), 0, reference)
    rows, result = chief()
    with pytest.raises(check.CheckFailed, match=r"lost or repeated epochs: \[1, 2, 2, 3\]"):
        check.resumed(rows[:2] + rows[1:], result, 1, reference)
    with pytest.raises(check.CheckFailed, match="two different jobs"):
        check.resumed(*chief(pids=(1, 1, 1)), 1, reference)
    with pytest.raises(check.CheckFailed, match="differ from the uninterrupted job's"):
        check.resumed(*chief(), 1, [dict(r, checksum=0.0) for r in reference])


def test_same_result_right_and_wrong():
    two = [{"process": i, "processes": 2, "loss": [2.0, 1.5]} for i in range(2)]
    assert check.same_result(two, list(reversed(two))).startswith("2 processes found each other")
    alone = [{"process": 0, "processes": 1, "loss": [2.0, 1.5]}] * 2
    with pytest.raises(check.CheckFailed, match="under Slurm: processes \\[0, 0\\].*trained separately"):
        check.same_result(alone, two)
    with pytest.raises(check.CheckFailed, match="they never met"):
        check.same_result([], two)
    with pytest.raises(check.CheckFailed, match="losses differ"):
        check.same_result(two, [dict(r, loss=[2.0, 1.4]) for r in two])
    ranks = [{"rank": i, "loss": [2.0]} for i in range(2)]            # ddp_train.py's reports: no job size
    assert check.same_result(ranks, ranks, rank="rank", count=None).startswith("2 processes")
    with pytest.raises(check.CheckFailed, match="by hand: processes \\[0\\]"):
        check.same_result(ranks, ranks[:1], rank="rank", count=None)


def test_same_shards_right_and_wrong():
    held = {"mlp/d1/kernel": {"[(0, 32), (None, None)]": "aa"}}
    ours = [{"process": 1, "held": held}, {"process": 0, "held": {"mlp/d1/kernel": {"[(32, 64), (None, None)]": "bb"}}}]
    theirs = list(reversed(ours))
    assert "2 processes, each wrote its own shards: 2 pieces" in check.same_shards(ours, theirs)
    with pytest.raises(check.CheckFailed, match="expected one job of 2"):
        check.same_shards(ours[:1], theirs)
    with pytest.raises(check.CheckFailed, match="process 1 held other shards"):
        check.same_shards(ours, [theirs[0], {"process": 1, "held": {"mlp/d1/kernel": {"x": "cc"}}}])


def test_lines_matching():
    text = 'noise\nsrun: error: vm: task 1: Exited with exit code 1\n'
    assert check.lines_matching(text, r"task 1: Exited") == ["srun: error: vm: task 1: Exited with exit code 1"]
    with pytest.raises(check.CheckFailed, match="expected messages not found"):
        check.lines_matching(text, r"Could not start gRPC server")


# --------------------------------------------------------------------------- TROUBLESHOOTING.md's Slurm section

INDEX = """# Index
## Devices
### One
**Message:**
```
ValueError: not Slurm's
```
## Slurm
### Two
**Message:**
```
srun: error: ...: task 1: Exited with exit code 1
```
**Message:**
```
KeyError: 'SLURM_STEP_NODELIST'
```
## Setup problems
"""


def test_section_and_unproduced():
    import error_index

    assert [e.message for e in error_index.parse(error_index.section(INDEX, "Slurm"))] == [
        "srun: error: ...: task 1: Exited with exit code 1", "KeyError: 'SLURM_STEP_NODELIST'"]
    with pytest.raises(ValueError, match="expected one '## Nothing' heading, found 0"):
        error_index.section(INDEX, "Nothing")
    quoted = "srun: error: vm: task 1: Exited with exit code 1\nKeyError: 'SLURM_STEP_NODELIST'"
    assert check.unproduced(INDEX, quoted) == []                         # "ValueError: not Slurm's" is not asked
    assert [e.message for e in check.unproduced(INDEX, quoted.splitlines()[0])] == ["KeyError: 'SLURM_STEP_NODELIST'"]
    assert len(check.unproduced(INDEX, "")) == 2


def test_the_real_index_has_a_slurm_section():
    import error_index

    entries = error_index.parse(error_index.section((ROOT / "TROUBLESHOOTING.md").read_text(), "Slurm"))
    assert len(entries) >= 10 and all(e.heading for e in entries)


# --------------------------------------------------------------------------- the scripts

def test_check_py_needs_a_local_slurm(monkeypatch, capsys):
    monkeypatch.delenv("SLURM_CONF", raising=False)
    assert check.main([]) == 2
    assert "run tools/slurm/check.sh" in capsys.readouterr().out


def test_local_slurm_without_root_says_why_in_one_line():
    with tempfile.TemporaryDirectory() as folder:                 # a copy that user nobody may run, wherever
        script = Path(shutil.copy(SLURM / "local_slurm.sh", folder))  # the checkout lives
        os.chmod(folder, 0o755)
        cmd = [str(script), "true"]
        if os.geteuid() == 0:
            if shutil.which("runuser") is None:
                pytest.skip("runuser is not installed: cannot run the script as another user")
            cmd = ["runuser", "-u", "nobody", "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd="/")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("local Slurm: needs root")


def test_check_sh_without_the_frameworks_says_why_in_one_line():
    done = subprocess.run([str(SLURM / "check.sh")], env={**os.environ, "PYTHON": "/bin/false"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith("slurm check: /bin/false cannot import keras, tensorflow, jax and sklearn")


def test_the_job_scripts_take_the_routes_the_lessons_teach():
    assert "srun --kill-on-bad-exit=1 python mwms_train.py" in LESSONS["07"]["mwms_job.sbatch"]
    assert check.JAX_SRUN in LESSONS["08"]["jax_job.sbatch"]              # the GPU check swaps the worker there
    assert "#SBATCH --job-name=jax --ntasks-per-node=2 " in LESSONS["08"]["jax_job.sbatch"]   # one task per GPU
    assert "JAX_LOCAL_DEVICE_IDS=0,1,2,3" in LESSONS["08"]["jax_job.sbatch"]
    assert "kd.initialize()\n" in LESSONS["08"]["jax_worker.py"]          # no arguments under srun
    assert 'srun --cpus-per-task="$SLURM_CPUS_PER_TASK" torchrun' in LESSONS["12"]["torch_job.sbatch"]   # srun starts torchrun
    assert "srun --kill-on-bad-exit=1 python ckpt_worker.py" in LESSONS["13"]["ckpt_job.sbatch"]
    assert "\nkd.initialize()  " in LESSONS["13"]["ckpt_worker.py"]        # no arguments: Slurm's, or the launcher's
