"""``make chaos``: kill each resumable job a lesson teaches at random moments, half of the kills in the middle of a
file write, rerun the same command after each kill until the job ends, and print what survived.

Usage: ``python tools/chaos.py [--kills N] [--jobs quickstart,05,07,12] [--parallel N] [--seed S] [--markdown]
[--keep] [--source CHECKOUT]`` (``make chaos KILLS=20``, 2 jobs at a time; CI runs ``make chaos KILLS=2``). Exit
status 1 when a figure is not perfect: the output says which figure of which job failed and shows the job's log.
``--markdown`` prints the tables as Markdown (README's); ``--source`` checks another checkout's jobs (a branch's
fixed jobs before they are merged).

**The jobs** (:data:`JOBS`, one :class:`Job` each: how to start it, which lines say "epoch k done with score s",
where its files go) are read at check time from where the lessons write them: the quick start from
``quickstart/train_2gpus.py``; lessons 05, 07 and 12 from their notebooks' ``%%writefile`` cells
(``nblint.written_files``), into a temporary folder. Each job runs as its lesson runs it: ``python train.py`` in
its folder; lesson 07's two workers from :func:`helpers.cluster.run` with a ``TF_CONFIG`` each (the lesson's launcher,
which stops the surviving worker when one dies); lesson 12's ``torchrun --standalone --nproc_per_node=2``.

**A trial** is one fresh folder: the job is started, killed (``KILLS_PER_TRIAL`` kills, in random order one at a
random moment and one mid-write), started again with the same command after each kill, and run until it ends by
itself. A run that fails by itself is run once more; a second failure in a row strands the trial. Each kill is:

* *at a random moment*: ``SIGKILL`` after a random delay (uniform over the run's expected length, learnt from the
  runs so far) to one process of the job chosen at random (the script, the launcher, a worker, torchrun, a rank)
  or to all of them at once, as a lost machine. The surviving processes must then end by themselves.
* *mid-write*: ``tools/chaos_inject.py``, copied as ``sitecustomize.py`` into a folder put first on the job's
  ``PYTHONPATH``, logs every write into the job's folder; at a random moment of the training the controller arms
  it, and the first, second or third write after that (chosen at random, in whichever process) is left as a kill
  in the middle of that write would leave it, and that process ``SIGKILL``\\s itself. Per writer (each checked in
  its source):

  - Keras ``saving_lib.save_model`` (``model.save``, ``.keras``, ``ModelCheckpoint``) and
    ``saving_lib.save_weights_only`` (``save_weights``, ``.weights.h5``, ``BackupAndRestore``) write in place:
    ``open(filepath, "wb")`` and ``H5IOStore(filepath, mode="w")`` (keras/src/saving/saving_lib.py, 3.15.1), which
    truncate the file first. ``torch.save(obj, path)`` opens ``path`` for writing in place too. A kill leaves some
    prefix of the new bytes and none of the old: the file is written, then cut at a random byte (h5py does not
    write strictly in order, so a prefix stands for "some of the writes done"; it gives h5py's own
    ``truncated file`` error, as the review's real kill did).
  - Python's ``open(path, "w"/"a"/"x")`` (``training_metadata.json``, ``history-*.jsonl``, ``report-*.json``,
    ``Path.write_text``): the file as it was when opened (empty, or the old bytes for ``"a"``), or cut at a page
    boundary of the new bytes: Linux checks for a fatal signal between the pages of one ``write(2)``, so a small
    JSON file written in one call is left empty or whole, never half.
  - TensorFlow's ``CheckpointManager.save`` (lesson 07): ``BundleWriter`` writes the shard's data and index under
    ``<prefix>_temp/`` with ``.tempstate<random>`` names and renames them when complete; ``MergeBundles`` renames the
    data to ``<prefix>.data-*`` and then writes ``<prefix>.index`` in place (tensorflow/core/util/tensor_bundle/
    tensor_bundle.cc); then the manager's callback writes the ``checkpoint`` state file atomically
    (``file_io.atomic_write_string_to_file``: a ``.tmp<hex>`` file renamed), deletes the old checkpoint (``_sweep``)
    and writes the state again (tensorflow/python/checkpoint/checkpoint_management.py, TF 2.21). A kill leaves one
    of :data:`chaos_inject.TF_STAGES`, chosen at random: the temporary files half-written, the new index half-written
    while the state file still names the previous checkpoint, the new checkpoint complete with the old state, a
    half-written state temporary, or the old checkpoint half-deleted after the state moved on. Never a truncated
    ``checkpoint`` state file or a truncated file the state file names: no real kill leaves those.

**The figures**, per job (every one must be perfect, else exit status 1):

* *kills*: the kills made (half of them mid-write) of the ones asked for; a kill lands in a run that was still
  running.
* *resumes that worked*: after each kill, the next runs did not fail by themselves (a traceback, a time-out).
* *epochs lost per kill*: epochs done before the kill (the last "epoch done" line of the killed run, or the epoch
  it resumed at) minus the epoch the next run resumed at (its first epoch line, or its "resumed" line): 0 when only
  the epoch in progress was lost.
* *unloadable files*: after each kill (and at the end of each trial), every file of the job's folder that the job
  or a learner reads back (``.keras``, ``.h5``, ``.json``, ``.jsonl``, ``.pt``, ``.npz``, the checkpoint a TF
  ``checkpoint`` state file names; not temporary names) is loaded by ``python tools/chaos.py load`` with the job's
  own libraries (``keras.saving.load_model``, h5py, ``tf.train.load_checkpoint``...): the count that fail.
* *best model kept*: the best file's score that the job prints when it ends (it reloads the file) equals the best
  score logged before each kill, across all runs of the trial (within :attr:`Job.score_tol`); "n/a" for a job that
  keeps no best model.
* *processes left over*: after each kill (and after each run's end), the processes of that run still alive after the
  job's grace period (:attr:`Job.grace`: a launcher may take a few seconds to stop the survivors), or more than
  ``ORPHAN_GRACE`` seconds after the process the check started has ended (nothing is left to stop them: ranks
  that torchrun left behind would otherwise train on, unseen, when a job's remaining epochs fit in its grace).
  Each run's processes carry ``CHAOS_TAG=<id>`` in their environment, inherited by workers and ranks; /proc is
  scanned. They are killed after being counted, so nothing outlives the check.

**What a job must print** (its natural output, parsed by :class:`Job`'s regular expressions; adapt the job's entry
when its output changes): a line when an epoch ends, printed *after* that epoch's files are written, with the
epoch's number (or after a line that starts the epoch) and, for a job that keeps a best model, the monitored
score: Keras's ``verbose=2`` lines ``Epoch k/N`` and ``... - val_accuracy: x - ...`` (user callbacks run before
Keras's ProgbarLogger prints), lesson 07's ``[worker-0] epoch k/N loss=...``; where a run resumed, its first
epoch line, or a line of its own (07's ``restored ckpt-k: k epoch(s) done``, the quick start's
``start after epoch k of N``); for a best model, the score of the reloaded file at the end (``best.keras reloads:
val_accuracy x``). Lesson 12's job prints none of these today: its entry expects ``epoch k/N`` lines.

The temporary folder (scripts, job folders, logs, snapshots; also the jobs' ``TMPDIR``) is removed at the end, also on
failure and on Ctrl-C; every wait has a time limit. This file is standard library only; the load check runs in the
jobs' Python (``python tools/chaos.py load DIR...``).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Mapping, Optional, Sequence

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import nblint  # noqa: E402  (tools/nblint.py: a notebook's %%writefile cells)

KILLS_PER_TRIAL = 2
ORPHAN_GRACE = 2.0        # seconds a job's process may outlive the process the check started (it should die with it)
WRITE_SKIP = 3            # a mid-write kill hits the 1st, 2nd or 3rd write after the controller armed it
POLL = 0.05
NOISE = re.compile(r"^(?:[IWE]\d{4} [\d:. ]+\d+ \S+:\d+\]|WARNING: All log messages before absl|To enable the "
                   r"following instructions|W\d{4} [\d:.]+ \d+ torch/distributed/run.py|\*{20,}$|Setting "
                   r"OMP_NUM_THREADS)")
ERROR = re.compile(r"^(?:[\w.]+(?:Error|Exception|Exit)\b|AssertionError|torch\.distributed\.\S+Error)")
CHECKED = {".keras": "keras", ".h5": "h5", ".json": "json", ".jsonl": "jsonl", ".pt": "torch", ".pth": "torch",
           ".npz": "numpy", ".npy": "numpy"}
TEMPORARY = re.compile(r"^\.|tmp|temp|partial|^__pycache__$", re.I)

# Lesson 07's launcher, as the lesson's cells run the job: helpers.cluster.run starts a Child per worker with its
# TF_CONFIG, waits, and stops the others once one failed (its grace, 5 s).
LAUNCH_07 = ("import sys; from helpers import cluster; cluster.run([sys.argv[1], '--epochs', sys.argv[2], "
             "'--min-epoch-seconds', '0.25', '--out', sys.argv[3]], n_workers=2, timeout=600, log_dir=sys.argv[4])")
KERAS_EPOCH = r"^Epoch (?P<epoch>\d+)/\d+$"                                  # verbose=2: before an epoch
KERAS_DONE = r"^\d+/\d+ - .*\bval_accuracy: (?P<score>\d+\.\d+)"           # verbose=2: after it, callbacks done


@dataclasses.dataclass(frozen=True)
class Job:
    """What the check knows about one job; the placeholders of ``command``: ``{python}`` (this interpreter),
    ``{repo}``, ``{scripts}`` (the lesson's written files), ``{folder}`` (the job's folder, also its working
    folder), ``{logs}`` (a folder for extra logs, outside it) and ``{epochs}``."""

    name: str
    title: str
    command: tuple[str, ...]
    epochs: int
    scripts: tuple[str, tuple[str, ...]] = ("", ())   # (notebook glob, the %%writefile files it needs)
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    progress_log: str = ""      # the file in {logs} that has the epoch lines; "" = the command's own output
    epoch_start: str = ""       # regex: an epoch begins (group "epoch")
    epoch_done: str = ""        # regex: an epoch ended and its files are written (groups "epoch", "score")
    resumed_at: str = ""        # regex: a run says how many epochs were done when it started (group 1)
    final_score: str = ""       # regex: the best file's score, reloaded by the job at its end (group 1)
    start_best: str = ""        # regex: the best file's score a run reads back when it starts (group 1): a kill after
                                # the best file was replaced but before its epoch line leaves a score seen only here
    score_tol: float = 1e-3     # the final score is printed with 3 decimals, the logged ones with 4
    root: str = "the script"    # what the started process is
    grace: float = 5.0          # seconds the surviving processes get to end by themselves after a kill
    timeout: float = 600.0      # seconds a run may take
    guess: tuple[float, float, float] = (8.0, 1.0, 2.0)   # seconds: start-up, an epoch, the end (before measuring)


START_BEST = r"^start after epoch \d+ of \d+; best so far: val_accuracy (\d+\.\d+)"
JOBS = (
    Job("quickstart", "quick start, quickstart/train_2gpus.py (MirroredStrategy, fit)",
        ("{python}", "{repo}/quickstart/train_2gpus.py"), epochs=6, epoch_start=KERAS_EPOCH, epoch_done=KERAS_DONE,
        resumed_at=r"^start after epoch (\d+) of", final_score=r"best\.keras reloads: val_accuracy (\d+\.\d+)",
        start_best=START_BEST),
    Job("05", "lesson 05's job script, train.py (MirroredStrategy, fit)", ("{python}", "{scripts}/train.py"),
        epochs=3, scripts=("05_*.ipynb", ("train.py",)), epoch_start=KERAS_EPOCH, epoch_done=KERAS_DONE,
        resumed_at=r"^start after epoch (\d+) of", final_score=r"best\.keras reloads val_accuracy (\d+\.\d+)",
        start_best=START_BEST),
    Job("07", "lesson 07's two workers, mwms_train.py (MultiWorkerMirroredStrategy)",
        ("{python}", "-c", LAUNCH_07, "{scripts}/mwms_train.py", "{epochs}", "{folder}", "{logs}"), epochs=3,
        scripts=("07_*.ipynb", ("mwms_lib.py", "mwms_model.py", "mwms_train.py")), progress_log="worker-0.log",
        epoch_done=r"^\[worker-0\] epoch (?P<epoch>\d+)/\d+ loss=", resumed_at=r"^\[worker-0\] .*\b(\d+) epoch\(s\) done",
        root="the launcher", grace=15.0, guess=(12.0, 1.5, 3.0)),
    Job("12", "lesson 12's DDP job, ddp_train.py (torchrun, 2 CPU processes)",
        ("{python}", "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "{scripts}/ddp_train.py",
         "{epochs}", "64"), epochs=3, scripts=("12_*.ipynb", ("common.py", "ddp_train.py")),
        env={"OMP_NUM_THREADS": "1"}, epoch_done=r"\bepoch (?P<epoch>\d+)/\d+", root="torchrun", grace=15.0,
        guess=(10.0, 1.0, 2.0)),
)


class CheckError(RuntimeError):
    """The check itself cannot run (a lesson does not write a job file); the message says why."""


class Stopped(Exception):
    """The check was interrupted (Ctrl-C, SIGTERM, another job's error): stop starting and waiting."""


# --------------------------------------------------------------------------- processes

def tagged(tag: str, prefix: bool = False) -> dict[int, dict[str, str]]:
    """Live processes (not zombies) whose environment has ``CHAOS_TAG=tag`` (or a tag starting with it): their
    environments, by pid."""
    want = f"CHAOS_TAG={tag}".encode()
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            items = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            state = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if state not in "ZX" and any(i == want or (prefix and i.startswith(want)) for i in items):
            found[int(entry)] = dict(i.decode(errors="replace").partition("=")[::2] for i in items if b"=" in i)
    return found


def describe(pid: int, env: Mapping[str, str], root: int, root_name: str) -> str:
    """A process of a job in words: its role (the script, a worker, a rank) and pid."""
    if pid == root:
        return f"{root_name} (pid {pid})"
    if "RANK" in env:
        return f"rank {env['RANK']} (pid {pid})"
    if "TF_CONFIG" in env:
        try:
            task = json.loads(env["TF_CONFIG"])["task"]
            return f"{task['type']} {task['index']} (pid {pid})"
        except (ValueError, KeyError, TypeError):
            pass
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        cmd = "?"
    return f"pid {pid} ({cmd[:60]})"


def kill_all(tag: str, prefix: bool = False, limit: float = 10.0) -> None:
    """SIGKILL every process with the tag, again until none is left (a parent may start one meanwhile) or ``limit``
    seconds passed."""
    deadline = time.monotonic() + limit
    while (pids := tagged(tag, prefix)) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(POLL)


def reap(proc: subprocess.Popen, run: "Run", timeout: float = 0.0) -> Optional[int]:
    """``proc``'s exit code once it has exited (None before), waiting up to ``timeout`` s; ``os.wait4`` adds the CPU
    seconds of it and of the processes it waited for (workers, ranks) to ``run.cpu``."""
    deadline = time.monotonic() + timeout
    while proc.returncode is None:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            run.cpu += usage.ru_utime + usage.ru_stime
        elif time.monotonic() >= deadline:
            break
        else:
            time.sleep(POLL)
    return proc.returncode


# --------------------------------------------------------------------------- logs and progress

class Follow:
    """New complete lines of growing files, each with the time it was first seen."""

    def __init__(self, paths: Sequence[Path]):
        self.paths, self.offsets, self.lines = list(paths), {}, []

    def poll(self, final: bool = False) -> list[tuple[float, str]]:
        new = []
        for path in self.paths:
            try:
                with open(path, "rb") as f:
                    f.seek(self.offsets.get(path, 0))
                    data = f.read()
            except OSError:
                continue
            end = len(data) if final else data.rfind(b"\n") + 1
            self.offsets[path] = self.offsets.get(path, 0) + end
            now = time.monotonic()
            new += [(now, ln) for ln in data[:end].decode(errors="replace").replace("\r", "\n").splitlines()]
        self.lines += new
        return new


@dataclasses.dataclass
class Progress:
    """What one run's output says: where it resumed, which epochs it finished with which score, its final score."""

    resumed: Optional[int] = None          # epochs done when it started
    done: list = dataclasses.field(default_factory=list)   # (epoch, score or None, time seen)
    final: Optional[float] = None
    first_seen: Optional[float] = None     # time of its first epoch line
    first_was_done: bool = False           # that line said an epoch ended (not began)
    start_scores: list = dataclasses.field(default_factory=list)   # the best file's score read back at the start
    _current: Optional[int] = None

    def feed(self, job: Job, lines: Sequence[tuple[float, str]]) -> None:
        for t, line in lines:
            line = line.strip()
            if job.resumed_at and (m := re.search(job.resumed_at, line)) and self.resumed is None:
                self.resumed = int(m.group(1))
            if job.epoch_start and (m := re.search(job.epoch_start, line)):
                self._current = int(m.group("epoch"))
                self._first(self._current, t, False)
            if job.epoch_done and (m := re.search(job.epoch_done, line)):
                groups = m.groupdict()
                epoch = int(groups["epoch"]) if groups.get("epoch") else self._current
                if epoch is not None:
                    self._first(epoch, t, True)
                    self.done.append((epoch, float(groups["score"]) if groups.get("score") else None, t))
            if job.final_score and (m := re.search(job.final_score, line)):
                self.final = float(m.group(1))
            if job.start_best and (m := re.search(job.start_best, line)) and float(m.group(1)) > 0:
                self.start_scores.append(float(m.group(1)))

    def _first(self, epoch: int, t: float, done: bool) -> None:
        if self.first_seen is None:
            self.first_seen, self.first_was_done = t, done
            if self.resumed is None:
                self.resumed = epoch - 1

    @property
    def last_done(self) -> Optional[int]:
        return self.done[-1][0] if self.done else None

    @property
    def scores(self) -> list[float]:
        """Every score the run reported: its epochs' and the one it read back from the best file at its start."""
        return [s for _, s, _ in self.done if s is not None] + self.start_scores


def error_line(text: str) -> str:
    """The last error line of a log (a traceback's last line, a torchrun failure), or its last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not NOISE.match(ln)]
    errors = [ln for ln in lines if ERROR.match(ln)]
    return (errors or lines or ["(no output)"])[-1][:300]


def tail(text: str, n: int = 25) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip() and not NOISE.match(ln)]
    return "\n".join(("    " + ln)[:240] for ln in lines[-n:])


# --------------------------------------------------------------------------- one run, one trial, one job

@dataclasses.dataclass
class Run:
    number: int
    plan: Optional[str]                    # "random", "write" or None (let it finish)
    log: str = ""
    progress: Progress = dataclasses.field(default_factory=Progress)
    kill: Optional[str] = None             # what was killed, in words (None: not killed)
    returncode: Optional[int] = None
    timed_out: bool = False
    leftovers: list = dataclasses.field(default_factory=list)
    left_when: str = ""                    # when the leftovers were counted, in words
    seconds: float = 0.0
    cpu: float = 0.0                       # CPU seconds of its processes (those their parents waited for)
    first_offset: float = 0.0              # seconds from its start to its first epoch line
    last_offset: float = 0.0               # ... to its last "epoch done" line

    @property
    def failed(self) -> bool:
        """It ended by itself, without success."""
        return self.kill is None and (self.timed_out or self.returncode != 0)


@dataclasses.dataclass
class Kill:
    mode: str
    what: str
    done: int                              # epochs done before it
    trial: int
    worked: Optional[bool] = None          # did the runs after it work (None: not judged yet)
    resumed: Optional[int] = None          # where the next run resumed
    error: str = ""

    @property
    def lost(self) -> Optional[int]:
        return None if not self.worked or self.resumed is None else max(0, self.done - self.resumed)


@dataclasses.dataclass
class Estimate:
    """Seconds of a run's parts, learnt from the runs that ended by themselves."""

    startup: float
    epoch: float
    end: float

    def remaining(self, epochs_left: int) -> float:
        return self.startup + max(0, epochs_left) * self.epoch + self.end

    def learn(self, run: Run) -> None:
        p = run.progress
        if p.first_seen is None:                  # no epoch lines: the whole run is "start-up"
            self.startup, self.epoch, self.end = run.seconds, 0.0, 0.0
            return
        times = [t for _, _, t in p.done]
        if len(times) >= 2:
            self.epoch = statistics.median(b - a for a, b in zip(times, times[1:]))
        # Start-up: until the first epoch began (a job that prints only "epoch done" lines: one epoch earlier).
        self.startup = max(0.05, run.first_offset - (self.epoch if p.first_was_done else 0.0))
        if times:
            self.end = max(0.05, run.seconds - run.last_offset)


@dataclasses.dataclass
class Report:
    job: Job
    kills_asked: int
    kills: list = dataclasses.field(default_factory=list)
    runs: list = dataclasses.field(default_factory=list)          # (trial, Run)
    snapshots: list = dataclasses.field(default_factory=list)     # (label, folder)
    unloadable: list = dataclasses.field(default_factory=list)    # "label: path: error"
    best: list = dataclasses.field(default_factory=list)          # per trial: (kept?, words)
    trial_errors: list = dataclasses.field(default_factory=list)  # runs that failed with no kill before them
    seconds: float = 0.0
    cpu: float = 0.0                 # CPU seconds of the job's processes (those their parents waited for)
    note: str = ""

    # The six figures: (name, value in words, perfect?)
    def figures(self) -> list[tuple[str, str, bool]]:
        n, writes = len(self.kills), sum(k.mode == "write" for k in self.kills)
        worked = sum(bool(k.worked) for k in self.kills)
        lost = [k.lost for k in self.kills]
        counts = {}
        for v in lost:
            counts[v] = counts.get(v, 0) + 1
        lost_words = ", ".join(f"{'?' if v is None else v} x{c}" for v, c in
                               sorted(counts.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))) or "-"
        if n and set(counts) == {0}:
            lost_words = "0 (every kill)"
        leftover = sum(len(r.leftovers) for _, r in self.runs)
        if not self.job.final_score:
            best = ("n/a (no best file)", True)
        elif not self.best:
            best = ("no trial ended", False)
        else:
            kept = sum(k for k, _ in self.best)
            best = (f"{kept} of {len(self.best)} trials", kept == len(self.best))
        return [
            ("kills", f"{n} of {self.kills_asked} ({writes} mid-write)",
             n == self.kills_asked and writes >= self.kills_asked // 2),
            ("resumes that worked", f"{worked} of {n}" + (f"; {len(self.trial_errors)} run(s) failed before any kill"
                                                           if self.trial_errors else ""),
             worked == n and not self.trial_errors),
            ("epochs lost per kill", lost_words, bool(n) and set(counts) == {0}),
            ("unloadable files", str(len(self.unloadable)), not self.unloadable),
            ("best model kept", *best),
            ("processes left over", str(leftover), leftover == 0),
        ]

    @property
    def ok(self) -> bool:
        return all(ok for _, _, ok in self.figures())


class Check:
    """The check of one job in the shared temporary folder ``root``: its random numbers, its runs' tags
    (``<run_id>-<job>-<n>``) and what it prints (``say``); :meth:`job` checks the job."""

    def __init__(self, root: Path, rng: random.Random, say=print, source: Path = ROOT,
                 run_id: Optional[str] = None, stop: Optional[threading.Event] = None):
        self.root, self.rng, self.say, self.source = root, rng, say, Path(source)
        self.notebooks = self.source / "notebooks"
        self.id = f"{run_id or os.getpid()}-{rng.getrandbits(32):08x}"
        self.stop = stop or threading.Event()
        self.hook = root / "hook"
        self.hook.mkdir(exist_ok=True)
        shutil.copy(HERE / "chaos_inject.py", self.hook / "sitecustomize.py")
        self.counter = 0

    def sleep(self, seconds: float = POLL) -> None:
        if self.stop.wait(seconds):
            raise Stopped()

    # ----------------------------------------------------------------------- setting up
    def scripts(self, job: Job) -> Path:
        """The files the job's lesson writes, written into a folder of their own."""
        folder = self.root / f"{job.name}-scripts"
        folder.mkdir(exist_ok=True)
        pattern, names = job.scripts
        if not names:
            return folder
        found = sorted(self.notebooks.glob(pattern))
        if len(found) != 1:
            raise CheckError(f"{job.name}: expected one notebook {pattern} in {self.notebooks}, found {len(found)}")
        files = nblint.written_files(json.loads(found[0].read_text(encoding="utf-8")))
        missing = [n for n in names if n not in files]
        if missing:
            raise CheckError(f"{job.name}: {found[0].name} writes no {', '.join(missing)} (%%writefile cells)")
        for name in names:
            (folder / name).write_text(files[name])
        return folder

    def env(self, job: Job, tag: str, ctl: Path, folder: Path, seed: int) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "TF_CONFIG", "MPLBACKEND")}
        tmp = self.root / f"{job.name}-tmp"
        tmp.mkdir(exist_ok=True)
        path = [str(self.hook), str(self.source)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
        env.update(PYTHONPATH=os.pathsep.join(path), PYTHONUNBUFFERED="1", TMPDIR=str(tmp), CHAOS_TAG=tag,
                   CHAOS_CTL=str(ctl), CHAOS_FOLDER=str(folder), CHAOS_SEED=str(seed))
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        env.update(job.env)
        return env

    # ----------------------------------------------------------------------- one run
    def run(self, job: Job, scripts: Path, folder: Path, plan: Optional[str], estimate: Estimate,
            epochs_done: int) -> Run:
        self.counter += 1
        run = Run(self.counter, plan)
        ctl = self.root / f"{job.name}-run-{self.counter}"
        logs = ctl / "logs"
        logs.mkdir(parents=True)
        tag = f"{self.id}-{self.counter}"
        values = dict(python=sys.executable, repo=str(self.source), scripts=str(scripts), folder=str(folder),
                      logs=str(logs), epochs=str(job.epochs))
        argv = [part.format(**values) for part in job.command]
        out = ctl / "output.log"
        follow = Follow([logs / job.progress_log] if job.progress_log else [out])
        # A random kill: anywhere in the run's expected length. A mid-write kill is armed while it trains (the
        # writes come at the ends of its epochs and after): spread over its epochs, rarely after its last write.
        left = job.epochs - epochs_done
        low, high = 0.2, estimate.remaining(left)
        if plan == "write" and left > 0 and estimate.epoch > 0:
            low, high = estimate.startup, estimate.startup + left * estimate.epoch
        delay = self.rng.uniform(low, max(low + 0.1, high))
        skip = self.rng.randrange(WRITE_SKIP)
        armed, killed_at, t0 = False, None, time.monotonic()
        with open(out, "wb") as sink:
            proc = subprocess.Popen(argv, cwd=folder, env=self.env(job, tag, ctl, folder, self.rng.getrandbits(32)),
                                    stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        try:
            while True:
                run.progress.feed(job, follow.poll())
                now = time.monotonic() - t0
                if (fired := self.fired(ctl)) is not None:
                    run.kill, killed_at = fired, now
                    break
                if reap(proc, run) is not None:
                    break
                if plan == "random" and now >= delay:
                    run.kill, killed_at = self.kill_random(job, tag, proc.pid), now
                    if run.kill:
                        break
                if plan == "write" and not armed and now >= delay:
                    (ctl / "arm.tmp").write_text(str(skip))
                    os.replace(ctl / "arm.tmp", ctl / "arm")
                    armed = True
                if now > job.timeout:
                    run.timed_out = True
                    kill_all(tag)
                    break
                self.sleep()
            # The grace period: after a kill the processes left must end by themselves within the job's grace, and
            # within ORPHAN_GRACE of the started process's end (nothing is left to stop them: they die with it).
            deadline, ended = time.monotonic() + (job.grace if run.kill else ORPHAN_GRACE), None
            while time.monotonic() < deadline and (reap(proc, run) is None or tagged(tag)):
                if proc.returncode is not None:
                    ended = ended or time.monotonic()
                    deadline = min(deadline, ended + ORPHAN_GRACE)
                self.sleep()
            if run.kill is None and (fired := self.fired(ctl)) is not None:   # killed just as it exited
                run.kill, killed_at = fired, time.monotonic() - t0
            left = tagged(tag)
            run.leftovers = [describe(pid, env, proc.pid, job.root) for pid, env in sorted(left.items())]
            run.left_when = (f"{ORPHAN_GRACE:g} s after {job.root} ended" if ended else
                             f"{job.grace:g} s after the kill" if run.kill else f"{ORPHAN_GRACE:g} s after the end")
        finally:
            kill_all(tag)
            reap(proc, run, timeout=10)
        run.returncode, run.seconds = proc.returncode, time.monotonic() - t0
        run.progress.feed(job, follow.poll(final=True))
        texts = [out.read_text(errors="replace")] + [p.read_text(errors="replace") for p in sorted(logs.glob("*"))]
        run.log = "\n".join(t for t in texts if t.strip())
        p = run.progress
        run.first_offset = (p.first_seen - t0) if p.first_seen else run.seconds
        run.last_offset = (p.done[-1][2] - t0) if p.done else run.seconds
        if run.kill and killed_at is not None:
            run.kill += f", at {killed_at:.1f} s"
        return run

    def fired(self, ctl: Path) -> Optional[str]:
        """The mid-write kill the injected code made in this run, in words (None: none yet)."""
        try:
            lines = (ctl / "writes.log").read_text().splitlines()
        except OSError:
            return None
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("kind") == "fired":
                where = (f"cut at {event['cut']} of {event['size']} bytes" if "cut" in event
                         else event.get("stage", "killed after the write"))
                return f"mid-write: {event['writer']} {event['path']} ({where}, pid {event['pid']})"
        return None

    def kill_random(self, job: Job, tag: str, root: int) -> Optional[str]:
        """SIGKILL one process of the run, or all of them; what was killed, in words (None: nothing ran)."""
        procs = tagged(tag)
        if not procs:
            return None
        choice = self.rng.choice(sorted(procs) + ["all"])
        if choice == "all":
            kill_all(tag)
            return f"at a random moment: all {len(procs)} process(es) (a lost machine)"
        try:
            os.kill(choice, signal.SIGKILL)
        except ProcessLookupError:
            return None
        return f"at a random moment: {describe(choice, procs[choice], root, job.root)}"

    # ----------------------------------------------------------------------- one job
    def job(self, job: Job, kills: int) -> Report:
        started = time.monotonic()
        report = Report(job, kills)
        scripts = self.scripts(job)
        estimate = Estimate(*job.guess)
        queue = [m for _ in range((kills + 1) // 2) for m in self.rng.sample(["random", "write"], 2)][:kills]
        budget, trial = 3 * kills + 6, 0
        while queue and budget > 0:
            trial += 1
            folder = self.root / f"{job.name}-trial-{trial}"
            folder.mkdir()
            budget = self.trial(job, report, trial, folder, scripts, queue, estimate, budget)
        if queue:
            report.note = f"{len(queue)} kill(s) never landed within {3 * kills + 6} runs"
        report.seconds = time.monotonic() - started
        report.cpu = sum(r.cpu for _, r in report.runs)
        return report

    def trial(self, job: Job, report: Report, trial: int, folder: Path, scripts: Path, queue: list,
              estimate: Estimate, budget: int) -> int:
        """Runs in one fresh folder until the job ends (or is stranded); the runs left in the budget."""
        in_trial, pending, done, scores, failures = 0, [], 0, [], 0
        while budget > 0:
            budget -= 1
            plan = queue[0] if queue and in_trial < KILLS_PER_TRIAL else None
            run = self.run(job, scripts, folder, plan, estimate, done)
            report.runs.append((trial, run))
            p = run.progress
            scores += p.scores
            if p.resumed is not None or p.done:
                done = p.last_done if p.done else p.resumed
            if p.resumed is not None and pending:            # the runs after the kills got going again
                for k in pending:
                    k.worked, k.resumed = True, p.resumed
                pending = []
            label = f"{job.name} trial {trial} run {run.number}"
            if run.kill:
                if queue:
                    queue.pop(0)
                in_trial, failures = in_trial + 1, 0
                kill = Kill("write" if run.kill.startswith("mid-write") else "random", run.kill, done, trial)
                report.kills.append(kill)
                pending.append(kill)
                self.say(f"{label}: killed {run.kill}; {done} epoch(s) done"
                         + (f"; left over: {', '.join(run.leftovers)}" if run.leftovers else ""))
                self.snapshot(report, folder, f"after kill {len(report.kills)}")
                continue
            if not run.failed:
                estimate.learn(run)
                for k in pending:    # it finished: the resume worked; no epoch line after all epochs: nothing left
                    k.worked = True
                    k.resumed = p.resumed if p.resumed is not None else (job.epochs if k.done >= job.epochs else None)
                self.say(f"{label}: ended by itself in {run.seconds:.1f} s" + (f" (the {plan} kill came too late)"
                                                                               if plan else "")
                         + (f"; left over: {', '.join(run.leftovers)}" if run.leftovers else ""))
                self.snapshot(report, folder, f"trial {trial} end")
                self.judge_best(job, report, trial, run, scores)
                return budget
            failures += 1
            why = "timed out" if run.timed_out else f"exit {run.returncode}: {error_line(run.log)}"
            self.say(f"{label}: FAILED by itself ({why})")
            last = report.kills[-1] if report.kills and report.kills[-1].trial == trial else None
            for k in pending or ([last] if last else []):
                k.worked, k.error = False, why
            if last is None:
                report.trial_errors.append((run, why))
            pending = []
            if failures >= 2:
                self.say(f"{job.name} trial {trial}: stranded (two failed runs in a row)")
                if job.final_score:
                    report.best.append((False, f"trial {trial}: the job never ended, no final best model"))
                return budget
        return budget

    def judge_best(self, job: Job, report: Report, trial: int, run: Run, scores: list[float]) -> None:
        if not job.final_score:
            return
        final, best = run.progress.final, max(scores) if scores else None
        if final is None or best is None:
            report.best.append((False, f"trial {trial}: no final score line ({job.final_score!r}) or no logged "
                                       f"score: final {final}, logged {scores}"))
            return
        kept = abs(final - best) <= job.score_tol
        report.best.append((kept, f"trial {trial}: best file {final} vs best logged {best} (logged {scores})"))

    def snapshot(self, report: Report, folder: Path, label: str) -> None:
        copy = self.root / f"{report.job.name}-snap-{len(report.snapshots) + 1}"
        shutil.copytree(folder, copy, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        report.snapshots.append((label, copy))


# --------------------------------------------------------------------------- loading the files (the jobs' Python)

def files_to_check(folder: Path) -> list[tuple[str, str]]:
    """(path relative to ``folder``, kind) of the files a job or a learner reads back; temporary names left out."""
    found = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if path.is_dir() or any(TEMPORARY.search(part) for part in rel.parts):
            continue
        if path.name == "checkpoint":
            found.append((str(rel), "tf-checkpoint"))
        elif (kind := next((k for ext, k in CHECKED.items() if path.name.endswith(ext)), None)):
            found.append((str(rel), kind))
    return found


def load(path: Path, kind: str) -> None:
    """Load one file as its job does; raises what the loader raises."""
    if kind == "json":
        json.loads(path.read_text())
    elif kind == "jsonl":
        text = path.read_text()
        if text and not text.endswith("\n"):
            raise ValueError("the last line is incomplete (no newline)")
        for line in text.splitlines():
            json.loads(line)
    elif kind == "h5":
        import h5py
        with h5py.File(path, "r") as f:
            f.visititems(lambda name, obj: obj[()] if isinstance(obj, h5py.Dataset) else None)
    elif kind == "keras":
        import keras
        keras.saving.load_model(path)
    elif kind == "torch":
        import torch
        torch.load(path, map_location="cpu", weights_only=False)
    elif kind == "numpy":
        import numpy
        data = numpy.load(path, allow_pickle=False)
        if hasattr(data, "files"):
            [data[k] for k in data.files]
    elif kind == "tf-checkpoint":
        import tensorflow as tf
        state = tf.train.get_checkpoint_state(str(path.parent))
        if state is None or not state.model_checkpoint_path:
            raise ValueError("the 'checkpoint' state file names no checkpoint")
        reader = tf.train.load_checkpoint(state.model_checkpoint_path)
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    else:
        raise ValueError(f"unknown kind {kind!r}")


def digest(path: Path, kind: str) -> str:
    """The content's hash (a TF checkpoint: its folder's files), to load identical files once and count them once."""
    h = hashlib.sha256(kind.encode())
    for p in sorted(path.parent.iterdir()) if kind == "tf-checkpoint" else [path]:
        if p.is_file():
            h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def load_all(folders: Sequence[Path]) -> dict[str, dict[str, tuple[Optional[str], str]]]:
    """``{folder: {file: (None or the error, content hash)}}`` for every file to check (identical files once)."""
    results, seen = {}, {}
    for folder in map(Path, folders):
        results[str(folder)] = {}
        for rel, kind in files_to_check(folder):
            key = digest(folder / rel, kind)
            if key not in seen:
                try:
                    load(folder / rel, kind)
                    seen[key] = None
                except Exception as exc:  # noqa: BLE001 - any failure to load is the finding
                    text = str(exc).replace(f"{folder}/", "").strip()
                    seen[key] = f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"
            results[str(folder)][rel] = (seen[key], key)
    return results


def check_loads(reports: Sequence[Report], python: str = sys.executable, timeout: float = 600) -> None:
    """Load every snapshot's files in one process of the jobs' Python; fill each report's ``unloadable`` with the
    distinct files (path and content) that failed, named by the first snapshot that had them."""
    folders = [str(f) for r in reports for _, f in r.snapshots]
    if not folders:
        return
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": os.pathsep.join(
        [str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))}
    env.pop("KERAS_BACKEND", None)
    done = subprocess.run([python, str(Path(__file__).resolve()), "load", *folders], capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    if done.returncode:
        raise CheckError(f"the load check failed (exit {done.returncode}):\n{tail(done.stdout + done.stderr)}")
    results = json.loads(done.stdout.strip().splitlines()[-1])
    for r in reports:
        counted = set()
        for label, folder in r.snapshots:
            for rel, (error, key) in results[str(folder)].items():
                if error and (rel, key) not in counted:
                    counted.add((rel, key))
                    r.unloadable.append(f"{label}: {rel}: {error}")


# --------------------------------------------------------------------------- tables

def table(rows: Sequence[Sequence[str]], markdown: bool) -> str:
    if markdown:
        out = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
        return "\n".join(out + ["| " + " | ".join(r) + " |" for r in rows[1:]])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def job_table(report: Report, markdown: bool = False) -> str:
    """The six figures of one job, each with its verdict."""
    rows = [["figure", "result", "verdict"]]
    rows += [[name, value, "ok" if ok else "FAILED"] for name, value, ok in report.figures()]
    runs = len(report.runs)
    head = f"{report.job.name}: {report.job.title}: {runs} runs, {report.seconds:.0f} s ({report.cpu:.0f} CPU s)"
    return (f"**{head}**\n\n" if markdown else f"{head}\n") + table(rows, markdown)


def summary_table(reports: Sequence[Report], markdown: bool = False) -> str:
    """One row per job: the six figures (what README shows)."""
    rows = [["job", "kills", "resumes that worked", "epochs lost per kill", "unloadable files", "best model kept",
             "processes left over", "seconds"]]
    for r in reports:
        figures = r.figures()
        rows.append([r.job.title.split(",")[0]] + [v if ok else f"{v} (FAILED)" for _, v, ok in figures]
                    + [f"{r.seconds:.0f}"])
    return table(rows, markdown)


def failures(report: Report) -> str:
    """For a job with a failed figure: which, and the log that shows it."""
    out = []
    for name, value, ok in report.figures():
        if ok:
            continue
        out.append(f"{report.job.name}: '{name}' failed: {value}")
        if name == "kills" and report.note:
            out.append(f"  {report.note}")
        if name == "resumes that worked":
            failed = [r for _, r in report.runs if r.failed]
            out += [f"  kill ({k.what}): the next run failed: {k.error}" for k in report.kills if k.worked is False][:5]
            for run in failed[:1]:
                out.append(f"  run {run.number} {why_of(run)}; its log:\n{tail(run.log)}")
        if name == "epochs lost per kill":
            out += [f"  kill ({k.what}): {k.done} epoch(s) done, the next run " + (
                f"resumed at {k.resumed}" if k.resumed is not None else "failed" if k.worked is False else
                "printed no epoch line: where it resumed is unknown") for k in report.kills if k.lost != 0][:5]
            if not any(r.progress.first_seen for _, r in report.runs):
                out.append(f"  no run printed an epoch line ({report.job.epoch_start or report.job.epoch_done!r}): "
                           "the check cannot tell a resumed run from a fresh start")
        if name == "unloadable files":
            out += [f"  {u}" for u in report.unloadable[:10]]
        if name == "best model kept":
            out += [f"  {words}" for kept, words in report.best if not kept]
        if name == "processes left over":
            for _, run in report.runs:
                if run.leftovers:
                    out.append(f"  run {run.number} ({run.kill or 'ended by itself'}): "
                               f"{', '.join(run.leftovers)} still alive {run.left_when}; its log:\n"
                               f"{tail(run.log, 10) or '    (no output)'}")
                    break
    return "\n".join(out)


def why_of(run: Run) -> str:
    return "timed out" if run.timed_out else f"exit {run.returncode}: {error_line(run.log)}"


# --------------------------------------------------------------------------- command line

def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["load"]:
        print(json.dumps(load_all([Path(a) for a in args[1:]])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20, help="kills per job (half of them mid-write)")
    parser.add_argument("--jobs", default=",".join(j.name for j in JOBS), help="comma-separated job names")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: a new one, printed)")
    parser.add_argument("--parallel", type=int, default=1, help="jobs checked at the same time")
    parser.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (its path is printed)")
    parser.add_argument("--source", type=Path, default=ROOT, help="the checkout whose jobs to check (quickstart/, "
                        "notebooks/ and helpers/ are read from it; default: this one)")
    opts = parser.parse_args(args)
    names = [n for n in opts.jobs.split(",") if n]
    unknown = sorted(set(names) - {j.name for j in JOBS})
    if unknown or opts.kills < 1:
        parser.error(f"unknown job(s) {unknown}; choose from {[j.name for j in JOBS]}" if unknown
                     else "--kills must be at least 1")
    seed = opts.seed if opts.seed is not None else random.SystemRandom().randrange(2 ** 31)
    jobs = [j for j in JOBS if j.name in names]
    return check(jobs, opts.kills, seed, parallel=opts.parallel, markdown=opts.markdown, keep=opts.keep,
                 source=opts.source.resolve())


def check(jobs: Sequence[Job], kills: int, seed: int, *, parallel: int = 1, markdown: bool = False,
          keep: bool = False, source: Path = ROOT, python: str = sys.executable, say=None) -> int:
    """Check ``jobs`` with ``kills`` kills each, ``parallel`` jobs at a time; print the tables; 0 if every figure of
    every job is perfect. Whatever happens, the jobs' processes are killed and the temporary folder removed."""
    say = say or (lambda message: print(message, flush=True))
    root, run_id, stop = Path(tempfile.mkdtemp(prefix="chaos-")), f"{os.getpid()}-{seed}", threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    pool = ThreadPoolExecutor(max_workers=max(1, parallel))

    def one(job: Job) -> Report:
        checker = Check(root, random.Random(f"{seed}:{job.name}"), say=say, source=source, run_id=run_id, stop=stop)
        return checker.job(job, kills)

    try:
        say(f"chaos: {kills} kill(s) per job, {parallel} job(s) at a time, seed {seed}, in {root}"
            + ("" if keep else " (removed at the end)"))
        futures = [pool.submit(one, job) for job in jobs]
        reports = [f.result() for f in futures]
        loading = time.monotonic()
        check_loads(reports, python)
        say(f"chaos: the files of {sum(len(r.snapshots) for r in reports)} snapshot(s) loaded in "
            f"{time.monotonic() - loading:.0f} s")
        say("")
        for r in reports:
            say(job_table(r, markdown) + "\n")
        say(summary_table(reports, markdown))
        bad = [r for r in reports if not r.ok]
        say(f"\nchaos: {len(jobs)} job(s), {sum(len(r.kills) for r in reports)} kills, "
            f"{time.monotonic() - started:.0f} s, seed {seed}")
        if bad:
            for r in bad:
                say("\n" + failures(r))
            say("\nchaos: FAILED: " + ", ".join(
                f"{r.job.name} ({', '.join(n for n, _, ok in r.figures() if not ok)})" for r in bad))
            return 1
        say("chaos: every figure perfect")
        return 0
    finally:
        stop.set()                       # the other jobs' threads stop starting and waiting
        kill_all(run_id, prefix=True)
        pool.shutdown(wait=True, cancel_futures=True)
        kill_all(run_id, prefix=True)
        signal.signal(signal.SIGTERM, previous)
        if keep:
            say(f"chaos: kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
