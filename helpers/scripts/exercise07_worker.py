"""Exercise 07.1/07.2's worker: runs the learner's function (answer.py, next to this file) on one of two workers.

Started by helpers/exercises/lesson07.py through helpers.cluster: ``worker.py MODE GLOBAL_BATCH ROWS``. answer.py's
``ANSWERS`` lists the learner's function (or the course's tests' several): each runs on a fresh model, and its
out-<k>-<task>.json goes beside this file. The worker then waits until every worker has written all of its own.
"""

import json
import os
import sys
import time

import keras
import numpy as np
import tensorflow as tf
from answer import ANSWERS

MODE, GLOBAL, ROWS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
strategy = tf.distribute.MultiWorkerMirroredStrategy()
tf_config = json.loads(os.environ["TF_CONFIG"])
task, n_workers = tf_config["task"]["index"], len(tf_config["cluster"]["worker"])
here = os.path.dirname(os.path.abspath(__file__))


def run_one(answer):
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
            ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
            return ds.batch(ctx.get_per_replica_batch_size(GLOBAL))

        xb, yb = next(iter(strategy.distribute_datasets_from_function(fn)))

        @tf.function
        def step(xb, yb):
            strategy.run(lambda a, b: answer(model, optimizer, a, b, GLOBAL), args=(xb, yb))

        step(xb, yb)
        error = x @ w0 + b0 - y                              # one device, mean squared error over the global batch
        return {"update": (model.weights[0].numpy() - w0).ravel().tolist(),
                "reference": (-0.1 * 2.0 / GLOBAL * x.T @ error).ravel().tolist()}
    ids = np.arange(ROWS)       # the batches the learner's make_dataset gives this worker
    rows = ids[:, None].astype("float32")
    dist = strategy.distribute_datasets_from_function(lambda ctx: answer(ctx, rows, ids, GLOBAL))
    steps = []
    for _, yb in dist:
        steps.append([int(v) for t in strategy.experimental_local_results(yb) for v in np.ravel(t.numpy())])
        if len(steps) > 100:
            break
    return {"steps": steps}


for k, answer in enumerate(ANSWERS):
    out = run_one(answer)
    with open(os.path.join(here, f"out-{k}-{task}.tmp"), "w") as f:
        json.dump(out, f)
    os.replace(os.path.join(here, f"out-{k}-{task}.tmp"), os.path.join(here, f"out-{k}-{task}.json"))
last = len(ANSWERS) - 1
for _ in range(600):        # leave only when every worker is done: a peer may still be in the last all-reduce
    if all(os.path.exists(os.path.join(here, f"out-{last}-{i}.json")) for i in range(n_workers)):
        break
    time.sleep(0.05)
print(f"worker {task} done", flush=True)
os._exit(0)
