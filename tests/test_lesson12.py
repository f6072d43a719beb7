"""Lesson 12 (Keras on PyTorch): its scripts' functions, imported from the files the notebook writes, its version
gate against what the installed Keras does, the spawn trap, and its Setup (helpers.torch_backend).

The scripts come from the notebook's own ``%%writefile`` cells (tools/nblint.written_files), so there is no
second copy. This test process runs Keras on TensorFlow (tests/conftest.py), so everything that needs Keras on
PyTorch runs in a fresh process (``slow``: each imports PyTorch and Keras, seconds).
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import keras
import nblint  # tools/nblint.py: reads a lesson's %%writefile cells
import numpy as np
import pytest

from helpers import subproc, torch_backend

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "12_pytorch_backend_across_devices.ipynb"
#: The interpreter that runs the gate's probes and the keras.distribution comparison: this one, or LESSON12_PYTHON
#: (a venv with keras-nightly, torch and scikit-learn: the gated path on Keras 3.16.0.dev, keras#23052 and #23316).
TORCH_PYTHON = os.environ.get("LESSON12_PYTHON", sys.executable)


@pytest.fixture(scope="module")
def scripts(tmp_path_factory):
    """A folder holding every file the lesson writes."""
    folder = tmp_path_factory.mktemp("lesson12")
    for name, text in nblint.written_files(json.loads(NOTEBOOK.read_text())).items():
        (folder / name).write_text(text)
    return folder


def _cell(first_line: str) -> str:
    """The source of the notebook's one code cell that starts with ``first_line``."""
    found = [src for _, src in nblint.code_cells(json.loads(NOTEBOOK.read_text())) if src.startswith(first_line)]
    assert len(found) == 1, (first_line, len(found))
    return found[0]


def torchrun(script: str, *args: str, cwd: Path, nproc: int = 2, timeout: float = 600,
             env: "dict | None" = None, python: str = sys.executable) -> subprocess.CompletedProcess:
    """``torchrun --standalone --nproc_per_node=nproc SCRIPT ARGS`` in ``cwd`` on CPU processes, to the end."""
    return subprocess.run([python, "-m", "torch.distributed.run", "--standalone",
                           f"--nproc_per_node={nproc}", script, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout,
                          env=subproc.child_env({"OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", **(env or {})}))


def children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid`` (Linux /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def on_torch(code: str, cwd: Path, env: "dict | None" = None, timeout: float = 300,
             python: str = sys.executable) -> str:
    """Run ``code`` with Keras on PyTorch in a fresh process in ``cwd``; its stdout (the test fails on an error)."""
    run = subprocess.run([python, "-c", textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True,
                         timeout=timeout, env=subproc.child_env({"KERAS_BACKEND": "torch", **(env or {})}))
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_lesson_writes_its_scripts():
    assert set(nblint.written_files(json.loads(NOTEBOOK.read_text()))) == {
        "common.py", "ddp_train.py", "torch_job.sbatch", "step_check.py", "kd_train.py", "fit_tf_jax.py"}


@pytest.mark.slow
def test_device_rule_of_the_worker(scripts):
    """common.device_and_backend (ddp_train.py's rule): one GPU per rank and NCCL only when every rank of this
    machine gets one."""
    cases = [(0, 2, 2), (1, 2, 2), (3, 4, 8), (0, 2, 1), (1, 2, 1), (1, 2, 0), (0, 4, 2)]
    out = on_torch(f"import json, common; print(json.dumps([common.device_and_backend(*c) for c in {cases}]))",
                   scripts)
    assert [tuple(r) for r in json.loads(out.splitlines()[-1])] == [
        ("cuda:0", "nccl"), ("cuda:1", "nccl"), ("cuda:3", "nccl"),
        ("cpu", "gloo"), ("cpu", "gloo"), ("cpu", "gloo"), ("cpu", "gloo")]


@pytest.mark.slow
def test_train_step_and_every_rank_on_one_rank(scripts):
    """On one gloo rank DDP averages over one process: train_step is one plain SGD step; every_rank the value."""
    out = on_torch("""
        import json, keras, torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        import ddp_train
        from common import build_model, every_rank, load_data
        dist.init_process_group("gloo")
        x, y = (torch.from_numpy(a) for a in load_data(rows=64))
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        with keras.device("cpu"):
            model, ref = build_model(), build_model()
            ddp = DistributedDataParallel(model)
            opt, sgd = torch.optim.SGD(ddp.parameters(), lr=0.1), torch.optim.SGD(ref.parameters(), lr=0.1)
            losses = [ddp_train.train_step(ddp, opt, loss_fn, x, y) for _ in range(3)]
            for _ in range(3):
                sgd.zero_grad()
                loss_fn(y, ref(x, training=True)).backward()
                sgd.step()
        same = all(torch.allclose(a, b, atol=1e-6) for a, b in zip(model.parameters(), ref.parameters()))
        print(json.dumps({"losses": [float(v) for v in losses], "grad": any(v.requires_grad for v in losses),
                          "same": same, "mean": every_rank(2.5, "cpu")}))
        dist.destroy_process_group()
    """, scripts, env={"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "RANK": "0", "WORLD_SIZE": "1"})
    got = json.loads(out.splitlines()[-1])
    assert got["same"] and not got["grad"] and got["mean"] == [2.5]
    assert got["losses"][2] < got["losses"][0]


@pytest.mark.slow
def test_every_backend_starts_from_the_same_weights(scripts):
    """common.build_model draws its first weights with NumPy: the same on PyTorch as here on TensorFlow."""
    common = subproc.load_script(scripts / "common.py")
    here = common.build_model().get_weights()
    out = on_torch("import json; from common import build_model; "
                   "print(json.dumps([w.tolist() for w in build_model().get_weights()]))", scripts)
    there = json.loads(out.splitlines()[-1])
    assert keras.backend.backend() == "tensorflow" and len(here) == len(there) == 4
    assert all(np.array_equal(a, np.array(b, dtype="float32")) for a, b in zip(here, there))
    x, y = common.load_data(rows=100)
    assert x.shape == (100, 64) and x.dtype == np.float32 and 0 <= x.min() and x.max() <= 1 and y.dtype == np.int64


# ---- the feature gate ----------------------------------------------------------------------------------

def gate(list_devices, version: str = "3.15.1") -> bool:
    """The notebook's gate (its cell up to the print) run against a stand-in ``keras`` whose
    ``distribution.list_devices`` is ``list_devices``."""
    source = _cell("try:").split("\nprint(")[0]
    scope = {"keras": SimpleNamespace(__version__=version, distribution=SimpleNamespace(list_devices=list_devices))}
    exec(source, scope)  # noqa: S102 - the lesson's own lines
    return scope["TORCH_DISTRIBUTION"]


def _no_backend():
    raise AttributeError("'NoneType' object has no attribute 'list_devices'")   # Keras 3.13-3.15 on PyTorch


@pytest.mark.parametrize("version, list_devices, has_it", [
    ("3.13.2", _no_backend, False), ("3.15.1", _no_backend, False),
    ("3.16.0", _no_backend, False),                       # a version number alone does not turn it on
    ("3.16.0.dev2026102704", lambda: ["cpu:0"], True),    # keras-nightly: the feature, whatever the number says
    ("3.15.1", lambda: ["cpu:0", "cpu:1"], True)])
def test_the_gate_tests_the_feature_not_the_version(version, list_devices, has_it):
    assert gate(list_devices, version) is has_it


#: The gate, then what ``DataParallel()`` does, in a process with Keras on PyTorch.
_GATE_PROBE = """
    import json, keras
    from keras import distribution as kd
    {gate}
    try:
        kd.DataParallel()
        error = None
    except AttributeError as err:
        error = str(err)
    print(json.dumps({{"version": keras.__version__, "gate": TORCH_DISTRIBUTION, "error": error}}))
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory) -> dict:
    """The notebook's gate and DataParallel() in a process with Keras on PyTorch (TORCH_PYTHON's)."""
    source = _cell("try:").split("\nprint(")[0]
    out = on_torch(_GATE_PROBE.format(gate=textwrap.indent(source, " " * 4).lstrip()),
                   tmp_path_factory.mktemp("probe"), python=TORCH_PYTHON)
    return json.loads(out.splitlines()[-1])


@pytest.mark.slow
def test_the_gate_predicts_what_the_installed_keras_does(probe):
    """Where the gate says "not yet", DataParallel() fails with the lesson's message; where it says yes, it builds.
    LESSON12_PYTHON=<a venv with keras-nightly>/bin/python runs it against Keras 3.16.0.dev."""
    print(probe)
    assert probe["error"] is None if probe["gate"] else \
        probe["error"] == "'NoneType' object has no attribute 'list_devices'"


@pytest.mark.slow
def test_where_keras_distribution_runs_on_pytorch_it_gives_the_ddp_losses(probe, scripts, tmp_path):
    """The lesson's claim for Keras 3.16 (keras-nightly today): kd_train.py (DataParallel under torchrun) gives
    ddp_train.py's losses. Skipped where the gate says "not yet" (every Keras release up to 3.15)."""
    if not probe["gate"]:
        pytest.skip("keras.distribution on PyTorch is not in this Keras (expected in 3.16: keras#23052, #23316)")
    for path in scripts.iterdir():
        shutil.copy(path, tmp_path)
    on_torch("""
        import numpy as np
        from torch.utils.data import DistributedSampler
        orders = []
        for epoch in range(2):
            s = DistributedSampler(range(1024), num_replicas=1, rank=0, shuffle=True, seed=0)
            s.set_epoch(epoch)
            orders.append(list(s))
        np.save("orders.npy", np.array(orders))
    """, tmp_path, python=TORCH_PYTHON)
    losses = {}
    for script, args in (("ddp_train.py", ["2", "64"]), ("kd_train.py", ["orders.npy"])):
        run = torchrun(script, *args, cwd=tmp_path, python=TORCH_PYTHON)
        assert run.returncode == 0, run.stderr[-3000:]
        report = json.loads((tmp_path / f"{script[:-3]}.out" / "report-0.json").read_text())
        print(script, report.get("devices", report.get("device")), report["loss"])
        losses[script] = report["loss"]
    np.testing.assert_allclose(losses["kd_train.py"], losses["ddp_train.py"], rtol=1e-5)


@pytest.mark.parametrize("n_gpus, on_cpu", [(0, True), (1, True), (2, False), (4, False)])
def test_kd_train_stays_on_the_cpu_with_fewer_gpus_than_processes(n_gpus, on_cpu, monkeypatch):
    """M2: Keras main's torch initialize() takes NCCL and cuda:LOCAL_RANK whenever its default device is cuda, so
    2 processes on Colab's one T4 would ask for a second GPU. kd_train.py's lines before `import keras` (run here
    with a stand-in torch) set KERAS_TORCH_DEVICE=cpu when there are fewer GPUs than processes."""
    text = nblint.written_files(json.loads(NOTEBOOK.read_text()))["kd_train.py"]
    before = text.split("\nimport keras\n")[0]
    assert 'os.environ["KERAS_TORCH_DEVICE"] = "cpu"' in before
    env = {"LOCAL_WORLD_SIZE": "2"}
    fake_torch = SimpleNamespace(cuda=SimpleNamespace(device_count=lambda: n_gpus))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    for name in ("tensorflow", "jax"):   # the lines block them in sys.modules: this process gets them back after
        monkeypatch.setitem(sys.modules, name, sys.modules.get(name))
    scope = {"os": SimpleNamespace(environ=env)}
    exec(before.replace("import json, os, sys\n", "import sys\n"), scope)  # noqa: S102 - the lesson's lines
    assert (env.get("KERAS_TORCH_DEVICE") == "cpu") is on_cpu


# ---- the spawn trap, and the Setup ----------------------------------------------------------------------

@pytest.mark.slow
def test_spawn_cannot_start_a_function_that_lives_in_no_file(tmp_path):
    """What a notebook gets with start_method="spawn" (keras-io#1838's advice), from `python -c`, whose functions
    are in no file either: each child fails to unpickle the function, the parent raises ProcessExitedException."""
    run = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import torch.multiprocessing as mp
        def per_device_launch_fn(current_gpu_index, num_gpu):
            pass
        try:
            mp.start_processes(per_device_launch_fn, args=(2,), nprocs=2, join=True, start_method="spawn")
        except mp.ProcessExitedException as err:
            print(f"{type(err).__name__}: {err}")
    """)], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=subproc.child_env())
    child = [ln for ln in run.stderr.splitlines() if ln.startswith("AttributeError")]
    print(child[0] if child else run.stderr[-2000:])              # the message TROUBLESHOOTING.md indexes
    assert child and all(ln.startswith("AttributeError: Can't get attribute 'per_device_launch_fn' on <module "
                                       "'__main__'") for ln in child), run.stderr[-2000:]
    assert re.search(r"ProcessExitedException: process [01] terminated with exit code 1", run.stdout), run.stdout


@pytest.mark.parametrize("gpus, plan", [
    (0, (["cpu", "cpu"], "gloo")), (1, (["cpu", "cpu"], "gloo")),
    (2, (["cuda:0", "cuda:1"], "nccl")), (3, (["cuda:0", "cuda:1"], "nccl")),
    (6, ([f"cuda:{i}" for i in range(4)], "nccl"))])
def test_process_plan(gpus, plan):
    assert torch_backend.process_plan(gpus) == plan


@pytest.mark.parametrize("bad", [-1, True, 2.0, "2"])
def test_process_plan_refuses_a_bad_count(bad):
    with pytest.raises(ValueError, match="n_gpus must be a whole number"):
        torch_backend.process_plan(bad)


@pytest.mark.slow
def test_setup_notebook_on_torch_keeps_tensorflow_and_jax_out(tmp_path):
    out = on_torch("""
        import sys, helpers
        names = helpers.setup_notebook(backend="torch")
        import keras
        print("RESULT", names, keras.backend.backend(), sys.modules.get("tensorflow"), sys.modules.get("jax"))
    """, tmp_path, env={"KERAS_BACKEND": ""})
    assert "a job here: 2 processes, on the CPU (fewer than 2 GPUs), gloo between them" in out, out
    assert "RESULT ['cpu', 'cpu'] torch None None" in out, out


def test_setup_without_pytorch_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(torch_backend, "installed", lambda dist: None)
    for name in ("tensorflow", "jax"):          # the keep-out markers setup() adds are removed after the test
        if name not in sys.modules:
            monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ModuleNotFoundError, match=r"pip install torch --index-url https://download\.pytorch\.org/whl/cpu"):
        torch_backend.setup("local", lambda where, n: "")



def test_every_script_releases_ddp_before_the_process_group():
    """DistributedDataParallel holds its process group: destroy_process_group() alone leaves gloo's threads alive
    until Python exits, where tearing them down aborted 1 run in 10 (``terminate called without an active
    exception``, SIGABRT). Every script of the lesson, its Copy box and the exercises' worker delete ``ddp`` first."""
    nb = json.loads(NOTEBOOK.read_text())
    sources = {**nblint.written_files(nb), "copy box": nblint.box_code(nblint.copy_boxes(nb)[0][1]),
               "exercise12_worker.py": (ROOT / "helpers" / "scripts" / "exercise12_worker.py").read_text()}
    leaving = {name: text for name, text in sources.items() if "destroy_process_group()" in text}
    assert {"ddp_train.py", "step_check.py", "copy box", "exercise12_worker.py"} <= set(leaving)
    for name, text in leaving.items():
        lines = [line.strip() for line in text.splitlines()]
        for i, line in enumerate(lines):
            if line.startswith("dist.destroy_process_group()"):
                assert lines[i - 1].startswith("del ddp"), f"{name}: `del ddp` does not come before line {i + 1}"


@pytest.mark.slow
def test_gloo_threads_outlive_destroy_process_group_while_ddp_holds_the_group(tmp_path):
    """Why `del ddp`: with the wrapper alive, the group's gloo threads are still there after destroy_process_group;
    deleted first, none is left."""
    if not Path("/proc/self/task").is_dir():
        pytest.skip("no /proc/self/task here to count threads")
    (tmp_path / "rank.py").write_text(textwrap.dedent("""
        import glob, json, os, sys
        os.environ["KERAS_BACKEND"] = "torch"
        sys.modules["tensorflow"] = sys.modules["jax"] = None
        import keras, torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        dist.init_process_group("gloo")
        with keras.device("cpu"):
            ddp = DistributedDataParallel(keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)]))
            ddp(torch.ones(2, 4)).sum().backward()
        if sys.argv[1] == "del":
            del ddp
        dist.destroy_process_group()
        names = [open(p).read().strip() for p in glob.glob("/proc/self/task/*/comm")]
        with open(f"threads-{os.environ['RANK']}.json", "w") as f:
            json.dump([n for n in names if "gloo" in n], f)
    """))
    left = {}
    for mode in ("keep", "del"):
        run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                              "rank.py", mode], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                             env=subproc.child_env({"OMP_NUM_THREADS": "1"}))
        assert run.returncode == 0 or mode == "keep", run.stderr[-3000:]
        left[mode] = [json.loads((tmp_path / f"threads-{r}.json").read_text()) for r in (0, 1)]
    assert all(left["keep"]) and not any(left["del"]), left


# ---- how many processes (M3) ------------------------------------------------------------------------------

@pytest.mark.parametrize("n_gpus, nproc", [(0, 2), (1, 2), (2, 2), (3, 2), (4, 4), (5, 4), (6, 4), (8, 8)])
def test_the_process_count_is_a_power_of_two_that_divides_the_batch(n_gpus, nproc):
    """The notebook's NPROC line and Setup's plan, for a stand-in torch with ``n_gpus`` GPUs: 3 GPUs -> 2 processes,
    6 -> 4, so the global batch of 64 and the 1,024 rows divide (no 63-row steps, no DistributedSampler padding)."""
    [line] = [ln for ln in _cell("NPROC = ").splitlines() if ln.startswith("NPROC = ")]
    scope = {"torch": SimpleNamespace(cuda=SimpleNamespace(device_count=lambda: n_gpus))}
    exec(line, scope)  # noqa: S102 - the lesson's line
    assert scope["NPROC"] == nproc and 64 % nproc == 0 and 1024 % nproc == 0
    devices, collective = torch_backend.process_plan(n_gpus)
    assert len(devices) == nproc and collective == ("nccl" if n_gpus >= 2 else "gloo")


# ---- the training flag under DDP (H1) ---------------------------------------------------------------------

_TRAINING_RANK = '''
import inspect, json, os, sys
os.environ["KERAS_BACKEND"] = "torch"
sys.modules["tensorflow"] = sys.modules["jax"] = None
import keras, torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
import ddp_train

source = inspect.getsource(ddp_train.train_step)
without = source.replace(", training=True", "")           # the step as it was before: ddp_model(x)
assert without != source, "train_step no longer passes training=True"
scope = {}
exec(without, scope)
dist.init_process_group("gloo")
rank, seen, report = dist.get_rank(), {}, {}

def loss_fn(y, out):                                      # the model's output is the Dropout layer's
    seen["dropped"] = float((out == 0).float().mean())
    return (out ** 2).mean()

for name, step in (("training=True", ddp_train.train_step), ("without", scope["train_step"])):
    with keras.device("cpu"):
        keras.utils.set_random_seed(rank)
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16), keras.layers.BatchNormalization(),
                                  keras.layers.Dropout(0.5)])
        ddp = DistributedDataParallel(model)
        ddp.train()                                       # PyTorch's training mode, which Keras does not read
        x = torch.randn(32, 8) + rank                     # each rank its own rows
        step(ddp, torch.optim.SGD(ddp.parameters(), lr=0.1), loss_fn, x, None)
        bn = model.layers[1]
        report[name] = {"dropped": seen["dropped"], "moving_mean": bn.moving_mean.numpy().tolist(),
                        "moving_variance": bn.moving_variance.numpy().tolist()}
    del ddp
with open(f"training-{rank}.json", "w") as f:
    json.dump(report, f)
dist.destroy_process_group()
'''


@pytest.mark.slow
def test_ddp_train_steps_in_training_mode_on_two_ranks(scripts, tmp_path):
    """Issue 39 item 4: the lesson's train_step calls the DDP model with training=True, so on 2 ranks Dropout drops
    about half of the values and BatchNorm's moving statistics move; the same step without the flag (its source
    edited) does neither, though ddp.train() was called: Keras reads the flag from the call (keras layer.py,
    "Infer training value"). DDP does not average Keras's moving statistics: each rank keeps its own rows'."""
    (tmp_path / "rank.py").write_text(_TRAINING_RANK)
    run = torchrun("rank.py", cwd=tmp_path, env={"PYTHONPATH": f"{scripts}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"})
    assert run.returncode == 0, run.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"training-{r}.json").read_text()) for r in (0, 1)]
    for r in ranks:
        on, off = r["training=True"], r["without"]
        print(f"Dropout dropped {on['dropped']:.0%} with training=True, {off['dropped']:.0%} without; BatchNorm's "
              f"moving mean moved by {np.abs(on['moving_mean']).sum():.4f}, without: {np.abs(off['moving_mean']).sum()}")
        assert 0.4 < on["dropped"] < 0.6 and off["dropped"] == 0.0
        assert np.abs(on["moving_mean"]).sum() > 1e-3 and not np.any(off["moving_mean"])
        assert not np.allclose(on["moving_variance"], 1.0) and np.allclose(off["moving_variance"], 1.0)
    assert not np.allclose(ranks[0]["training=True"]["moving_mean"], ranks[1]["training=True"]["moving_mean"])


# ---- the DDP job: its files, resuming, and no process left behind (issue 39 items 1, 3, 7) ----------------------

def _job_folder(scripts: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("common.py", "ddp_train.py"):
        shutil.copy(scripts / name, folder)
    return folder


def _report(folder: Path, rank: int = 0) -> dict:
    return json.loads((folder / "ddp_train.out" / f"report-{rank}.json").read_text())


@pytest.mark.slow
def test_the_ddp_job_resumes_where_it_stopped_and_leaves_your_files_alone(scripts, tmp_path):
    """A run of 2 epochs equals a run of 1 epoch, then the state a kill mid-write leaves (a half-written checkpoint
    and model under their temporary names), then the same command for 2 epochs: it resumes after epoch 1 (it
    prints epoch 2 only) and ends with the same losses and weights, bit for bit. The learner's files in the
    working folder, named as the job's once were, stay byte for byte; the job's own folder holds its files only."""
    whole = _job_folder(scripts, tmp_path / "whole")
    run = torchrun("ddp_train.py", "2", "64", cwd=whole)
    assert run.returncode == 0, run.stderr[-3000:]
    assert [ln for ln in run.stdout.splitlines() if ln.startswith("epoch ")] == [
        f"epoch {e}/2 saved: loss {loss:.4f}" for e, loss in zip((1, 2), _report(whole)["loss"])]

    stopped = _job_folder(scripts, tmp_path / "stopped")
    mine = {"model.keras": b"the learner's model", "report-0.json": b'{"mine": true}', "checkpoint.pt": b"mine",
            "backup/notes.txt": b"notes"}
    for name, data in mine.items():
        (stopped / name).parent.mkdir(exist_ok=True)
        (stopped / name).write_bytes(data)
    run = torchrun("ddp_train.py", "1", "64", cwd=stopped)
    assert run.returncode == 0, run.stderr[-3000:]
    out = stopped / "ddp_train.out"
    (out / "partial-checkpoint.pt").write_bytes((out / "checkpoint.pt").read_bytes()[:500])   # killed mid-write
    (out / "partial-model.keras").write_bytes(b"PK\x03\x04 half a zip")
    run = torchrun("ddp_train.py", "2", "64", cwd=stopped)
    assert run.returncode == 0, run.stderr[-3000:]
    assert [ln for ln in run.stdout.splitlines() if ln.startswith("epoch ")] == [
        f"epoch 2/2 saved: loss {_report(stopped)['loss'][1]:.4f}"]                 # epoch 1 was not trained again
    for rank in (0, 1):
        a, b = _report(whole, rank), _report(stopped, rank)
        assert a["loss"] == b["loss"] and a["own_loss"] == b["own_loss"] and a["weights"] == b["weights"]
        assert a["rows"] == b["rows"]
    assert {name: (stopped / name).read_bytes() for name in mine} == mine
    assert sorted(p.name for p in out.iterdir()) == [
        "checkpoint.pt", "made-by-this-job", "model.keras", "report-0.json", "report-1.json"]


def test_the_job_adopts_an_empty_folder_and_stops_at_a_foreign_one(scripts, tmp_path):
    """common.own_folder, ddp_train.py's first write: a new or empty folder becomes the job's (marked); a marked one
    is the job's; one that holds anything else stops the job with a message that says what to do, untouched."""
    common = subproc.load_script(scripts / "common.py")
    new, empty, foreign = tmp_path / "new", tmp_path / "empty", tmp_path / "yours" / "ddp_train.out"
    empty.mkdir()
    foreign.mkdir(parents=True)
    (foreign / "notes.txt").write_bytes(b"mine")
    for folder in (new, empty, new):                      # the second call on `new`: a run after a kill
        assert common.own_folder(str(folder)) == str(folder)
        assert [p.name for p in folder.iterdir()] == ["made-by-this-job"]
    with pytest.raises(SystemExit, match=r"ddp_train.out/ holds files this job did not write: move them away, or "
                                         r"start the job in another folder") as stopped:
        common.own_folder(str(foreign))
    print(stopped.value)                                  # the message TROUBLESHOOTING.md indexes
    assert [(p.name, p.read_bytes()) for p in foreign.iterdir()] == [("notes.txt", b"mine")]


def test_write_whole_leaves_the_last_whole_file_when_a_write_is_cut(scripts, tmp_path):
    """common.write_whole writes under a temporary name and renames: a write that dies half-way (here it raises)
    leaves the previous file as it was, and the next write replaces the half-written temporary file."""
    common = subproc.load_script(scripts / "common.py")
    common.write_whole(str(tmp_path), "checkpoint.pt", lambda tmp: Path(tmp).write_bytes(b"epoch 1"))

    def dies_half_way(tmp):
        Path(tmp).write_bytes(b"epo")
        raise KeyboardInterrupt("killed mid-write")

    with pytest.raises(KeyboardInterrupt):
        common.write_whole(str(tmp_path), "checkpoint.pt", dies_half_way)
    assert (tmp_path / "checkpoint.pt").read_bytes() == b"epoch 1"
    common.write_whole(str(tmp_path), "checkpoint.pt", lambda tmp: Path(tmp).write_bytes(b"epoch 2"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt"]
    assert (tmp_path / "checkpoint.pt").read_bytes() == b"epoch 2"


def _start_and_kill_torchrun(folder: Path) -> list[int]:
    """Start 2 ranks of ddp_train.py (200 epochs) in ``folder``, wait until both are past their start (the job's
    folder is marked), SIGKILL torchrun alone; the ranks' process ids."""
    job = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                            "ddp_train.py", "200", "64"], cwd=folder, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=subproc.child_env({"OMP_NUM_THREADS": "1"}))
    try:
        deadline = time.monotonic() + 240
        while not (folder / "ddp_train.out" / "made-by-this-job").exists() or len(children(job.pid)) < 2:
            assert job.poll() is None and time.monotonic() < deadline, "the job did not start"
            time.sleep(0.2)
        ranks = children(job.pid)
    finally:
        job.kill()                                        # torchrun only: its ranks are in a session of their own
        job.wait()
    return ranks


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_ranks_die_with_a_killed_torchrun(scripts, tmp_path):
    """torchrun starts each rank in a session of its own, so a SIGKILL of torchrun alone does not reach them; the
    ranks set PR_SET_PDEATHSIG and die with it. (Without those two lines, measured once: both ranks ran on after
    torchrun's SIGKILL, each waiting for gloo's 30-minute timeout.)"""
    ranks = _start_and_kill_torchrun(_job_folder(scripts, tmp_path))
    deadline = time.monotonic() + 10
    while any(subproc.pid_alive(pid) for pid in ranks) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [pid for pid in ranks if subproc.pid_alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert len(ranks) == 2 and not left, f"ranks {left} outlived torchrun"


# ---- the notebook's launchers end what they start (issue 39 item 7) -----------------------------------------

@pytest.mark.slow
def test_the_torchrun_launcher_stops_a_job_that_runs_too_long(tmp_path):
    """The notebook's torchrun() with its 10 minutes cut to 15 s, on ranks that never end: SIGTERM, torchrun stops
    its ranks, TimeoutExpired reaches the cell, and no process of the job is left."""
    (tmp_path / "forever.py").write_text("import os, pathlib, time\n"
                                         "pathlib.Path(f\"pid-{os.environ['RANK']}\").write_text(str(os.getpid()))\n"
                                         "time.sleep(3600)\n")
    source = _cell("def torchrun(")
    assert source.count("timeout=600") == 1
    scope = {"json": json, "os": os, "subprocess": subprocess, "sys": sys, "SCRATCH": tmp_path, "NPROC": 2}
    exec(source.replace("timeout=600", "timeout=15"), scope)  # noqa: S102 - the lesson's launcher
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        scope["torchrun"]("forever.py")
    ranks = [int((tmp_path / f"pid-{r}").read_text()) for r in (0, 1)]
    left = [pid for pid in ranks if subproc.pid_alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"ranks {left} outlived the launcher"
    assert time.monotonic() - started < 120              # 15 s, then torchrun's own stop (30 s at most)


@pytest.mark.slow
def test_the_three_backend_cell_kills_its_jobs_on_a_timeout(tmp_path):
    """The comparison cell with its 10 minutes cut to 3 s, on two jobs that never end: the timeout reaches the cell
    and both processes are gone."""
    (tmp_path / "fit_tf_jax.py").write_text("import os, pathlib, time\n"
                                            "pathlib.Path(f\"pid-{os.environ['KERAS_BACKEND']}\").write_text("
                                            "str(os.getpid()))\ntime.sleep(3600)\n")
    source = _cell("ENVS = ")
    assert source.count("timeout=600") == 1
    scope = {"json": json, "os": os, "subprocess": subprocess, "sys": sys, "SCRATCH": tmp_path,
             "ranks": [{"device": "cpu"}]}
    with pytest.raises(subprocess.TimeoutExpired):
        exec(source.replace("timeout=600", "timeout=3"), scope)  # noqa: S102 - the lesson's cell
    pids = [int(p.read_text()) for p in sorted(tmp_path.glob("pid-*"))]
    left = [pid for pid in pids if subproc.pid_alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert len(pids) == 2 and not left, f"{left} outlived the cell"


def test_the_copy_box_counts_the_rows_it_scored():
    """L7: with drop_last the loader scores fewer rows than len(sampler) (which DistributedSampler pads): the
    accuracy divides by the rows scored, len(yb), and every step calls the model with training=True."""
    box = nblint.box_code(nblint.copy_boxes(json.loads(NOTEBOOK.read_text()))[0][1])
    assert "rows += len(yb)" in box and "torch.tensor([right, rows]" in box and "len(sampler)" not in box
    assert "ddp(xb.to(device), training=True)).backward()" in box
    assert "ctypes.CDLL(None).prctl(1, signal.SIGKILL)" in box        # its ranks die with torchrun too
