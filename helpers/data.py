"""A small real image-classification data set that works offline.

Why: ``keras.datasets`` downloads at run time, which fails on CI and in air-gapped classrooms. Quick mode (and a
failed download) uses scikit-learn's bundled 8x8 *digits*; full mode tries CIFAR-10, from an extracted Keras cache
first (``keras.datasets`` downloads again when only the extracted folder is left).
"""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from . import config

NAMES = ("auto", "digits", "cifar10")
_CIFAR_DIR = ("datasets", "cifar-10-batches-py-target", "cifar-10-batches-py")


@dataclass
class Dataset:
    """Train/test arrays (``x_*`` float32 in [0, 1], shape (N, H, W, C); ``y_*`` int labels) and their source."""

    name: str
    source: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int

    @property
    def input_shape(self) -> tuple:
        return tuple(self.x_train.shape[1:])

    def summary(self) -> str:
        return (f"{self.name} ({self.source}): train {self.x_train.shape}, test {self.x_test.shape}, "
                f"{self.num_classes} classes")


def load_digits() -> Dataset:
    """scikit-learn's bundled handwritten digits as 8x8x1 images (no network); a fixed 20% are the test set."""
    from sklearn.datasets import load_digits as _sk_digits

    bunch = _sk_digits()
    x = (bunch.images / 16.0).astype("float32")[..., None]
    y = bunch.target.astype("int64")
    test, train = np.split(np.random.default_rng(0).permutation(len(x)), [round(len(x) * 0.2)])
    return Dataset("digits", "scikit-learn bundled copy (offline)", x[train], y[train], x[test], y[test], 10)


def keras_cache_dirs() -> list[Path]:
    """Where Keras keeps downloads: ``$KERAS_HOME``, ``~/.keras``, then ``/tmp/.keras``."""
    home = os.environ.get("KERAS_HOME")
    return ([Path(home).expanduser()] if home else []) + [Path("~/.keras").expanduser(), Path("/tmp/.keras")]


def _load_cifar_batch(path: Path) -> tuple:
    """One pickled CIFAR-10 batch file -> (uint8 images (N, 32, 32, 3), labels)."""
    with open(path, "rb") as f:
        batch = pickle.load(f, encoding="bytes")
    batch = {k.decode() if isinstance(k, bytes) else k: v for k, v in batch.items()}
    images = np.asarray(batch["data"], dtype=np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return images, np.asarray(batch["labels"])


def _cifar_from_cache() -> Optional[tuple]:
    """Read CIFAR-10 from an extracted Keras cache, or None if there is none."""
    for base in keras_cache_dirs():
        folder = base.joinpath(*_CIFAR_DIR)
        batches = sorted(folder.glob("data_batch_*"))
        if batches and (folder / "test_batch").exists():
            x_train, y_train = zip(*[_load_cifar_batch(p) for p in batches])
            train = np.concatenate(x_train), np.concatenate(y_train)
            return train, _load_cifar_batch(folder / "test_batch"), f"Keras cache {folder}"
    return None


def load_cifar10() -> Dataset:
    """CIFAR-10 from the Keras cache, else downloaded by ``keras.datasets`` (needs network)."""
    found = _cifar_from_cache()
    if found is None:
        import keras

        found = (*keras.datasets.cifar10.load_data(), "keras.datasets download")
    (x_train, y_train), (x_test, y_test), source = found
    return Dataset("cifar10", source, (x_train / 255.0).astype("float32"), y_train.reshape(-1).astype("int64"),
                   (x_test / 255.0).astype("float32"), y_test.reshape(-1).astype("int64"), 10)


def load_dataset(name: str = "auto") -> Dataset:
    """Load a data set by name and print which one was used. ``"auto"``: digits in quick mode; CIFAR-10 in full
    mode, else digits (with a message), e.g. offline."""
    if name not in NAMES:
        raise ValueError(f"unknown data set {name!r}; choose one of {', '.join(NAMES)}")
    if name == "digits" or (name == "auto" and config.is_quick()):
        data = load_digits()
    elif name == "cifar10":
        data = load_cifar10()
    else:
        try:
            data = load_cifar10()
        except Exception as exc:  # offline, blocked, corrupted cache...
            print(f"CIFAR-10 unavailable ({type(exc).__name__}: {str(exc)[:120]}); using the offline digits instead.")
            data = load_digits()
    print("data set:", data.summary())
    return data
