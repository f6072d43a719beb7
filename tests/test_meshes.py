"""helpers.meshes (lesson 08's plumbing).

This pytest process runs Keras on the TensorFlow backend with 2 logical CPUs
(see conftest's ``replicas`` fixture), which is what tf_backend_report needs.
"""

import json
import os
import sys

import pytest

from helpers import meshes


def test_tf_backend_report_shows_the_no_op(replicas):
    import keras
    from keras import distribution as kd

    from helpers.versions import version_tuple

    report = meshes.tf_backend_report()
    dp, mp, ms = report["data_parallel"], report["model_parallel"], report["mirrored_strategy"]
    assert report["keras_devices"] == kd.list_devices() and len(report["keras_devices"]) >= 2
    if version_tuple(keras.__version__) >= (3, 15):  # constructs, fits, distributes nothing
        assert dp["distribution"] == "DataParallel" and dp["mesh_shape"] == [len(report["keras_devices"])]
        assert dp["variable_class"] == "ResourceVariable" and len(dp["variable_devices"]) == 1
        assert not dp["has_strategy"]
        assert mp["distribution"] == "ModelParallel"
        assert mp["keras_layout"] == [None, "model"] and mp["per_device_shape"] == mp["shape"] == [8, 4]
    else:  # Keras 3.13-3.14: the TF backend has no num_processes()
        for entry in (dp, mp):
            assert entry == {"error": entry["error"]} and entry["error"].startswith("AttributeError")
            assert "has no attribute 'num_processes'" in entry["error"]
    assert ms["replicas"] == 2 and ms["variable_class"] == "MirroredVariable" and len(ms["variable_devices"]) == 2
    json.dumps(report)  # plain data: it travels from a subprocess as JSON
    assert kd.distribution() is None  # reset afterwards


def test_tf_backend_report_refuses_other_backends(monkeypatch, replicas):
    import keras

    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    with pytest.raises(RuntimeError, match="KERAS_BACKEND=tensorflow"):
        meshes.tf_backend_report()


def test_choose_jax_platform(monkeypatch):
    monkeypatch.delitem(sys.modules, "jax", raising=False)
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    monkeypatch.setattr("helpers.cluster.visible_gpu_ids", lambda: ["0", "1", "2", "3"])
    assert meshes.choose_jax_platform(4) == "accelerators"
    assert "JAX_PLATFORMS" not in os.environ
    monkeypatch.setattr("helpers.cluster.visible_gpu_ids", lambda: ["0"])
    assert meshes.choose_jax_platform(4) == "cpu"
    assert os.environ["JAX_PLATFORMS"] == "cpu"
    assert meshes.choose_jax_platform(4) == "cpu"  # already decided
    monkeypatch.setenv("JAX_PLATFORMS", "cuda")
    assert meshes.choose_jax_platform(4) == "accelerators"
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="positive int"):
            meshes.choose_jax_platform(bad)


def test_old_module_name_still_imports():
    from helpers.distribution import choose_jax_platform  # helpers.notebook's import, until it moves

    assert choose_jax_platform is meshes.choose_jax_platform
