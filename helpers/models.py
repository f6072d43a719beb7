"""Small models shared by the lessons (so no notebook re-types the same network).

Why: the lessons are about *where* a model runs, not about architectures; one
small CNN that trains in seconds on 8x8 digits and also works on 32x32 CIFAR-10
keeps every notebook short and comparable.
"""

from __future__ import annotations

from typing import Sequence


def small_cnn(input_shape: Sequence[int] = (8, 8, 1), num_classes: int = 10,
              batchnorm: bool = False, width: int = 32, name: str = "small_cnn"):
    """A two-conv-layer classifier (softmax output); ``batchnorm`` adds BatchNormalization."""
    if len(tuple(input_shape)) != 3:
        raise ValueError(f"input_shape must be (height, width, channels), got {tuple(input_shape)}")
    if num_classes < 2 or width < 1:
        raise ValueError("num_classes must be >= 2 and width >= 1")
    import keras
    from keras import layers

    body = [keras.Input(tuple(input_shape)), layers.Conv2D(width, 3, padding="same", activation="relu")]
    if batchnorm:
        body.append(layers.BatchNormalization())
    body += [layers.Conv2D(width, 3, padding="same", activation="relu"),
             layers.GlobalAveragePooling2D(), layers.Dense(64, activation="relu"),
             layers.Dense(num_classes, activation="softmax")]
    return keras.Sequential(body, name=name)


def small_mlp(input_dim: int = 64, num_classes: int = 10, hidden: int = 64, name: str = "small_mlp"):
    """A one-hidden-layer classifier on flat inputs (softmax output)."""
    if input_dim < 1 or num_classes < 2 or hidden < 1:
        raise ValueError("input_dim and hidden must be >= 1, num_classes >= 2")
    import keras
    from keras import layers

    return keras.Sequential([keras.Input((input_dim,)), layers.Dense(hidden, activation="relu"),
                             layers.Dense(num_classes, activation="softmax")], name=name)
