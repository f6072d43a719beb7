"""tools/slurm/: TF_CONFIG from Slurm's variables, the checks' verdicts, what SlurmClusterResolver and JAX do on
CPU-only nodes, and (slow, as root with Slurm installed) the whole ``tools/slurm/check.sh`` on a real local Slurm.

The fast tests need no Slurm. Messages that TROUBLESHOOTING.md's "Slurm" section indexes are printed, for the
error index; the ones only a real Slurm gives come from ``check.sh``'s output in the slow test.
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SLURM = ROOT / "tools" / "slurm"


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tfc = load("slurm_tf_config", SLURM / "jobs" / "slurm_tf_config.py")
check = load("slurm_check", SLURM / "check.py")


def task_env(rank: int, local: int, node: str, nodelist="node[01-02]", per_node="2(x2)", job="4242") -> dict:
    """The variables srun sets in one task (as the local Slurm's tasks show them)."""
    return {"SLURM_JOB_ID": job, "SLURM_STEP_NODELIST": nodelist, "SLURM_STEP_TASKS_PER_NODE": per_node,
            "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(local), "SLURMD_NODENAME": node}


def expand(nodelist: str) -> list[str]:
    """What ``scontrol show hostnames`` prints for the node lists used here."""
    return {"node[01-02]": ["node01", "node02"], "vm": ["vm"], "a,b[1-2]": ["a", "b1", "b2"]}[nodelist]


# --------------------------------------------------------------------------- tf_config_from_slurm

def test_two_nodes_two_tasks_each_rank_order_and_ports():
    layout = [(0, 0, "node01"), (1, 1, "node01"), (2, 0, "node02"), (3, 1, "node02")]
    configs = [json.loads(tfc.tf_config_from_slurm(task_env(*t), hostnames=expand)) for t in layout]
    port = 12000 + 4242 % 1000 * 16
    workers = [f"node01:{port}", f"node01:{port + 1}", f"node02:{port}", f"node02:{port + 1}"]
    assert all(c["cluster"] == {"worker": workers} for c in configs)          # the same cluster in every task
    assert [c["task"] for c in configs] == [{"type": "worker", "index": i} for i in range(4)]


def test_one_node_and_uneven_nodes():
    one = json.loads(tfc.tf_config_from_slurm(task_env(1, 1, "vm", "vm", "2", job="7"), hostnames=expand))
    assert one == {"cluster": {"worker": ["vm:12112", "vm:12113"]}, "task": {"type": "worker", "index": 1}}
    uneven = json.loads(tfc.tf_config_from_slurm(task_env(3, 1, "b1", "a,b[1-2]", "2,2(x2)", job="1"),
                                                 hostnames=expand))
    assert uneven["cluster"]["worker"] == ["a:12016", "a:12017", "b1:12016", "b1:12017", "b2:12016", "b2:12017"]
    assert uneven["task"]["index"] == 3


def test_jobs_get_distinct_ports():
    ports = {json.loads(tfc.tf_config_from_slurm(task_env(0, 0, "vm", "vm", "2", job=str(j)), hostnames=expand))
             ["cluster"]["worker"][0] for j in range(1, 40)}
    assert len(ports) == 39


def test_a_cyclic_distribution_is_refused():
    # --distribution=cyclic puts rank 1 on the second node: rank order no longer matches the block layout
    with pytest.raises(RuntimeError, match="use srun's default --distribution=block"):
        tfc.tf_config_from_slurm(task_env(1, 0, "node02"), hostnames=expand)


def test_without_srun_it_says_so(capsys):
    batch_step = {k: v for k, v in task_env(0, 0, "vm", "vm", "2").items() if not k.startswith("SLURM_STEP_")}
    with pytest.raises(RuntimeError) as caught:
        tfc.tf_config_from_slurm(batch_step, hostnames=expand)
    print(f"RuntimeError: {caught.value}")   # TROUBLESHOOTING.md indexes it
    assert "SLURM_STEP_NODELIST is not set: start every task with srun" in capsys.readouterr().out
    print(f"RuntimeError: {caught.value}")   # again, after the capture was read: the error index collects it


# --------------------------------------------------------------------------- TensorFlow's and JAX's own Slurm paths

def test_slurm_cluster_resolver_on_a_cpu_only_node(monkeypatch, tmp_path, capsys):
    """The resolver assumes GPUs: without one it asks nvidia-smi, and with gpus_per_node=0 it divides by zero."""
    import tensorflow as tf

    for k, v in {**task_env(0, 0, "vm", "vm", "2"), "SLURM_STEP_NUM_TASKS": "2"}.items():
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
    messages = [f"{c.type.__name__}: {c.value}" for c in (no_smi, zero, no_step)]
    print("\n".join(messages))
    assert messages == ["FileNotFoundError: [Errno 2] No such file or directory: 'nvidia-smi'",
                        "ValueError: range() arg 3 must not be zero",
                        "RuntimeError: SLURM_STEP_NUM_TASKS not found in environment. Not running inside a SLURM step?"]
    capsys.readouterr()
    print("\n".join(messages))                                    # for the error index


def test_keras_distribution_initialize_outside_a_slurm_step():
    """No srun step (the batch script itself, or no cluster at all): JAX finds no coordinator."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "KERAS_DISTRIBUTION_", "JAX_COORDINATOR", "OMPI_", "PMI_"))}
    env.update(KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", "import keras; keras.distribution.initialize()"], env=env,
                          capture_output=True, text=True, timeout=120)
    last = done.stderr.strip().splitlines()[-1]
    print(last)                                                   # TROUBLESHOOTING.md indexes it
    assert done.returncode == 1 and last == "ValueError: coordinator_address should be defined."


# --------------------------------------------------------------------------- the checks' verdicts

def epochs(shares=((0.4, 0.3), (0.2, 0.1)), weights=("a1", "a2"), pid=1):
    """Two tasks' history rows: per epoch the all-reduced loss (the sum of the shares), shares and weights."""
    rows = {f"worker-{i}": [] for i in range(2)}
    for e, (pair, w) in enumerate(zip(shares, weights), start=1):
        for i, share in enumerate(pair):
            rows[f"worker-{i}"].append(dict(epoch=e, loss=sum(pair), own_share=share, weights=w, pid=pid))
    return rows


RESULTS = {f"worker-{i}": {"workers": 2, "replicas": 2, "resumed_after": 0, "weights": "a2"} for i in range(2)}
SOLO = {"worker-0": {"workers": 1, "replicas": 1, "resumed_after": 0, "weights": "s2"}}


def test_trained_together_right():
    assert check.trained_together(epochs(), RESULTS, SOLO).startswith("2 tasks, 2 epochs, the same weights")


@pytest.mark.parametrize("history, results, solo, words", [
    (epochs(), {"worker-0": RESULTS["worker-0"]}, SOLO, "did not form one cluster"),
    (epochs(), {k: dict(v, workers=1) for k, v in RESULTS.items()}, SOLO, "trained alone"),
    ({"worker-0": epochs()["worker-0"], "worker-1": [dict(r, weights="b") for r in epochs()["worker-1"]]},
     RESULTS, SOLO, "different weights or losses"),
    (epochs(shares=((0.35, 0.35), (0.2, 0.1))), RESULTS, SOLO, "they saw the same data"),
    ({"worker-0": epochs()["worker-0"], "worker-1": [dict(r, own_share=0.9) for r in epochs()["worker-1"]]},
     RESULTS, SOLO, "do not add up"),
    (epochs(), RESULTS, {"worker-0": dict(SOLO["worker-0"], weights="a2")}, "the weights of the 1-task job"),
])
def test_trained_together_catches(history, results, solo, words):
    with pytest.raises(check.CheckFailed, match=words):
        check.trained_together(history, results, solo)


def chief(pids=(1, 2, 2), resumed_after=1):
    rows = [dict(epoch=e, loss=1.0 / e, weights=f"w{e}", pid=p) for e, p in enumerate(pids, start=1)]
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
        check.resumed(*chief(), 1, [dict(r, weights="other") for r in reference])


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


def test_reports_and_lines_matching():
    text = 'noise\n{"rank": 0, "world": 2}{"rank": 1, "world": 2}\nsrun: error: vm: task 1: Exited with exit code 1\n'
    assert check.reports(text, "rank") == [{"rank": 0, "world": 2}, {"rank": 1, "world": 2}]
    assert check.lines_matching(text, r"task 1: Exited") == ["srun: error: vm: task 1: Exited with exit code 1"]
    with pytest.raises(check.CheckFailed, match="expected messages not found"):
        check.lines_matching(text, r"Could not start gRPC server")


def test_check_py_needs_a_local_slurm(monkeypatch, capsys):
    monkeypatch.delenv("SLURM_CONF", raising=False)
    assert check.main([]) == 2
    assert "run tools/slurm/check.sh" in capsys.readouterr().out


# --------------------------------------------------------------------------- the scripts

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


@pytest.mark.slow
def test_check_sh_on_a_real_local_slurm():
    """The whole check (minutes): as root, with Debian's slurm-wlm and munge installed (make slurm-check installs them)."""
    if os.geteuid() != 0:
        pytest.skip("tools/slurm/check.sh needs root (it starts munged, slurmctld and slurmd)")
    missing = [t for t in ("munged", "slurmctld", "slurmd", "sbatch", "srun") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"Slurm is not installed here ({', '.join(missing)} missing): make slurm-check installs it")
    done = subprocess.run([str(SLURM / "check.sh")], env={**os.environ, "PYTHON": sys.executable},
                          capture_output=True, text=True, timeout=1800)
    print(done.stdout + done.stderr)                             # every check's verdict and quoted messages
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "slurm check: 10 ok, 0 failed" in done.stdout
