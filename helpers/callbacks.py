"""Checkpoints for the template/parallel split of ``multi_gpu_model`` (lesson 05).

Why: you train the *parallel* model but must save the *template* (saving the parallel one fails). The 2017 blog's
``ParallelModelCheckpoint``, ported word for word to Keras 3, has two traps: its positional ``period`` lands in
``save_freq`` (a save every batch), and ``mode='auto'`` reads the uncompiled template's metrics. This one avoids
both. Under ``MirroredStrategy`` there is one model, and plain ``ModelCheckpoint`` saves it.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import keras


class ParallelModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """``ModelCheckpoint`` that always saves ``model`` (the template passed to ``multi_gpu_model``); ``filepath`` and
    the keyword-only ``**kwargs`` as for ``ModelCheckpoint``. As in 2017 the file holds no optimizer state."""

    def __init__(self, model, filepath, **kwargs):
        if not isinstance(model, keras.Model):
            raise ValueError(f"model must be the template keras.Model, got {type(model).__name__}")
        super().__init__(filepath, **kwargs)
        self.template = model
        self._trained_model = None

    def set_model(self, model):
        """Remember the model being trained (for ``mode='auto'``); save the template."""
        self._trained_model = model
        super().set_model(self.template)

    def _set_monitor_op(self):
        # ModelCheckpoint resolves mode='auto' from self.model.metrics; those are the
        # trained model's compiled metrics, not the (uncompiled) template's.
        saving = self._model
        self._model = self._trained_model if self._trained_model is not None else self.template
        try:
            super()._set_monitor_op()
        finally:
            self._model = saving


@contextmanager
def count_saves(model) -> Iterator[dict]:
    """Count calls of ``model.save`` and ``model.save_weights`` inside the block: yields ``{"save": n,
    "save_weights": m}``, growing while it runs (how often a checkpoint callback really writes)."""
    if not isinstance(model, keras.Model):
        raise ValueError(f"model must be a keras.Model, got {type(model).__name__}")
    counts = {"save": 0, "save_weights": 0}
    originals = {name: getattr(model, name) for name in counts}

    def wrap(name):
        def counted(*args, **kwargs):
            counts[name] += 1
            return originals[name](*args, **kwargs)
        return counted

    for name in counts:
        setattr(model, name, wrap(name))
    try:
        yield counts
    finally:
        for name in counts:
            delattr(model, name)  # back to the class's method
