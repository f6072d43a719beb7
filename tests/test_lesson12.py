"""Lesson 12 (Keras on PyTorch): its scripts' functions, imported from the files the notebook writes, its version
gate against what the installed Keras does, the spawn trap, and its Setup (helpers.torch_backend).

The scripts come from the notebook's own ``%%writefile`` cells (tools/nblint.written_files), so there is no
second copy. This test process runs Keras on TensorFlow (tests/conftest.py), so everything that needs Keras on
PyTorch runs in a fresh process (``slow``: each imports PyTorch and Keras, seconds).
"""

import json
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import keras
import nblint  # tools/nblint.py: reads a lesson's %%writefile cells
import numpy as np
import pytest

from helpers import subproc, torch_backend

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "12_pytorch_backend_across_devices.ipynb"


@pytest.fixture(scope="module")
def scripts(tmp_path_factory):
    """A folder holding every file the lesson writes."""
    folder = tmp_path_factory.mktemp("lesson12")
    for name, text in nblint.written_files(json.loads(NOTEBOOK.read_text())).items():
        (folder / name).write_text(text)
    return folder


def on_torch(code: str, cwd: Path, env: "dict | None" = None, timeout: float = 300) -> str:
    """Run ``code`` with Keras on PyTorch in a fresh process in ``cwd``; its stdout (the test fails on an error)."""
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True,
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
    """ddp_train.device_and_backend: one GPU per rank and NCCL only when every rank of this machine gets one."""
    cases = [(0, 2, 2), (1, 2, 2), (3, 4, 8), (0, 2, 1), (1, 2, 1), (1, 2, 0), (0, 4, 2)]
    out = on_torch(f"import json, ddp_train; print(json.dumps([ddp_train.device_and_backend(*c) for c in {cases}]))",
                   scripts)
    assert [tuple(r) for r in json.loads(out.splitlines()[-1])] == [
        ("cuda:0", "nccl"), ("cuda:1", "nccl"), ("cuda:3", "nccl"),
        ("cpu", "gloo"), ("cpu", "gloo"), ("cpu", "gloo"), ("cpu", "gloo")]


@pytest.mark.slow
def test_train_step_and_global_mean_on_one_rank(scripts):
    """On one gloo rank DDP averages over one process: train_step is one plain SGD step; global_mean the value."""
    out = on_torch("""
        import json, keras, torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        import ddp_train
        from common import build_model, load_data
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
                loss_fn(y, ref(x)).backward()
                sgd.step()
        same = all(torch.allclose(a, b, atol=1e-6) for a, b in zip(model.parameters(), ref.parameters()))
        print(json.dumps({"losses": [float(v) for v in losses], "grad": any(v.requires_grad for v in losses),
                          "same": same, "mean": ddp_train.global_mean(2.5, "cpu")}))
        dist.destroy_process_group()
    """, scripts, env={"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "RANK": "0", "WORLD_SIZE": "1"})
    got = json.loads(out.splitlines()[-1])
    assert got["same"] and not got["grad"] and got["mean"] == 2.5
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


# ---- the version gate -----------------------------------------------------------------------------------

def _gate_lines() -> str:
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    lines = [ln for c in cells if c["cell_type"] == "code" for ln in "".join(c["source"]).splitlines()
             if ln.startswith(("KERAS = ", "TORCH_DISTRIBUTION = "))]
    assert len(lines) == 2, lines
    return "\n".join(lines)


def gate(version: str) -> bool:
    """The notebook's own gate, run on ``version``."""
    scope = {"re": re, "keras": SimpleNamespace(__version__=version)}
    exec(_gate_lines(), scope)  # noqa: S102 - the lesson's two lines
    return scope["TORCH_DISTRIBUTION"]


@pytest.mark.parametrize("version, has_it", [("3.13.2", False), ("3.15.1", False), ("3.16.0", True),
                                             ("3.16.0.dev2026082103", True), ("3.17.1", True), ("4.0.0", True)])
def test_the_gate_reads_the_version(version, has_it):
    assert gate(version) is has_it


@pytest.mark.slow
def test_the_gate_predicts_what_the_installed_keras_does(tmp_path):
    """Where the gate says "not yet", DataParallel() fails with the lesson's message; where it says yes, it builds."""
    out = on_torch("""
        import json, keras
        from keras import distribution as kd
        try:
            kd.DataParallel()
            print(json.dumps({"version": keras.__version__, "error": None}))
        except AttributeError as err:
            print(json.dumps({"version": keras.__version__, "error": str(err)}))
    """, tmp_path)
    got = json.loads(out.splitlines()[-1])
    assert got["version"] == keras.__version__
    if gate(got["version"]):
        assert got["error"] is None
    else:
        assert got["error"] == "'NoneType' object has no attribute 'list_devices'"


@pytest.mark.slow
@pytest.mark.skipif(not gate(keras.__version__), reason="keras.distribution on PyTorch needs Keras 3.16+")
def test_on_keras_316_data_parallel_gives_the_ddp_losses(scripts):
    """The lesson's claim for Keras 3.16: kd_train.py (DataParallel under torchrun) matches ddp_train.py."""
    orders = on_torch("""
        import numpy as np
        from torch.utils.data import DistributedSampler
        orders = []
        for epoch in range(2):
            s = DistributedSampler(range(1024), num_replicas=1, rank=0, shuffle=True, seed=0)
            s.set_epoch(epoch)
            orders.append(list(s))
        np.save("orders.npy", np.array(orders))
    """, scripts)
    assert orders == ""
    losses = {}
    for script, args in (("ddp_train.py", ["2", "64"]), ("kd_train.py", ["orders.npy"])):
        run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                              script, *args], cwd=scripts, capture_output=True, text=True, timeout=600,
                             env=subproc.child_env({"OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}))
        assert run.returncode == 0, run.stderr[-3000:]
        losses[script] = json.loads((scripts / "report-0.json").read_text())["loss"]
    np.testing.assert_allclose(losses["kd_train.py"], losses["ddp_train.py"], rtol=1e-5)


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
    (2, (["cuda:0", "cuda:1"], "nccl")), (3, (["cuda:0", "cuda:1", "cuda:2"], "nccl"))])
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
