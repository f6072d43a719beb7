"""Lesson 13: its two job files are its Copy box, the kernel's model is the job's, and the box loses nothing when it
is killed inside any of its writes, then resumed on fewer devices.

The kill tests run the box itself (helpers-free) with a hook that sends ``SIGKILL`` to the job just before one of
its commits: the rename of ``log.json`` (its scores), or of an epoch's checkpoint (Orbax's ``<epoch>`` folder, or
Keras 3.13's ``<epoch>.weights.h5``). Each resumed run must start after the last whole checkpoint, restore the
state logged for it bit for bit (the box asserts its fingerprint), and end with every epoch logged once.
"""

from __future__ import annotations

import ast
import json
import re
import signal
import textwrap
from pathlib import Path

import nblint
import pytest

from helpers.exercises import lesson13
from helpers.resume import TrainingRun

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "13_sharded_checkpoints.ipynb"
FILES = nblint.written_files(json.loads(NOTEBOOK.read_text(encoding="utf-8")))
IMPORT = "from sharded_model import "


def merged(model: str, train: str) -> str:
    """Both job files as one: the job's opening comment, the model file without its own, then the job without
    the import of the model file and without any import line the model file already has."""
    lines, have = train.splitlines(), model.splitlines()
    head = [ln for ln in lines if ln.startswith("#")][:2]
    rest = [ln for ln in lines[len(head):] if not ln.startswith(IMPORT)
            and not (ln.startswith(("import ", "from ")) and ln in have)]
    return "\n".join(head + have[1:] + rest) + "\n"


def box() -> str:
    [(_, markdown)] = nblint.copy_boxes(json.loads(NOTEBOOK.read_text(encoding="utf-8")))
    return nblint.box_code(markdown)


def test_the_copy_box_is_the_two_job_files():
    assert IMPORT + "ORBAX, fsdp, mlp, sha256" in FILES["sharded_train.py"]
    assert box() == merged(FILES["sharded_model.py"], FILES["sharded_train.py"])
    assert "sharded_model" not in box()


def test_the_kernels_model_is_the_jobs():
    """The notebook imports mlp, fsdp and sha256 from helpers.exercises.lesson13: the same code as the job's file."""
    def functions(source):
        return {n.name: ast.dump(n) for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}
    job = functions(FILES["sharded_model.py"])
    here = functions(Path(lesson13.__file__).read_text(encoding="utf-8"))
    for name in ("mlp", "fsdp", "sha256"):
        assert job[name] == here[name], f"{name} differs between sharded_model.py and helpers/exercises/lesson13.py"


def test_the_worker_and_the_slurm_job_write_what_the_notebook_reads():
    worker, job = FILES["ckpt_worker.py"], FILES["ckpt_job.sbatch"]
    assert re.search(r"^kd\.initialize\(\)  ", worker, re.M) and "auto_shard_dataset = False" in worker and "OrbaxCheckpoint" in worker
    assert re.search(r"^srun --kill-on-bad-exit=1 python ckpt_worker\.py \"\$@\"$", job, re.M)
    assert "--ntasks=2" in job and "unset TF_CONFIG" in job


#: Runs the box with SIGKILL sent just before the ``n``-th rename whose target is named ``name`` (argv: name n).
KILL_HOOK = textwrap.dedent("""
    import os, signal, sys
    name, n = sys.argv[1], int(sys.argv[2])
    seen = []
    def hooked(real):
        def rename(src, dst, *args, **kwargs):
            if os.path.basename(os.fspath(dst)) == name:
                seen.append(dst)
                if len(seen) == n:
                    os.kill(os.getpid(), signal.SIGKILL)      # inside the write: its commit never happens
            return real(src, dst, *args, **kwargs)
        return rename
    os.rename, os.replace = hooked(os.rename), hooked(os.replace)
    sys.argv = ["box.py", *sys.argv[3:]]
    exec(compile(open("box.py").read(), "box.py", "exec"), {"__name__": "__main__"})
""")


def _cpus(n: int) -> dict:
    return {"JAX_PLATFORMS": "cpu", "XLA_FLAGS": f"--xla_force_host_platform_device_count={n}", "PYTHONPATH": ""}


@pytest.mark.slow   # four training processes, about a minute: the kill at each commit, then the resume
@pytest.mark.parametrize("commit", ["log.json", "checkpoint"])
def test_a_kill_inside_a_write_loses_nothing(commit, tmp_path):
    (tmp_path / "box.py").write_text("import sys; sys.modules['helpers'] = None\n" + box())
    (tmp_path / "hook.py").write_text(KILL_HOOK)
    name = "log.json" if commit == "log.json" else ("2" if lesson13.ORBAX else "2.weights.h5")
    nth = 3 if commit == "log.json" else 1               # epoch 2's scores, or epoch 2's checkpoint
    run = tmp_path / "run"
    with TrainingRun([str(tmp_path / "hook.py"), name, str(nth), str(run), "5"], tmp_path, env=_cpus(4)) as first:
        first.wait(timeout=300)
    assert first.returncode == -signal.SIGKILL, first.log()
    whole = sorted(int(m[1]) for p in (run / "latest").iterdir() if (m := re.fullmatch(r"(\d+)(\.weights\.h5)?", p.name)))
    assert whole and whole[-1] <= 1, whole                # epoch 2's checkpoint never committed (1's may be late)
    with TrainingRun([str(tmp_path / "box.py"), str(run), "5"], tmp_path, env=_cpus(2)) as second:
        assert second.wait(timeout=300) == 0, second.log()
    log, k = second.log(), whole[-1] + 1
    assert f"resumed at epoch {k}," in log and "as saved" in log, log   # the fingerprint of that epoch's state
    assert not re.search(rf"^Epoch [1-{k}]/", log, re.M) and re.search(rf"^Epoch {k + 1}/5", log, re.M), log
    before = [float(v) for v in re.findall(r"val_loss: ([\d.]+)", first.log())][:k]
    assert f"best val_loss {min(before):.4f}" in log, (before, log)
    scores = json.loads((run / "log.json").read_text())
    assert sorted(map(int, scores)) == [0, 1, 2, 3, 4] and f"success: epochs {k}-4 on 2 devices" in log
