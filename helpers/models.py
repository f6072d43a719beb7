"""Small models shared by the lessons: they are about *where* a model runs, not architectures.

Why: one small CNN that trains in seconds on 8x8 digits and also works on CIFAR-10 keeps the notebooks comparable.
"""

from __future__ import annotations

from typing import Sequence

from .checks import positive_int


def small_cnn(input_shape: Sequence[int] = (8, 8, 1), num_classes: int = 10, batchnorm: bool = False, width: int = 32):
    """A two-conv-layer classifier (softmax output); ``batchnorm`` adds BatchNormalization."""
    if len(tuple(input_shape)) != 3:
        raise ValueError(f"input_shape must be (height, width, channels), got {tuple(input_shape)}")
    positive_int("num_classes", num_classes, minimum=2)
    positive_int("width", width)
    import keras
    from keras import layers

    body = [keras.Input(tuple(input_shape)), layers.Conv2D(width, 3, padding="same", activation="relu")]
    if batchnorm:
        body.append(layers.BatchNormalization())
    body += [layers.Conv2D(width, 3, padding="same", activation="relu"),
             layers.GlobalAveragePooling2D(), layers.Dense(64, activation="relu"),
             layers.Dense(num_classes, activation="softmax")]
    return keras.Sequential(body, name="small_cnn")


def small_mlp(input_dim: int = 64, num_classes: int = 10, hidden: int = 64, name: str = "small_mlp"):
    """A one-hidden-layer classifier on flat inputs (softmax output)."""
    positive_int("input_dim", input_dim)
    positive_int("num_classes", num_classes, minimum=2)
    positive_int("hidden", hidden)
    import keras
    from keras import layers

    return keras.Sequential([keras.Input((input_dim,)), layers.Dense(hidden, activation="relu"),
                             layers.Dense(num_classes, activation="softmax")], name=name)
