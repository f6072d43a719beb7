"""Kaggle's GPU T4 x2, simulated: which path every lesson takes on two T4s (and on one T4, and 8 A100s).

TensorFlow cannot fake GPUs. So every choice that depends on the hardware is a small function: in helpers
(replica devices, JAX devices, worker GPUs, memory settings, dtype policy) or in the scripts the lessons write
(lesson 06's ``bench_lib.py``, lesson 07's ``mwms_lib.py``, loaded here from the notebooks' own cells). These
tests feed them the machines learners have and check what each lesson would run. Nothing here has run on a GPU:
TROUBLESHOOTING's platform notes say so until a Kaggle run reports figures.
"""

import json
import re
from pathlib import Path
from types import SimpleNamespace

import benchmark  # tools/benchmark.py: reads the lessons' %%writefile cells
import pytest

from helpers import cluster, devices, meshes, precision, subproc

ROOT = Path(__file__).resolve().parent.parent
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
T4, A100 = (7, 5), (8, 0)
MACHINES = {  # name -> (GPU count, compute capability of each)
    "kaggle_t4x2": (2, [T4, T4]),
    "colab_t4": (1, [T4]),
    "server_a100x8": (8, [A100] * 8),
    "laptop": (0, []),
}


def _setup_call(nb: Path) -> tuple[str, "int | None"]:
    """(backend, devices argument) of a lesson's ``setup_notebook`` call (the template's 4th cell)."""
    src = "".join(json.loads(nb.read_text())["cells"][3]["source"])
    [call] = re.findall(r"setup_notebook\(([^)]*)\)", src)
    backend = re.search(r'backend="(\w+)"', call)
    n = re.search(r"devices=(\d+)", call)
    return (backend.group(1) if backend else "tensorflow"), (int(n.group(1)) if n else None)


def test_every_lesson_is_covered():
    assert [p.name[:2] for p in LESSONS] == [f"{i:02d}" for i in range(len(LESSONS))] and len(LESSONS) >= 12


@pytest.mark.parametrize("nb", LESSONS, ids=lambda p: p.name[:2])
def test_which_devices_each_lesson_uses_on_t4x2(nb, fresh_jax_choice):
    backend, n = _setup_call(nb)
    fresh_jax_choice.setattr("helpers.gpus.visible_gpu_ids", lambda: ["0", "1"])
    if backend == "jax":   # 08, 10, 11: the device count decides the mesh, so both GPUs
        plan = meshes.choose_jax_platform(n)
        assert (plan.platform, plan.devices) == ("gpu", 2), plan
    else:                  # TensorFlow lessons: one replica per real GPU
        assert devices.replica_plan(n or 2, n_gpus=2) == devices.KIND_GPUS


@pytest.mark.parametrize("machine, tf_kind, jax_platform, jax_devices", [
    ("colab_t4", devices.KIND_SPLIT_GPU, "cpu", 4),        # one chip: split for TF, CPU devices for JAX
    ("server_a100x8", devices.KIND_GPUS, "gpu", 8),
    ("laptop", devices.KIND_SPLIT_CPU, "cpu", 4),
])
def test_the_other_machines(machine, tf_kind, jax_platform, jax_devices):
    n_gpus, _ = MACHINES[machine]
    assert devices.replica_plan(2, n_gpus) == tf_kind
    plan = meshes.jax_device_plan(n_gpus)
    assert (plan.platform, plan.devices) == (jax_platform, jax_devices)


@pytest.mark.parametrize("machine, policy", [("kaggle_t4x2", "mixed_float16"), ("colab_t4", "mixed_float16"),
                                             ("server_a100x8", "mixed_bfloat16"), ("laptop", "mixed_bfloat16")])
def test_dtype_policy_by_machine(machine, policy):
    _, caps = MACHINES[machine]
    assert precision.mixed_policy(caps or [None, None]) == policy


# -- lesson 06: its benchmark script's own hardware choices, with a faked tf.config -------------------------

class FakeTfConfig:
    """Just enough of ``tf.config`` for bench_lib's choices: physical GPUs, their details, what was set."""

    def __init__(self, n_gpus, caps):
        self.gpus = [SimpleNamespace(name=f"/physical_device:GPU:{i}", device_type="GPU") for i in range(n_gpus)]
        self.caps, self.growth, self.split = caps, [], None
        self.LogicalDeviceConfiguration = lambda **kw: kw
        self.experimental = SimpleNamespace(
            set_memory_growth=lambda gpu, on: self.growth.append((gpu.name, on)),
            get_device_details=lambda gpu: {"device_name": "Tesla T4" if self.caps[0] == T4 else "A100",
                                            "compute_capability": self.caps[self.gpus.index(gpu)]})

    def list_physical_devices(self, kind):
        return self.gpus if kind == "GPU" else [SimpleNamespace(name="/physical_device:CPU:0", device_type="CPU")]

    def set_logical_device_configuration(self, device, configs):
        self.split = (device.name, len(configs))

    def list_logical_devices(self, kind):
        if kind == "GPU":
            n = self.split[1] if self.split and "GPU" in self.split[0] else len(self.gpus)
            return [SimpleNamespace(name=f"/device:GPU:{i}") for i in range(n)]
        n = self.split[1] if self.split else 1
        return [SimpleNamespace(name=f"/device:CPU:{i}") for i in range(n)]


@pytest.fixture(scope="module")
def bench_lib(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lesson06")
    benchmark.write_scripts(folder)
    return subproc.load_script(folder / "bench_lib.py")


def _fake_tf(lib, monkeypatch, machine):
    fake = FakeTfConfig(*MACHINES[machine])
    monkeypatch.setattr(lib, "tf", SimpleNamespace(config=fake))
    return fake


def test_06_on_t4x2_one_and_two_replicas_are_real_gpus_four_split_gpu_0(bench_lib, monkeypatch):
    fake = _fake_tf(bench_lib, monkeypatch, "kaggle_t4x2")
    assert bench_lib.replica_devices(2) == ["/device:GPU:0", "/device:GPU:1"]
    assert fake.growth == [("/physical_device:GPU:0", True), ("/physical_device:GPU:1", True)] and not fake.split
    assert bench_lib.capabilities(["/device:GPU:0", "/device:GPU:1"]) == [T4, T4]
    assert bench_lib.mixed_policy(bench_lib.capabilities(["/device:GPU:0", "/device:GPU:1"])) == "mixed_float16"
    fake = _fake_tf(bench_lib, monkeypatch, "kaggle_t4x2")
    assert len(bench_lib.replica_devices(4)) == 4 and fake.split == ("/physical_device:GPU:0", 4)


@pytest.mark.parametrize("machine", sorted(MACHINES))
def test_06_scripts_policy_is_the_course_rule(bench_lib, monkeypatch, machine):
    _fake_tf(bench_lib, monkeypatch, machine)
    n_gpus, caps = MACHINES[machine]
    replicas = bench_lib.replica_devices(2)
    got = bench_lib.mixed_policy(bench_lib.capabilities(replicas))
    assert got == precision.mixed_policy(caps[:2] if n_gpus >= 2 else (caps[:1] * 2 or [None, None]))
    for mix in ([T4, A100], [A100, None], [None]):   # the two copies of the rule agree beyond the machines too
        assert bench_lib.mixed_policy(mix) == precision.mixed_policy(mix)


# -- lesson 07: one GPU per worker, NCCL between them ---------------------------------------------------

@pytest.fixture(scope="module")
def mwms_lib(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lesson07")
    for name, text in benchmark.notebook_scripts(ROOT / "notebooks" / "07_multi_worker_and_fault_tolerance.ipynb").items():
        (folder / name).write_text(text)
    return subproc.load_script(folder / "mwms_lib.py")


def test_07_on_t4x2_each_worker_owns_one_gpu_and_runs_nccl(mwms_lib, monkeypatch):
    import tensorflow as tf

    monkeypatch.setattr(cluster, "visible_gpu_ids", lambda: ["0", "1"])
    per_worker = mwms_lib.gpus_per_worker(2, 2)
    job = cluster.LocalCluster(["-c", "pass"], n_workers=2, gpus_per_worker=per_worker)
    envs = [job.worker_env(i) for i in range(2)]
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["0", "1"]       # disjoint: NCCL refuses shared GPUs
    assert all(e["TF_FORCE_GPU_ALLOW_GROWTH"] == "true" for e in envs)  # beside the kernel that sees them too
    assert [json.loads(e["TF_CONFIG"])["task"]["index"] for e in envs] == [0, 1]
    impl = tf.distribute.experimental.CommunicationImplementation
    assert mwms_lib.communication(["/physical_device:GPU:0"]).implementation == impl.NCCL


@pytest.mark.parametrize("n_gpus", [0, 1])
def test_07_with_fewer_gpus_than_workers_the_workers_use_the_cpu_and_the_ring(mwms_lib, monkeypatch, n_gpus):
    import tensorflow as tf

    monkeypatch.setattr(cluster, "visible_gpu_ids", lambda: [str(i) for i in range(n_gpus)])
    monkeypatch.delenv("TF_FORCE_GPU_ALLOW_GROWTH", raising=False)
    per_worker = mwms_lib.gpus_per_worker(n_gpus, 2)
    job = cluster.LocalCluster(["-c", "pass"], n_workers=2, gpus_per_worker=per_worker)
    envs = [job.worker_env(i) for i in range(2)]
    assert per_worker == 0 and [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["-1", "-1"]
    assert not any("TF_FORCE_GPU_ALLOW_GROWTH" in e for e in envs)      # nothing GPU-only for CPU workers
    assert mwms_lib.communication([]).implementation == tf.distribute.experimental.CommunicationImplementation.RING


def test_07_worker_env_refuses_a_bad_index():
    job = cluster.LocalCluster(["-c", "pass"], n_workers=2)
    for bad in (-1, 2, True, "0"):
        with pytest.raises(ValueError, match="worker index"):
            job.worker_env(bad)


# -- lesson 08: the mesh follows the device count ---------------------------------------------------------

@pytest.mark.parametrize("n, mesh", [(2, (1, 2)), (4, (2, 2)), (8, (2, 4))])
def test_08_mesh_follows_the_device_count(n, mesh):
    """The lesson's own one-liner, taken from its cell: T4 x2 gives 1x2; 2x2 needs 4 devices."""
    cells = json.loads((ROOT / "notebooks" / "08_keras3_distribution_api.ipynb").read_text())["cells"]
    [line] = [ln for c in cells if c["cell_type"] == "code" for ln in "".join(c["source"]).splitlines()
              if ln.startswith("DATA, MODEL = ")]
    scope = {"N": n}
    exec(line, scope)
    assert (scope["DATA"], scope["MODEL"]) == mesh
