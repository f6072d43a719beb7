"""Exercises of 08_keras3_distribution_api.

Both checkers are backend-independent (a LayoutMap lookup and arithmetic), so
they run in the notebook's JAX kernel and in the TensorFlow test process alike.
"""

from __future__ import annotations

import re

import keras
import numpy as np
from keras import distribution as kd

from ..versions import at_least
from . import describe, register


def _mesh():
    """A ("data", "model") mesh as the lesson builds it: 2x2 where there are 4 or more devices, else 1x2 (1x1)."""
    devices = kd.list_devices()
    devices = devices[:4] if len(devices) >= 4 else devices[:2]
    shape = (2, 2) if len(devices) == 4 else (1, len(devices))
    return kd.DeviceMesh(shape, ("data", "model"), devices)


# ---- 08.1: LayoutMap keys for a Megatron-style MLP ----------------------------------------------

#: Weight paths of helpers.distribution.mlp() under two model names: keys must not depend on the name.
PATHS_08_1 = ("mlp/d1/kernel", "mlp/d1/bias", "mlp/d2/kernel", "mlp/d2/bias", "classifier/d1/kernel",
              "classifier/d2/kernel")


def _check_megatron(answer):
    if not answer:
        return False, "the dict is empty: give one entry {LayoutMap key: axes tuple} per kernel to split"
    try:
        layout_map = kd.LayoutMap(_mesh())
        for key, axes in answer.items():
            layout_map[key] = tuple(axes)
        got = {p: None if layout_map[p] is None else tuple(layout_map[p].axes) for p in PATHS_08_1}
    except ValueError as exc:  # several keys match one path, or a bad axis name
        return False, f"Keras rejects this LayoutMap: {str(exc).splitlines()[0]}"
    wrong = []
    for prefix in ("mlp", "classifier"):
        if got[f"{prefix}/d1/kernel"] != (None, "model"):
            wrong.append(f"{prefix}/d1/kernel gets {got[f'{prefix}/d1/kernel']}, want (None, 'model') "
                         "(split its columns)")
        if got[f"{prefix}/d2/kernel"] != ("model", None):
            wrong.append(f"{prefix}/d2/kernel gets {got[f'{prefix}/d2/kernel']}, want ('model', None) "
                         "(split its rows)")
    if got["mlp/d2/bias"] not in (None, (None,)):
        wrong.append(f"mlp/d2/bias gets {got['mlp/d2/bias']}: d2's output is summed over the 'model' axis, "
                     "so its bias must stay whole (no key should match it)")
    if got["mlp/d1/bias"] not in (None, (None,), ("model",)):
        wrong.append(f"mlp/d1/bias gets {got['mlp/d1/bias']}; leave it replicated or split it like d1's columns")
    if wrong:
        hint = (" Keys are full-match regexes: 'mlp/d1/kernel' misses a model named 'classifier' and "
                "'d1/kernel' matches nothing; '.*d1/kernel' matches both.")
        return False, "; ".join(wrong) + "." + hint
    return True, ("d1 is split by columns and d2 by rows, under any model name: each device computes half of "
                  "the hidden units and XLA adds one all-reduce after d2 (the Megatron-LM pattern)")


def _solve_megatron():
    return {".*d1/kernel": (None, "model"),   # column-parallel: each device computes half the hidden units
            ".*d2/kernel": ("model", None)}   # row-parallel: consumes them in place, partial sums all-reduced


register("08.1", title="LayoutMap keys that shard both Dense layers (Megatron style)",
         checker=_check_megatron, solution=_solve_megatron, expects="dict",
         wants="a dict {LayoutMap key: axes tuple}",
         hint="keys are full-match regexes over weight paths like 'mlp/d1/kernel'; values name a mesh "
              "axis (or None) per kernel dimension.")

# ---- 08.2: what one device holds ----------------------------------------------------------------

MESH_08_2 = {"data": 2, "model": 2}       # d1's kernel is (64, 128), the global batch 64


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
    data, model = MESH_08_2["data"], MESH_08_2["model"]
    return {"d1_kernel_per_device": (64, 128 // model),            # columns split over 'model'
            "devices_per_d1_block": data,                         # replicated along 'data'
            "batch_per_device_model_parallel": 64 // data,         # batch split over 'data' only
            "batch_per_device_data_parallel": 64 // (data * model)}  # batch split over every device


register("08.2", title="what one device of a 2x2 mesh holds", checker=_check_shards, solution=_solve_shards,
         expects="dict", wants="a dict with the four keys named in the exercise",
         hint="a named axis splits that dimension over the devices of that mesh axis; unnamed axes "
              "replicate. Compare with distribution.show_layouts(mp_model).")


# ---- shared by 08.3 and 08.4: build under ModelParallel (JAX) or look the paths up (any backend) -----

def _real_sharding() -> bool:
    """True where ModelParallel really shards: the JAX backend with 2 or more devices (a 'model' axis of 2)."""
    return keras.backend.backend() == "jax" and _mesh().shape[1] >= 2


def _layouts(layout_map, build):
    """{weight path: axes} for the model ``build()`` makes: read from the arrays under JAX, else looked up.

    Returns (layouts, model, how): how says which of the two it did, for the message.
    """
    if _real_sharding():
        with kd.ModelParallel(layout_map=layout_map, batch_dim_name="data").scope():
            model = build()
        specs = {v.path: tuple(v.value.sharding.spec) + (None,) * (len(v.shape) - len(v.value.sharding.spec))
                 for v in model.weights}                     # a jax spec leaves its trailing Nones out
        how = "read from each weight's jax sharding"
    else:
        model = build()
        specs = {v.path: tuple(layout_map[v.path].axes) if layout_map[v.path] is not None else (None,) * len(v.shape)
                 for v in model.weights}
        how = ("looked up in the LayoutMap: on the TensorFlow backend keras.distribution shards nothing, "
               "lesson 08 showed why")
    return specs, model, how


# ---- 08.3: a LayoutMap for an embedding tower -----------------------------------------------------

VOCAB_08_3, WIDTH_08_3 = 64, 32


def tower(name="tower"):
    """The model of exercise 08.3: token ids -> Embedding -> mean -> Dense(64) -> Dense(8)."""
    return keras.Sequential([keras.Input((6,), dtype="int32"),
                             keras.layers.Embedding(VOCAB_08_3, WIDTH_08_3, name="embed"),
                             keras.layers.GlobalAveragePooling1D(name="pool"),
                             keras.layers.Dense(64, activation="relu", name="up"),
                             keras.layers.Dense(8, name="out")], name=name)


#: What each weight of tower() should get: rows of the table, columns of "up" (and its bias), rows of "out".
WANT_08_3 = {"embed/embeddings": ("model", None), "up/kernel": (None, "model"), "up/bias": ("model",),
             "out/kernel": ("model", None), "out/bias": (None,)}


def _check_tower_layout(answer):
    layout_map = answer(_mesh())
    if not isinstance(layout_map, kd.LayoutMap):
        return False, f"layout_for(mesh) must return a keras.distribution.LayoutMap, it returned {describe(layout_map)}"
    try:
        got, model, how = _layouts(layout_map, tower)
    except ValueError as exc:
        return False, f"Keras rejects this LayoutMap: {str(exc).splitlines()[0][:200]}"
    wrong = []
    for suffix, want in WANT_08_3.items():
        path = next(p for p in got if p.endswith(suffix))
        if got[path] != want:
            wrong.append(f"{path} gets {got[path]}, want {want}")
    if wrong:
        return False, "; ".join(wrong) + f" ({how})"
    if _real_sharding():   # and it trains: one step on the sharded model
        ids = np.random.default_rng(0).integers(0, VOCAB_08_3, size=(8, 6)).astype("int32")
        with kd.ModelParallel(layout_map=layout_map, batch_dim_name="data").scope():
            model.compile(optimizer="sgd", loss=__import__("keras").losses.SparseCategoricalCrossentropy(
                from_logits=True))
        model.fit(ids, np.arange(8) % 8, batch_size=8, epochs=1, verbose=0)
        table = model.get_layer("embed").embeddings.value
        per_device = table.sharding.shard_shape(table.shape)
        return True, (f"the table's {VOCAB_08_3} rows are split over 'model' (each device holds {per_device}), "
                      "'up' by columns with its bias, 'out' by rows with its bias whole; one training step "
                      f"ran on the {'x'.join(map(str, _mesh().shape))} mesh ({how})")
    return True, (f"rows of the table, columns of 'up' (and its bias), rows of 'out', its bias whole: the layouts "
                  f"are right ({how})")


def _solve_tower_layout():
    def layout_for(mesh):
        layout_map = kd.LayoutMap(mesh)
        layout_map[".*embed/embeddings"] = ("model", None)   # vocabulary rows over 'model'
        layout_map[".*up/kernel"] = (None, "model")          # column-parallel ...
        layout_map[".*up/bias"] = ("model",)                 # ... its bias follows the columns
        layout_map[".*out/kernel"] = ("model", None)         # row-parallel: partial sums, one all-reduce
        return layout_map                                    # out/bias matches nothing: replicated

    return layout_for


register("08.3", title="a LayoutMap for an embedding tower", checker=_check_tower_layout,
         solution=_solve_tower_layout, expects="function", takes=1,
         wants="a function layout_for(mesh) that returns a keras.distribution.LayoutMap",
         hint="print [v.path for v in tower().weights] first; a key must match a whole path on Keras >= "
              "3.14, and each value names a mesh axis (or None) per dimension.")

# ---- 08.4: find and fix - the 2023 guide's LayoutMap keys ------------------------------------------

def mlp_08_4(name="mlp"):
    """The lesson's MLP: 64 features -> Dense(128, name="d1") -> Dense(10, name="d2")."""
    return keras.Sequential([keras.Input((64,)), keras.layers.Dense(128, activation="relu", name="d1"),
                             keras.layers.Dense(10, activation="softmax", name="d2")], name=name)


WANT_08_4 = {"d1/kernel": (None, "model"), "d1/bias": ("model",), "d2/kernel": ("model", None),
             "d2/bias": (None,)}


def _check_guide_layout(answer):
    layout_map = answer(_mesh())
    if not isinstance(layout_map, kd.LayoutMap):
        return False, f"guide_layout(mesh) must return a keras.distribution.LayoutMap, it returned {describe(layout_map)}"
    full_match = at_least("keras", "3.14")
    try:
        got, _, how = _layouts(layout_map, mlp_08_4)
    except ValueError as exc:
        return False, f"Keras {keras.__version__} rejects this LayoutMap: {str(exc).splitlines()[0][:200]}"
    wrong = [f"{p} gets {got[p]}, want {want}" for suffix, want in WANT_08_4.items()
             for p in got if p.endswith(suffix) and got[p] != want]
    if wrong:
        why = (f" On Keras {keras.__version__} a key must match the whole path ('mlp/d1/kernel'), so 'd1/kernel' "
               "matches nothing and the weight stays replicated, silently." if full_match else "")
        return False, "; ".join(wrong) + f" ({how}).{why}"
    keys = list(layout_map.keys()) if hasattr(layout_map, "keys") else []
    portable = all(any(re.fullmatch(k, f"mlp/{suffix}") for k in keys) for suffix, want in WANT_08_4.items()
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


register("08.4", title="find and fix: the 2023 guide's LayoutMap keys", checker=_check_guide_layout,
         solution=_solve_guide_layout, expects="function", takes=1,
         wants="a function guide_layout(mesh) that returns a keras.distribution.LayoutMap: your fixed version",
         hint="print each weight's path and what layout_map[path] returns for it; the lesson's trap "
              "section says how Keras compares a key with a path.")
