"""helpers.data: offline digits, CIFAR-10 from a (faked) Keras cache, and the fallback."""

import pickle

import numpy as np
import pytest

from helpers import data


def test_digits_shapes_and_ranges():
    d = data.load_digits()
    assert d.name == "digits" and d.input_shape == (8, 8, 1) and d.num_classes == 10
    assert len(d.x_train) + len(d.x_test) == 1797 and len(d.x_test) == 359
    assert d.x_train.dtype == np.float32 and 0.0 <= d.x_train.min() and d.x_train.max() <= 1.0
    assert set(np.unique(d.y_train)) == set(range(10))
    again = data.load_digits()
    np.testing.assert_array_equal(d.y_test, again.y_test)   # deterministic split


def test_unknown_name():
    with pytest.raises(ValueError, match="unknown data set"):
        data.load_dataset("mnist")


def test_quick_auto_is_digits(monkeypatch, capsys):
    monkeypatch.setenv("MULTIGPU_MODE", "quick")
    assert data.load_dataset().name == "digits"
    assert "data set: digits" in capsys.readouterr().out


def _fake_cifar_cache(home, n=6):
    folder = home.joinpath(*data._CIFAR_DIR)
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in ("data_batch_1", "data_batch_2", "test_batch"):
        batch = {b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                 b"labels": list(rng.integers(0, 10, n))}
        with open(folder / name, "wb") as f:
            pickle.dump(batch, f)
    return folder


def test_cifar_from_faked_keras_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    _fake_cifar_cache(tmp_path)

    def no_network():
        raise AssertionError("must not download when the cache exists")
    import keras
    monkeypatch.setattr(keras.datasets.cifar10, "load_data", no_network)
    d = data.load_dataset("cifar10")
    assert d.name == "cifar10" and "Keras cache" in d.source
    assert d.x_train.shape == (12, 32, 32, 3) and d.x_test.shape == (6, 32, 32, 3)
    assert d.x_train.max() <= 1.0 and d.y_train.dtype == np.int64


def test_full_auto_falls_back_to_digits_offline(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MULTIGPU_MODE", "full")
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.setattr(data, "keras_cache_dirs", lambda: [tmp_path])
    import keras

    def offline():
        raise Exception("URL fetch failure on https://...: None -- [Errno -3] Temporary failure")
    monkeypatch.setattr(keras.datasets.cifar10, "load_data", offline)
    d = data.load_dataset("auto")
    out = capsys.readouterr().out
    assert d.name == "digits" and "CIFAR-10 unavailable" in out and "URL fetch failure" in out


def test_full_auto_uses_download_when_online(tmp_path, monkeypatch):
    monkeypatch.setenv("MULTIGPU_MODE", "full")
    monkeypatch.setattr(data, "keras_cache_dirs", lambda: [tmp_path])
    import keras
    rng = np.random.default_rng(1)
    fake = ((rng.integers(0, 256, (4, 32, 32, 3), dtype=np.uint8), rng.integers(0, 10, (4, 1))),
            (rng.integers(0, 256, (2, 32, 32, 3), dtype=np.uint8), rng.integers(0, 10, (2, 1))))
    monkeypatch.setattr(keras.datasets.cifar10, "load_data", lambda: fake)
    d = data.load_dataset("auto")
    assert d.name == "cifar10" and d.source == "keras.datasets download"
    assert d.x_train.shape == (4, 32, 32, 3) and d.y_train.shape == (4,)


def test_keras_cache_dirs_honours_env(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    assert data.keras_cache_dirs()[0] == tmp_path
