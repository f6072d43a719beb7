"""Exercises of 08_keras3_distribution_api.

They run in the notebook's JAX kernel and in the TensorFlow test process alike: 08.1 builds the model under the
answer in the kernel, else in a fresh JAX process; 08.2 reads real shardings under JAX and looks the paths up
elsewhere.
"""

from __future__ import annotations

import inspect
import re
import textwrap

import keras
import numpy as np
from keras import distribution as kd

from ..versions import at_least
from . import JAX_TIME_LIMIT_S, as_str, describe, error_line, jax_devices_here, register, run_in_jax


def _mlp():
    """The lesson's MLP: 64 -> d1 (128, relu) -> d2 (10, softmax), weight paths mlp/d1/kernel..."""
    return keras.Sequential([keras.Input((64,)), keras.layers.Dense(128, activation="relu", name="d1"),
                             keras.layers.Dense(10, activation="softmax", name="d2")], name="mlp")


def _mesh():
    """A ("data", "model") mesh as the lesson builds it: 2x2 where there are 4 or more devices, else 1x2 (1x1)."""
    devices = kd.list_devices()
    devices = devices[:4] if len(devices) >= 4 else devices[:2]
    shape = (2, 2) if len(devices) == 4 else (1, len(devices))
    return kd.DeviceMesh(shape, ("data", "model"), devices)


# ---- 08.1: a ModelParallel for any even number of devices ---------------------------------------------

def _facts_here(fn, n: int) -> dict:
    """Build the lesson's MLP under ``fn(devices)`` on this process's first ``n`` JAX devices; what came out."""
    devices = kd.list_devices()[:n]
    try:
        dist = fn(devices)
        if not (hasattr(dist, "scope") and hasattr(dist, "device_mesh")):   # DataParallel, ModelParallel
            raise TypeError(f"distribution_for(devices) returned {describe(dist)}, not a keras.distribution")
        with dist.scope():
            model = _mlp()
        batch = dist.get_data_layout((64, 64))
    except Exception as exc:  # the learner's code fails: that is the verdict
        return {"n": n, "error": error_line(exc)}
    mesh = dist.device_mesh
    kernels = {name: list(k.value.sharding.shard_shape(k.shape))
               for name, k in ((n_, model.get_layer(n_).kernel) for n_ in ("d1", "d2"))}
    axis = batch.axes[0]   # the batch dimension's mesh axis (None: every device gets the whole batch)
    rows = 64 // (mesh.shape[list(mesh.axis_names).index(axis)] if axis else 1)
    return {"n": n, "error": None, "kind": type(dist).__name__, "mesh": dict(zip(mesh.axis_names, mesh.shape)),
            "devices": int(np.prod(mesh.shape)), "kernels": kernels, "rows": rows, "batch_axis": axis}


def _facts(fn) -> list[dict]:
    """:func:`_facts_here` on N devices, then on 2 ("any even number": an answer must read the device count), in
    lesson 08's kernel (Keras on JAX: N its devices), else in a fresh JAX process with N = 4 devices, to which the
    answer travels as its source."""
    here = jax_devices_here()
    if here:
        return [_facts_here(fn, n) for n in dict.fromkeys((here, 2)) if n <= here]
    try:
        src = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        raise ValueError("cannot read this function's source: define it in a cell or a file") from None
    return run_in_jax(f"""
        import json, keras, numpy as np
        from keras import distribution as kd
        from helpers.exercises.lesson08 import _facts_here
        namespace = dict(kd=kd, keras=keras, np=np)
        exec({src!r}, namespace)
        print(json.dumps([_facts_here(namespace[{fn.__name__!r}], n) for n in (4, 2)]))
    """, 4)


def _check_distribution(answer):
    facts = _facts(answer)
    verdicts = [_judge_distribution(f) for f in facts]
    wrong = next((v for v in verdicts if not v[0]), None)
    if wrong:
        return wrong
    more = [f"{f['n']}" for f in facts[1:]]
    return True, verdicts[0][1] + (f"; right on {' and '.join(more)} devices too" if more else "")


def _judge_distribution(f: dict) -> "tuple[bool, str]":
    """The verdict on what building the MLP under the answer on ``f["n"]`` devices gave."""
    n = f["n"]
    if f["error"]:
        return False, f"on {n} devices, building the lesson's mlp() under your distribution fails: {f['error']}"
    if f["kind"] != "ModelParallel":
        return False, (f"distribution_for returned a {f['kind']}: only a ModelParallel lays weights out by a "
                       "LayoutMap (DataParallel replicates every weight)")
    mesh, wrong = f["mesh"], []
    if f["devices"] != n:
        wrong.append(f"the mesh {mesh} holds {f['devices']} devices, not all {n}")
    if mesh.get("model") != 2:
        wrong.append(f"the 'model' axis should have 2 devices, the mesh is {mesh}")
    if f["kernels"]["d1"] != [64, 64]:
        wrong.append(f"each device holds d1/kernel as {tuple(f['kernels']['d1'])}, want (64, 64): its columns "
                     "split over 'model' (a key must match the whole path, 'mlp/d1/kernel')")
    if f["kernels"]["d2"] != [64, 10]:
        wrong.append(f"each device holds d2/kernel as {tuple(f['kernels']['d2'])}, want (64, 10): its rows "
                     "split over 'model'")
    want_rows = 64 // max(n // 2, 1)
    if f["rows"] != want_rows or f["batch_axis"] != "data":
        wrong.append(f"a global batch of 64 is split over {f['batch_axis']!r}, {f['rows']} rows a device, want "
                     f"{want_rows} over 'data': it follows batch_dim_name, which must be the 'data' axis")
    if wrong:
        return False, f"on {n} devices: " + "; ".join(wrong)
    return True, (f"on {n} devices: a {mesh} mesh, d1 split by columns and d2 by rows over the 2 'model' "
                  f"devices, and each global batch of 64 split {n // 2} way(s) over 'data'")


def _solve_distribution():
    def distribution_for(devices):
        mesh = kd.DeviceMesh((len(devices) // 2, 2), ("data", "model"), devices)
        layout_map = kd.LayoutMap(mesh)
        layout_map[".*d1/kernel"] = (None, "model")       # columns
        layout_map[".*d2/kernel"] = ("model", None)       # rows
        return kd.ModelParallel(layout_map=layout_map, batch_dim_name="data")

    return distribution_for


register("08.1", title="a ModelParallel for any even number of devices", checker=_check_distribution,
         solution=_solve_distribution, expects="function", takes=1, time_limit=JAX_TIME_LIMIT_S,
         wants="a function distribution_for(devices) that returns a keras.distribution.ModelParallel",
         hint="the mesh's shape multiplies to the device count; write the keys as the lesson does; which mesh "
              "axis does ModelParallel split each batch over?",
         giveaways=["len(devices) // 2", 'batch_dim_name="data"', ".*d1"], slow=True)


# ---- 08.2: find and fix - the 2023 guide's LayoutMap keys ------------------------------------------

#: What each weight of the lesson's MLP should get: d1 split by columns (bias too), d2 by rows, d2's bias whole.
WANT_08_2 = {"d1/kernel": (None, "model"), "d1/bias": ("model",), "d2/kernel": ("model", None),
             "d2/bias": (None,)}


def _layouts(layout_map):
    """({weight path: axes}, how) for the lesson's MLP: read from the arrays under JAX, else looked up in the map.

    ModelParallel really shards only on the JAX backend with a 'model' axis of 2 or more devices.
    """
    if keras.backend.backend() == "jax" and _mesh().shape[1] >= 2:
        with kd.ModelParallel(layout_map=layout_map, batch_dim_name="data").scope():
            model = _mlp()
        specs = {v.path: tuple(v.value.sharding.spec) + (None,) * (len(v.shape) - len(v.value.sharding.spec))
                 for v in model.weights}                     # a jax spec leaves its trailing Nones out
        return specs, "read from each weight's jax sharding"
    specs = {v.path: tuple(layout_map[v.path].axes) if layout_map[v.path] is not None else (None,) * len(v.shape)
             for v in _mlp().weights}
    return specs, ("looked up in the LayoutMap: on the TensorFlow backend keras.distribution shards nothing, "
                   "lesson 08 showed why")


def _axis(name):
    """A layout's axis as a plain value: None, a plain str, or the repr of anything else (never its own ``==``)."""
    return None if name is None else as_str("an axis", name) if isinstance(name, str) else repr(name)


def _check_guide_layout(answer):
    layout_map = answer(_mesh())
    if not isinstance(layout_map, kd.LayoutMap):
        return False, f"guide_layout(mesh) must return a keras.distribution.LayoutMap, it returned {describe(layout_map)}"
    full_match = at_least("keras", "3.14")
    try:
        got, how = _layouts(layout_map)
    except ValueError as exc:
        return False, f"Keras {keras.__version__} rejects this LayoutMap: {str(exc).splitlines()[0][:200]}"
    got = {path: tuple(_axis(a) for a in axes) for path, axes in got.items()}
    wrong = [f"{p} gets {got[p]}, want {want}" for suffix, want in WANT_08_2.items()
             for p in got if p.endswith(suffix) and got[p] != want]
    if wrong:
        why = (f" On Keras {keras.__version__} a key must match the whole path ('mlp/d1/kernel'), so 'd1/kernel' "
               "matches nothing and the weight stays replicated, silently." if full_match else "")
        return False, "; ".join(wrong) + f" ({how}).{why}"
    keys = list(layout_map.keys()) if hasattr(layout_map, "keys") else []
    portable = all(any(re.fullmatch(k, f"mlp/{suffix}") for k in keys) for suffix, want in WANT_08_2.items()
                   if want != (None,)) if keys else True
    if not full_match and not portable:
        return True, (f"right on Keras {keras.__version__}, which finds a key anywhere in the path (re.search), so "
                      "'d1/kernel' matches 'mlp/d1/kernel'. From Keras 3.14 keys must match the whole path and "
                      "these would shard nothing: write '.*d1/kernel' to be right on every version")
    return True, (f"every key matches the whole path ('.*d1/kernel' fits 'mlp/d1/kernel'), so d1 is split by "
                  f"columns, d2 by rows and d2's bias stays whole, on Keras {keras.__version__} and on any "
                  f"version from 3.13 on ({how})")


def _solve_guide_layout():
    def guide_layout(mesh):
        layout_map = kd.LayoutMap(mesh)
        layout_map[".*d1/kernel"] = (None, "model")   # '.*': keys must match the whole path on Keras >= 3.14
        layout_map[".*d1/bias"] = ("model",)
        layout_map[".*d2/kernel"] = ("model", None)
        return layout_map

    return guide_layout


register("08.2", title="find and fix: the 2023 guide's LayoutMap keys", checker=_check_guide_layout,
         solution=_solve_guide_layout, expects="function", takes=1,
         wants="a function guide_layout(mesh) that returns a keras.distribution.LayoutMap: your fixed version",
         hint="print each weight's path and what layout_map[path] returns for it; the lesson's trap "
              "section says how Keras compares a key with a path.",
         giveaways=[".*d1", "fullmatch", "re.search"])
