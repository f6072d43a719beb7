"""Exercises of 01_data_vs_device_parallelism."""

from __future__ import annotations

import collections
import math

import keras
import numpy as np
import tensorflow as tf

from ..devices import ensure_devices
from ..placement import short_device
from . import RANDOM, as_float, as_int, as_str, describe, error_line, practice_strategy, quiet_tf, register

# ---- 01.1: one data-parallel step by hand, against one device's step on the whole batch ----------------


def _check_replica_step(answer):
    strategy = practice_strategy()
    n, x = strategy.num_replicas_in_sync, np.linspace(-1, 1, 24, dtype="float32").reshape(8, 3)
    y = (x @ np.array([[1], [-2], [0.5]], "float32") + 0.3) ** 2
    w, b = np.full((3, 1), 0.1, "float32"), np.zeros(1, "float32")
    with strategy.scope():
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        optimizer = keras.optimizers.SGD(learning_rate=0.1)
    model.set_weights([w, b])
    with quiet_tf():
        loss = answer(strategy, model, optimizer, x, y)
    err = x @ w + b - y                               # one device's SGD step on the whole batch, by hand
    base, want = np.append(w, b), np.append(w - 0.1 * 2 * x.T @ err / len(x), b - 0.1 * 2 * err.mean(0))
    copies = [np.concatenate([v.value.values[i].numpy().ravel() for v in model.trainable_variables]) for i in range(n)]
    got = copies[0]
    if np.allclose(got, base):
        return False, ("the weights did not change: call optimizer.apply_gradients(...) inside the function "
                       "that strategy.run runs on every replica")
    if not all(np.allclose(c, got) for c in copies):
        return False, "the replicas' copies of the weights differ after the step: every replica must apply it"
    if not np.allclose(got, want, rtol=1e-4, atol=1e-6):
        if math.isclose(float(np.dot(got - base, want - base) / np.dot(want - base, want - base)), n, rel_tol=1e-3):
            return False, (f"the update is {n}x one device's step on the whole batch: the replicas' gradients are "
                           "summed, so each replica's loss must be its rows' sum divided by the GLOBAL batch (not a "
                           "mean over its own rows), and each replica must get only its slice of the batch")
        return False, (f"the new weights {np.round(got, 4).tolist()} are not one device's SGD step on the whole batch "
                       f"({np.round(want, 4).tolist()})")
    if hasattr(loss, "values") or not (isinstance(loss, (float, np.floating)) or hasattr(loss, "numpy")):
        return False, (f"train_step returned {describe(loss)}; return the whole batch's loss as one number "
                       "(strategy.reduce adds up the replicas' parts)")
    if not math.isclose(as_float("the loss", loss), float(np.mean(err ** 2)), rel_tol=1e-4):
        return False, (f"the update is right, but the loss {float(loss):.5f} is not the whole batch's mean squared "
                       f"error {np.mean(err ** 2):.5f}: add up the replicas' losses, each divided by the global batch")
    return True, (f"{n} replicas, each on its {len(x) // n} rows with its loss divided by the global batch of {len(x)}: "
                  "their summed gradients gave exactly one device's step on the whole batch")


def _solve_replica_step():
    def train_step(strategy, model, optimizer, x, y):
        global_batch = len(x)
        dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(global_batch)
        x_dist, y_dist = next(iter(strategy.experimental_distribute_dataset(dataset)))   # a slice per replica

        def replica_step(x, y):
            with tf.GradientTape() as tape:
                per_example = tf.square(model(x, training=True) - y)[:, 0]
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))   # all-reduce (sum), then update
            return loss

        losses = strategy.run(replica_step, args=(x_dist, y_dist))
        return float(strategy.reduce("SUM", losses, axis=None))

    return train_step


register("01.1", title="one data-parallel step by hand", checker=_check_replica_step, solution=_solve_replica_step,
         expects="function", takes=5, wants="a function train_step(strategy, model, optimizer, x, y) -> float",
         hint="follow the lesson's step: the batch split over the replicas, each replica's loss over the global "
              "batch, the update inside strategy.run, the replicas' losses added up.",
         giveaways=["compute_average_loss", "global_batch_size", "experimental_distribute_dataset",
                    "strategy.reduce"])

# ---- 01.2: find and fix - the optimizer state of a split model ---------------------------------


def _split_functional():
    """Dense(16) built on the first replica device, Dense(3) on the second (a functional model: the weights split)."""
    first, second = ensure_devices(2)
    with tf.device(first):
        inputs = keras.Input((8,))
        hidden = keras.layers.Dense(16, activation="relu")(inputs)  # called here -> built here
    with tf.device(second):
        outputs = keras.layers.Dense(3, activation="softmax")(hidden)
    return keras.Model(inputs, outputs)


def _check_compile_split(answer):
    model = _split_functional()
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
              "'Third trap' measured it.",
         giveaways=["optimizer.build", ".build(", "trainable_variables"])

# ---- 01.3: which parallelism? A mesh for a model, a batch and some devices --------------------------------

#: (weights GB, activations GB of the global batch, GB per device, devices) -> the mesh shape, or None: none fits.
SITUATIONS = [((2, 8, 16, 8), (8, 1)), ((40, 8, 16, 8), (2, 4)), ((1, 60, 16, 4), (4, 1)),
              ((30, 6, 16, 6), (2, 3)), ((100, 8, 16, 4), None), ((20, 40, 16, 2), None)]


def _per_device(weights, activations, shape):
    return weights / shape[1] + activations / shape[0]


def _least_split(weights, activations, device_gb, n):
    """The mesh shape that splits the weights the fewest ways and fits, or None: the reference answer."""
    return next(((n // m, m) for m in range(1, n + 1)
                 if n % m == 0 and _per_device(weights, activations, (n // m, m)) <= device_gb), None)


def _random_situation():
    """One more situation, drawn afresh for each check: an answer cannot know them all by heart."""
    weights, activations, n = RANDOM.randint(1, 90), RANDOM.randint(1, 60), RANDOM.choice((2, 4, 6, 8))
    return (weights, activations, 16, n), _least_split(weights, activations, 16, n)


def _check_mesh(answer):
    for (weights, activations, device_gb, n), want in [*SITUATIONS, _random_situation()]:
        devices = [f"gpu:{i}" for i in range(n)]
        case = f"{weights} GB of weights, {activations} GB of activations on {n} devices of {device_gb} GB"
        try:
            mesh = answer(weights, activations, device_gb, list(devices))
        except ValueError as exc:
            if want is None:
                continue
            return False, f"for {case} it raised {error_line(exc)}, but the mesh {want} fits"
        if want is None:
            least = min(_per_device(weights, activations, (n // m, m)) for m in range(1, n + 1) if n % m == 0)
            return False, (f"for {case} no mesh fits (the best one still needs {least:g} GB a device), so raise "
                           f"ValueError; it returned {describe(mesh)}")
        if not isinstance(mesh, keras.distribution.DeviceMesh):
            return False, (f"for {case} it returned {describe(mesh)}; return keras.distribution.DeviceMesh(shape="
                           "(d, m), axis_names=('batch', 'model'), devices=devices)")
        shape = tuple(as_int("a mesh dimension", s) for s in mesh.shape)
        names = tuple(as_str("an axis name", a) if isinstance(a, str) else repr(a) for a in mesh.axis_names)
        if names != ("batch", "model"):
            return False, f"name the mesh's axes ('batch', 'model'), in that order, not {names}"
        if [as_str("a device", str(d)) for d in np.asarray(mesh.devices).ravel()] != devices:
            return False, f"for {case} the mesh must hold every device given, in order"
        need = _per_device(weights, activations, shape)
        if need > device_gb:
            return False, f"for {case} the mesh {shape} puts {need:g} GB on each device: more than {device_gb} GB"
        if shape != want:
            return False, (f"for {case} the mesh {shape} fits, but {want} fits too with the weights split fewer "
                           "ways: split the model only as far as it must, the rest is data parallelism")
    return True, ("every situation gets the least model splitting that fits: data parallelism while the weights fit, "
                  "a model axis only when they do not, and an error when nothing fits")


def _solve_mesh():
    def choose_mesh(weights_gb, activations_gb, device_gb, devices):
        n = len(devices)
        for m in range(1, n + 1):                 # split the weights as few ways as possible
            d = n // m
            if n % m == 0 and weights_gb / m + activations_gb / d <= device_gb:
                return keras.distribution.DeviceMesh(shape=(d, m), axis_names=("batch", "model"), devices=devices)
        raise ValueError(f"{weights_gb} GB of weights do not fit on {n} devices of {device_gb} GB")

    return choose_mesh


register("01.3", title="which parallelism: a mesh for a situation", checker=_check_mesh, solution=_solve_mesh,
         expects="function", takes=4,
         wants="a function choose_mesh(weights_gb, activations_gb, device_gb, devices) -> keras.distribution.DeviceMesh",
         hint="try the model axis sizes that divide the device count, smallest first, and keep the first whose "
              "memory per device fits.",
         giveaways=["n % m", "range(1", "DeviceMesh(shape", "weights_gb / m"])
