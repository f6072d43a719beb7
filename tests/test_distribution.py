"""helpers.distribution (lesson 08).

This pytest process runs Keras on the TensorFlow backend with 2 logical CPUs,
so the TensorFlow-side helpers run here and the JAX-side ones run in a
subprocess with KERAS_BACKEND=jax and 4 forced host devices.
"""

import json
import sys

import numpy as np
import pytest

from helpers import distribution
from helpers.subproc import run_python

JAX_ENV = {"KERAS_BACKEND": "jax", "XLA_FLAGS": "--xla_force_host_platform_device_count=4",
           "JAX_PLATFORMS": "cpu"}


def test_mlp_has_stable_paths():
    model = distribution.mlp(input_dim=5, num_classes=3, hidden=7, name="clf")
    assert [v.path for v in model.weights] == ["clf/d1/kernel", "clf/d1/bias", "clf/d2/kernel", "clf/d2/bias"]
    assert model.output_shape == (None, 3)
    with pytest.raises(ValueError):
        distribution.mlp(input_dim=0)
    with pytest.raises(ValueError):
        distribution.mlp(num_classes=1)


def test_trim_to_multiple():
    x, y = np.arange(10), np.arange(10) * 2
    tx, ty = distribution.trim_to_multiple(4, x, y)
    assert list(tx) == list(range(8)) and list(ty) == [2 * i for i in range(8)]
    assert list(distribution.trim_to_multiple(5, x)) == list(range(10))
    with pytest.raises(ValueError, match="differ in length"):
        distribution.trim_to_multiple(2, x, y[:3])
    with pytest.raises(ValueError, match="fewer than one batch"):
        distribution.trim_to_multiple(64, x)
    with pytest.raises(ValueError, match="at least one array"):
        distribution.trim_to_multiple(2)
    with pytest.raises(ValueError, match="positive int"):
        distribution.trim_to_multiple(0, x)


def test_matched_axes_is_a_full_match(replicas):
    from keras import distribution as kd

    mesh = kd.DeviceMesh((1, 2), ("data", "model"), kd.list_devices()[:2])
    layout_map = kd.LayoutMap(mesh)
    layout_map["d1/kernel"] = (None, "model")
    assert distribution.matched_axes(layout_map, "mlp/d1/kernel") is None   # the trap
    assert distribution.matched_axes(layout_map, "d1/kernel") == (None, "model")
    layout_map[".*d2/kernel"] = ("model", None)
    assert distribution.matched_axes(layout_map, "mlp/d2/kernel") == ("model", None)
    layout_map[".*kernel"] = (None, None)
    with pytest.raises(ValueError, match="matches multiple layout specification keys"):
        distribution.matched_axes(layout_map, "mlp/d2/kernel")


def test_tf_backend_report_shows_the_no_op(replicas):
    from keras import distribution as kd

    report = distribution.tf_backend_report()
    dp, mp, ms = report["data_parallel"], report["model_parallel"], report["mirrored_strategy"]
    assert dp["distribution"] == "DataParallel" and dp["mesh_shape"] == [2]
    assert dp["variable_class"] == "ResourceVariable" and len(dp["variable_devices"]) == 1
    assert not dp["has_strategy"]
    assert mp["keras_layout"] == [None, "model"] and mp["per_device_shape"] == mp["shape"]
    assert ms["replicas"] == 2 and ms["variable_class"] == "MirroredVariable" and len(ms["variable_devices"]) == 2
    json.dumps(report)  # plain data: it travels from a subprocess as JSON
    assert kd.distribution() is None  # reset afterwards


def test_tf_side_guards(replicas):
    model = distribution.mlp()
    with pytest.raises(RuntimeError, match="reads JAX shardings"):
        distribution.weight_layouts(model)
    distribution.reset()


def test_choose_jax_platform(monkeypatch):
    monkeypatch.delitem(sys.modules, "jax", raising=False)
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    monkeypatch.setattr("helpers.cluster.visible_gpu_ids", lambda: ["0", "1", "2", "3"])
    assert distribution.choose_jax_platform(4) == "accelerators"
    assert "JAX_PLATFORMS" not in __import__("os").environ
    monkeypatch.setattr("helpers.cluster.visible_gpu_ids", lambda: ["0"])
    assert distribution.choose_jax_platform(4) == "cpu"
    assert __import__("os").environ["JAX_PLATFORMS"] == "cpu"
    assert distribution.choose_jax_platform(4) == "cpu"  # already decided
    with pytest.raises(ValueError):
        distribution.choose_jax_platform(0)


def test_jax_side_in_a_subprocess():
    r = run_python("""
        import json
        import keras
        from keras import distribution as kd
        from helpers import distribution as D
        devices = D.mesh_devices(4)
        kd.set_distribution(kd.DataParallel(devices=devices))
        dp = D.weight_layouts(D.mlp(8, 3, 4))
        mesh = kd.DeviceMesh((2, 2), ("data", "model"), devices)
        lm = kd.LayoutMap(mesh)
        lm[".*d1/kernel"] = (None, "model")
        kd.set_distribution(kd.ModelParallel(layout_map=lm, batch_dim_name="data"))
        model = D.mlp(8, 3, 4)
        rows = D.show_layouts(model)
        d1 = D.layout_of(model, "d1/kernel")
        try:
            D.layout_of(model, "kernel")
            several = "no error"
        except ValueError as exc:
            several = str(exc)
        try:
            D.mesh_devices(8)
            too_many = "no error"
        except RuntimeError as exc:
            too_many = str(exc)
        D.reset()
        print(json.dumps({"devices": devices, "dp": [r["spec"] for r in dp], "dp_shapes": [r["shard_shape"] == r["shape"] for r in dp],
                          "d1": [d1["spec"], d1["shard_shape"], sorted(set(map(str, d1["blocks"].values())))],
                          "several": several, "too_many": too_many, "reset": kd.distribution() is None}))
    """, env=JAX_ENV, timeout=240, echo=False)
    assert r.ok, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["devices"] == ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]
    assert all(set(s) <= {None} for s in out["dp"]) and all(out["dp_shapes"])
    assert out["d1"][0] == [None, "model"] and out["d1"][1] == [8, 2]
    assert out["d1"][2] == ["((0, 8), (0, 2))", "((0, 8), (2, 4))"]
    assert "2 weights end with 'kernel'" in out["several"]
    assert "xla_force_host_platform_device_count=8" in out["too_many"]
    assert out["reset"]
    assert "sharding spec" in r.stdout and "mlp/d1/kernel" in r.stdout
