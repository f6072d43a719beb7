"""Lesson 08's checkers explain wrong answers: each case asserts the sentence the learner reads.

tests/test_exercises.py runs every solution, the unattempted answer, answers of the wrong kind and the hints.
"""

import json
from pathlib import Path

import pytest
from keras import distribution as kd
from test_exercises import not_yet as _not_yet  # the shared checks

from helpers import exercises
from helpers.subproc import run_python
from helpers.versions import at_least

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "08_keras3_distribution_api.ipynb"


def _cell_code(key):
    """The code the notebook's exercise cell shows above `answer = ...` (the broken version to fix)."""
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    cell = next("".join(c["source"]) for c in cells
                if c["cell_type"] == "code" and f'check("{key}", answer)' in "".join(c["source"]))
    return cell.split("\nanswer = ...")[0]


def _snippet(key, **names):
    """Run that code unchanged; the names it defines."""
    scope = dict(names)
    exec(_cell_code(key), scope)  # noqa: S102 - the notebook's own snippet
    return scope


def _dp(devices):
    return kd.DataParallel(devices=devices)


def _one_row(devices):                    # every device on 'model': the batch is never split
    mesh = kd.DeviceMesh((1, len(devices)), ("data", "model"), devices)
    layout_map = kd.LayoutMap(mesh)
    layout_map[".*d1/kernel"] = (None, "model")
    layout_map[".*d2/kernel"] = ("model", None)
    return kd.ModelParallel(layout_map=layout_map, batch_dim_name="data")


def _guide_keys(devices):                 # 2023 guide keys: match nothing on Keras >= 3.14; the batch over 'model'
    mesh = kd.DeviceMesh((len(devices) // 2, 2), ("data", "model"), devices)
    layout_map = kd.LayoutMap(mesh)
    layout_map["d1/kernel"] = (None, "model")
    layout_map[".*d2/kernel"] = ("model", None)
    return kd.ModelParallel(layout_map=layout_map, batch_dim_name="model")


def _four_only(devices):                  # the mesh of 4 devices written in: "any even number" fails on 2
    mesh = kd.DeviceMesh((2, 2), ("data", "model"), devices)
    layout_map = kd.LayoutMap(mesh)
    layout_map[".*d1/kernel"] = (None, "model")
    layout_map[".*d2/kernel"] = ("model", None)
    return kd.ModelParallel(layout_map=layout_map, batch_dim_name="data")


@pytest.mark.slow
@pytest.mark.parametrize("answer, phrases", [
    (_dp, ["returned a DataParallel: only a ModelParallel lays weights out"]),
    (_four_only, ["on 2 devices, building the lesson's mlp() under your distribution fails"]),
    (_one_row, ["on 4 devices", "the 'model' axis should have 2 devices", "is split over 'data', 64 rows a device, "
                "want 32 over 'data'"]),
    (_guide_keys, ["each device holds d1/kernel as (64, 128)" if at_least("keras", "3.14") else "on 4 devices",
                   "is split over 'model', 32 rows a device", "which must be the 'data' axis"]),
], ids=["DataParallel", "4 devices only", "mesh (1, N)", "guide keys, batch over model"])
def test_08_1_wrong_distributions_say_what_is_wrong(answer, phrases):
    """Built in a fresh JAX process with 4 devices (this test process runs Keras on TensorFlow)."""
    _not_yet("08.1", answer, *phrases)


def test_08_2_lookup_on_tensorflow(replicas):
    from keras import distribution as kd

    text = exercises.verdict("08.2", _snippet("08.2", kd=kd)["guide_layout"])[1]
    if at_least("keras", "3.14"):
        assert "not yet" in text and "'d1/kernel' matches nothing" in text, text
    else:
        assert "correct" in text and "From Keras 3.14 keys must match the whole path" in text, text


class _AnyAxis(str):
    """An axis name that says it equals any other."""

    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


def test_08_2_an_axis_that_equals_anything_fails(replicas):
    def guide_layout(mesh):
        layout_map = kd.LayoutMap(mesh)
        layout_map[".*d1/kernel"] = (None, "model")
        layout_map[".*d1/bias"] = ("model",)
        layout_map[".*d2/kernel"] = (_AnyAxis("data"), None)       # passes Keras's own check of the axis names
        return layout_map

    _not_yet("08.2", guide_layout, "mlp/d2/kernel gets ('data', None), want ('model', None)")


JAX_CHECK = """
import json
from keras import distribution as kd
from helpers import exercises
from helpers.subproc import run_python
from helpers.versions import at_least
broken = {"kd": kd}
exec(BROKEN, broken)
out = {"08.2": exercises.verdict("08.2", exercises.get("08.2").solution())}
out["broken"] = exercises.verdict("08.2", broken["guide_layout"])
print("RESULT " + json.dumps(out))
"""


@pytest.mark.parametrize("devices", [4, 2])                  # a 2x2 mesh, and 1x2 as on a T4 x2
@pytest.mark.slow
def test_08_2_reads_real_shardings_under_jax(devices):
    """The notebook's kernel: JAX with 4 CPU devices (or 2, as on a T4 x2), where ModelParallel really shards."""
    code = JAX_CHECK.replace("BROKEN", repr(_cell_code("08.2")))       # the notebook's broken snippet
    result = run_python(code, env={"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
                                   "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"},
                        timeout=240, echo=False)
    assert result.ok, result.stderr[-2000:]
    line = next(ln for ln in result.stdout.splitlines() if ln.startswith("RESULT "))
    out = json.loads(line[len("RESULT "):])
    ok, text = out["08.2"]
    assert ok and "read from each weight's jax sharding" in text, text
    ok, text = out["broken"]
    if at_least("keras", "3.14"):
        assert not ok and "mlp/d1/kernel gets (None, None)" in text, text
    else:
        assert ok and "From Keras 3.14" in text, text
