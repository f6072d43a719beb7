"""The Slurm checks of ``make slurm-check``: the lessons' own job scripts on the local one-node Slurm.

Usage (inside ``tools/slurm/local_slurm.sh``, which exports ``SLURM_CONF``): ``python tools/slurm/check.py
[--notebooks DIR]``. The job scripts are the files that lessons 07, 08, 12 and 13 write with ``%%writefile`` (read from
the notebooks in ``DIR``, default ``notebooks/``, at check time): each lesson's files go into a folder of their own
and are submitted from there, as a learner submits what a lesson wrote. There is no second copy of them.

Checks (each prints its seconds and a verdict; any failure makes the exit status 1):

1. **TF together**: lesson 07's ``mwms_job.sbatch`` (2 tasks, ``srun`` inside) on a CPU node, where each task builds
   its ``TF_CONFIG`` with the lesson's ``tf_config_from_slurm``. Both tasks must log the same loss and weights
   checksum after every epoch, have seen different data whose shares add up to the all-reduced loss, and end with
   other weights than the same job with ``--ntasks=1``.
2. **TF resume**: the job is cancelled (``scancel``) after its first backup and submitted again, unchanged: the
   second job must resume after the backed-up epoch (not from epoch 0), lose and repeat no epoch, and end with the
   uninterrupted job's losses and weights.
3. **TF GPU node**: the same job with ``--gres=gpu:2`` on the node's 2 stand-in GPUs (``local_slurm.sh``): Slurm
   sets ``SLURM_GPUS_ON_NODE`` and ``CUDA_VISIBLE_DEVICES``, so ``make_strategy`` takes TensorFlow's
   ``SlurmClusterResolver`` (its ports 8888 and 8889); the tasks must train together, as in 1.
4. **JAX srun**: lesson 08's ``jax_job.sbatch``: ``srun`` starts ``jax_worker.py``, which calls
   ``keras.distribution.initialize()`` with no arguments; it must give the result of the lesson's own 2-process
   run (a ``TF_CONFIG`` per process, no Slurm).
5. **JAX GPUs per task**: lesson 08's ``jax_job.sbatch`` with ``--gres=gpu:2`` on the node's 2 stand-in GPUs, its
   ``srun`` line running a probe instead of the worker: the probe calls ``keras.distribution.initialize()`` as the
   worker does and reports the GPUs JAX would use (``jax_cuda_visible_devices``, which JAX's Slurm detection sets to
   ``SLURM_LOCALID``, applied to the ``CUDA_VISIBLE_DEVICES`` Slurm gave the task). The node's tasks must use every
   GPU it was given, each a different one. Nothing computes on the stand-in GPUs: what is checked is JAX's own choice.
5b. **JAX checkpoint, lesson 13**: ``ckpt_job.sbatch``: ``srun`` starts ``ckpt_worker.py`` twice, and each task writes
   its own shards of one checkpoint (an Orbax part per process, or Keras 3.13's file per process); both must have
   held the very shards of the same worker started by hand with the ``KERAS_DISTRIBUTION_*`` variables (the
   notebook's launcher), which the notebook restores on one process bit for bit.
6. **PyTorch torchrun**: lesson 12's ``torch_job.sbatch``: ``srun`` starts ``torchrun`` (PyTorch's own Slurm example),
   which starts 2 DDP ranks of ``ddp_train.py``; the result must equal ``torchrun --standalone`` by hand. Skipped,
   saying so, where torch is not installed.

Then each failure mode once, for real: the checks above must catch it (for JAX's GPUs: one task per node with
``--gres=gpu:2`` uses 1 of 2 GPUs, ``--gpus-per-task=1`` has task 1 ask for a GPU it does not see, and
``JAX_LOCAL_DEVICE_IDS=0,1`` gives one task both), and the exact messages (Slurm's and the
frameworks') are printed. At the end, every message of TROUBLESHOOTING.md's "Slurm" section must be among the
printed ones: ``make slurm-check`` is what produces that section (the pytest error index leaves it out).
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))
import error_index  # noqa: E402  (tools/error_index.py: the TROUBLESHOOTING.md parser)
import nblint  # noqa: E402  (tools/nblint.py: a notebook's %%writefile cells)
import registry  # noqa: E402  (tools/registry.py: each lesson's entry)


def slurm_lessons(root: Path = ROOT) -> dict[str, tuple[str, ...]]:
    """Each lesson's job scripts: the files its registry entry's ``slurm`` names (its %%writefile cells write
    them; the checks submit them)."""
    return {ls.number: ls.slurm for ls in registry.load(root) if ls.slurm}


LESSONS = slurm_lessons()
SECTION = "Slurm"    # TROUBLESHOOTING.md's "## Slurm": every message in it comes from this run
EPOCHS = 3
BATCH, SEED = 64, 7  # lesson 08's global batch and seed (jax_worker.py's arguments)
FLOOR = 4.0          # seconds per epoch at least, for the job to cancel: scancel (SIGTERM, KillWait 2 s, SIGKILL) ends
                     # it before its last epoch
TIMEOUT = 240        # seconds for any one job; a job still running then is cancelled and its check fails
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
         "PREEMPTED"}
NOISE = re.compile(r"^(?:[IW]\d{4} [\d:. ]+\d+ \S+:\d+\]|WARNING: All log messages before absl|To enable the "
                   r"following instructions|W\d{4} [\d:.]+ \d+ torch/distributed/run.py)")
RESOLVER = "import tensorflow as tf; tf.distribute.cluster_resolver.SlurmClusterResolver({})"
JAX_SRUN = 'srun --kill-on-bad-exit=1 python jax_worker.py "$@"'   # lesson 08's srun line (the probe replaces it)
#: What the job's tasks run instead of jax_worker.py to show the GPUs JAX would use: the worker's own
#: initialize() (JAX reads the job, and each task's GPU, from Slurm), then one line per task.
JAX_GPU_PROBE = """import json, os, sys
sys.modules["tensorflow"] = None
import jax
from keras import distribution as kd
kd.initialize()
print("JAX_GPUS " + json.dumps({"node": os.environ["SLURMD_NODENAME"], "localid": int(os.environ["SLURM_LOCALID"]),
      "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
      "jax_visible": jax.config.values["jax_cuda_visible_devices"]}), flush=True)
"""


class CheckFailed(AssertionError):
    """A check's claim does not hold; the message says which and why."""


# --------------------------------------------------------------------------- verdicts (pure: tests/test_slurm.py)

def trained_together(history: Mapping[str, list[dict]], solo: Mapping[str, list[dict]], n_tasks: int = 2) -> str:
    """Raise :class:`CheckFailed` unless ``n_tasks`` MWMS tasks trained one model together; else a summary.

    ``history``: per task (``"worker-0"``...), the rows of its ``history-<task>.jsonl`` (epoch, loss, own_share,
    checksum); ``solo``: the same of the job with one task.
    """
    names = [f"worker-{i}" for i in range(n_tasks)]
    if sorted(history) != names:
        raise CheckFailed(f"expected the histories of {', '.join(names)}, got {sorted(history) or 'none'}: fewer "
                          "tasks than that, or tasks that did not form one cluster")
    rows = [history[n] for n in names]
    if len({len(r) for r in rows}) != 1 or any(len(r) != len({e["epoch"] for e in r}) for r in rows):
        raise CheckFailed(f"the tasks logged different or repeated epochs: {[[e['epoch'] for e in r] for r in rows]}")
    for epoch_rows in zip(*rows):
        epoch = epoch_rows[0]["epoch"]
        if len({e["checksum"] for e in epoch_rows}) != 1 or len({e["loss"] for e in epoch_rows}) != 1:
            raise CheckFailed(f"epoch {epoch}: the tasks hold different weights or losses: they trained separately")
        shares = [e["own_share"] for e in epoch_rows]
        if len(set(shares)) != len(shares):
            raise CheckFailed(f"epoch {epoch}: every task's share of the loss is {shares[0]}: they saw the same data")
        if abs(sum(shares) - epoch_rows[0]["loss"]) > 1e-5 * abs(epoch_rows[0]["loss"]):
            raise CheckFailed(f"epoch {epoch}: the shares {shares} do not add up to the all-reduced loss")
    if any(r and r[-1]["checksum"] == rows[0][-1]["checksum"] for r in solo.values()):
        raise CheckFailed("the 2-task job ends with the weights of the 1-task job: the tasks trained alone")
    return f"{n_tasks} tasks, {len(rows[0])} epochs, the same weights on every task, not the 1-task job's"


def resumed(history: Sequence[dict], result: Mapping, epochs_before: int, reference: Sequence[dict],
            epochs: int = EPOCHS) -> str:
    """Raise :class:`CheckFailed` unless the chief's ``history`` (both jobs' rows) shows the resubmitted job
    continuing after ``epochs_before`` epochs and ending as the uninterrupted ``reference`` did; else a summary."""
    if epochs_before < 1:
        raise CheckFailed("the cancelled job had backed up no epoch: nothing to resume from")
    if result["resumed_after"] != epochs_before:
        raise CheckFailed(f"the resubmitted job started from epoch {result['resumed_after']}, not after epoch "
                          f"{epochs_before}: it did not find the backup")
    got = [r["epoch"] for r in history]
    if got != list(range(1, epochs + 1)):
        raise CheckFailed(f"lost or repeated epochs: {got}")
    first, second = {r["pid"] for r in history[:epochs_before]}, {r["pid"] for r in history[epochs_before:]}
    if len(first) != 1 or first & second:
        raise CheckFailed(f"epochs 1-{epochs_before} and the rest should come from two different jobs: {got}")
    for mine, ref in zip(history, reference):
        if (mine["loss"], mine["checksum"]) != (ref["loss"], ref["checksum"]):
            raise CheckFailed(f"epoch {mine['epoch']}: loss {mine['loss']} and checksum {mine['checksum']} differ "
                              f"from the uninterrupted job's ({ref['loss']}, {ref['checksum']})")
    return f"cancelled after epoch {epochs_before}, resumed there, {epochs} epochs as uninterrupted, bit for bit"


def same_result(scheduled: Sequence[dict], by_hand: Sequence[dict], n: int = 2, rank: str = "process",
                count: Optional[str] = "processes") -> str:
    """Raise :class:`CheckFailed` unless the ``n`` reports of the Slurm run are one job of ``n`` processes with the
    losses of the run started by hand; else a summary. ``count``: the report's key for the job's size, if any."""
    for name, reports in (("under Slurm", scheduled), ("by hand", by_hand)):
        ranks = sorted(r[rank] for r in reports)
        if ranks != list(range(n)) or (count and any(r[count] != n for r in reports)):
            raise CheckFailed(f"{name}: processes {ranks}, expected one job of {n}: "
                              f"{'they never met' if not ranks else 'they trained separately'}")
    ours, theirs = (sorted(rs, key=lambda r: r[rank]) for rs in (scheduled, by_hand))
    if [r["loss"] for r in ours] != [r["loss"] for r in theirs]:
        raise CheckFailed(f"losses differ: under Slurm {ours[0]['loss']}, by hand {theirs[0]['loss']}")
    return f"{n} processes found each other; losses {[round(v, 5) for v in ours[0]['loss']]} as by hand"


def gpus_used(reports: Sequence[Mapping], gpus_per_node: int) -> str:
    """Raise :class:`CheckFailed` unless the tasks on each node together use all its ``gpus_per_node`` GPUs, each
    task its own; else a summary. ``reports``: per task, ``node``, ``localid``, ``cuda_visible_devices`` (what Slurm
    set) and ``jax_visible`` (``jax.config.values["jax_cuda_visible_devices"]`` after ``initialize()``: ``"all"`` or
    CUDA ordinals among the visible GPUs)."""
    if not reports:
        raise CheckFailed("no task reported its GPUs")
    by_node: dict[str, list[str]] = {}
    for r in reports:
        visible = [g for g in (r["cuda_visible_devices"] or "").split(",") if g]
        ordinals = range(len(visible)) if r["jax_visible"] == "all" else [int(i) for i in r["jax_visible"].split(",")]
        if any(i >= len(visible) for i in ordinals):
            raise CheckFailed(f"task {r['localid']} on {r['node']} asks JAX for GPU ordinals {list(ordinals)} but sees "
                              f"{len(visible)} GPU(s) ({r['cuda_visible_devices']!r}): JAX takes SLURM_LOCALID as the "
                              "ordinal, which --gpus-per-task breaks")
        by_node.setdefault(r["node"], []).extend(visible[i] for i in ordinals)
    for node, used in by_node.items():
        tasks = sum(r["node"] == node for r in reports)
        if len(set(used)) != len(used):
            raise CheckFailed(f"{node}: two tasks share a GPU ({sorted(used)}): more tasks than GPUs")
        if len(used) < gpus_per_node:
            raise CheckFailed(f"{node}: its {tasks} task(s) use {len(used)} of its {gpus_per_node} GPUs: under Slurm "
                              "JAX gives each task only the GPU numbered SLURM_LOCALID (one task per GPU, or "
                              "JAX_LOCAL_DEVICE_IDS)")
    return (f"{len(reports)} task(s) on {len(by_node)} node(s) use all {gpus_per_node} GPUs of each, "
            f"one task per GPU" if len(reports) == gpus_per_node * len(by_node) else
            f"{len(reports)} task(s) use all {gpus_per_node} GPUs of each node")


def same_shards(scheduled: Sequence[dict], by_hand: Sequence[dict], n: int = 2) -> str:
    """Raise :class:`CheckFailed` unless the ``n`` reports of lesson 13's checkpoint job under Slurm name ``n``
    processes that held the very shards of the run started by hand (``held``: path -> shard index -> sha256)."""
    for name, reports in (("under Slurm", scheduled), ("by hand", by_hand)):
        ranks = sorted(r["process"] for r in reports)
        if ranks != list(range(n)):
            raise CheckFailed(f"{name}: processes {ranks}, expected one job of {n}")
    ours, theirs = (sorted(rs, key=lambda r: r["process"]) for rs in (scheduled, by_hand))
    for mine, hand in zip(ours, theirs):
        if mine["held"] != hand["held"]:
            raise CheckFailed(f"process {mine['process']} held other shards under Slurm than by hand")
    pieces = sum(len(v) for r in ours for v in r["held"].values())
    return f"{n} processes, each wrote its own shards: {pieces} pieces, bit for bit those of the run by hand"


def unproduced(index_text: str, printed: str, section: str = SECTION) -> list[error_index.Entry]:
    """The entries of the index's ``## <section>`` whose message is not in ``printed`` (what the checks quoted)."""
    return error_index.missing(error_index.parse(error_index.section(index_text, section)), printed)


# --------------------------------------------------------------------------- the lessons' scripts

def lesson_files(notebooks: Path) -> dict[str, dict[str, str]]:
    """For lessons 07, 08 and 12: ``{file name: text}`` of what their ``%%writefile`` cells write.
    ``CheckFailed`` names a lesson that is missing or does not write a job file the checks need."""
    files = {}
    for number, needed in LESSONS.items():
        found = sorted(Path(notebooks).glob(f"{number}_*.ipynb"))
        if len(found) != 1:
            raise CheckFailed(f"expected one notebook {number}_*.ipynb in {notebooks}, found {len(found)}")
        files[number] = nblint.written_files(json.loads(found[0].read_text(encoding="utf-8")))
        missing = [n for n in needed if n not in files[number]]
        if missing:
            raise CheckFailed(f"{found[0].name} writes no {', '.join(missing)} (%%writefile cells): nothing to submit")
    return files


def function_from(source: str, name: str, **names) -> Callable:
    """The function ``name`` of a lesson's file, alone: its ``def`` run with ``names`` as its globals (the check
    computes what the job's tasks will compute without importing the file's frameworks)."""
    found = [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name]
    if len(found) != 1:
        raise CheckFailed(f"the lesson's file defines {name} {len(found)} times, expected once")
    scope = dict(names)
    exec(compile(ast.Module(found, type_ignores=[]), f"<{name}>", "exec"), scope)  # noqa: S102 - the lesson's code
    return scope[name]


def edited(script: Path, old: str, new: str, name: str) -> Path:
    """A copy of a lesson's job script with one line changed (to provoke a failure); :class:`CheckFailed` if the
    script no longer has ``old``."""
    text = script.read_text()
    if text.count(old) != 1:
        raise CheckFailed(f"{script.name} no longer has {old.strip()!r}: the failure check cannot remove it")
    copy = script.with_name(name)
    copy.write_text(text.replace(old, new))
    return copy


# --------------------------------------------------------------------------- Slurm

def run(cmd: Sequence[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(map(str, cmd)), capture_output=True, text=True, **kw)


def clean(text: str) -> str:
    """A log without TensorFlow's, absl's and torchrun's start-up lines."""
    return "\n".join(ln for ln in text.splitlines() if ln.strip() and not NOISE.match(ln))


class Slurm:
    """Submit jobs with ``env``, their output in ``work``; wait for them."""

    def __init__(self, work: Path, env: Mapping[str, str]):
        self.work, self.env = work, dict(env)
        self.node = run(["hostname", "-s"]).stdout.strip()

    def log(self, job: int) -> str:
        path = self.work / f"slurm-{job}.out"
        return path.read_text() if path.exists() else ""

    def sbatch(self, script: Path, *args, options: Sequence[str] = (), env: Optional[Mapping[str, str]] = None,
               chdir: Optional[Path] = None) -> int:
        """Submit ``script`` with ``args`` from ``chdir`` (default: the script's folder); the job id.
        :class:`CheckFailed` if sbatch refuses."""
        done = run(["sbatch", "--parsable", f"--chdir={chdir or Path(script).parent}",
                    f"--output={self.work}/slurm-%j.out", *options, script, *args], env={**self.env, **(env or {})})
        if done.returncode:
            raise CheckFailed(done.stderr.strip())
        return int(done.stdout.split(";")[0])

    def state(self, job: int) -> str:
        text = run(["scontrol", "show", "job", "--oneliner", job]).stdout
        found = re.search(r"JobState=(\S+)", text)
        return found.group(1) if found else "UNKNOWN"

    def wait(self, job: int, timeout: float = TIMEOUT, until: Optional[Callable[[], bool]] = None) -> str:
        """Poll until the job ends (or ``until()`` holds); cancel it and fail after ``timeout`` s."""
        deadline = time.time() + timeout
        while (state := self.state(job)) not in FINAL:
            if until is not None and until():
                return state
            if time.time() > deadline:
                self.cancel(job)
                raise CheckFailed(f"job {job} still {state} after {timeout} s, cancelled (a task waiting for a "
                                  f"peer that never came?):\n{clean(self.log(job))[-1500:]}")
            time.sleep(0.2)
        return state

    def cancel(self, job: int) -> str:
        """scancel, then wait until the job has left the queue: its state is final at once, its processes live on
        for up to KillWait seconds (the next job must not meet them in the same folder)."""
        run(["scancel", job])
        state, deadline = self.wait(job, timeout=60), time.time() + 60
        while run(["squeue", "--noheader", f"--jobs={job}"]).stdout.strip() and time.time() < deadline:
            time.sleep(0.2)
        return state

    def completed(self, *args, **kw) -> int:
        """Submit, wait, and fail unless the job COMPLETED; the job id."""
        job = self.sbatch(*args, **kw)
        state = self.wait(job)
        if state != "COMPLETED":
            raise CheckFailed(f"job {job} {state}:\n{clean(self.log(job))[-2000:]}")
        return job


def read_history(out: Path) -> tuple[dict[str, list[dict]], dict[str, dict]]:
    """Per task: its ``history-<task>.jsonl`` rows and its ``result-<task>.json`` (lesson 07's worker writes them)."""
    history = {p.stem[len("history-"):]: [json.loads(ln) for ln in p.read_text().splitlines() if ln.strip()]
               for p in out.glob("history-*.jsonl")}
    results = {p.stem[len("result-"):]: json.loads(p.read_text()) for p in out.glob("result-*.json")}
    return history, results


def read_reports(folder: Path, pattern: str) -> list[dict]:
    """The JSON reports a job's processes wrote (``process-*.json``, ``report-*.json``)."""
    return [json.loads(p.read_text()) for p in sorted(folder.glob(pattern))]


def lines_matching(text: str, *patterns: str) -> list[str]:
    """For each regex, the first line of ``text`` it matches; :class:`CheckFailed` names the ones that match none."""
    found, missing = [], []
    for pat in patterns:
        hit = next((ln.strip() for ln in text.splitlines() if re.search(pat, ln)), None)
        (found if hit else missing).append(hit or pat)
    if missing:
        raise CheckFailed(f"expected messages not found: {missing}\nin:\n{clean(text)[-2000:]}")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def started_by_hand(cmd: Sequence[str], envs: Sequence[Mapping[str, str]], cwd: Optional[Path] = None,
                    timeout: float = TIMEOUT) -> list[str]:
    """Start ``cmd`` once per environment (no Slurm), wait for all; their outputs. Fails if one fails."""
    procs = [subprocess.Popen(list(map(str, cmd)), env=dict(e), cwd=cwd, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for e in envs]
    try:
        outs = [p.communicate(timeout=timeout)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, out in zip(procs, outs):
        if p.returncode:
            raise CheckFailed(f"{' '.join(map(str, cmd))} by hand exited {p.returncode}:\n{clean(out)[-2000:]}")
    return outs


# --------------------------------------------------------------------------- the checks

class Checks:
    """Each check returns ``(summary, messages)``: the messages are lines quoted verbatim from the jobs' logs."""

    def __init__(self, slurm: Slurm, lessons: Mapping[str, Path]):
        self.s, self.w = slurm, slurm.work
        self.tf, self.jax, self.pt, self.ckpt = lessons["07"], lessons["08"], lessons["12"], lessons["13"]
        self.job = self.tf / "mwms_job.sbatch"
        self.gpus = int(os.environ.get("LOCAL_SLURM_GPUS", "0"))

    def out(self, name: str) -> Path:
        path = self.w / name
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir()
        return path

    def mwms(self, name: str, *worker_args, options: Sequence[str] = ()) -> tuple[Path, int]:
        """Lesson 07's job, completed, into a fresh folder ``name``; the folder and the job id."""
        out = self.out(name)
        return out, self.s.completed(self.job, "--epochs", EPOCHS, "--out", out, *worker_args, options=options)

    def tf_together(self):
        self.together = self.mwms("together")[0]
        history = read_history(self.together)[0]
        self.reference = history["worker-0"]
        self.solo = read_history(self.mwms("solo", options=["--ntasks=1"])[0])[0]
        return trained_together(history, self.solo), []

    def tf_resume(self):
        out = self.out("resume")
        args = (self.job, "--epochs", EPOCHS, "--out", out, "--min-epoch-seconds", FLOOR)
        first = self.s.sbatch(*args)
        if self.s.wait(first, until=lambda: (out / "history-worker-0.jsonl").exists()) in FINAL:
            raise CheckFailed(f"job {first} ended before its first backup:\n{clean(self.s.log(first))[-2000:]}")
        cancelled = self.s.cancel(first)
        self.before = len(read_history(out)[0]["worker-0"])
        if cancelled != "CANCELLED" or not (out / "backup").is_dir():
            raise CheckFailed(f"job {first} ended {cancelled}, leaving {sorted(p.name for p in out.iterdir())}")
        messages = lines_matching(self.s.log(first), r"error: \*\*\* JOB \d+ ON \S+ CANCELLED AT", r"SIGTERM caught")
        self.s.completed(*args)                    # the same command again
        history, results = read_history(out)
        return resumed(history["worker-0"], results["worker-0"], self.before, self.reference), messages

    def tf_gpu_node(self):
        if self.gpus < 2:
            raise CheckFailed("the local Slurm has no stand-in GPUs (mknod refused): the GPU-node path did not run")
        job_out, job = self.mwms("gpu-node", options=["--gres=gpu:2"])
        history = read_history(job_out)[0]
        verdict = trained_together(history, self.solo)
        if [r["loss"] for r in history["worker-0"]] != [r["loss"] for r in self.reference]:
            raise CheckFailed("the GPU-node job's losses differ from the CPU-node job's")
        lines_matching(self.s.log(job), r"Started server with target: grpc://\S+:8888$",
                       r"Started server with target: grpc://\S+:8889$")   # the resolver's ports, not tf_config_from_slurm's
        return verdict + "; SlurmClusterResolver's ports 8888-8889, the CPU-node job's losses", []

    def jax_env(self) -> dict:
        return {"JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}

    def jax_data(self, name: str) -> Path:
        """A folder with lesson 08's x.npy and y.npy (the digits, whole global batches)."""
        import numpy as np
        from sklearn.datasets import load_digits
        folder, (x, y) = self.out(name), load_digits(return_X_y=True)
        keep = len(x) // BATCH * BATCH
        np.save(folder / "x.npy", (x[:keep] / 16).astype("float32"))
        np.save(folder / "y.npy", y[:keep])
        return folder

    def jax_srun(self):
        mine, hand = self.jax_data("jax-slurm"), self.jax_data("jax-by-hand")
        self.s.completed(self.jax / "jax_job.sbatch", mine, BATCH, EPOCHS, SEED, env=self.jax_env())
        spec = {"worker": [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]}   # as lesson 08's launcher
        envs = [{**self.s.env, **self.jax_env(), "KERAS_BACKEND": "jax",
                 "TF_CONFIG": json.dumps({"cluster": spec, "task": {"type": "worker", "index": i}})} for i in range(2)]
        started_by_hand([self.s.env["PYTHON"], self.jax / "jax_worker.py", hand, BATCH, EPOCHS, SEED], envs)
        verdict = same_result(read_reports(mine, "process-*.json"), read_reports(hand, "process-*.json"))
        import numpy as np
        a, b = np.load(mine / "trained.npz"), np.load(hand / "trained.npz")
        if not all(np.array_equal(a[k], b[k]) for k in a.files):
            raise CheckFailed("the trained weights differ between the Slurm run and the run by hand")
        return verdict + ", the same trained weights", []

    def jax_gpus(self, name: str, options: Sequence[str] = ("--gres=gpu:2",),
                 env: Optional[Mapping[str, str]] = None) -> list[dict]:
        """Lesson 08's job script on the stand-in GPUs (``options``: how it asks for them) with the probe in place of
        the worker; each task's report."""
        if self.gpus < 2:
            raise CheckFailed("the local Slurm has no stand-in GPUs (mknod refused): the GPU-node path did not run")
        (self.jax / "jax_gpu_probe.py").write_text(JAX_GPU_PROBE)
        script = edited(self.jax / "jax_job.sbatch", JAX_SRUN, JAX_SRUN.replace("jax_worker.py", "jax_gpu_probe.py"),
                        f"jax_{name}.sbatch")
        job = self.s.completed(script, options=options, env={**self.jax_env(), **(env or {})})
        return [json.loads(ln.split(" ", 1)[1]) for ln in self.s.log(job).splitlines() if ln.startswith("JAX_GPUS ")]

    def jax_one_task_per_gpu(self):
        reports = self.jax_gpus("gpus")
        return gpus_used(reports, self.gpus) + f" (JAX: {[r['jax_visible'] for r in reports]})", []

    def jax_checkpoint(self):
        """Lesson 13's ckpt_job.sbatch: two srun tasks, each writing its own shards of one checkpoint; the same
        worker started by hand with the KERAS_DISTRIBUTION_* variables (the notebook's launcher) holds the same."""
        mine, hand = self.out("ckpt-slurm"), self.out("ckpt-by-hand")
        self.s.completed(self.ckpt / "ckpt_job.sbatch", mine, env=self.jax_env())
        spec = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
        envs = [{**self.s.env, **self.jax_env(), "KERAS_BACKEND": "jax", "KERAS_DISTRIBUTION_JOB_ADDRESSES": ",".join(spec),
                 "KERAS_DISTRIBUTION_NUM_PROCESSES": "2", "KERAS_DISTRIBUTION_PROCESS_ID": str(i)} for i in range(2)]
        started_by_hand([self.s.env["PYTHON"], self.ckpt / "ckpt_worker.py", hand], envs, cwd=self.ckpt)
        written = sorted(p.name for p in (mine / "ckpt").rglob("*") if re.fullmatch(r"ocdbt\.process_\d|process-\d\.npz", p.name))
        if len(written) != 2:
            raise CheckFailed(f"expected one checkpoint part per process in {mine / 'ckpt'}, found {written}")
        verdict = same_shards(read_reports(mine, "process-*.json"), read_reports(hand, "process-*.json"))
        return verdict + f"; {', '.join(written)}", []

    def torch_torchrun(self):
        if importlib.util.find_spec("torch") is None:
            return "skipped: torch is not installed in this environment", []
        mine, hand = self.out("torch-slurm"), self.out("torch-by-hand")
        self.s.completed(self.pt / "torch_job.sbatch", 2, self.pt / "ddp_train.py", EPOCHS, 64, chdir=mine)
        started_by_hand([self.s.env["PYTHON"], "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                         self.pt / "ddp_train.py", EPOCHS, 64], [self.s.env], cwd=hand)
        ours, theirs = (read_reports(folder / "ddp_train.out", "report-*.json") for folder in (mine, hand))
        verdict = same_result(ours, theirs, rank="rank", count=None)
        if len({json.dumps(r["weights"]) for r in ours + theirs}) != 1:
            raise CheckFailed("the ranks' weights differ, under Slurm or from the run by hand")
        return verdict + ", the same weights on every rank", []

    # ----------------------------------------------------------------------- failure modes, each run once

    def squat(self, job: int) -> socket.socket:
        """Listen on the port that task 1 of ``job`` (held, not started) will compute for itself, with the lesson's
        own ``tf_config_from_slurm``."""
        tf_config_from_slurm = function_from((self.tf / "mwms_lib.py").read_text(), "tf_config_from_slurm",
                                             json=json, os=os, re=re, subprocess=subprocess)
        task1 = {"SLURM_JOB_ID": str(job), "SLURM_STEP_NODELIST": self.s.node, "SLURM_STEP_TASKS_PER_NODE": "2",
                 "SLURM_PROCID": "1"}
        address = json.loads(tf_config_from_slurm(task1))["cluster"]["worker"][1]
        squatter = socket.socket()
        squatter.bind(("", int(address.rsplit(":", 1)[1])))
        squatter.listen(1)
        return squatter

    def fail_peer_never_starts(self):
        """Without srun --kill-on-bad-exit: task 1 cannot start (its port is taken), task 0 waits for it forever."""
        script = edited(self.job, "srun --kill-on-bad-exit=1 ", "srun ", "mwms_no_kill.sbatch")
        job = self.s.sbatch(script, "--epochs", EPOCHS, "--out", self.out("peer-never-starts"), options=["--hold"])
        with self.squat(job):
            run(["scontrol", "release", job])
            gone = re.compile(r"task 1: Exited with exit code")
            state = self.s.wait(job, until=lambda: bool(gone.search(self.s.log(job))))
        time.sleep(5)                              # task 1 is gone: is task 0 still waiting for it?
        if state in FINAL or self.s.state(job) != "RUNNING":
            raise CheckFailed(f"job {job} ended ({self.s.state(job)}): task 0 did not wait for its peer")
        self.s.cancel(job)
        return f"job {job} still RUNNING 5 s after task 1 died, cancelled", lines_matching(
            self.s.log(job), r"Waiting for 1/2 tasks to connect", r"task 1: Exited with exit code",
            r"UnknownError: Could not start gRPC server")

    def fail_port_taken(self):
        """The same with the lesson's srun --kill-on-bad-exit=1: srun ends the step at once."""
        job = self.s.sbatch(self.job, "--epochs", EPOCHS, "--out", self.out("port-taken"), options=["--hold"])
        with self.squat(job):
            run(["scontrol", "release", job])
            state = self.s.wait(job)
        return self.caught(job, state, r"task 1: Exited with exit code", r"Terminating StepId=\d+\.0")

    def fail_separate(self):
        """A TF_CONFIG left in the environment (the script without its ``unset TF_CONFIG``) wins over Slurm's
        variables: each task trains alone, as worker 0. Both then write the chief's files: the job may also fail,
        when their backups collide."""
        script = edited(self.job, "unset TF_CONFIG", ":", "mwms_keeps_tf_config.sbatch")
        out = self.out("separate")
        job = self.s.sbatch(script, "--epochs", EPOCHS, "--out", out, env={"TF_CONFIG": "{}"})
        state = self.s.wait(job)
        try:
            trained_together(read_history(out)[0], self.solo)
        except CheckFailed as exc:
            return f"caught: job {job} {state}: {exc}", []
        raise CheckFailed("two tasks that each trained alone passed the together check")

    def fail_fresh_folder(self):
        """Submitted again into a new folder (as --out runs/$SLURM_JOB_ID would do): that job starts from epoch 0,
        exactly like the first job in its fresh folder, whose history "TF together" kept: the resume check must
        refuse it."""
        history, results = read_history(self.together)
        try:
            resumed(history["worker-0"], results["worker-0"], self.before, self.reference)
        except CheckFailed as exc:
            return f"caught: {exc}", []
        raise CheckFailed("a job that started from epoch 0 passed the resume check")

    def fail_ntasks(self):
        """--ntasks wrong: more tasks than the node has CPUs, srun asking for more than the job has, and one task."""
        cpus = len(os.sched_getaffinity(0))                # what local_slurm.sh gave the node (nproc)
        job = self.s.sbatch(self.job, "--out", self.out("too-many"), options=[f"--ntasks={cpus + 1}"])
        for _ in range(50):                                # until the scheduler has looked at it
            pending = re.search(r"JobState=\S+ Reason=\S+", run(["scontrol", "show", "job", "-o", job]).stdout)
            if pending and not pending.group(0).endswith("Reason=None"):
                break
            time.sleep(0.1)
        self.s.cancel(job)
        if not pending or pending.group(0) != "JobState=PENDING Reason=PartitionConfig":
            raise CheckFailed(f"sbatch --ntasks={cpus + 1} on a node with {cpus} CPUs: {pending and pending.group(0)}")
        script = self.w / "srun_too_many.sbatch"
        script.write_text("#!/bin/bash\n#SBATCH --ntasks=2\nsrun --ntasks=3 true\n")
        job = self.s.sbatch(script)
        step, messages = self.caught(job, self.s.wait(job),
                                     r"srun: error: Unable to create step for job \d+: More processors requested")
        try:
            trained_together(self.solo, self.solo)
        except CheckFailed as exc:
            return f"{step}; --ntasks=1: {exc}", [f"sbatch --ntasks={cpus + 1}: {pending.group(0)}", *messages]
        raise CheckFailed("a 1-task job passed the together check")

    def fail_no_srun(self):
        """The batch script runs the workers itself, without srun: one process, outside any job step. Then the JAX
        worker outside any Slurm job, where every JAX version finds no coordinator."""
        data, logs = self.jax_data("jax-no-srun"), {k: self.w / f"no-srun-{k}.log" for k in ("tf", "jax", "resolver")}
        script = self.w / "no_srun.sbatch"
        script.write_text(
            f"#!/bin/bash\n#SBATCH --ntasks=2\n"
            f"python {self.tf}/mwms_train.py --out {self.out('tf-no-srun')} >{logs['tf']} 2>&1\n"
            f"KERAS_BACKEND=jax python {self.jax}/jax_worker.py {data} {BATCH} {EPOCHS} {SEED} >{logs['jax']} 2>&1\n"
            f"python -c '{RESOLVER.format('')}' >{logs['resolver']} 2>&1\n")
        job = self.s.sbatch(script, env=self.jax_env())
        step, _ = self.caught(job, self.s.wait(job))
        text = {k: p.read_text() if p.exists() else "" for k, p in logs.items()}
        outside = run([self.s.env["PYTHON"], self.jax / "jax_worker.py", data, BATCH, EPOCHS, SEED], timeout=TIMEOUT,
                      env={**self.s.env, **self.jax_env(), "KERAS_BACKEND": "jax"})   # no SLURM_JOB_ID: no job
        if outside.returncode == 0:
            raise CheckFailed("jax_worker.py outside any Slurm job and without TF_CONFIG ran")
        return step, [*lines_matching(text["tf"], r"KeyError: 'SLURM_STEP_NODELIST'"),
                      *lines_matching(text["jax"],       # JAX 0.10 finds no Slurm step; JAX 0.7 looks for its node list
                                      r"ValueError: coordinator_address should be defined|KeyError: 'SLURM_STEP_NODELIST'"),
                      *lines_matching(text["resolver"], r"RuntimeError: SLURM_STEP_NUM_TASKS not found"),
                      *lines_matching(outside.stderr, r"ValueError: coordinator_address should be defined")]

    def fail_resolver_cpu_node(self):
        """TensorFlow's SlurmClusterResolver in a real srun task on a node without GPUs (no nvidia-smi on the PATH),
        as it is and with gpus_per_node=0: why lesson 07 builds TF_CONFIG itself there."""
        env = {k: v for k, v in self.s.env.items() if k != "CUDA_VISIBLE_DEVICES"}
        env["PATH"] = str(Path(self.s.env["PYTHON"]).parent)     # this Python, and no nvidia-smi
        messages = []
        for args, pattern in (("", r"FileNotFoundError: .*'nvidia-smi'"),
                              ("gpus_per_node=0).cluster_spec(", r"ValueError: range\(\) arg 3 must not be zero")):
            done = run([shutil.which("srun"), "--ntasks=1", f"--chdir={self.w}", self.s.env["PYTHON"], "-c",
                        RESOLVER.format(args)], env=env, timeout=TIMEOUT)
            if done.returncode == 0:
                raise CheckFailed(f"SlurmClusterResolver({args}) on a CPU node did not fail")
            messages += lines_matching(done.stdout + done.stderr, pattern)
        return "caught: without GPUs the resolver asks nvidia-smi; with gpus_per_node=0 it divides by zero", messages

    def fail_gpus_per_task(self):
        """The lesson's job on a GPU node with --gpus-per-task=1: each task sees one GPU, and SlurmClusterResolver
        hands each of the node's 2 tasks 1 // 2 = 0 GPUs."""
        if self.gpus < 2:
            raise CheckFailed("the local Slurm has no stand-in GPUs (mknod refused): the GPU-node path did not run")
        job = self.s.sbatch(self.job, "--epochs", EPOCHS, "--out", self.out("gpus-per-task"),
                            options=["--gpus-per-task=1"])
        return self.caught(job, self.s.wait(job), r"ValueError: range\(\) arg 3 must not be zero")

    def fail_jax_one_task_per_node(self):
        """The lesson's JAX job with one task on a node of 2 GPUs: JAX gives it GPU 0 alone, and the GPU check must
        say so; with JAX_LOCAL_DEVICE_IDS=0,1 the same task gets both. Then 2 tasks with --gpus-per-task=1."""
        caught = []
        for name, options in (("one_task", ["--gres=gpu:2", "--ntasks-per-node=1"]),
                              ("gpus_per_task", ["--gpus-per-task=1"])):
            reports = self.jax_gpus(name, options=options)
            try:
                gpus_used(reports, self.gpus)
            except CheckFailed as exc:
                caught.append(f"{' '.join(options)}: {exc}")
            else:
                raise CheckFailed(f"{' '.join(options)} passed the GPU check: {reports}")
        both = self.jax_gpus("one_task_all_gpus", options=["--gres=gpu:2", "--ntasks-per-node=1"],
                             env={"JAX_LOCAL_DEVICE_IDS": "0,1"})
        return f"caught: {'; '.join(caught)}; with JAX_LOCAL_DEVICE_IDS=0,1: {gpus_used(both, self.gpus)}", []

    def caught(self, job: int, state: str, *patterns: str):
        if state == "COMPLETED":
            raise CheckFailed(f"job {job} COMPLETED: the failure did not happen")
        return f"caught: job {job} {state}", lines_matching(self.s.log(job), *patterns)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--notebooks", type=Path, default=ROOT / "notebooks", help="folder with lessons 07, 08, 12 and 13")
    args = p.parse_args(argv)
    if "SLURM_CONF" not in os.environ:
        print("slurm check: SLURM_CONF is not set: run tools/slurm/check.sh, which starts a local Slurm")
        return 2
    try:
        written = lesson_files(args.notebooks)
    except CheckFailed as exc:
        print(f"slurm check: {exc}")
        return 2
    work = Path(tempfile.mkdtemp(prefix="slurm-check-", dir=os.environ.get("LOCAL_SLURM_DIR")))
    lessons = {}
    for number, files in written.items():
        lessons[number] = work / f"lesson{number}"
        lessons[number].mkdir()
        for name, text in files.items():
            (lessons[number] / name).write_text(text)
    python = os.path.abspath(sys.executable)                 # a venv's python: not resolved, or the venv is lost
    env = {**os.environ, "PATH": f"{os.path.dirname(python)}:{os.environ['PATH']}", "PYTHON": python,
           "PYTHONUNBUFFERED": "1", "KERAS_BACKEND": "tensorflow",
           "TF_CPP_MIN_LOG_LEVEL": "0"}                      # TensorFlow's INFO and WARNING lines are quoted below
    for name in ("TF_CONFIG", "XLA_FLAGS", "JAX_PLATFORMS", "CUDA_VISIBLE_DEVICES"):
        env.pop(name, None)                                  # the jobs start from a login shell's environment
    checks = Checks(Slurm(work, env), lessons)
    order = [("TF together", checks.tf_together), ("TF resume", checks.tf_resume),
             ("TF GPU node", checks.tf_gpu_node), ("JAX srun", checks.jax_srun),
             ("JAX one task per GPU", checks.jax_one_task_per_gpu),
             ("JAX checkpoint, lesson 13", checks.jax_checkpoint), ("PyTorch torchrun", checks.torch_torchrun),
             ("failure: peer never starts", checks.fail_peer_never_starts),
             ("failure: port taken", checks.fail_port_taken), ("failure: separate models", checks.fail_separate),
             ("failure: fresh folder", checks.fail_fresh_folder), ("failure: wrong --ntasks", checks.fail_ntasks),
             ("failure: no srun", checks.fail_no_srun),
             ("failure: resolver, CPU node", checks.fail_resolver_cpu_node),
             ("failure: --gpus-per-task", checks.fail_gpus_per_task),
             ("failure: JAX, 1 task per node", checks.fail_jax_one_task_per_node)]
    failed, quoted, t_all = [], [], time.time()
    for name, check in order:
        t0, messages = time.time(), []
        try:
            summary, messages = check()
            verdict = "ok: " + summary
        except Exception as exc:                   # noqa: BLE001 - any failure is this check's verdict
            failed.append(name)
            verdict = f"FAILED: {'' if isinstance(exc, CheckFailed) else type(exc).__name__ + ': '}{exc}"
        print(f"{name:<29} {time.time() - t0:6.1f} s  {verdict}", flush=True)
        for message in messages:
            print(f"{'':<29}   message: {message}", flush=True)
        quoted += messages
    lost = unproduced((ROOT / "TROUBLESHOOTING.md").read_text(encoding="utf-8"), "\n".join(quoted))
    for entry in lost:
        print(f"TROUBLESHOOTING.md, {SECTION} section, '{entry.heading}': not produced by this run: {entry.message}")
    print(f"slurm check: {len(order) - len(failed)} ok, {len(failed)} failed in {time.time() - t_all:.0f} s"
          + (f" ({', '.join(failed)})" if failed else "")
          + (f"; {len(lost)} indexed Slurm message(s) not produced" if lost else
             "; every message of TROUBLESHOOTING.md's Slurm section was produced"))
    return 1 if failed or lost else 0


if __name__ == "__main__":
    sys.exit(main())
