"""Exercises of 08_keras3_distribution_api.

They run in the notebook's JAX kernel and in the TensorFlow test process alike: 08.1 is arithmetic, 08.2 reads
real shardings under JAX and looks the paths up elsewhere.
"""

from __future__ import annotations

import re

import keras
from keras import distribution as kd

from ..versions import at_least
from . import describe, register


def _mesh():
    """A ("data", "model") mesh as the lesson builds it: 2x2 where there are 4 or more devices, else 1x2 (1x1)."""
    devices = kd.list_devices()
    devices = devices[:4] if len(devices) >= 4 else devices[:2]
    shape = (2, 2) if len(devices) == 4 else (1, len(devices))
    return kd.DeviceMesh(shape, ("data", "model"), devices)


# ---- 08.1: what one device holds ----------------------------------------------------------------

MESH_08_1 = {"data": 2, "model": 2}       # d1's kernel is (64, 128), the global batch 64


def _check_shards(answer):
    want = _solve_shards()
    if set(want) - set(answer):
        return False, f"expected the keys {sorted(want)}, got {sorted(map(repr, answer))}"
    why = {"d1_kernel_per_device": "(None, 'model') keeps all 64 rows and splits the 128 columns over the "
                                   "2 devices of the 'model' axis",
           "devices_per_d1_block": "each half of the kernel is replicated along the other axis, 'data' (2 devices)",
           "batch_per_device_model_parallel": "ModelParallel splits the batch along batch_dim_name='data' only "
                                              "(2 ways); the 'model' devices of a row share the same examples",
           "batch_per_device_data_parallel": "DataParallel over all 4 devices splits the batch 4 ways"}
    wrong = [f"{k}={answer[k]!r}: {why[k]}" for k in want
             if (tuple(answer[k]) if isinstance(answer[k], (list, tuple)) else answer[k]) != want[k]]
    if wrong:
        return False, "; ".join(wrong)
    return True, (f"each device holds a {want['d1_kernel_per_device']} block (2 devices per block) and "
                  f"{want['batch_per_device_model_parallel']} examples per step, against "
                  f"{want['batch_per_device_data_parallel']} under DataParallel with whole weights everywhere")


def _solve_shards():
    data, model = MESH_08_1["data"], MESH_08_1["model"]
    return {"d1_kernel_per_device": (64, 128 // model),            # columns split over 'model'
            "devices_per_d1_block": data,                         # replicated along 'data'
            "batch_per_device_model_parallel": 64 // data,         # batch split over 'data' only
            "batch_per_device_data_parallel": 64 // (data * model)}  # batch split over every device


register("08.1", title="what one device of a 2x2 mesh holds", checker=_check_shards, solution=_solve_shards,
         expects="dict", wants="a dict with the four keys named in the exercise",
         hint="a named axis splits that dimension over the devices of that mesh axis; unnamed axes "
              "replicate. Compare with distribution.show_layouts(mp_model).")


# ---- 08.2: find and fix - the 2023 guide's LayoutMap keys ------------------------------------------

#: What each weight of the lesson's MLP should get: d1 split by columns (bias too), d2 by rows, d2's bias whole.
WANT_08_2 = {"d1/kernel": (None, "model"), "d1/bias": ("model",), "d2/kernel": ("model", None),
             "d2/bias": (None,)}


def _layouts(layout_map):
    """({weight path: axes}, how) for the lesson's MLP: read from the arrays under JAX, else looked up in the map.

    ModelParallel really shards only on the JAX backend with a 'model' axis of 2 or more devices.
    """
    def mlp():
        return keras.Sequential([keras.Input((64,)), keras.layers.Dense(128, activation="relu", name="d1"),
                                 keras.layers.Dense(10, activation="softmax", name="d2")], name="mlp")

    if keras.backend.backend() == "jax" and _mesh().shape[1] >= 2:
        with kd.ModelParallel(layout_map=layout_map, batch_dim_name="data").scope():
            model = mlp()
        specs = {v.path: tuple(v.value.sharding.spec) + (None,) * (len(v.shape) - len(v.value.sharding.spec))
                 for v in model.weights}                     # a jax spec leaves its trailing Nones out
        return specs, "read from each weight's jax sharding"
    specs = {v.path: tuple(layout_map[v.path].axes) if layout_map[v.path] is not None else (None,) * len(v.shape)
             for v in mlp().weights}
    return specs, ("looked up in the LayoutMap: on the TensorFlow backend keras.distribution shards nothing, "
                   "lesson 08 showed why")


def _check_guide_layout(answer):
    layout_map = answer(_mesh())
    if not isinstance(layout_map, kd.LayoutMap):
        return False, f"guide_layout(mesh) must return a keras.distribution.LayoutMap, it returned {describe(layout_map)}"
    full_match = at_least("keras", "3.14")
    try:
        got, how = _layouts(layout_map)
    except ValueError as exc:
        return False, f"Keras {keras.__version__} rejects this LayoutMap: {str(exc).splitlines()[0][:200]}"
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
              "section says how Keras compares a key with a path.")
