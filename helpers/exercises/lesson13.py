"""Exercises of 13_sharded_checkpoints, checked on the devices, in a fresh process with a time limit.

Both restore a checkpoint of the lesson's model into a model built by the learner's function. The checker saves
that checkpoint on 4 devices (an Orbax folder on Keras 3.14+ with ``orbax-checkpoint``, a ``.weights.h5`` file on
Keras 3.13: what ``model.load_weights(path)`` reads), runs the answer on fewer devices and compares every weight and
both Adam slots with what was saved, bit for bit, and where each variable lives. It runs in a fresh Keras-on-JAX
process with 4 host devices (:data:`TIME_LIMIT` seconds at most), to which the answer travels as its source; the
tests call :func:`facts_here` inside such a process.

The model, its layout and its fingerprint are the lesson's ``sharded_model.py`` (tests/test_lesson13.py keeps them
equal), so lesson 13's kernel imports them from here.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import inspect
import json
import subprocess
import tempfile
import textwrap
from pathlib import Path
from typing import Callable

import keras
import numpy as np
from keras import distribution as kd

from ..subproc import run_python
from . import JAX_TIME_LIMIT_S, error_line, register

#: ``keras.callbacks.OrbaxCheckpoint``: Keras 3.14+ exports it, and it needs the ``orbax-checkpoint`` package.
ORBAX = hasattr(keras.callbacks, "OrbaxCheckpoint") and importlib.util.find_spec("orbax") is not None
#: Seconds a check may take, the learner's restores included (a checkpoint, then 2 or 3 restores).
TIME_LIMIT = 240
#: The device counts each exercise restores on (out of the checking process's 4).
COUNTS = {"13.1": (1, 2, 3), "13.2": (2, 4)}


def mlp():                                                # fixed names: a restore matches variables by path
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation="relu", name="d1"),
                              keras.layers.Dense(10, name="d2")], name="mlp")
    model.compile(keras.optimizers.Adam(1e-3, name="adam"),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.optimizer.build(model.trainable_variables)      # the slots exist, so a restore fills them too
    return model


def fsdp(devices):                                        # FSDP: each kernel's rows split over the devices
    layout_map = kd.LayoutMap(kd.DeviceMesh((len(devices),), ("batch",), devices))
    layout_map[".*/kernel"] = ("batch", None)             # no LoRA weight (lora_kernel_a) matches
    return kd.ModelParallel(layout_map=layout_map, batch_dim_name="batch")


def sha256(model):                                        # every weight and slot, gathered: a check, not a need
    return hashlib.sha256(b"".join(np.asarray(v.value).tobytes() for v in model.weights
                                   + model.optimizer.variables)).hexdigest()[:16]


def data() -> tuple[np.ndarray, np.ndarray]:
    """The lesson's data: 1,280 rows of 64 features and a learnable label (the first 1,024 train)."""
    x = np.random.default_rng(0).normal(size=(1280, 64)).astype("float32")
    return x, (x[:, :10].argmax(axis=1)).astype("int32")


def save_checkpoint(folder: Path) -> tuple[str, dict]:
    """Train the lesson's model one epoch on 4 devices and checkpoint it into ``folder``; the path
    ``load_weights`` reads and ``[path, sha256]`` of every weight and optimizer variable, in order."""
    folder = Path(folder)
    x, y = data()
    with fsdp(kd.list_devices()[:4]).scope():
        keras.utils.set_random_seed(0)
        model = mlp()
        if ORBAX:
            path = folder / "ckpt"
            save = keras.callbacks.OrbaxCheckpoint(str(path), max_to_keep=1, save_on_background=False)
            model.fit(x[:1024], y[:1024], batch_size=64, epochs=1, verbose=0, callbacks=[save])
        else:
            model.fit(x[:1024], y[:1024], batch_size=64, epochs=1, verbose=0)
            path = folder / "ckpt.weights.h5"
            model.save_weights(path)
    saved = [[v.path, hashlib.sha256(np.asarray(v.value).tobytes()).hexdigest()]
             for v in model.weights + model.optimizer.variables]
    return str(path), saved


def _where(var) -> dict:
    """What a restored variable is and where it lives, as data."""
    value = var.value
    sharding = value.sharding
    return {"path": var.path, "sha": hashlib.sha256(np.asarray(value).tobytes()).hexdigest(),
            "devices": sorted(d.id for d in sharding.device_set),
            "split": not sharding.is_fully_replicated}


def facts_here(fn: Callable, counts) -> list[dict]:
    """In this process (Keras on JAX, 4+ devices): a checkpoint, then ``fn(path, devices)`` on the first ``k``
    devices for each ``k`` of ``counts``; what came out, as data (an error is data too)."""
    out = []
    with tempfile.TemporaryDirectory(prefix="lesson13-check-") as tmp:
        path, saved = save_checkpoint(Path(tmp))
        for k in counts:
            devices = kd.list_devices()[:k]
            facts = {"k": k, "error": None, "given": sorted(int(d.split(":")[1]) for d in devices), "saved": saved}
            try:
                model = fn(path, devices)
                if not isinstance(model, keras.Model):
                    raise TypeError(f"it returned {type(model).__name__}, not the Keras model")
                facts["weights"] = [_where(v) for v in model.weights]
                facts["slots"] = [_where(v) for v in model.optimizer.variables]
            except Exception as exc:  # the learner's code fails: that is the verdict
                facts["error"] = error_line(exc, 400)
            out.append(facts)
    return out


def facts(key: str, fn: Callable) -> list[dict]:
    """:func:`facts_here` for exercise ``key``'s device counts, in a fresh Keras-on-JAX process with 4 host devices
    and a time limit, which re-creates ``fn`` from its source (kd, keras, np, mlp, fsdp and ORBAX defined)."""
    try:
        src = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        raise ValueError("cannot read this function's source: define it in a cell or a file") from None
    code = f"""
        import json, keras, numpy as np
        from keras import distribution as kd
        from helpers.exercises.lesson13 import ORBAX, facts_here, fsdp, mlp
        namespace = dict(kd=kd, keras=keras, np=np, mlp=mlp, fsdp=fsdp, ORBAX=ORBAX)
        exec({src!r}, namespace)
        print(json.dumps(facts_here(namespace[{fn.__name__!r}], {COUNTS[key]!r})))
    """
    env = {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    try:
        run = run_python(code, env=env, timeout=TIME_LIMIT, echo=False)
    except subprocess.TimeoutExpired:
        raise TimeoutError(f"the check did not finish within {TIME_LIMIT} s (stopped): does your function "
                           "wait for something that never comes?") from None
    if not run.ok:
        raise RuntimeError(f"checking in a JAX subprocess failed: {run.last_error_line() or run.stderr[-300:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def judge(all_facts: list[dict]) -> tuple[bool, str]:
    """The verdict on :func:`facts_here`'s data: the first thing wrong, on the first device count it shows."""
    for f in all_facts:
        on = f"on {f['k']} device{'s' if f['k'] > 1 else ''}"
        if f["error"]:
            why = ""
            if "does not match the number of devices" in f["error"]:
                why = " (a mesh must have as many places as the devices you give it)"
            elif "divisible by" in f["error"] or "partitioned" in f["error"]:
                why = " (64 rows do not split evenly over this many devices: use some of them, or another layout)"
            return False, f"{on}, your function fails: {f['error']}{why}"
        saved, n_weights = f["saved"], len(f["weights"])
        if [p for p, _ in saved[:n_weights]] != [w["path"] for w in f["weights"]]:
            return False, (f"{on}, the model's weights are {[w['path'] for w in f['weights']]}, the checkpoint's "
                           f"{[p for p, _ in saved if not p.startswith('adam')]}: build the lesson's model")
        wrong = [p for (p, sha), w in zip(saved, f["weights"]) if w["sha"] != sha]
        if wrong:
            return False, f"{on}, {wrong[0]} is not what was saved ({len(wrong)} weight(s) differ)"
        slots = saved[n_weights:]
        if len(f["slots"]) != len(slots):
            return False, (f"{on}, the optimizer has {len(f['slots'])} variables and the checkpoint {len(slots)}: "
                           "its slots did not exist when the weights were loaded, so nothing filled them")
        wrong = [(p, s["path"]) for (p, sha), s in zip(slots, f["slots"]) if s["sha"] != sha]
        if wrong:
            return False, (f"{on}, the weights came back but {len(wrong)} optimizer variable(s) did not, e.g. "
                           f"{wrong[0][0]} (yours is {wrong[0][1]}): a restore matches them by name")
        got = f["weights"] + f["slots"]
        stray = sorted({d for v in got for d in v["devices"]} - set(f["given"]))
        if stray:
            return False, f"{on}, variables live on devices {stray}, which you were not given ({f['given']})"
        kernel = f["weights"][0]                              # mlp/d1/kernel
        if f["k"] >= 2 and (not kernel["split"] or len(kernel["devices"]) < 2):
            return False, (f"{on}, mlp/d1/kernel is whole on {len(kernel['devices'])} device(s): build the model "
                           "inside a distribution's scope that shards it")
    counts = ", ".join(str(f["k"]) for f in all_facts)
    return True, (f"restored on {counts} devices: every weight and both Adam slots bit for bit as saved, "
                  "each kernel sharded over the devices it was given")


def _check(key: str, answer) -> tuple[bool, str]:
    return judge(facts(key, answer))


# ---- 13.1: write the restore for another device count ----------------------------------------------


def _solve_restore():
    def restore(path, devices):
        use = devices[:2 ** (len(devices).bit_length() - 1)]   # a power of two of them: 64 rows split evenly
        with fsdp(use).scope():                               # build and restore inside the scope
            model = mlp()
            model.load_weights(path)
        return model
    return restore


register("13.1", title="restore a sharded checkpoint on another device count",
         checker=functools.partial(_check, "13.1"), solution=_solve_restore, expects="function", takes=2,
         time_limit=JAX_TIME_LIMIT_S,
         wants="a function restore(path, devices) that returns the restored Keras model",
         hint="the checker tries 1, 2 and 3 devices: what can 64 rows be split into? Build, and restore, where "
              "the layout applies.",
         giveaways=["bit_length", "power of two", "[:2", "load_weights", "with fsdp"], slow=True)


# ---- 13.2: find and fix a broken restore -----------------------------------------------------------


def _solve_resume():
    def resume(path, devices):
        layout_map = kd.LayoutMap(kd.DeviceMesh((len(devices),), ("batch",), devices))   # the devices given
        layout_map[".*/kernel"] = ("batch", None)
        with kd.ModelParallel(layout_map=layout_map, batch_dim_name="batch").scope():      # build inside
            model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation="relu", name="d1"),
                                      keras.layers.Dense(10, name="d2")], name="mlp")
            model.compile(keras.optimizers.Adam(1e-3, name="adam"),                        # the saved name
                          keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            model.optimizer.build(model.trainable_variables)                               # slots to fill
            model.load_weights(path)
        return model
    return resume


register("13.2", title="fix a restore that does not restore", checker=functools.partial(_check, "13.2"),
         solution=_solve_resume, expects="function", takes=2, time_limit=JAX_TIME_LIMIT_S,
         wants="a function resume(path, devices) that returns the restored Keras model",
         hint="three things: the mesh's size, where the model is built, and what the optimizer has (and is "
              "called) when the weights are loaded.",
         giveaways=["name=\"adam\"", "optimizer.build", "len(devices)", "inside the scope", "build(model"],
         slow=True)

