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
    monkeypatch.setattr("helpers.gpus.visible_gpu_ids", lambda: ["0", "1", "2", "3"])
    assert meshes.choose_jax_platform(4) == "accelerators"
    assert "JAX_PLATFORMS" not in os.environ
    monkeypatch.setattr("helpers.gpus.visible_gpu_ids", lambda: ["0"])
    assert meshes.choose_jax_platform(4) == "cpu"
    assert os.environ["JAX_PLATFORMS"] == "cpu"
    assert meshes.choose_jax_platform(4) == "cpu"  # already decided
    monkeypatch.setenv("JAX_PLATFORMS", "cuda")
    assert meshes.choose_jax_platform(4) == "accelerators"
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="positive int"):
            meshes.choose_jax_platform(bad)


def test_no_helper_module_named_like_keras_distribution():
    import importlib.util
    assert importlib.util.find_spec("helpers.distribution") is None   # the learner writes keras.distribution


WORKER = '''
import json, sys
sys.modules["tensorflow"] = None          # as in lesson 08's worker: no TensorFlow in a JAX process
import json, os
import numpy as np
import keras
from keras import distribution as kd

cfg = json.loads(os.environ["TF_CONFIG"])
addresses, me = cfg["cluster"]["worker"], cfg["task"]["index"]
keras.utils.set_random_seed(1)
kd.initialize(job_addresses=",".join(addresses), num_processes=len(addresses), process_id=me)
dist = kd.DataParallel(devices=kd.list_devices())
kd.set_distribution(dist)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
model.compile(optimizer="sgd", loss="mse")
x, y = np.full((8, 4), me + 1.0, "float32"), np.zeros((8, 2), "float32")
try:
    model.fit(x, y, batch_size=4, verbose=0)
    refused = ""
except ValueError as exc:
    refused = f"{type(exc).__name__}: {exc}"
dist.auto_shard_dataset = False           # this process's rows are its part of each global batch
loss = model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0).history["loss"]
print(json.dumps({"me": me, "devices": len(kd.list_devices()), "refused": refused, "loss": loss}))
'''


def test_two_jax_processes_form_one_data_parallel_job(tmp_path):
    """What lesson 08's 2-process job relies on, on the running JAX/Keras versions."""
    from helpers import cluster

    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    job = cluster.run([str(script)], n_workers=2, env=env, timeout=240, echo=False)
    out = [json.loads(ln) for w in job.workers for ln in w.log.splitlines() if ln.startswith('{"me"')]
    print("\n".join(r["refused"] for r in out))  # the message TROUBLESHOOTING.md indexes
    assert [r["me"] for r in out] == [0, 1] and all(r["devices"] == 4 for r in out)
    for r in out:
        assert r["refused"].startswith("ValueError: When using a multi-worker distribution with auto-sharding")
        assert "auto_shard_dataset = False" in r["refused"]
    assert out[0]["loss"] == out[1]["loss"] and len(out[0]["loss"]) == 2   # one global loss, both processes
    assert not any(cluster.pid_alive(w.pid) for w in job.workers)
