"""Exercises of 01_data_vs_device_parallelism."""

from __future__ import annotations

import collections

import keras
import numpy as np
import tensorflow as tf

from ..devices import ensure_devices
from ..placement import short_device
from . import quiet_tf, register

# ---- 01.1: put a model's layers on two devices (and avoid the lazy-build trap) ------------------


def _check_placed(answer):
    dense = [layer for layer in answer.layers if isinstance(layer, keras.layers.Dense)]
    if len(dense) < 2 or not all(layer.built for layer in dense):
        return False, "the model needs two built Dense layers (8 -> 16 -> 3); build it with keras.Input((8,))"
    first, last = dense[0], dense[-1]
    if (first.units, last.units) != (16, 3):
        return False, f"expected Dense(16) then Dense(3), got Dense({first.units}) ... Dense({last.units})"
    want = [short_device(d) for d in ensure_devices(2)]
    got = [short_device(first.kernel.value.device), short_device(last.kernel.value.device)]
    if got == want:
        return True, f"Dense(16) weights live on {got[0]} and Dense(3) weights on {got[1]}: two devices"
    if got[0] == got[1]:
        return False, (f"both kernels are on {got[0]}. Creating a layer under tf.device places nothing in "
                       "Keras 3: the weights are made when the layer is built, i.e. when you call it on "
                       "the Input. Call each layer inside its own tf.device block.")
    return False, f"kernels on {got}, expected {want} (first layer on REPLICAS[0], last on REPLICAS[1])"


def _solve_placed():
    first, second = ensure_devices(2)
    with tf.device(first):
        inputs = keras.Input((8,))
        hidden = keras.layers.Dense(16, activation="relu")(inputs)  # called here -> built here
    with tf.device(second):
        outputs = keras.layers.Dense(3, activation="softmax")(hidden)
    return keras.Model(inputs, outputs)


register("01.1", title="place two layers on two devices", checker=_check_placed, solution=_solve_placed,
         expects="keras.Model", wants="a keras.Model (8 inputs -> Dense(16) -> Dense(3))",
         hint="a layer's weights are created when the layer is built, not when it is constructed: "
              "where does your code build each layer?")

# ---- 01.2: find and fix - the optimizer state of a split model ---------------------------------

def _check_compile_split(answer):
    model = _solve_placed()          # the lesson's split model: Dense(16) on one device, Dense(3) on the other
    result = answer(model)
    if result is not model:
        return False, ("compile_split(model) must compile the model it is given and return it, it returned "
                       + (f"{type(result).__name__}" if result is not None else "None (no `return model`?)"))
    if getattr(model, "optimizer", None) is None:
        return False, "the model is not compiled: call model.compile(...)"
    x, y = np.ones((8, 8), "float32"), np.arange(8) % 3
    with quiet_tf():
        model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    weights = collections.Counter(short_device(v.value.device) for v in model.trainable_variables)
    slots = collections.Counter(short_device(v.value.device) for v in model.optimizer.variables
                                if len(v.shape) > 0)
    if not slots:
        return False, "the optimizer keeps no per-weight state (slots): keep Adam, as in the broken code"
    if set(slots) == set(weights):
        return True, (f"Adam's slots sit next to their weights ({dict(slots)} slot variables, weights "
                      f"{dict(weights)}): building the optimizer eagerly, before fit, creates each slot "
                      "where its weight lives")
    return False, (f"the weights live on {sorted(weights)}, but all of Adam's slots ended up on "
                   f"{sorted(slots)}: fit creates them lazily, inside its traced step, on one device. "
                   "Create them yourself before compile/fit")


def _solve_compile_split():
    def compile_split(model):
        optimizer = keras.optimizers.Adam()
        optimizer.build(model.trainable_variables)     # eagerly: each slot next to its weight
        model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy")
        return model

    return compile_split


register("01.2", title="find and fix: where Adam keeps its state", checker=_check_compile_split,
         solution=_solve_compile_split, expects="function", takes=1,
         wants="a function compile_split(model): your fixed version",
         hint="when, and under which device, are the optimizer's per-weight variables created? Section "
              "'Third trap' measured it.")
