"""Kaggle's GPU T4 x2, simulated: which path every lesson takes on two T4s (and on one T4, and 8 A100s).

TensorFlow cannot fake GPUs. So every choice that depends on the hardware is a small function: in helpers
(replica devices, JAX devices, worker GPUs, memory settings, dtype policy), in lesson 06's benchmark script
(``helpers/scripts/bench_child.py``) or in the scripts the lessons write (lesson 07's ``mwms_lib.py``, loaded here
from the notebook's own cells). These tests feed them the machines learners have and check what each lesson would
run. Nothing here has run on a GPU: TROUBLESHOOTING's platform notes say so until a Kaggle run reports figures.
"""

import ast
import json
import os
import re
from pathlib import Path
from types import SimpleNamespace

import nblint
import pytest

from helpers import bench, cluster, devices, meshes, precision, subproc, torch_backend

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
    elif backend == "torch":   # 12: one process per GPU, NCCL between them
        assert torch_backend.process_plan(2) == (["cuda:0", "cuda:1"], "nccl")
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


# -- lesson 06: the benchmark's hardware choices (a faked tf.config), and the lesson's own precision rule ------

class FakeTfConfig:
    """Just enough of ``tf.config`` for the benchmark script's choices: physical GPUs and their details."""

    def __init__(self, n_gpus, caps):
        self.gpus = [SimpleNamespace(name=f"/physical_device:GPU:{i}", device_type="GPU") for i in range(n_gpus)]
        self.experimental = SimpleNamespace(
            get_device_details=lambda gpu: {"device_name": "Tesla T4", "compute_capability": caps[self.gpus.index(gpu)]})

    def list_physical_devices(self, kind):
        return self.gpus if kind == "GPU" else [SimpleNamespace(name="/physical_device:CPU:0", device_type="CPU")]


@pytest.fixture(scope="module")
def bench_child():
    return subproc.load_script(bench.SCRIPT)


def _fake_tf(child, monkeypatch, machine):
    monkeypatch.setattr(child, "tf", SimpleNamespace(config=FakeTfConfig(*MACHINES[machine])))


def test_06_on_t4x2_one_and_two_replicas_are_real_gpus_four_split_gpu_0(bench_child, monkeypatch):
    assert [devices.replica_plan(n, n_gpus=2) for n in (1, 2, 4)] == [devices.KIND_GPUS] * 2 + [devices.KIND_SPLIT_GPU]
    _fake_tf(bench_child, monkeypatch, "kaggle_t4x2")
    assert bench_child.capabilities(2) == [T4, T4] and bench_child.capabilities(4) == [T4] * 4   # GPU 0 split
    assert bench_child.policy_for("mixed", bench_child.capabilities(2)) == "mixed_float16"


@pytest.mark.parametrize("machine", sorted(MACHINES))
def test_06_scripts_policy_is_the_course_rule(bench_child, monkeypatch, machine):
    _fake_tf(bench_child, monkeypatch, machine)
    n_gpus, caps = MACHINES[machine]
    got = bench_child.policy_for("mixed", bench_child.capabilities(2))
    assert got == precision.mixed_policy(caps[:2] if n_gpus >= 2 else (caps[:1] * 2 or [None, None]))


def test_06_the_lessons_rule_is_the_course_rule():
    """Lesson 06 writes the rule in a cell for learners to take away: it must agree with helpers.precision."""
    cells = json.loads((ROOT / "notebooks" / "06_scaling_and_performance.ipynb").read_text())["cells"]
    [src] = ["".join(c["source"]) for c in cells if "".join(c["source"]).startswith("def mixed_policy(")]
    scope = {}
    exec(src.split("\ncapabilities = ")[0], scope)
    for caps in [*(c or [None] for _, c in MACHINES.values()), [(6, 0)], [(6, 1), T4], [(7, 0)], [A100, None]]:
        assert scope["mixed_policy"](caps) == precision.mixed_policy(caps), caps


# -- lesson 07: one GPU per worker, NCCL between them ---------------------------------------------------

@pytest.fixture(scope="module")
def mwms_lib(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lesson07")
    nb = json.loads((ROOT / "notebooks" / "07_multi_worker_and_fault_tolerance.ipynb").read_text())
    for name, text in nblint.written_files(nb).items():
        (folder / name).write_text(text)
    return subproc.load_script(folder / "mwms_lib.py")


def test_07_on_t4x2_each_worker_owns_one_gpu_and_requests_nccl(mwms_lib, monkeypatch):
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


# -- lessons 08, 10, 11: TensorFlow off the GPUs, and a power of two of them -------------------------------

class _RecordingTfConfig:
    """``tf.config`` as far as hiding GPUs goes, noting whether JAX had started when it was called."""

    def __init__(self):
        self.calls = []

    def set_visible_devices(self, devices, device_type=None):
        import sys
        self.calls.append((list(devices), device_type, "jax" in sys.modules))


@pytest.mark.parametrize("machine", ["kaggle_t4x2", "colab_t4", "server_a100x8"])
def test_in_a_jax_kernel_tensorflow_sees_no_gpu(machine, fresh_jax_choice):
    """jax#39167: TensorFlow beside JAX on Kaggle's T4 x2 breaks JAX's NCCL all-reduce; the Setup hides the GPUs
    from TensorFlow before JAX starts, on every machine with a GPU."""
    import tensorflow as tf

    config = _RecordingTfConfig()
    fresh_jax_choice.setattr(tf, "config", config)
    n_gpus, _ = MACHINES[machine]
    fresh_jax_choice.setattr("helpers.gpus.visible_gpu_ids", lambda: [str(i) for i in range(n_gpus)])
    meshes.choose_jax_platform()
    assert config.calls == [([], "GPU", False)]          # no GPU for TensorFlow, and JAX not started yet


def _lesson_sizes():
    """What must divide by the JAX device count: 08's global batch, 10's global batch, 11's query heads."""
    def cell_value(number, pattern):
        nb = next((ROOT / "notebooks").glob(f"{number}_*.ipynb"))
        code = "".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code")
        return int(re.search(pattern, code).group(1))
    return {"08 BATCH": cell_value("08", r"BATCH = config\.pick\(quick=(\d+)"),
            "10 BATCH": cell_value("10", r"BATCH = config\.pick\(quick=(\d+)"),
            "11 HEADS": cell_value("11", r"SEED, HEADS, .* = \d+, (\d+),")}


@pytest.mark.parametrize("n_gpus, used", [(2, 2), (3, 2), (4, 4), (5, 4), (6, 4), (7, 4), (8, 8)])
def test_3_to_7_gpus_use_a_power_of_two_that_the_lessons_divide(n_gpus, used, fresh_jax_choice):
    fresh_jax_choice.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    fresh_jax_choice.setattr("helpers.gpus.visible_gpu_ids", lambda: [str(i) for i in range(n_gpus)])
    fresh_jax_choice.setattr(meshes, "hide_gpus_from_tensorflow", lambda: True)
    plan = meshes.choose_jax_platform()
    assert (plan.platform, plan.devices) == ("gpu", used)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    assert visible == (None if used == n_gpus else ",".join(map(str, range(used))))   # jax.devices() = the plan's
    sizes = _lesson_sizes()
    assert not [name for name, size in sizes.items() if size % plan.devices], (sizes, plan)
    assert 64 % 6 and sizes["11 HEADS"] % 6                  # what 6 GPUs would have broken


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


# -- lesson 12: one process per GPU on cuda:LOCAL_RANK with NCCL; else 2 CPU processes with gloo ------------

LESSON12 = ROOT / "notebooks" / "12_pytorch_backend_across_devices.ipynb"


def _fake_torch(n_gpus):
    return SimpleNamespace(cuda=SimpleNamespace(device_count=lambda: n_gpus))


def _lesson12_lines(prefixes, source, **scope):
    """Run the lines of ``source`` that start with ``prefixes`` (the lesson's one-liners) in ``scope``."""
    lines = [ln for ln in source.splitlines() if ln.startswith(prefixes)]
    assert len(lines) == len(prefixes), lines
    exec("\n".join(lines), scope)
    return scope


@pytest.mark.parametrize("machine, want", [
    ("kaggle_t4x2", [("cuda:0", "nccl"), ("cuda:1", "nccl")]),
    ("colab_t4", [("cpu", "gloo")] * 2),                   # NCCL cannot put two ranks on one GPU
    ("laptop", [("cpu", "gloo")] * 2),
    ("server_a100x8", [(f"cuda:{i}", "nccl") for i in range(8)]),
])
def test_12_each_rank_gets_a_device_and_a_collective(machine, want):
    """The worker's device_and_backend (from the notebook's common.py cell, run without PyTorch), for the number
    of processes the notebook's launcher starts; Setup's plan and the Copy box's rule agree with it."""
    n_gpus, _ = MACHINES[machine]
    nb = json.loads(LESSON12.read_text())
    nproc = _lesson12_lines(("NPROC = ",), "\n".join(src for _, src in nblint.code_cells(nb)),
                            torch=_fake_torch(n_gpus))["NPROC"]
    tree = ast.parse(nblint.written_files(nb)["common.py"])
    [rule] = [ast.unparse(n) for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "device_and_backend"]
    scope = {}
    exec(rule, scope)
    ranks = [scope["device_and_backend"](rank, nproc, n_gpus) for rank in range(nproc)]   # LOCAL_RANK, LOCAL_WORLD_SIZE
    assert ranks == want
    assert torch_backend.process_plan(n_gpus) == ([d for d, _ in ranks], want[0][1])     # what Setup prints
    box = nblint.box_code(nblint.copy_boxes(nb)[0][1])
    for rank, (device, collective) in enumerate(want):                                    # the Copy box's rule
        got = _lesson12_lines(("on_gpus = ", "device = "), box, torch=_fake_torch(n_gpus), local_rank=rank,
                              os=SimpleNamespace(environ={"LOCAL_WORLD_SIZE": str(nproc)}))
        assert (got["device"], "nccl" if got["on_gpus"] else "gloo") == (device, collective)
