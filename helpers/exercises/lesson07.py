"""Exercises of 07_multi_worker_and_fault_tolerance: the learner's function runs on two real workers.

The checker copies the function's source into a small worker script and starts two workers with
:mod:`helpers.cluster` (MultiWorkerMirroredStrategy on the CPU, one replica each), through the harness it shares
with lesson 12 (:mod:`helpers.exercises.harness`), and reads what each measured.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import tensorflow as tf

from .. import cluster, subproc
from . import harness, register

GLOBAL_BATCH = 8          # examples per step, both workers together
WORKERS = 2
ROWS_07_2 = 49            # odd on purpose: the two shards differ by one example
TIMEOUT = 180             # seconds before the launcher kills the checker's workers
TIME_LIMIT = TIMEOUT + 60  # the check's: the launcher's timeout ends a hung job first, with its own message

_HEADER = "import keras\nimport numpy as np\nimport tensorflow as tf\n\n"

#: The workers' script: a file, so that it is read (and linted) as code.
WORKER_SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "exercise07_worker.py"


def _launch(mode: str):
    """The launcher of :func:`helpers.exercises.harness.run_answers`: two workers in the job's folder."""
    def launch(work: Path) -> Optional[str]:
        try:
            result = cluster.run([str(work / "worker.py"), mode, str(GLOBAL_BATCH), str(ROWS_07_2)],
                                 n_workers=WORKERS, timeout=TIMEOUT, grace=2.0, check=False, echo=False,
                                 log_dir=work / "logs")
        except cluster.ClusterTimeoutError:
            return (f"the two workers did not finish within {TIMEOUT} s: does every worker take the same steps "
                    "(a worker that waits in an all-reduce nobody else joins waits forever)?")
        if not result.ok:
            errors = {name: subproc.error_summary(text, 300) for name, text in result.errors.items()}
            return "your function failed in the workers: " + "; ".join(f"{k}: {v}" for k, v in errors.items())
        return None
    return launch


def run_answers(fns: list, mode: str) -> "list[tuple[bool, object]]":
    """Each of ``fns`` on the same two workers, one after the other, each on a fresh model (``mode``: "step" for
    07.1's answers, "data" for 07.2's): for each, ``(True, [worker 0's output, worker 1's])`` or
    ``(False, message)``. One two-worker job for all, as the course's tests use it; a learner's check runs one."""
    if mode not in ("step", "data"):
        raise ValueError(f"mode must be 'step' or 'data', got {mode!r}")
    return harness.run_answers(fns, WORKER_SCRIPT, _HEADER, _launch(mode), where="the workers", n=WORKERS)


def _run_answer(fn, mode: str) -> tuple[bool, object]:
    """Run ``fn`` in two workers; ``(True, [worker 0's output, worker 1's])`` or ``(False, message)``."""
    return run_answers([fn], mode)[0]


# ---- 07.1: write the replica step of the worker script ------------------------------------------

def _check_replica_step(answer):
    ran, outs = _run_answer(answer, "step")
    if not ran:
        return False, outs
    ups, ref = [np.array(o["update"]) for o in outs], np.array(outs[0]["reference"])
    if not np.allclose(ups[0], ups[1], rtol=1e-5, atol=1e-7):
        return False, ("the two workers' weights differ after the step: apply the gradients with the "
                       "optimizer inside the replica step, so that it all-reduces them")
    if np.allclose(ups[0], 0.0, atol=1e-9):
        return False, "the weights did not change: compute the gradients and apply them with the optimizer"
    ratio = float(np.dot(ups[0], ref) / np.dot(ref, ref))
    if np.allclose(ups[0], ref, rtol=1e-4, atol=1e-7):
        return True, (f"both workers made one device's step on the global batch of {GLOBAL_BATCH}: each worker's "
                      f"loss was its rows' sum / {GLOBAL_BATCH}, and the all-reduce added the two")
    if abs(ratio - WORKERS) < 0.05:
        return False, (f"the step is {WORKERS}x one device's: each worker divided by its own "
                       f"{GLOBAL_BATCH // WORKERS} rows, and the all-reduce then adds the {WORKERS} workers' "
                       "gradients")
    if abs(ratio - 1 / WORKERS) < 0.02:
        return False, (f"the step is 1/{WORKERS} of one device's: the loss was divided twice (a default-reduction "
                       "Keras loss already scales by 1/num_replicas_in_sync in a replica context)")
    return False, (f"the step is {ratio:.3f}x one device's step on the global batch (want 1x): the loss should be "
                   "the mean squared error of the global batch of 8")


def _solve_replica_step():
    def replica_step(model, optimizer, x, y, global_batch_size):
        with tf.GradientTape() as tape:
            per_example = tf.square(model(x, training=True) - y)[:, 0]    # one loss per row
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch_size)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))  # all-reduce (sum), then update

    return replica_step


register("07.1", title="write the replica step of a two-worker job", checker=_check_replica_step,
         solution=_solve_replica_step, expects="function", takes=5, time_limit=TIME_LIMIT,
         wants="a function replica_step(model, optimizer, x, y, global_batch_size)",
         hint="this worker sees only its part of the global batch, and the all-reduce ADDS the workers' "
              "gradients: what must each worker divide its rows' squared errors by?",
         giveaways=["compute_average_loss", "global_batch_size)", "/ 8", "reduce_mean"], slow=True)

# ---- 07.2: fix a worker's input: the batch and the number of steps ------------------------------

def _check_dataset(answer):
    ran, outs = _run_answer(answer, "data")
    if not ran:
        return False, outs
    steps = [o["steps"] for o in outs]
    want = GLOBAL_BATCH // WORKERS
    seen = [[i for s in worker for i in s] for worker in steps]
    wrong = []
    if any(len(s) > 100 for s in steps):
        return False, "the dataset never ends (repeat()?): give every worker a finite epoch"
    if not all(steps):
        return False, "a worker got no batch at all"
    both = sorted(set(seen[0]) & set(seen[1]))
    if both:
        wrong.append(f"both workers read the examples {both[:4]}...: shard the data by this worker's "
                     "input pipeline, so each worker reads its own part")
    first = [len(s[0]) for s in steps]
    if any(n != want for n in first):
        wrong.append(f"a worker's batch has {first[0]} rows: the global batch of {GLOBAL_BATCH} is shared by "
                     f"{WORKERS} workers, so with one replica each a worker batches {want} "
                     "(ctx.get_per_replica_batch_size)")
    if len(steps[0]) != len(steps[1]):
        wrong.append(f"worker 0 takes {len(steps[0])} steps and worker 1 {len(steps[1])}: in training the "
                     "worker with more steps would wait forever in an all-reduce nobody else joins")
    short = sorted({len(s) for worker in steps for s in worker if len(s) != first[0]})
    if short:
        wrong.append(f"some steps give a worker {short} rows instead of {first[0]} (an empty batch is what a "
                     "worker that ran out gets): drop the partial last batch, so every step is a full one")
    if wrong:
        return False, "; ".join(wrong)
    return True, (f"each worker reads its own shard in batches of {want} and both take {len(steps[0])} steps: "
                  f"{WORKERS} x {want} = {GLOBAL_BATCH} examples per step, and no all-reduce waits forever")


def _solve_dataset():
    def make_dataset(ctx, x, y, global_batch):
        ds = tf.data.Dataset.from_tensor_slices((x, y))
        ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
        return ds.batch(ctx.get_per_replica_batch_size(global_batch), drop_remainder=True)
    return make_dataset


register("07.2", title="fix a worker's batches and step count", checker=_check_dataset,
         solution=_solve_dataset, expects="function", takes=4, time_limit=TIME_LIMIT,
         wants="a function make_dataset(ctx, x, y, global_batch) returning a tf.data.Dataset",
         hint="count the rows one step trains on over both workers, and the steps each worker's shard "
              "gives (49 examples): what must be the same on every worker?",
         giveaways=["get_per_replica_batch_size", "drop_remainder", "// 2"], slow=True)
