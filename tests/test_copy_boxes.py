"""The "Copy this" box that ends lessons 03-12 runs as it stands, in a fresh process that has no course helpers.

The box's shape (one ```python block, before the Summary, helper-free, ending in asserts) is nblint's copy-box
rule. A learner pastes the box into a project, so here ``import helpers`` fails and the cwd is empty.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import nblint
import pytest
import registry  # tools/registry.py

#: Every lesson with a box (nblint's copy-box rule: 03 on); 12's box starts torchrun itself: `python box.py`.
LESSONS = [ls.number for ls in registry.load() if ls.number >= "03"]
#: The JAX lessons: their registry entries say so (nblint checks the flag against the Setup cell).
JAX_LESSONS = [ls.number for ls in registry.load() if ls.jax]
#: helpers cannot be imported, whatever is installed: the box must stand on its own.
_NO_HELPERS = ("import sys; sys.modules['helpers'] = None; __file__ = 'box.py'; "
               "exec(compile(open('box.py').read(), 'box.py', 'exec'))")


@pytest.mark.slow
@pytest.mark.parametrize("number", LESSONS)
def test_copy_this_box_runs_without_helpers(number, tmp_path):
    [path] = sorted(nblint.NOTEBOOKS.glob(f"{number}_*.ipynb"))
    [(_, markdown)] = nblint.copy_boxes(json.loads(path.read_text(encoding="utf-8")))
    (tmp_path / "box.py").write_text(nblint.box_code(markdown), encoding="utf-8")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MULTIGPU_", "KERAS_BACKEND", "XLA_FLAGS", "JAX_PLATFORMS"))}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([sys.executable, "-c", _NO_HELPERS], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, f"{path.name}'s box failed:\n{proc.stdout[-1500:]}\n{proc.stderr[-3000:]}"


@pytest.mark.parametrize("number", JAX_LESSONS)
def test_jax_boxes_keep_tensorflow_off_the_gpus_and_use_a_power_of_two(number):
    """jax#39167: TensorFlow beside JAX on two GPUs breaks NCCL, so each JAX box hides the GPUs from it before JAX
    starts (or, needing no TensorFlow, keeps it out: 13); its devices follow the JAX rule (2+ GPUs: a power of two
    of them, else the CPU split in two)."""
    [path] = sorted(nblint.NOTEBOOKS.glob(f"{number}_*.ipynb"))
    [(_, markdown)] = nblint.copy_boxes(json.loads(path.read_text(encoding="utf-8")))
    code = nblint.box_code(markdown)
    keep_off = [k for k in ('tf.config.set_visible_devices([], "GPU")', 'sys.modules.setdefault("tensorflow", None)')
                if k in code]
    assert keep_off and code.index(keep_off[0]) < code.index("import jax")
    assert "gpus[:2 ** (len(gpus).bit_length() - 1)] if len(gpus) >= 2 else jax.devices(\"cpu\")" in code
    assert 'print("devices:", devices)' in code and 'print(f"success' in code
