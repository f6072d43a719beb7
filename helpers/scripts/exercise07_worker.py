"""Exercise 07.1/07.2's worker: runs the learner's function (answer.py, next to this file) on one of two workers.

Started by helpers/exercises/lesson07.py through helpers.cluster: ``worker.py MODE GLOBAL_BATCH ROWS``. It writes
out-<task>.json beside itself and waits until every worker has written its own.
"""

import json
import os
import sys
import time

import keras
import numpy as np
import tensorflow as tf
from answer import ANSWER

MODE, GLOBAL, ROWS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
strategy = tf.distribute.MultiWorkerMirroredStrategy()
tf_config = json.loads(os.environ["TF_CONFIG"])
task, n_workers = tf_config["task"]["index"], len(tf_config["cluster"]["worker"])
out = {}
if MODE == "step":          # one training step of the learner's replica_step, and one device's step
    rng = np.random.default_rng(0)
    x = rng.normal(size=(GLOBAL, 3)).astype("float32")
    y = (x @ np.array([[1.0], [-2.0], [0.5]]) + 0.3).astype("float32")
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        optimizer = keras.optimizers.SGD(0.1)
        optimizer.build(model.trainable_variables)
    w0, b0 = [v.numpy() for v in model.weights]

    def fn(ctx):
        ds = tf.data.Dataset.from_tensor_slices((x, y))
        return ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id).batch(ctx.get_per_replica_batch_size(GLOBAL))

    xb, yb = next(iter(strategy.distribute_datasets_from_function(fn)))

    @tf.function
    def step(xb, yb):
        strategy.run(lambda a, b: ANSWER(model, optimizer, a, b, GLOBAL), args=(xb, yb))

    step(xb, yb)
    error = x @ w0 + b0 - y                              # one device, mean squared error over the global batch
    out = {"update": (model.weights[0].numpy() - w0).ravel().tolist(),
           "reference": (-0.1 * 2.0 / GLOBAL * x.T @ error).ravel().tolist()}
else:                       # the batches the learner's make_dataset gives this worker
    ids = np.arange(ROWS)
    dist = strategy.distribute_datasets_from_function(lambda ctx: ANSWER(ctx, ids[:, None].astype("float32"), ids, GLOBAL))
    steps = []
    for _, yb in dist:
        steps.append([int(v) for t in strategy.experimental_local_results(yb) for v in np.ravel(t.numpy())])
        if len(steps) > 100:
            break
    out = {"steps": steps}
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, f"out-{task}.tmp"), "w") as f:
    json.dump(out, f)
os.replace(os.path.join(here, f"out-{task}.tmp"), os.path.join(here, f"out-{task}.json"))
for _ in range(600):        # leave only when every worker is done: a peer may still be in the last all-reduce
    if all(os.path.exists(os.path.join(here, f"out-{i}.json")) for i in range(n_workers)):
        break
    time.sleep(0.05)
print(f"worker {task} done", flush=True)
os._exit(0)
