"""tools/gpu_check.py (`make gpu-check`): the shapes a machine can run, the memory sampler's parser, the report,
and the GPU-less stop that touches nothing. nvidia-smi is faked for a T4 x2, one T4 and eight A100s."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import gpu_check as gc  # tools/gpu_check.py
import pytest

from helpers.gpus import GpuInfo

ROOT = Path(__file__).resolve().parent.parent

T4 = "Tesla T4"
CSV = {
    "t4x2": ("index, uuid, pci.bus_id, name, memory.used [MiB], memory.total [MiB]\n"
             f"0, GPU-aaaa, 00000000:00:04.0, {T4}, 0 MiB, 15360 MiB\n"
             f"1, GPU-bbbb, 00000000:00:05.0, {T4}, 0 MiB, 15360 MiB\n"),
    "t4": ("index, uuid, pci.bus_id, name, memory.used [MiB], memory.total [MiB]\n"
           f"0, GPU-aaaa, 00000000:00:04.0, {T4}, 0 MiB, 15360 MiB\n"),
    "a100x8": "index, name\n" + "".join(f"{i}, NVIDIA A100-SXM4-80GB\n" for i in range(8)),
}


def _gpus(n, name=T4):
    return [GpuInfo(index=i, name=name) for i in range(n)]


def test_plan_follows_the_gpu_count():
    assert [s.name for s in gc.plan(_gpus(1))] == ["split"]
    assert [s.name for s in gc.plan(_gpus(2))] == ["split", "two"]
    assert [s.name for s in gc.plan(_gpus(8, "A100"))] == ["split", "two"]
    assert gc.plan(_gpus(2), "two") == [gc.SHAPES["two"]] and gc.SHAPES["two"].visible == "0,1"
    assert gc.SHAPES["split"].visible == "0" and gc.SHAPES["split"].replicas == 2


def test_plan_refuses_clearly():
    with pytest.raises(ValueError, match="Nothing was installed or run"):
        gc.plan([])
    with pytest.raises(ValueError, match="need 2 GPUs"):
        gc.plan(_gpus(1), "two")
    with pytest.raises(ValueError, match="unknown"):
        gc.plan(_gpus(2), "four")


def test_parse_memory():
    assert gc.parse_memory("0, 1200\n1, 35\n") == {0: 1200, 1: 35}
    with pytest.raises(ValueError, match="line 1"):
        gc.parse_memory("0, N/A\n")


def test_render_report():
    rows = [{"notebook": "00_start_here.ipynb", "result": "ok", "seconds": 12.3, "peak_mib": 900}]
    text = gc.render_report(T4, gc.SHAPES["two"], rows)
    assert "Tesla T4" in text and "CUDA_VISIBLE_DEVICES=0,1" in text and "| 00_start_here.ipynb | ok | 12 | 900 |" in text
    with pytest.raises(ValueError):
        gc.render_report(T4, gc.SHAPES["two"], [])


def test_peak_memory_refuses_a_bad_interval():
    with pytest.raises(ValueError, match="interval"):
        gc.PeakMemory([0], interval=0)


def _fake_smi(tmp_path, csv):
    exe = tmp_path / "nvidia-smi"
    exe.write_text("#!/bin/sh\ncat <<'EOF'\n" + csv + "EOF\n")
    exe.chmod(0o755)
    return dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}")


@pytest.mark.parametrize("machine, shapes", [("t4x2", "split two"), ("t4", "split"), ("a100x8", "split two")])
def test_probe_with_faked_nvidia_smi(tmp_path, machine, shapes):
    env = _fake_smi(tmp_path, CSV[machine])
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gpu_check.py"), "probe"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.split() == shapes.split(), proc.stdout + proc.stderr


def test_make_gpu_check_on_a_gpu_less_machine_stops_and_touches_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "MAKEFLAGS"}
    env["PATH"] = ":".join(p for p in env["PATH"].split(":") if not (Path(p) / "nvidia-smi").exists())
    before = sorted(p.name for p in ROOT.iterdir())
    proc = subprocess.run(["make", "-s", "gpu-check", "VENV=" + str(tmp_path / "venv")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "needs a machine with an NVIDIA GPU" in proc.stdout and "Nothing was installed or run" in proc.stdout
    assert not (tmp_path / "venv").exists() and sorted(p.name for p in ROOT.iterdir()) == before


def test_the_kaggle_cell_runs_every_shape_of_a_t4x2(tmp_path):
    """CONTRIBUTING's Kaggle cell: its loop runs `run` once per shape the probe finds (nvidia-smi faked as T4 x2)."""
    import re

    import generate  # tools/generate.py: the cell is generated into CONTRIBUTING.md

    block = re.search(r"```bash\n(.*?)```", generate.kaggle_cell(ROOT), re.S).group(1)
    [loop] = [line[1:] for line in block.splitlines() if line.startswith("!for ")]
    pins = (ROOT / "requirements-kaggle.txt").read_text()
    for pin in re.findall(r"(\S+==\S+)", block):
        assert pin in pins, f"the Kaggle cell installs {pin}, the kaggle stack pins otherwise"
    env = _fake_smi(tmp_path, CSV["t4x2"])
    shim = tmp_path / "python"        # `python` as on Kaggle; `run` only records what it would run
    shim.write_text(f'#!/bin/sh\nif [ "$2" = run ]; then echo "RUN $3 $4 $5"; else exec {sys.executable} "$@"; fi\n')
    shim.chmod(0o755)
    proc = subprocess.run(["bash", "-c", loop], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["RUN split --out /kaggle/working/gpu-check",
                                           "RUN two --out /kaggle/working/gpu-check"], proc.stdout
