"""Exercises of 12_pytorch_backend_across_devices: the learner's function runs in two ranks that torchrun starts
(gloo, CPU; helpers/scripts/exercise12_worker.py beside answer.py), Keras on PyTorch whatever the caller's backend,
through the harness it shares with lesson 07 (:mod:`helpers.exercises.harness`)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Optional

import numpy as np

from .. import subproc
from . import harness, register

TIMEOUT = 300             # seconds before the checker stops its torchrun job (SIGTERM, then SIGKILL)
TIME_LIMIT = TIMEOUT + 60  # the check's: the job's timeout ends a hung job first, with its own message
WORKER_SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "exercise12_worker.py"
_HEADER = "import keras\nimport numpy as np\nimport torch\nimport torch.distributed as dist\n\n"


#: What a step without ``training=True`` misses (keras/src/layers/layer.py, "Infer training value", 3.13-3.15).
NOT_TRAINING = ("your code called the model without training=True: Keras takes the flag from the call, never from "
                "PyTorch's .train(), so Dropout would not drop and BatchNorm would not update its statistics; call "
                "ddp_model(x, training=True) (DDP passes keyword arguments on to the model)")


def _in_training_mode(outs: list) -> bool:
    """True when every call of the model, on every rank, passed ``training=True`` (the worker's ``Mode`` layer
    records the flag of each call; an answer that never calls the model fails another check)."""
    return all(all(o["training"]) for o in outs)


def _launch(mode: str):
    """The launcher of :func:`helpers.exercises.harness.run_answers`: a 2-rank torchrun job in the job's folder."""
    def launch(work: Path) -> Optional[str]:
        try:
            run = harness.torchrun(work, ["worker.py", mode], timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            return f"the two ranks did not finish within {TIMEOUT} s: does every rank take the same steps?"
        if run.returncode != 0:
            raised = sorted(work.glob("error-*.txt"))
            if raised:
                return f"your function raised, in rank {raised[0].stem[6:]}: {raised[0].read_text()[:300]}"
            return f"the ranks failed: {subproc.error_summary(run.stderr) or run.returncode}"
        return None
    return launch


def run_answers(fns: list, mode: str) -> "list[tuple[bool, object]]":
    """Each of ``fns`` on the same two ranks, one after the other, each on a fresh model (``mode``: "step" for
    12.1's answers, "epochs" for 12.2's): for each, ``(True, [rank 0's report, rank 1's])`` or ``(False, message)``.
    One torchrun job for all, as the course's tests use it; a learner's check runs one answer."""
    if mode not in ("step", "epochs"):
        raise ValueError(f"mode must be 'step' or 'epochs', got {mode!r}")
    return harness.run_answers(fns, WORKER_SCRIPT, _HEADER, _launch(mode), where="the ranks")


def _run_answer(fn, mode: str) -> tuple[bool, object]:
    """Run ``fn`` on two ranks: ``(True, [rank 0's report, rank 1's])`` or ``(False, message)``."""
    return run_answers([fn], mode)[0]


def _check_step(answer):
    ran, outs = _run_answer(answer, "step")
    if not ran:
        return False, outs
    start, ref = (np.array(outs[0][key]) for key in ("start", "reference"))
    mine, theirs = (np.array(o["after"]) for o in outs)
    if not np.allclose(mine, theirs, rtol=1e-5, atol=1e-7):
        return False, ("the two ranks' weights differ after a step: call the model DDP wrapped (ddp_model), so "
                       "that backward() averages the gradients over the ranks")
    got, want = mine[0] - start, ref[0] - start
    if np.allclose(got, 0.0, atol=1e-9):
        return False, "the weights did not change: compute the loss's gradients and let the optimizer step"
    if not np.allclose(got, want, rtol=1e-4, atol=1e-7):
        ratio = float(got @ want / (want @ want))
        why = ("the loss was averaged twice; DDP already averages the gradients over the ranks"
               if abs(ratio - 0.5) < 0.05 else "use the Keras loss on this rank's rows, as it is")
        return False, f"the step is {ratio:.3f}x one process's step on the global batch of 32 (want 1x): {why}"
    if not np.allclose(mine[1], ref[1], rtol=1e-4, atol=1e-6):
        return False, ("the first step is right, the second is not: the first step's gradients were still there; "
                       "clear them before each backward()")
    if not _in_training_mode(outs):
        return False, "the steps are right for this model, but " + NOT_TRAINING
    return True, ("both ranks made one process's step on the global batch of 32, twice: each rank's mean loss, "
                  "and DDP's average of the gradients in backward()")


def _solve_step():
    def train_step(ddp_model, optimizer, loss_fn, x, y):
        optimizer.zero_grad()                  # the last step's gradients would add up
        loss = loss_fn(y, ddp_model(x, training=True))   # this rank's mean; DDP averages the gradients
        loss.backward()
        optimizer.step()
        return loss.detach()
    return train_step


register("12.1", title="write the DDP training step", checker=_check_step, solution=_solve_step,
         expects="function", takes=5, wants="a function train_step(ddp_model, optimizer, loss_fn, x, y)",
         time_limit=TIME_LIMIT,
         hint="DDP's backward() already averages over the ranks: what loss does each rank need, what must be "
              "cleared before each backward(), and what tells Keras that it trains?",
         giveaways=["zero_grad", "/ world", "get_world_size", ".module", "loss_fn(y, ddp_model(x))",
                    "training=True"], slow=True)


def _check_epochs(answer):
    ran, outs = _run_answer(answer, "epochs")
    if not ran:
        return False, outs
    n, (zero, one) = outs[0]["per_epoch"], outs
    if any(len(o["read"]) != 2 * n for o in outs):
        return False, "a rank did not read each epoch's rows once: train on the loader in every epoch"
    wrong = [message for bad, message in (
        (any(o["read"][:n] == o["read"][n:] for o in outs), "each epoch read the same rows in the same order: the "
         "sampler shuffles by its epoch number, so tell it the epoch before each epoch"),
        (one["files"], f"rank 1 wrote {one['files']} too: every rank holds the same weights, and two writers of one "
         "file race; let only rank 0 save"),
        (not zero["files"], "rank 0 wrote no checkpoint: keep the save, on rank 0"),
        (zero["after"] == zero["start"], "the weights did not change: keep the training steps"),
        (not _in_training_mode(outs), NOT_TRAINING)) if bad]
    if wrong:
        return False, "; ".join(wrong)
    return True, (f"every epoch read new rows in a new order, and only rank 0 wrote {zero['files']}: the "
                  "sampler knew the epoch, and one writer kept the file whole")


def _solve_epochs():
    def run_epochs(ddp_model, loader, optimizer, loss_fn, epochs, out_dir):
        import torch.distributed as dist
        for epoch in range(epochs):
            loader.sampler.set_epoch(epoch)    # a new order each epoch, the same on every rank
            for x, y in loader:
                optimizer.zero_grad()
                loss_fn(y, ddp_model(x, training=True)).backward()   # Keras reads the flag from the call
                optimizer.step()
            if dist.get_rank() == 0:           # one writer: every rank holds the same weights
                ddp_model.module.save(f"{out_dir}/model.keras")
    return run_epochs


register("12.2", title="fix a rank's epochs: the shuffle and the checkpoint", checker=_check_epochs,
         solution=_solve_epochs, expects="function", takes=6, time_limit=TIME_LIMIT,
         wants="a function run_epochs(ddp_model, loader, optimizer, loss_fn, epochs, out_dir)",
         hint="how does a DistributedSampler know which epoch it is, and which of the processes should write the "
              "one checkpoint file?",
         giveaways=["set_epoch", "get_rank() == 0", "rank == 0", "if rank"], slow=True)
