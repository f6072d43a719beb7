"""helpers.devices: replica devices on 0 / 1 / N GPUs, and the restart rule."""

import types

import pytest

from helpers import config, devices
from helpers.subproc import run_python

# ---- in the pytest process (2 logical CPUs configured by conftest) -------------------------

def test_same_n_returns_same_list(replicas):
    assert len(replicas) == 2 and len(set(replicas)) == 2
    assert devices.ensure_devices(2) == replicas


def test_different_n_after_init_raises_restart(replicas):
    with pytest.raises(RuntimeError, match="Restart the kernel"):
        devices.ensure_devices(3)


@pytest.mark.parametrize("bad", [0, -1, 2.0, "2", True, None])
def test_bad_n(bad):
    with pytest.raises(ValueError, match="n must be"):
        devices.ensure_devices(bad)


def test_too_many_devices_is_refused_before_touching_tensorflow():
    """ensure_devices(10000) used to create 10,000 logical CPUs silently; now the cap is named and explained."""
    with pytest.raises(ValueError, match=r"at most 64.*MAX_DEVICES"):
        devices.ensure_devices(devices.MAX_DEVICES + 1)
    with pytest.raises(ValueError, match="n=10000"):
        devices.ensure_devices(10000)


@pytest.mark.parametrize("n", [1, 2, 8, 64])
def test_check_device_count_accepts_the_range(n):
    assert devices.check_device_count(n) == n


@pytest.mark.parametrize("bad", [0, -1, 65, 2.0, True])
def test_check_device_count_refuses(bad):
    with pytest.raises(ValueError):
        devices.check_device_count(bad)


def test_show_devices_prints_table(replicas, capsys):
    rows = devices.show_devices()
    out = capsys.readouterr().out
    assert "physical" in out and "logical" in out
    assert {r["name"] for r in rows if r["kind"] == "logical"} >= set(replicas)
    assert devices.replica_kind() is not None
    assert devices.configured_devices() == replicas


def test_default_gpu_memory(monkeypatch):
    monkeypatch.delenv(config.GPU_MEMORY_ENV, raising=False)
    assert devices.default_gpu_memory_mb(2) == 4096
    assert devices.default_gpu_memory_mb(8) == 1536
    assert devices.default_gpu_memory_mb(64) == 512
    monkeypatch.setenv(config.GPU_MEMORY_ENV, "1000")
    assert devices.default_gpu_memory_mb(2) == 1000
    monkeypatch.setenv(config.GPU_MEMORY_ENV, "lots")
    with pytest.raises(ValueError, match="whole number"):
        devices.default_gpu_memory_mb(2)
    monkeypatch.setenv(config.GPU_MEMORY_ENV, "10")
    with pytest.raises(ValueError, match="at least 64"):
        devices.default_gpu_memory_mb(2)


# ---- the GPU branches, against a fake TensorFlow (no GPU on CI) ------------------------------

class FakeTF:
    """Just enough of tf.config to drive ensure_devices' three branches."""

    def __init__(self, n_gpus, initialised=False):
        self.n_gpus, self.initialised, self.splits, self.growth = n_gpus, initialised, {}, {}
        self.visible = None
        self.config = types.SimpleNamespace(
            list_physical_devices=self._physical, list_logical_devices=self._logical,
            set_logical_device_configuration=self._set, get_logical_device_configuration=lambda p: self.splits.get(p.name),
            set_visible_devices=self._visible,
            LogicalDeviceConfiguration=lambda memory_limit=None: ("cfg", memory_limit),
            experimental=types.SimpleNamespace(set_memory_growth=self._growth))

    def _growth(self, physical, on):
        if self.initialised:
            raise RuntimeError("Physical devices cannot be modified after being initialized")
        self.growth[physical.name] = on

    def _physical(self, kind=None):
        devs = [types.SimpleNamespace(name="/physical_device:CPU:0", device_type="CPU")]
        devs += [types.SimpleNamespace(name=f"/physical_device:GPU:{i}", device_type="GPU")
                 for i in range(self.n_gpus)]
        return [d for d in devs if kind in (None, d.device_type)]

    def _logical_sources(self, kind):
        return [p for p in self._physical(kind) if self.visible is None or p.device_type != "GPU"
                or p.name in self.visible]

    def _visible(self, physical, kind):
        if self.initialised:
            raise RuntimeError("Visible devices cannot be modified after being initialized")
        self.visible = [p.name for p in physical]

    def _set(self, physical, cfg):
        if self.initialised:
            raise RuntimeError("Virtual devices cannot be modified after being initialized")
        self.splits[physical.name] = cfg

    def _logical(self, kind=None):
        self.initialised = True
        out = []
        for p in self._logical_sources(kind):
            t = p.device_type
            for _ in self.splits.get(p.name, [None]):
                out.append(types.SimpleNamespace(name=f"/device:{t}:{sum(o.device_type == t for o in out)}",
                                                 device_type=t))
        return out


@pytest.fixture
def fake(monkeypatch):
    def make(n_gpus, initialised=False):
        tf = FakeTF(n_gpus, initialised)
        monkeypatch.setattr(devices, "import_tensorflow", lambda: tf)
        monkeypatch.setattr(devices, "_configured", None)
        return tf
    return make


def test_enough_gpus_uses_first_n(fake):
    tf = fake(4)
    assert devices.ensure_devices(2) == ["/device:GPU:0", "/device:GPU:1"]
    assert tf.splits == {} and devices.replica_kind() == "GPUs"
    assert tf.growth == {f"/physical_device:GPU:{i}": True for i in range(4)}
    assert devices.configured_devices() == ["/device:GPU:0", "/device:GPU:1"]
    # the kernel sees only its replicas, so a plain MirroredStrategy() takes exactly these two
    assert tf.visible == ["/physical_device:GPU:0", "/physical_device:GPU:1"]
    assert [d.name for d in tf.config.list_logical_devices("GPU")] == ["/device:GPU:0", "/device:GPU:1"]


def test_one_gpu_is_split_with_memory_limit(fake, monkeypatch):
    tf = fake(1)
    monkeypatch.setenv(config.GPU_MEMORY_ENV, "1234")
    assert devices.ensure_devices(2) == ["/device:GPU:0", "/device:GPU:1"]
    assert tf.splits["/physical_device:GPU:0"] == [("cfg", 1234)] * 2
    assert "split" in devices.replica_kind()


def test_no_gpu_splits_cpu(fake):
    tf = fake(0)
    assert devices.ensure_devices(3) == ["/device:CPU:0", "/device:CPU:1", "/device:CPU:2"]
    assert len(tf.splits["/physical_device:CPU:0"]) == 3


def test_too_late_to_split_raises_restart(fake):
    fake(1, initialised=True)
    with pytest.raises(RuntimeError, match="Restart the kernel"):
        devices.ensure_devices(2)


# ---- real TensorFlow in fresh processes -----------------------------------------------------

@pytest.mark.slow
def test_real_split_into_three_and_one():
    r = run_python("""
        from helpers.devices import ensure_devices
        print(ensure_devices(3)); print(ensure_devices(3))
    """, echo=False)
    assert r.ok, r.stderr[-2000:]
    want = "['/device:CPU:0', '/device:CPU:1', '/device:CPU:2']"
    assert r.stdout.splitlines() == [want, want]


@pytest.mark.slow
def test_real_too_late_after_tf_touched_devices():
    r = run_python("""
        import tensorflow as tf
        tf.constant(1.0) + 1          # initialises the devices
        from helpers.devices import ensure_devices
        try:
            ensure_devices(2)
        except RuntimeError as e:
            print("RuntimeError", "Restart the kernel" in str(e), "cannot be modified" in str(e))
    """, echo=False)
    assert r.ok, r.stderr[-2000:]
    assert r.stdout.strip() == "RuntimeError True True"


# ---- which case the learner is in: labels and notes -------------------------------------------

def test_two_physical_gpus_use_both_and_say_nccl(fake):
    fake(2)
    names = devices.ensure_devices(2)
    assert names == ["/device:GPU:0", "/device:GPU:1"] and devices.replica_kind() == devices.KIND_GPUS
    note = devices.replicas_note(devices.replica_kind(), 2, ["Tesla T4", "Tesla T4"])
    assert note.startswith("2 x Tesla T4: real parallel replicas") and "NCCL" in note
    assert devices.hardware_label(devices.KIND_GPUS, 2, ["Tesla T4", "Tesla T4"]) == "2 x Tesla T4"
    assert devices.hardware_label(devices.KIND_GPUS, 2, ["A100", "V100"]) == "A100 + V100"


def test_one_gpu_split_says_so(fake):
    fake(1)
    devices.ensure_devices(2)
    note = devices.replicas_note(devices.replica_kind(), 2, ["Tesla T4"])
    assert note.startswith("1 x Tesla T4 split in 2") and "no real speed-up" in note and "virtual" in note


def test_cpu_note_and_bad_kinds():
    assert "same cores" in devices.replicas_note(devices.KIND_SPLIT_CPU, 2)
    assert devices.replicas_note(devices.KIND_SPLIT_CPU, 1) == "1 replica on 1 CPU: nothing to all-reduce."
    with pytest.raises(ValueError, match="unknown replica kind"):
        devices.hardware_label("TPU pod", 2)
    with pytest.raises(ValueError, match="ensure_devices"):
        devices.replicas_note(None, 2)


def test_gpu_names_one_per_physical_gpu(replicas, monkeypatch):
    import tensorflow as tf
    names = devices.gpu_names()
    assert len(names) == len(tf.config.list_physical_devices("GPU")) and all(isinstance(n, str) and n for n in names)

    from types import SimpleNamespace

    def details(gpu):                                  # TF has no details for the second GPU
        if gpu.name.endswith(":1"):
            raise RuntimeError("no details")
        return {"device_name": "Tesla T4"}
    gpus = [SimpleNamespace(name="/physical_device:GPU:0"), SimpleNamespace(name="/physical_device:GPU:1")]
    fake = SimpleNamespace(config=SimpleNamespace(list_physical_devices=lambda kind: gpus,
                                                  experimental=SimpleNamespace(get_device_details=details)))
    monkeypatch.setattr(devices, "import_tensorflow", lambda: fake)
    assert devices.gpu_names() == ["Tesla T4", "/physical_device:GPU:1"]


@pytest.mark.parametrize("n, n_gpus, kind", [
    (2, 2, devices.KIND_GPUS), (2, 8, devices.KIND_GPUS), (4, 2, devices.KIND_SPLIT_GPU),
    (2, 1, devices.KIND_SPLIT_GPU), (2, 0, devices.KIND_SPLIT_CPU), (1, 0, devices.KIND_SPLIT_CPU)])
def test_replica_plan(n, n_gpus, kind):
    assert devices.replica_plan(n, n_gpus) == kind


def test_replica_plan_refuses_bad_counts():
    for bad in ((0, 2), (2, -1), (2, True), (2.0, 2)):
        with pytest.raises(ValueError):
            devices.replica_plan(*bad)
