"""The Slurm checks of ``make slurm-check``: real jobs on the local one-node Slurm that ``check.sh`` starts.

Usage (inside ``tools/slurm/local_slurm.sh``, which exports ``SLURM_CONF``): ``python tools/slurm/check.py
[--jobs DIR]``. ``DIR`` holds the job scripts (default: ``tools/slurm/jobs``); they are copied into a scratch
folder and submitted from there, as a learner submits what a lesson wrote.

Checks (each prints its seconds and a verdict; any failure makes the exit status 1):

1. **TF together**: lesson 07's MultiWorkerMirroredStrategy worker under ``sbatch --ntasks=2`` with ``srun``
   inside; each task builds its ``TF_CONFIG`` from Slurm's variables. Both tasks must report 2 workers, hold the
   same weights after every epoch, have seen different data whose shares add up to the all-reduced loss, and end
   with other weights than the same job with ``--ntasks=1``.
2. **TF resume**: the job is cancelled (``scancel``) after its first backup and submitted again, unchanged: the
   second job must resume after the backed-up epoch (not from epoch 0), lose and repeat no epoch, and end with
   the uninterrupted job's losses and weights.
3. **JAX srun**: lesson 08's worker under ``srun --ntasks=2`` calls ``keras.distribution.initialize()`` with no
   arguments; it must give the result of the same 2-process job started by hand.
4. **PyTorch torchrun**: ``srun`` starts ``torchrun`` (PyTorch's own Slurm example), which starts 2 DDP ranks;
   the result must equal ``torchrun --standalone`` by hand. Skipped, saying so, where torch is not installed.

Then each failure mode once, for real: the checks above must catch it, and the exact messages (Slurm's and the
framework's) are printed, as TROUBLESHOOTING.md's "Slurm" section quotes them.
"""

from __future__ import annotations

import argparse
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
EPOCHS = 3
FLOOR = 4.0          # seconds per epoch at least, for the job to cancel: scancel (SIGTERM, KillWait 2 s, SIGKILL) ends
                     # it before its last epoch
TIMEOUT = 240        # seconds for any one job; a job still running then is cancelled and its check fails
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
         "PREEMPTED"}
NOISE = re.compile(r"^(?:[IW]\d{4} [\d:. ]+\d+ \S+:\d+\]|WARNING: All log messages before absl|To enable the "
                   r"following instructions|W\d{4} [\d:.]+ \d+ torch/distributed/run.py)")


class CheckFailed(AssertionError):
    """A check's claim does not hold; the message says which and why."""


# --------------------------------------------------------------------------- verdicts (pure: tests/test_slurm.py)

def trained_together(history: Mapping[str, list[dict]], results: Mapping[str, dict],
                     solo: Mapping[str, dict], n_tasks: int = 2) -> str:
    """Raise :class:`CheckFailed` unless ``n_tasks`` MWMS tasks trained one model together; else a summary.

    ``history``/``results``: per task (``"worker-0"``...), its epoch rows and final result; ``solo``: the results of
    the same job with one task.
    """
    names = [f"worker-{i}" for i in range(n_tasks)]
    if sorted(results) != names or sorted(history) != names:
        raise CheckFailed(f"expected the results of {', '.join(names)}, got {sorted(results) or 'none'}: fewer "
                          "tasks than that, or tasks that did not form one cluster")
    for name in names:
        if results[name]["workers"] != n_tasks:
            raise CheckFailed(f"{name} trained as a {results[name]['workers']}-worker job, not {n_tasks}: it "
                              "trained alone")
    rows = [history[n] for n in names]
    if len({len(r) for r in rows}) != 1 or any(len(r) != len(set(e["epoch"] for e in r)) for r in rows):
        raise CheckFailed(f"the tasks logged different or repeated epochs: {[[e['epoch'] for e in r] for r in rows]}")
    for epoch_rows in zip(*rows):
        epoch = epoch_rows[0]["epoch"]
        if len({e["weights"] for e in epoch_rows}) != 1 or len({e["loss"] for e in epoch_rows}) != 1:
            raise CheckFailed(f"epoch {epoch}: the tasks hold different weights or losses: they trained separately")
        shares = [e["own_share"] for e in epoch_rows]
        if len(set(shares)) != len(shares):
            raise CheckFailed(f"epoch {epoch}: every task's share of the loss is {shares[0]}: they saw the same data")
        if abs(sum(shares) - epoch_rows[0]["loss"]) > 1e-5 * abs(epoch_rows[0]["loss"]):
            raise CheckFailed(f"epoch {epoch}: the shares {shares} do not add up to the all-reduced loss")
    final = results[names[0]]["weights"]
    if any(r["weights"] == final for r in solo.values()):
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
        if (mine["loss"], mine["weights"]) != (ref["loss"], ref["weights"]):
            raise CheckFailed(f"epoch {mine['epoch']}: loss {mine['loss']} and weights {mine['weights']} differ from "
                              f"the uninterrupted job's ({ref['loss']}, {ref['weights']})")
    return (f"cancelled after epoch {epochs_before}, resumed there, {epochs} epochs as uninterrupted, bit for bit")


def same_result(scheduled: Sequence[dict], by_hand: Sequence[dict], n: int = 2, rank: str = "process",
                count: str = "processes") -> str:
    """Raise :class:`CheckFailed` unless the ``n`` reports of the Slurm run are one job of ``n`` processes with the
    losses of the run started by hand; else a summary."""
    for name, reports in (("under Slurm", scheduled), ("by hand", by_hand)):
        ranks = sorted(r[rank] for r in reports)
        if ranks != list(range(n)) or any(r[count] != n for r in reports):
            raise CheckFailed(f"{name}: processes {ranks} of {[r[count] for r in reports]}, expected one job of "
                              f"{n}: {'they never met' if not ranks else 'they trained separately'}")
    ours, theirs = (sorted(rs, key=lambda r: r[rank]) for rs in (scheduled, by_hand))
    if [r["loss"] for r in ours] != [r["loss"] for r in theirs]:
        raise CheckFailed(f"losses differ: under Slurm {ours[0]['loss']}, by hand {theirs[0]['loss']}")
    return f"{n} processes found each other; losses {[round(v, 5) for v in ours[0]['loss']]} as by hand"


# --------------------------------------------------------------------------- Slurm

def run(cmd: Sequence[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(map(str, cmd)), capture_output=True, text=True, **kw)


def clean(text: str) -> str:
    """A log without TensorFlow's, absl's and torchrun's start-up lines."""
    return "\n".join(ln for ln in text.splitlines() if ln.strip() and not NOISE.match(ln))


class Slurm:
    """Submit jobs from ``work`` (a scratch folder holding the job scripts) with ``env``; wait for them."""

    def __init__(self, work: Path, env: Mapping[str, str]):
        self.work, self.env = work, dict(env)
        self.node = run(["hostname", "-s"]).stdout.strip()

    def log(self, job: int) -> str:
        path = self.work / f"slurm-{job}.out"
        return path.read_text() if path.exists() else ""

    def sbatch(self, *args, options: Sequence[str] = (), env: Optional[Mapping[str, str]] = None) -> int:
        """Submit ``args`` (the script, then its arguments); the job id. :class:`CheckFailed` if sbatch refuses."""
        done = run(["sbatch", "--parsable", f"--chdir={self.work}", f"--output={self.work}/slurm-%j.out",
                    *options, *args], env={**self.env, **(env or {})})
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
    """Per task: its ``history-<task>.jsonl`` rows and its ``result-<task>.json``."""
    history = {p.stem[len("history-"):]: [json.loads(ln) for ln in p.read_text().splitlines() if ln.strip()]
               for p in out.glob("history-*.jsonl")}
    results = {p.stem[len("result-"):]: json.loads(p.read_text()) for p in out.glob("result-*.json")}
    return history, results


def reports(text: str, key: str) -> list[dict]:
    """Every JSON object in ``text`` that starts with ``{"<key>"`` (two ranks' lines may share a line)."""
    decoder, start = json.JSONDecoder(), f'{{"{key}"'
    return [decoder.raw_decode(text, i)[0] for i in (m.start() for m in re.finditer(re.escape(start), text))]


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


def started_by_hand(cmd: Sequence[str], envs: Sequence[Mapping[str, str]], timeout: float = TIMEOUT) -> list[str]:
    """Start ``cmd`` once per environment (no Slurm), wait for all; their outputs. Fails if one fails."""
    procs = [subprocess.Popen(list(cmd), env=dict(e), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for e in envs]
    try:
        outs = [p.communicate(timeout=timeout)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, out in zip(procs, outs):
        if p.returncode:
            raise CheckFailed(f"{' '.join(cmd)} by hand exited {p.returncode}:\n{clean(out)[-2000:]}")
    return outs


# --------------------------------------------------------------------------- the checks

class Checks:
    """Each check returns ``(summary, messages)``: the messages are lines quoted verbatim from the jobs' logs."""

    def __init__(self, slurm: Slurm):
        self.s, self.w = slurm, slurm.work

    def out(self, name: str) -> Path:
        path = self.w / name
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir()
        return path

    def mwms(self, name: str, *worker_args, options: Sequence[str] = (), env=None) -> Path:
        out = self.out(name)
        self.s.completed("mwms_job.sbatch", out, "--epochs", EPOCHS, *worker_args, options=options, env=env)
        return out

    def tf_together(self):
        history, results = read_history(self.mwms("together"))
        self.reference = history["worker-0"]
        self.solo = read_history(self.mwms("solo", options=["--ntasks=1"]))
        return trained_together(history, results, self.solo[1]), []

    def tf_resume(self):
        out = self.out("resume")
        args = ("mwms_job.sbatch", out, "--epochs", EPOCHS, "--min-epoch-seconds", FLOOR)
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

    def jax_env(self) -> dict:
        return {**self.s.env, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
                "XLA_FLAGS": "--xla_force_host_platform_device_count=1"}

    def jax_srun(self):
        mine, hand = self.out("jax-srun"), self.out("jax-by-hand")
        done = run(["srun", "--ntasks=2", "--kill-on-bad-exit=1", f"--chdir={self.w}", "python", "jax_worker.py",
                    mine], env=self.jax_env(), timeout=TIMEOUT)
        if done.returncode:
            raise CheckFailed(f"srun exited {done.returncode}:\n{clean(done.stdout + done.stderr)[-2000:]}")
        envs = [{**self.jax_env(), "KERAS_DISTRIBUTION_JOB_ADDRESSES": f"127.0.0.1:{free_port()}",
                 "KERAS_DISTRIBUTION_NUM_PROCESSES": "2"}] * 2
        envs = [{**e, "KERAS_DISTRIBUTION_PROCESS_ID": str(i)} for i, e in enumerate(envs)]
        outs = started_by_hand([self.s.env["PYTHON"], str(self.w / "jax_worker.py"), str(hand)], envs)
        verdict = same_result(reports(done.stdout, "process"), [r for o in outs for r in reports(o, "process")])
        import numpy as np
        a, b = np.load(mine / "trained.npz"), np.load(hand / "trained.npz")
        if not all(np.array_equal(a[k], b[k]) for k in a.files):
            raise CheckFailed("the trained weights differ between the Slurm run and the run by hand")
        return verdict + ", the same trained weights", []

    def torch_torchrun(self):
        if importlib.util.find_spec("torch") is None:
            return "skipped: torch is not installed in this environment", []
        mine, hand = self.out("torch-slurm"), self.out("torch-by-hand")
        job = self.s.completed("torch_job.sbatch", mine)
        torchrun = str(Path(self.s.env["PYTHON"]).with_name("torchrun"))
        outs = started_by_hand([torchrun, "--standalone", "--nproc-per-node=2", str(self.w / "torch_worker.py"),
                                str(hand)], [self.s.env])
        ours, theirs = reports(self.s.log(job), "rank"), reports(outs[0], "rank")
        verdict = same_result(ours, theirs, rank="rank", count="world")
        if len({r["weights"] for r in ours + theirs}) != 1:
            raise CheckFailed(f"weights differ: {[r['weights'] for r in ours]} vs {[r['weights'] for r in theirs]}")
        return verdict + ", the same weights on every rank", []

    # ----------------------------------------------------------------------- failure modes, each run once

    def squat(self, job: int) -> socket.socket:
        """Listen on the port that task 1 of ``job`` (held, not started) will compute for itself."""
        sys.path.insert(0, str(self.w))
        from slurm_tf_config import tf_config_from_slurm  # the job's own function
        node = self.s.node
        task1 = {"SLURM_JOB_ID": str(job), "SLURM_STEP_NODELIST": node, "SLURM_STEP_TASKS_PER_NODE": "2",
                 "SLURM_PROCID": "1", "SLURM_LOCALID": "1", "SLURMD_NODENAME": node}
        address = json.loads(tf_config_from_slurm(task1, hostnames=lambda _: [node]))["cluster"]["worker"][1]
        squatter = socket.socket()
        squatter.bind(("", int(address.rsplit(":", 1)[1])))
        squatter.listen(1)
        return squatter

    def fail_peer_never_starts(self):
        """Without srun --kill-on-bad-exit: task 1 cannot start (its port is taken), task 0 waits for it forever."""
        script = self.w / "mwms_no_kill.sbatch"
        script.write_text((self.w / "mwms_job.sbatch").read_text().replace("srun --kill-on-bad-exit=1 ", "srun "))
        job = self.s.sbatch(script, self.out("peer-never-starts"), "--epochs", EPOCHS, options=["--hold"])
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
        """The same with srun --kill-on-bad-exit=1 (mwms_job.sbatch): srun ends the step at once."""
        job = self.s.sbatch("mwms_job.sbatch", self.out("port-taken"), "--epochs", EPOCHS, options=["--hold"])
        with self.squat(job):
            run(["scontrol", "release", job])
            state = self.s.wait(job)
        return self.caught(job, state, r"task 1: Exited with exit code", r"Terminating StepId=\d+\.0")

    def fail_separate(self):
        """A TF_CONFIG left in the environment wins over Slurm's variables: each task trains alone, as worker 0.

        Both then write the chief's files: the job may also fail, when their backups collide."""
        out = self.out("separate")
        job = self.s.sbatch("mwms_job.sbatch", out, "--epochs", EPOCHS, env={"TF_CONFIG": "{}"})
        state = self.s.wait(job)
        try:
            trained_together(*read_history(out), self.solo[1])
        except CheckFailed as exc:
            return f"caught: job {job} {state}: {exc}", []
        raise CheckFailed("two tasks that each trained alone passed the together check")

    def fail_fresh_folder(self):
        """Resubmitted into a new folder (as --out runs/$SLURM_JOB_ID would do): the job starts from epoch 0."""
        history, results = read_history(self.mwms("fresh-folder"))
        try:
            resumed(history["worker-0"], results["worker-0"], self.before, self.reference)
        except CheckFailed as exc:
            return f"caught: {exc}", []
        raise CheckFailed("a job that started from epoch 0 passed the resume check")

    def fail_ntasks(self):
        """--ntasks wrong: more tasks than the node has CPUs, srun asking for more than the job has, and one task."""
        cpus = len(os.sched_getaffinity(0))                # what local_slurm.sh gave the node (nproc)
        job = self.s.sbatch("mwms_job.sbatch", self.out("too-many"), options=[f"--ntasks={cpus + 1}"])
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
            trained_together(*self.solo, self.solo[1])
        except CheckFailed as exc:
            return f"{step}; --ntasks=1: {exc}", [f"sbatch --ntasks={cpus + 1}: {pending.group(0)}", *messages]
        raise CheckFailed("a 1-task job passed the together check")

    def fail_no_srun(self):
        """The batch script runs the workers itself, without srun: one process, outside any job step."""
        script = self.w / "no_srun.sbatch"
        script.write_text(f"#!/bin/bash\n#SBATCH --ntasks=2\nKERAS_BACKEND=jax python jax_worker.py "
                          f"{self.out('jax-no-srun')}\npython mwms_worker.py --out {self.out('tf-no-srun')}\n")
        job = self.s.sbatch(script, env={**self.jax_env(), "KERAS_BACKEND": "tensorflow"})
        return self.caught(job, self.s.wait(job),   # JAX 0.10 finds no Slurm step; JAX 0.7 looks for its node list
                           r"ValueError: coordinator_address should be defined|KeyError: 'SLURM_STEP_NODELIST'",
                           r"RuntimeError: SLURM_STEP_NODELIST is not set")

    def caught(self, job: int, state: str, *patterns: str):
        if state == "COMPLETED":
            raise CheckFailed(f"job {job} COMPLETED: the failure did not happen")
        return f"caught: job {job} {state}", lines_matching(self.s.log(job), *patterns)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=Path, default=HERE / "jobs", help="folder with the job scripts")
    args = p.parse_args(argv)
    if "SLURM_CONF" not in os.environ:
        print("slurm check: SLURM_CONF is not set: run tools/slurm/check.sh, which starts a local Slurm")
        return 2
    work = Path(tempfile.mkdtemp(prefix="slurm-check-", dir=os.environ.get("LOCAL_SLURM_DIR")))
    for f in args.jobs.iterdir():
        if f.suffix in (".py", ".sbatch"):
            shutil.copy(f, work)
    python = os.path.abspath(sys.executable)                 # a venv's python: not resolved, or the venv is lost
    env = {**os.environ, "PATH": f"{os.path.dirname(python)}:{os.environ['PATH']}", "PYTHON": python,
           "PYTHONUNBUFFERED": "1", "KERAS_BACKEND": "tensorflow",
           "TF_CPP_MIN_LOG_LEVEL": "0"}                      # TensorFlow's INFO and WARNING lines are quoted below
    checks = Checks(Slurm(work, env))
    order = [("TF together", checks.tf_together), ("TF resume", checks.tf_resume),
             ("JAX srun", checks.jax_srun), ("PyTorch torchrun", checks.torch_torchrun),
             ("failure: peer never starts", checks.fail_peer_never_starts),
             ("failure: port taken", checks.fail_port_taken), ("failure: separate models", checks.fail_separate),
             ("failure: fresh folder", checks.fail_fresh_folder), ("failure: wrong --ntasks", checks.fail_ntasks),
             ("failure: no srun", checks.fail_no_srun)]
    failed, t_all = [], time.time()
    for name, check in order:
        t0, messages = time.time(), []
        try:
            summary, messages = check()
            verdict = "ok: " + summary
        except Exception as exc:                   # noqa: BLE001 - any failure is this check's verdict
            failed.append(name)
            verdict = f"FAILED: {'' if isinstance(exc, CheckFailed) else type(exc).__name__ + ': '}{exc}"
        print(f"{name:<27} {time.time() - t0:6.1f} s  {verdict}", flush=True)
        for message in messages:
            print(f"{'':<27}   message: {message}", flush=True)
    print(f"slurm check: {len(order) - len(failed)} ok, {len(failed)} failed in {time.time() - t_all:.0f} s"
          + (f" ({', '.join(failed)})" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
