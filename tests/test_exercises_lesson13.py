"""Exercises 13.1 (restore on another device count) and 13.2 (fix a broken restore): right and wrong answers, each
checked as the checker checks them, on 4 host devices with Keras on JAX; and the verdicts on made-up facts.

This test process runs TensorFlow, so the answers run in one fresh JAX subprocess (``facts_here``, the checker's
part that runs in its own process); the notebook's broken ``resume`` travels there as its source. Each verdict is
printed: TROUBLESHOOTING.md's entry for a split that does not divide 3 devices is produced here on every stack
(lesson 13's kernel shows it only where it has 4 devices).
"""

import json
from pathlib import Path

import pytest

from helpers.exercises import lesson13
from helpers.subproc import run_python

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "13_sharded_checkpoints.ipynb"


def broken_resume() -> str:
    """The notebook's exercise 2 cell, up to ``answer = ...``: the broken ``resume``."""
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    [cell] = ["".join(c["source"]) for c in cells if c["cell_type"] == "code" and 'check("13.2"' in "".join(c["source"])]
    return cell.split("\nanswer = ...")[0]


VERDICTS = '''
import json, keras
from keras import distribution as kd
from helpers import exercises
from helpers.exercises import lesson13 as L
from helpers.exercises.lesson13 import fsdp, mlp

exec(BROKEN)                             # 13.2 as the notebook gives it

def naive(path, devices):                # 13.1, wrong: the lesson's layout on every count, 3 included
    with fsdp(devices).scope():
        model = mlp()
        model.load_weights(path)
    return model

def outside(path, devices):              # 13.1, wrong: built and restored outside any distribution
    model = mlp()
    model.load_weights(path)
    return model

def unbuilt(path, devices):              # 13.2, half fixed: mesh and scope right, the optimizer not built
    with fsdp(devices).scope():
        model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation="relu", name="d1"),
                                  keras.layers.Dense(10, name="d2")], name="mlp")
        model.compile(keras.optimizers.Adam(1e-3, name="adam"), "mse")
        model.load_weights(path)
    return model

def unnamed(path, devices):              # 13.2, half fixed: built, but a second Adam in the process: adam_1...
    with fsdp(devices).scope():
        model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation="relu", name="d1"),
                                  keras.layers.Dense(10, name="d2")], name="mlp")
        model.compile(keras.optimizers.Adam(1e-3), "mse")
        model.optimizer.build(model.trainable_variables)
        model.load_weights(path)
    return model

out = {}
for key, answers in (("13.1", {"right": exercises.get("13.1").solution(), "naive": naive, "outside": outside}),
                     ("13.2", {"right": exercises.get("13.2").solution(), "notebook": resume, "unbuilt": unbuilt,
                               "unnamed": unnamed})):
    for name, answer in answers.items():
        out[f"{key} {name}"] = L.judge(L.facts_here(answer, L.COUNTS[key]))
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def verdicts():
    code = f"BROKEN = {broken_resume()!r}\n" + VERDICTS
    run = run_python(code, env={"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
                                "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}, timeout=900, echo=False)
    assert run.ok, run.stderr[-3000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    for name, (ok, text) in found.items():
        print(f"{name}: {'correct' if ok else 'not yet'}: {text}")     # the error index reads these
    return found


@pytest.mark.slow   # one JAX process: seven checkpoints and their restores, about a minute
def test_right_answers_pass_on_1_to_4_devices(verdicts):
    ok, text = verdicts["13.1 right"]
    assert ok and "1, 2, 3 devices" in text, text
    ok, text = verdicts["13.2 right"]
    assert ok and "2, 4 devices" in text, text


@pytest.mark.slow   # the same process as above
def test_wrong_answers_say_what_is_wrong(verdicts):
    ok, text = verdicts["13.1 naive"]
    assert not ok and "on 3 devices" in text and "64 rows do not split evenly" in text, text
    assert "(full shape: (64, 256)" in text, text
    ok, text = verdicts["13.1 outside"]               # Orbax lays it out as saved (4 devices), h5 on one device
    assert not ok and ("which you were not given" in text or "is whole on 1 device" in text), text
    ok, text = verdicts["13.2 notebook"]
    assert not ok and "on 2 devices" in text and "Shape does not match the number of devices" in text, text
    ok, text = verdicts["13.2 unbuilt"]
    assert not ok and "the optimizer has 2 variables and the checkpoint 10" in text, text
    ok, text = verdicts["13.2 unnamed"]               # Orbax matches by name; Keras 3.13's .weights.h5 by position
    if lesson13.ORBAX:
        assert not ok and "optimizer variable(s) did not" in text and "adam_" in text, text
    else:
        assert ok, text


def _facts(k=2, **change):
    """Made-up facts of a restore on k devices that is right, with ``change`` applied."""
    saved = [["mlp/d1/kernel", "a"], ["mlp/d1/bias", "b"], ["adam/iteration", "c"], ["adam/mlp_d1_kernel_momentum", "d"]]
    devices = list(range(k))
    weights = [{"path": p, "sha": s, "devices": devices, "split": p.endswith("kernel") and k > 1} for p, s in saved[:2]]
    slots = [{"path": p, "sha": s, "devices": devices, "split": False} for p, s in saved[2:]]
    facts = {"k": k, "error": None, "given": devices, "saved": saved, "weights": weights, "slots": slots}
    facts.update(change)
    return facts


def test_judge_names_the_first_thing_wrong():
    assert lesson13.judge([_facts(1), _facts(2)])[0]
    ok, text = lesson13.judge([_facts(2, error="ValueError: Shape does not match the number of devices. ...")])
    assert not ok and "as many places as the devices" in text
    right = _facts(2)
    ok, text = lesson13.judge([_facts(2, slots=right["slots"][:1])])
    assert not ok and "optimizer has 1 variables and the checkpoint 2" in text
    ok, text = lesson13.judge([_facts(2, slots=[right["slots"][0], {**right["slots"][1], "path": "adam_1/x", "sha": "z"}])])
    assert not ok and "yours is adam_1/x" in text
    ok, text = lesson13.judge([_facts(2, weights=[{**right["weights"][0], "split": False}, right["weights"][1]])])
    assert not ok and "is whole on 2 device(s)" in text
    ok, text = lesson13.judge([_facts(2, given=[0])])
    assert not ok and "which you were not given" in text
