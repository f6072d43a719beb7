"""The "2 GPUs in 5 minutes" quick start: one script, three copies that must not drift, and it runs alone.

The script lives in quickstart/train_2gpus.py. Lesson 00 writes it with one %%writefile cell and the README
shows it under the heading "## 2 GPUs in 5 minutes": all three must be the same text. It must run in a fresh
process, from an empty folder, where the course's helpers cannot be imported, as a learner who pasted it runs it.
"""

import ast
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "quickstart" / "train_2gpus.py"
NOTEBOOK = ROOT / "notebooks" / "00_start_here.ipynb"
README = ROOT / "README.md"
HEADING = "## 2 GPUs in 5 minutes"
MAX_LINES = 60


def _script() -> str:
    return SCRIPT.read_text(encoding="utf-8")


def _writefile_cell() -> tuple[str, str]:
    """(magic line, body) of lesson 00's %%writefile cell for the script."""
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    found = [("".join(c["source"])) for c in cells
             if c["cell_type"] == "code" and "".join(c["source"]).startswith("%%writefile")
             and "train_2gpus.py" in "".join(c["source"]).splitlines()[0]]
    assert len(found) == 1, f"lesson 00 must write train_2gpus.py in exactly one %%writefile cell, found {len(found)}"
    magic, _, body = found[0].partition("\n")
    return magic, body


def _readme_block() -> str:
    text = README.read_text(encoding="utf-8")
    assert HEADING in text.splitlines(), (
        f"README.md has no '{HEADING}' section: paste the quick-start section (heading, two sentences, the "
        "```python block = quickstart/train_2gpus.py, how to run it) into README.md")
    section = text.split(HEADING + "\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, f"the README's '{HEADING}' section needs exactly one ```python block, has {len(blocks)}"
    return blocks[0]


def test_script_is_short_and_needs_no_helpers():
    text = _script()
    assert len(text.splitlines()) <= MAX_LINES, f"{len(text.splitlines())} lines (at most {MAX_LINES})"
    tree = ast.parse(text)
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported == {"os", "keras", "tensorflow", "sklearn"}, imported
    for call in ("tf.config.list_physical_devices(\"GPU\")", "tf.config.set_logical_device_configuration(",
                 "tf.distribute.MirroredStrategy()", "* strategy.num_replicas_in_sync", "drop_remainder=True",
                 "strategy.extended.worker_devices", "learning_rate = ", "with strategy.scope():",
                 "model.compile(", "model.fit(",
                 'keras.callbacks.ModelCheckpoint("best.keras", monitor="val_accuracy", save_best_only=True',
                 "initial_value_threshold=", "keras.callbacks.BackupAndRestore(", "load_digits",
                 'print(f"replicas: {strategy.num_replicas_in_sync} on',
                 "assert strategy.num_replicas_in_sync == max(len(gpus), 2)"):
        assert call in text, f"the quick start must write {call}"


def test_lesson_00_writes_the_same_script():
    magic, body = _writefile_cell()
    assert magic == "%%writefile {scratch}/train_2gpus.py", magic
    assert body + "\n" == _script(), "lesson 00's %%writefile cell and quickstart/train_2gpus.py differ"


def test_readme_shows_the_same_script():
    assert _readme_block() == _script(), f"README.md's '{HEADING}' block and quickstart/train_2gpus.py differ"


@pytest.mark.slow
@pytest.mark.one_stack(reason="lesson 00 runs these same bytes on every stack (nbval); this run adds only the empty "
                       "folder and the helpers kept out, which no stack changes")
def test_runs_alone_in_an_empty_folder(tmp_path):
    (tmp_path / "train_2gpus.py").write_text(_script(), encoding="utf-8")
    no_helpers = ("import runpy, sys; sys.modules['helpers'] = None; "   # `import helpers` fails in this process
                  "runpy.run_path('train_2gpus.py', run_name='__main__')")
    run = subprocess.run([sys.executable, "-c", no_helpers], cwd=tmp_path, capture_output=True, text=True,
                         timeout=90)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    replicas = [ln for ln in lines if ln.startswith("replicas: ")]
    assert len(replicas) == 1 and int(replicas[0].split()[1]) >= 2, run.stdout
    assert "device:" in replicas[0], "the script prints the replicas' devices"
    assert any(ln.startswith("best.keras reloads: val_accuracy ") for ln in lines), run.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.keras", "train_2gpus.py"]   # backup/ removed



#: Run the quick start, but SIGKILL it right after BackupAndRestore saved epoch N (sys.argv[1]); print each
#: epoch's val_accuracy first (the progress line of the killed epoch never comes). The script itself is unchanged.
_KILLED_AFTER = """
import os, runpy, signal, sys
import keras
sys.modules["helpers"] = None
kill_after, save = int(sys.argv[1]), keras.callbacks.BackupAndRestore.on_epoch_end
def on_epoch_end(self, epoch, logs=None):
    save(self, epoch, logs)
    print("epoch", epoch + 1, "val_accuracy", logs["val_accuracy"], flush=True)
    if epoch + 1 == kill_after:
        os.kill(os.getpid(), signal.SIGKILL)
keras.callbacks.BackupAndRestore.on_epoch_end = on_epoch_end
runpy.run_path("train_2gpus.py", run_name="__main__")
"""


def _untrain(weights_h5: Path) -> None:
    """Overwrite the model's weights in a BackupAndRestore file with fresh small random ones (the optimizer's
    state and the epoch counter stay): the resumed epoch then starts almost from scratch and ends worse."""
    import h5py
    import numpy as np

    rng = np.random.default_rng(0)
    with h5py.File(weights_h5, "r+") as f:
        for layer in f["layers"].values():
            for var in layer["vars"].values():
                var[...] = rng.normal(0, 0.05, var.shape) if var.ndim == 2 else 0.0


@pytest.mark.slow
def test_a_resumed_run_keeps_the_best_model(tmp_path):
    """Killed after epoch 5 (the best so far), resumed from a backup whose epoch 6 is worse: best.keras must still
    be epoch 5's model. (Before initial_value_threshold, the resumed ModelCheckpoint started with best=None and
    epoch 6 overwrote best.keras.)"""
    (tmp_path / "train_2gpus.py").write_text(_script(), encoding="utf-8")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    killed = subprocess.run([sys.executable, "-c", _KILLED_AFTER, "5"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120, env=env)
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr[-3000:])
    before = [float(ln.split()[-1]) for ln in killed.stdout.splitlines() if ln.startswith("epoch ")]
    assert len(before) == 5 and (tmp_path / "backup").is_dir(), killed.stdout
    _untrain(tmp_path / "backup" / "latest.weights.h5")

    no_helpers = "import runpy, sys; sys.modules['helpers'] = None; runpy.run_path('train_2gpus.py', run_name='__main__')"
    resumed = subprocess.run([sys.executable, "-c", no_helpers], cwd=tmp_path, capture_output=True, text=True,
                             timeout=120, env=env)
    after = [float(m) for m in re.findall(r"val_accuracy: ([0-9.]+)", resumed.stdout)]
    assert len(after) == 1 and after[0] < max(before) - 0.1, (  # the set-up: one epoch left, and a worse one
        f"expected one resumed epoch worse than the best of {before}: {after}\n{resumed.stdout}")
    reloads = [ln for ln in resumed.stdout.splitlines() if ln.startswith("best.keras reloads: val_accuracy ")]
    assert reloads, resumed.stdout + resumed.stderr[-3000:]
    kept = float(reloads[0].split()[-1])
    assert abs(kept - max(before)) < 0.002, (
        f"best.keras holds val_accuracy {kept}: the resumed epoch ({after[0]}) overwrote the best before the kill "
        f"({max(before):.4f})")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert not (tmp_path / "backup").exists()
