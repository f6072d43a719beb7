"""Checkpoint callbacks for the template/parallel split of ``multi_gpu_model`` (lesson 05).

Why: with ``multi_gpu_model`` you train the *parallel* model but must save the
*template* (the model you passed in): in 2017 saving the parallel model crashed
with ``TypeError: can't pickle module objects``, and with the course's Keras 3
re-implementation (:func:`helpers.legacy.multi_gpu_model`) it raises
``NotImplementedError``. The blog's ``ParallelModelCheckpoint`` fixed this by
swapping the template in via ``set_model``. Ported word for word to Keras 3 it
has two traps: its positional ``period`` lands in ``save_freq`` (a save every
batch), and ``mode='auto'`` looks for the monitored metric on the template,
which was never compiled. :class:`ParallelModelCheckpoint` avoids both.

Under ``tf.distribute.MirroredStrategy`` none of this is needed: there is one
model, and the plain ``keras.callbacks.ModelCheckpoint`` saves it.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import keras


class ParallelModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """``ModelCheckpoint`` that always saves ``model`` (the template), whatever model is being trained.

    Args:
        model: the template ``keras.Model`` (the one you passed to ``multi_gpu_model``).
        filepath: as for ``ModelCheckpoint`` (``.keras``/``.h5``, or ``.weights.h5``
            with ``save_weights_only=True``; ``{epoch:02d}``, ``{val_loss:.2f}`` ... allowed).
        **kwargs: every ``ModelCheckpoint`` keyword (``monitor``, ``verbose``,
            ``save_best_only``, ``save_weights_only``, ``mode``, ``save_freq``,
            ``initial_value_threshold``), with the same meaning and the same errors -
            e.g. ``period=`` is a ``TypeError`` as it is for ``ModelCheckpoint``.
            They are keyword-only on purpose: the blog's positional ``period`` would
            silently become ``save_freq=1``.

    ``mode='auto'`` decides min/max from the metrics of the model being trained
    (the parallel model), exactly as ``ModelCheckpoint`` would for that model.

    Weakness (as in 2017): the template was never compiled, so the file holds no
    optimizer state; resuming from it restarts the optimizer (Adam's moments, step
    count). Under ``MirroredStrategy`` a plain ``ModelCheckpoint`` saves both.
    """

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
    """Count calls of ``model.save`` and ``model.save_weights`` inside the block.

    Yields a dict ``{"save": n, "save_weights": m}`` that grows while the block
    runs; the model's methods are restored afterwards. Used to measure how often
    a checkpoint callback really writes (e.g. the positional-``period`` trap).
    """
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
