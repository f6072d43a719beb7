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


@pytest.mark.parametrize("n_gpus, requested, platform, devices", [
    (0, None, "cpu", 4),      # a laptop: the 2x2 mesh's default
    (0, 2, "cpu", 2),         # MULTIGPU_JAX_DEVICES=2: Kaggle's shape rehearsed on CPU
    (1, None, "cpu", 4),      # Colab's one T4: JAX does not split one chip
    (2, None, "gpu", 2),      # Kaggle T4 x2: both GPUs, not 4 CPU devices
    (8, None, "gpu", 8),      # an 8-GPU server
    (8, 4, "gpu", 4),         # the first 4 of 8
    (3, None, "gpu", 2),      # 3, 5, 6 or 7 GPUs: the largest power of two, so batches and heads divide
    (5, None, "gpu", 4),
    (6, None, "gpu", 4),
    (7, None, "gpu", 4),
])
def test_jax_device_plan(n_gpus, requested, platform, devices):
    plan = meshes.jax_device_plan(n_gpus, requested)
    assert (plan.platform, plan.devices) == (platform, devices)
    assert plan.reason


def test_jax_device_plan_refuses_bad_counts():
    for bad in (-1, True, 2.0):
        with pytest.raises(ValueError, match="n_gpus"):
            meshes.jax_device_plan(bad)
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="requested must be"):
            meshes.jax_device_plan(0, bad)
    with pytest.raises(ValueError, match="only 2 GPUs"):
        meshes.jax_device_plan(2, 4)
    for n_gpus in (0, 8):
        with pytest.raises(ValueError, match="MULTIGPU_JAX_DEVICES=6: .* power of two; use 2, 4 or 8"):
            meshes.jax_device_plan(n_gpus, 6)


def test_largest_power_of_two():
    assert [meshes.largest_power_of_two(n) for n in range(1, 10)] == [1, 2, 2, 4, 4, 4, 4, 8, 8]
    with pytest.raises(ValueError, match="n must be an int >= 1"):
        meshes.largest_power_of_two(0)


def test_a_capped_plan_names_its_gpus_in_cuda_visible_devices():
    plan = meshes.jax_device_plan(6)
    assert "6 GPUs visible: JAX runs on 4 of them (the largest power of two" in plan.reason
    env = meshes.jax_env(plan, ["0", "1", "2", "3", "4", "5"])
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    assert meshes.jax_env(meshes.jax_device_plan(3), ["4", "6", "7"])["CUDA_VISIBLE_DEVICES"] == "4,6"
    assert "CUDA_VISIBLE_DEVICES" not in meshes.jax_env(meshes.jax_device_plan(2), ["0", "1"])   # all of them


def test_jax_env_cpu_splits_the_host_and_gpu_shares_memory():
    assert meshes.jax_env(meshes.jax_device_plan(0, 2)) == {
        "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    # On GPUs neither framework may grab the memory: JAX would pre-allocate 75%, TensorFlow all of it.
    assert meshes.jax_env(meshes.jax_device_plan(2)) == {"XLA_PYTHON_CLIENT_PREALLOCATE": "false",
                                                         "TF_FORCE_GPU_ALLOW_GROWTH": "true"}
    with pytest.raises(ValueError, match="platform"):
        meshes.jax_env(meshes.JaxPlan("tpu", 4, "?"))


def test_choose_jax_platform_on_kaggle_t4x2(fresh_jax_choice):
    fresh_jax_choice.setattr("helpers.gpus.visible_gpu_ids", lambda: ["0", "1"])
    plan = meshes.choose_jax_platform()
    assert (plan.platform, plan.devices) == ("gpu", 2)
    assert "JAX_PLATFORMS" not in os.environ and "XLA_FLAGS" not in os.environ
    assert os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert os.environ["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"


def test_choose_jax_platform_on_six_gpus_keeps_four_visible(fresh_jax_choice):
    fresh_jax_choice.setattr("helpers.gpus.visible_gpu_ids", lambda: ["0", "1", "2", "3", "4", "5"])
    fresh_jax_choice.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5")
    plan = meshes.choose_jax_platform()
    assert (plan.platform, plan.devices) == ("gpu", 4)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"   # so jax.devices() lists exactly the plan's four


class _RecordingConfig:
    """``tf.config`` as far as hiding GPUs goes: records each set_visible_devices call, or fails like a TensorFlow
    that already initialised its GPUs."""

    def __init__(self, initialised=False):
        self.calls, self.initialised = [], initialised

    def set_visible_devices(self, devices, device_type=None):
        if self.initialised:
            raise RuntimeError("Visible devices cannot be modified after being initialized")
        self.calls.append((list(devices), device_type))


def test_hide_gpus_from_tensorflow(monkeypatch):
    import tensorflow as tf

    config = _RecordingConfig()
    monkeypatch.setattr(tf, "config", config)
    assert meshes.hide_gpus_from_tensorflow() is True and config.calls == [([], "GPU")]
    monkeypatch.setattr(tf, "config", _RecordingConfig(initialised=True))
    with pytest.raises(RuntimeError, match="already holds the GPUs.*restart the kernel"):
        meshes.hide_gpus_from_tensorflow()
    monkeypatch.setattr(meshes.importlib.util, "find_spec", lambda name: None)   # no TensorFlow installed
    assert meshes.hide_gpus_from_tensorflow() is False


@pytest.mark.parametrize("gpu_ids, hidden", [(["0", "1"], True), (["0"], True), ([], False)])
def test_choose_jax_platform_hides_the_gpus_from_tensorflow_on_a_gpu_machine(fresh_jax_choice, gpu_ids, hidden):
    calls = []
    fresh_jax_choice.setattr("helpers.gpus.visible_gpu_ids", lambda: gpu_ids)
    fresh_jax_choice.setattr(meshes, "hide_gpus_from_tensorflow", lambda: calls.append("hidden") or True)
    meshes.choose_jax_platform()
    assert calls == (["hidden"] if hidden else [])


def test_choose_jax_platform_on_a_laptop_reads_the_switch(fresh_jax_choice):
    fresh_jax_choice.setattr("helpers.gpus.visible_gpu_ids", lambda: [])
    fresh_jax_choice.setenv("MULTIGPU_JAX_DEVICES", "2")
    plan = meshes.choose_jax_platform()
    assert (plan.platform, plan.devices) == ("cpu", 2)
    assert os.environ["JAX_PLATFORMS"] == "cpu"
    assert os.environ["XLA_FLAGS"] == "--xla_force_host_platform_device_count=2"
    assert "XLA_PYTHON_CLIENT_PREALLOCATE" not in os.environ


def test_choose_jax_platform_keeps_the_learners_settings(fresh_jax_choice):
    fresh_jax_choice.setattr("helpers.gpus.visible_gpu_ids", lambda: ["0", "1"])
    fresh_jax_choice.setenv("JAX_PLATFORMS", "cpu")          # rehearse on CPU devices on a GPU machine
    fresh_jax_choice.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
    plan = meshes.choose_jax_platform(4)
    assert plan.platform == "cpu"
    assert os.environ["XLA_FLAGS"] == "--xla_force_host_platform_device_count=8"  # not overwritten


def test_choose_jax_platform_is_fixed_once_jax_runs(fresh_jax_choice):
    fresh_jax_choice.setattr("helpers.gpus.visible_gpu_ids", lambda: [])
    first = meshes.choose_jax_platform(2)
    fresh_jax_choice.setitem(sys.modules, "jax", object())  # JAX has started: the choice holds
    fresh_jax_choice.setattr("helpers.gpus.visible_gpu_ids", lambda: ["0", "1"])
    assert meshes.choose_jax_platform() is first


def test_bad_jax_devices_switch_fails_in_validate_environment(monkeypatch):
    from helpers import config

    for bad in ("two", "0", "65", "-2", "2.0"):
        monkeypatch.setenv("MULTIGPU_JAX_DEVICES", bad)
        with pytest.raises(ValueError, match="MULTIGPU_JAX_DEVICES"):
            config.validate_environment()
    monkeypatch.setenv("MULTIGPU_JAX_DEVICES", " ")
    assert config.jax_devices_requested() is None
    monkeypatch.setenv("MULTIGPU_JAX_DEVICES", "2")
    assert config.jax_devices_requested() == 2


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


@pytest.mark.slow
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


def test_tpu_chips_counts_google_tpu_devices_only(tmp_path):
    """Lessons 11 and 13 run their job on a TPU when this finds one: a TPU v5e chip counts, Google's virtual NIC
    (the same vendor id) and an NVIDIA GPU do not; no PCI folder at all is 0."""
    for name, vendor, device in (("0000:00:04.0", "0x1ae0", "0x0063"), ("0000:00:05.0", "0x1ae0", "0x0063"),
                                 ("0000:00:06.0", "0x1ae0", "0x0042"), ("0000:00:07.0", "0x10de", "0x1eb8")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "vendor").write_text(vendor + "\n")
        (tmp_path / name / "device").write_text(device + "\n")
    assert meshes.tpu_chips(tmp_path) == 2
    assert meshes.tpu_chips(tmp_path / "missing") == 0
    assert meshes.tpu_chips() == 0    # the machines that test this course have no TPU
