"""helpers.models."""

import numpy as np
import pytest

from helpers import models


def test_small_cnn_trains_one_step():
    m = models.small_cnn((8, 8, 1), 10, batchnorm=True)
    assert any(layer.__class__.__name__ == "BatchNormalization" for layer in m.layers)
    m.compile("adam", "sparse_categorical_crossentropy")
    x = np.random.rand(16, 8, 8, 1).astype("float32")
    m.fit(x, np.arange(16) % 10, epochs=1, verbose=0)
    assert m.predict(x, verbose=0).shape == (16, 10)


def test_small_mlp_shape():
    assert models.small_mlp(5, 3).output_shape == (None, 3)


@pytest.mark.parametrize("kwargs", [dict(input_shape=(8, 8)), dict(num_classes=1), dict(width=0)])
def test_small_cnn_bad(kwargs):
    with pytest.raises(ValueError):
        models.small_cnn(**kwargs)


def test_small_mlp_bad():
    with pytest.raises(ValueError):
        models.small_mlp(0)
