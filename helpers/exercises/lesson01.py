"""Exercises of 01_data_vs_device_parallelism."""

from __future__ import annotations

from . import describe, register

# ---- 01.1: how MirroredStrategy splits a global batch -------------------------------------------


def _check_split(answer):
    import numpy as np

    if not all(isinstance(s, (list, tuple, np.ndarray)) or hasattr(s, "numpy") for s in answer):
        return False, ("each item must be one replica's numbers (a list, array or tensor); got "
                       + ", ".join(describe(s) for s in answer))
    slices = [[int(v) for v in np.asarray(s).ravel()] for s in answer]
    if len(slices) != 2:
        return False, f"{len(slices)} slice(s): REPLICAS has 2 devices, so the strategy makes 2 slices"
    flat = [v for s in slices for v in s]
    if sorted(flat) != list(range(10)):
        return False, f"together the slices must be the whole global batch 0..9 once each, got {slices}"
    if [len(s) for s in slices] != [5, 5]:
        return False, f"slice sizes {[len(s) for s in slices]}: MirroredStrategy splits the batch evenly"
    if flat != list(range(10)):
        return False, f"{slices}: each replica gets a contiguous slice, replica 0 the first half"
    return True, (f"replica 0 got {slices[0]} and replica 1 got {slices[1]}: a global batch of 10 "
                  "becomes two per-replica batches of 5")


def _solve_split():
    import numpy as np
    import tensorflow as tf

    from helpers.devices import ensure_devices

    strategy = tf.distribute.MirroredStrategy(devices=ensure_devices(2))
    dataset = tf.data.Dataset.from_tensor_slices(np.arange(10)).batch(10)
    batch = next(iter(strategy.experimental_distribute_dataset(dataset)))
    return [t.numpy().tolist() for t in strategy.experimental_local_results(batch)]


register("01.1", title="split a global batch over the replicas", checker=_check_split,
         solution=_solve_split, expects="list", wants="a list with one list of numbers per replica",
         hint="one batch that holds all ten numbers, handed to the strategy the way this lesson "
              "distributed its dataset; then ask the strategy for each replica's part.")

# ---- 01.2: put a model's layers on two devices (and avoid the lazy-build trap) ------------------


def _check_placed(answer):
    import keras

    from helpers.devices import ensure_devices
    from helpers.placement import short_device

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
    import keras
    import tensorflow as tf

    from helpers.devices import ensure_devices

    first, second = ensure_devices(2)
    with tf.device(first):
        inputs = keras.Input((8,))
        hidden = keras.layers.Dense(16, activation="relu")(inputs)  # called here -> built here
    with tf.device(second):
        outputs = keras.layers.Dense(3, activation="softmax")(hidden)
    return keras.Model(inputs, outputs)


register("01.2", title="place two layers on two devices", checker=_check_placed, solution=_solve_placed,
         expects="keras.Model", wants="a keras.Model (8 inputs -> Dense(16) -> Dense(3))",
         hint="a layer's weights are created when the layer is built, not when it is constructed: "
              "where does your code build each layer?")

# ---- 01.3: which kind of parallelism? -----------------------------------------------------------

_SCENARIOS = {
    "a": ("data", "the model fits on one GPU and you want faster epochs: replicate it and split the "
                  "batch (data parallelism)"),
    "b": ("model", "30 GB of weights cannot fit on one 16 GB GPU, however you split the batch: put "
                   "parts of the model on different GPUs (device/model parallelism)"),
    "c": ("pipeline", "devices of a split model wait for each other; feeding micro-batches through "
                      "them one after another (pipeline parallelism) keeps them busy"),
}
_ALIASES = {"data": "data", "data parallel": "data", "data parallelism": "data", "model": "model",
            "device": "model", "model parallel": "model", "model parallelism": "model",
            "device parallelism": "model", "device parallel": "model", "pipeline": "pipeline",
            "pipeline parallelism": "pipeline", "pipeline parallel": "pipeline"}


def _check_kind(answer):
    if set(answer) != set(_SCENARIOS):
        return False, f"give one answer for each of the keys a, b, c; got keys {sorted(map(str, answer))}"
    wrong = []
    for key, (want, why) in _SCENARIOS.items():
        given = _ALIASES.get(str(answer[key]).strip().lower())
        if given is None:
            return False, f"{key}: {answer[key]!r} is not one of 'data', 'model', 'pipeline'"
        if given != want:
            wrong.append(f"{key}: not {given!r} - {why}")
    if wrong:
        return False, "; ".join(wrong)
    return True, "right on all three: data parallelism for speed, model parallelism for size, " \
                 "pipelining to keep a split model busy"


def _solve_kind():
    return {"a": "data", "b": "model", "c": "pipeline"}


register("01.3", title="data, model or pipeline parallelism?", checker=_check_kind, solution=_solve_kind,
         expects="dict", wants='a dict {"a": ..., "b": ..., "c": ...} of "data", "model" or "pipeline"',
         hint="ask: does the model fit on one device? if yes, what is the bottleneck?")
