"""Lesson 06's benchmark in one process: ``python bench_child.py REPLICAS SETTINGS_JSON`` -> one JSON line per way.

``helpers.bench.run_benchmark`` runs it in a fresh process for a replica count the kernel has no devices for, and
imports it to measure in the kernel. The three ways train the same CNN from the same weights on the same global
batch, kept in memory (no input cost), with XLA off for all three: the default ``jit_compile="auto"`` picks XLA
for one GPU but never for a model built under a strategy (keras#19005), which would compare two compilers.
"""

import json
import sys
import time

import keras
import tensorflow as tf

from helpers import devices, precision
from helpers.models import small_cnn


class StepTimer(keras.callbacks.Callback):
    """``time.perf_counter()`` when each step ends: ``fit`` calls ``on_train_batch_end`` once the step's result is ready."""

    def on_train_begin(self, logs=None):
        self.ends = []

    def on_train_batch_end(self, batch, logs=None):
        self.ends.append(time.perf_counter())


class Towers(keras.Model):
    """The 2017 tower model: one set of weights, a slice of the batch per device, the outputs merged on the CPU."""

    def __init__(self, template, tower_devices):
        super().__init__()
        self.template, self.tower_devices = template, list(tower_devices)

    def call(self, x):
        outputs = []
        for device, part in zip(self.tower_devices, tf.split(x, len(self.tower_devices))):
            with tf.device(device):
                outputs.append(self.template(part))
        with tf.device("/cpu:0"):
            return tf.concat(outputs, axis=0)


def capabilities(n):
    """Each of ``n`` replicas' compute capability, (7, 5) on a T4 (a split GPU: GPU 0's); None on a CPU."""
    gpus = tf.config.list_physical_devices("GPU")
    caps = [tuple(tf.config.experimental.get_device_details(g).get("compute_capability", (0, 0))) for g in gpus]
    return [caps[min(i, len(caps) - 1)] for i in range(n)] if caps else [None] * n


def policy_for(setting, caps):
    """The dtype policy to measure: ``setting`` as given (None: float32), or the course's rule for ``"mixed"``."""
    return precision.mixed_policy(caps) if setting == "mixed" else setting or "float32"


def timed_fit(model, s, global_batch):
    """Samples/s of every step after ``s["warmup"]`` untimed ones (the first step traces the graph)."""
    x = tf.random.uniform((global_batch, *s["input_shape"]), seed=1)
    y = tf.random.uniform((global_batch,), maxval=s["num_classes"], dtype=tf.int64, seed=2)
    timer = StepTimer()
    model.fit(tf.data.Dataset.from_tensors((x, y)).repeat(), steps_per_epoch=s["warmup"] + s["steps"], epochs=1,
              verbose=0, shuffle=False, callbacks=[timer])
    ends = timer.ends[s["warmup"] - 1:]
    return [global_batch / (b - a) for a, b in zip(ends, ends[1:])]


def build(s, towers=()):
    template = small_cnn(s["input_shape"], s["num_classes"], width=s["width"])
    model = Towers(template, towers) if towers else template
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="sparse_categorical_crossentropy", jit_compile=False)
    return model


def run(way, strategy, s):
    """One way measured with the caller's ``strategy`` (a process keeps one), as a JSON-ready dict; the dtype policy
    of ``s["policy"]`` holds while the model is built and trained, float32 again afterwards."""
    keras.utils.set_random_seed(0)                            # the same starting weights for every way
    used = ["/device:" + d.split("/device:")[-1] for d in strategy.extended.worker_devices]
    global_batch = s["batch_per_replica"] * strategy.num_replicas_in_sync   # the same for every way
    policy = policy_for(s["policy"], capabilities(len(used)))
    keras.mixed_precision.set_global_policy(policy)
    try:
        if way == "mirrored":
            with strategy.scope():
                model = build(s)
            rates = timed_fit(model, s, global_batch)
        elif way == "towers":
            rates = timed_fit(build(s, towers=used), s, global_batch)
        else:                                                 # one device takes the whole global batch
            used = used[:1]
            with tf.device(used[0]):
                rates = timed_fit(build(s), s, global_batch)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    return {"way": way, "replicas": strategy.num_replicas_in_sync, "devices": used, "kind": devices.replica_kind(),
            "gpus": devices.gpu_names(), "global_batch": global_batch, "samples_per_s": rates, "policy": policy}


if __name__ == "__main__":
    n, settings = int(sys.argv[1]), json.loads(sys.argv[2])
    strategy = tf.distribute.MirroredStrategy(devices.ensure_devices(n))   # first: TF fixes its devices once
    for way in settings["ways"]:
        if way != "towers" or n > 1:                          # a tower model needs >= 2 devices
            print(json.dumps(run(way, strategy, settings)), flush=True)
