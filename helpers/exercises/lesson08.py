"""Exercises of 08_keras3_distribution_api.

Both checkers are backend-independent (a LayoutMap lookup and arithmetic), so
they run in the notebook's JAX kernel and in the TensorFlow test process alike.
"""

from __future__ import annotations

from . import register

# ---- 08.1: LayoutMap keys for a Megatron-style MLP ----------------------------------------------

#: Weight paths of helpers.distribution.mlp() under two model names: keys must not depend on the name.
PATHS_08_1 = ("mlp/d1/kernel", "mlp/d1/bias", "mlp/d2/kernel", "mlp/d2/bias", "classifier/d1/kernel",
              "classifier/d2/kernel")


def _layout_map(answer):
    from keras import distribution as kd

    devices = kd.list_devices()[:2]
    mesh = kd.DeviceMesh((1, len(devices)), ("data", "model"), devices)
    layout_map = kd.LayoutMap(mesh)
    for key, axes in answer.items():
        layout_map[key] = tuple(axes)
    return layout_map


def _axes(layout_map, path):
    layout = layout_map[path]
    return None if layout is None else tuple(layout.axes)


def _check_megatron(answer):
    if not answer:
        return False, "the dict is empty: give one entry {LayoutMap key: axes tuple} per kernel to split"
    try:
        layout_map = _layout_map(answer)
        got = {p: _axes(layout_map, p) for p in PATHS_08_1}
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

MESH_08_2 = {"data": 2, "model": 2}
KERNEL_08_2 = (64, 128)
GLOBAL_BATCH_08_2 = 64


def _expected_shards():
    return {"d1_kernel_per_device": (KERNEL_08_2[0], KERNEL_08_2[1] // MESH_08_2["model"]),
            "devices_per_d1_block": MESH_08_2["data"],
            "batch_per_device_model_parallel": GLOBAL_BATCH_08_2 // MESH_08_2["data"],
            "batch_per_device_data_parallel": GLOBAL_BATCH_08_2 // (MESH_08_2["data"] * MESH_08_2["model"])}


def _check_shards(answer):
    want = _expected_shards()
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
