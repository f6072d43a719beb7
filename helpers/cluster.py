"""Start a multi-worker job on this machine: one process per worker, each with its ``TF_CONFIG`` (lesson 07).

Why: ``MultiWorkerMirroredStrategy`` needs several processes that find each other through a cluster spec. On a
cluster a scheduler starts them (lesson 07's ``mwms_job.sbatch`` under Slurm); in a lesson we start
them on 127.0.0.1 with free ports, as :class:`helpers.subproc.Child` processes, killed on error, timeout or exit.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import time
from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

from .checks import int_between, is_int, nonneg_int, nonneg_number, positive_int, positive_number
from .gpus import visible_gpu_ids
from .subproc import (
    Child,
    check_command,
    child_env,
    final_exception,
    pid_alive,  # noqa: F401 - pid_alive: lesson 07
    remove_temp_dir,
    strip_noise,
    temp_dir,
)

HOST = "127.0.0.1"
#: Job names MultiWorkerMirroredStrategy understands ("ps" is for ParameterServerStrategy).
JOBS = ("chief", "worker", "evaluator", "ps")
LOCAL_HOSTS = ("127.0.0.1", "localhost")


class ClusterSpecError(ValueError):
    """The cluster spec (or TF_CONFIG) is malformed; the message says which entry and why."""


class PortBusyError(OSError):
    """A port of the cluster spec is already taken on this machine."""


class WorkerFailedError(RuntimeError):
    """A worker exited with a non-zero code; ``result`` is the :class:`LocalCluster`, ``errors`` its errors."""

    def __init__(self, message: str, result: "LocalCluster"):
        super().__init__(message)
        self.result = result

    @property
    def errors(self) -> dict[str, str]:
        return self.result.errors


class ClusterTimeoutError(TimeoutError):
    """The workers did not finish (or print the awaited line) in time; they were killed."""


# --------------------------------------------------------------------------- cluster specs

def _parse_address(addr: object, where: str) -> tuple[str, int]:
    if not isinstance(addr, str) or ":" not in addr:
        raise ClusterSpecError(f"{where}: expected 'host:port', got {addr!r}")
    host, _, port_text = addr.rpartition(":")
    if not host or any(c.isspace() for c in host):
        raise ClusterSpecError(f"{where}: bad host in {addr!r}")
    try:
        port = int(port_text)
    except ValueError:
        raise ClusterSpecError(f"{where}: port must be a number in {addr!r}") from None
    if not 1 <= port <= 65535:
        raise ClusterSpecError(f"{where}: port {port} out of range 1-65535 in {addr!r}")
    return host, port


def validate_cluster_spec(spec: object) -> dict[str, list[str]]:
    """A checked copy (job -> list of addresses) of a spec like ``{"worker": ["127.0.0.1:12345", ...]}``;
    :class:`ClusterSpecError` names the bad entry and why (so a typo fails here, not in a hung worker)."""
    if not isinstance(spec, Mapping) or not spec:
        raise ClusterSpecError(
            f"cluster spec must be a non-empty dict like {{'worker': ['host:port', ...]}}, got {spec!r}")
    out: dict[str, list[str]] = {}
    seen: dict[tuple[str, int], str] = {}
    for job, addrs in spec.items():
        if job not in JOBS:
            raise ClusterSpecError(f"unknown job name {job!r}; use one of {', '.join(JOBS)}")
        if isinstance(addrs, str) or not isinstance(addrs, (list, tuple)) or not addrs:
            raise ClusterSpecError(f"job {job!r} needs a non-empty list of 'host:port' strings, got {addrs!r}")
        if job in ("chief", "evaluator") and len(addrs) != 1:
            raise ClusterSpecError(f"job {job!r} must have exactly one task, got {len(addrs)}")
        for i, addr in enumerate(addrs):
            host, port = _parse_address(addr, f"{job}[{i}]")
            key = (host.lower().replace("localhost", HOST), port)
            if key in seen:
                raise ClusterSpecError(f"{job}[{i}] {addr!r} duplicates {seen[key]}: every task needs its own port")
            seen[key] = f"{job}[{i}]"
        out[job] = list(addrs)
    if "worker" not in out and "chief" not in out:
        raise ClusterSpecError("cluster spec needs a 'worker' (or 'chief') job")
    return out


def tf_config(spec: Mapping, task_type: str = "worker", task_index: int = 0) -> str:
    """The ``TF_CONFIG`` JSON string for one task of ``spec`` (what each host must export)."""
    spec = validate_cluster_spec(spec)
    if task_type not in spec:
        raise ClusterSpecError(f"task type {task_type!r} is not a job of this cluster ({', '.join(spec)})")
    if not is_int(task_index) or not 0 <= task_index < len(spec[task_type]):
        raise ClusterSpecError(
            f"task index {task_index!r} out of range for job {task_type!r} with {len(spec[task_type])} task(s)")
    return json.dumps({"cluster": spec, "task": {"type": task_type, "index": task_index}})


def parse_tf_config(text: str) -> tuple[dict[str, list[str]], str, int]:
    """Read a ``TF_CONFIG`` string back: (cluster spec, task type, task index), checked."""
    try:
        data = json.loads(text)
    except (TypeError, json.JSONDecodeError) as exc:
        raise ClusterSpecError(f"TF_CONFIG is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or "cluster" not in data or "task" not in data:
        raise ClusterSpecError("TF_CONFIG must be a JSON object with 'cluster' and 'task' keys")
    task = data["task"]
    if not isinstance(task, dict) or "type" not in task or "index" not in task:
        raise ClusterSpecError("TF_CONFIG 'task' must look like {'type': 'worker', 'index': 0}")
    spec = validate_cluster_spec(data["cluster"])
    tf_config(spec, task["type"], task["index"])  # range checks
    return spec, task["type"], task["index"]


def port_is_free(port: int) -> bool:
    """True if a server could listen on ``127.0.0.1:port`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # like gRPC: TIME_WAIT is fine
        try:
            s.bind((HOST, port))
            s.listen(1)
        except OSError:
            return False
    return True


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports of 127.0.0.1 that are free now (the OS picks them; a tiny race window remains)."""
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(positive_int("n", n))]
    try:
        for s in socks:
            s.bind((HOST, 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def local_cluster_spec(n_workers: int = 2, ports: Optional[Sequence[int]] = None) -> dict[str, list[str]]:
    """``{"worker": ["127.0.0.1:p0", ...]}`` with ``n_workers`` free (or the given) ports."""
    ports = free_ports(n_workers) if ports is None else list(ports)
    if len(ports) != positive_int("n_workers", n_workers):
        raise ClusterSpecError(f"got {len(ports)} port(s) for {n_workers} worker(s)")
    return validate_cluster_spec({"worker": [f"{HOST}:{p}" for p in ports]})


def check_ports_free(spec: Mapping) -> None:
    """Raise :class:`PortBusyError` listing every local address of ``spec`` that is taken."""
    busy = []
    for job, addrs in validate_cluster_spec(spec).items():
        for i, addr in enumerate(addrs):
            host, port = _parse_address(addr, f"{job}[{i}]")
            if host in LOCAL_HOSTS and not port_is_free(port):
                busy.append(f"{job}[{i}] {addr}")
    if busy:
        raise PortBusyError(
            f"port(s) already in use on this machine: {', '.join(busy)}. Another program (or the workers "
            "of an earlier run) is listening there. Pick free ports with helpers.cluster.free_ports(n), "
            "or leave ports=None to have them chosen for you.")


# --------------------------------------------------------------------------- processes

def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask: ``taskset -c 0`` gives 1), at least 1."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def gpu_assignment(n_tasks: int, gpus_per_worker: int, gpu_ids: Sequence[str]) -> list[str]:
    """``CUDA_VISIBLE_DEVICES`` per task: ``-1`` (CPU only) or disjoint GPU groups (NCCL refuses shared GPUs)."""
    if nonneg_int("gpus_per_worker", gpus_per_worker) == 0:
        return ["-1"] * n_tasks
    need = n_tasks * gpus_per_worker
    if len(gpu_ids) < need:
        raise ValueError(f"{n_tasks} worker(s) x {gpus_per_worker} GPU(s) need {need} GPUs, "
                         f"this machine shows {len(gpu_ids)}; use gpus_per_worker=0 (CPU workers)")
    return [",".join(gpu_ids[i * gpus_per_worker:(i + 1) * gpus_per_worker]) for i in range(n_tasks)]


class LocalCluster:
    """Worker processes on this machine, ``python <command>`` each with its ``TF_CONFIG``; a context manager.

    Each worker is a :class:`helpers.subproc.Child` logging to ``log_dir/worker-<index>.log`` (default: a temporary
    folder, removed once the workers are stopped; their logs stay readable here); they share the CPU cores
    (TensorFlow's thread pools). Leaving the ``with`` block, even by an exception, kills what still runs.
    Once it ran, it is also the run's result: every worker's exit code and log, and ``seconds`` it took.
    With ``keras_distribution=True`` each worker also gets the three variables ``keras.distribution.initialize()``
    reads when called without arguments (lesson 13): every address, the process count and its own index.
    """

    def __init__(self, command: Union[str, Sequence[str]], n_workers: int = 2, *,
                 ports: Optional[Sequence[int]] = None, env: Optional[Mapping[str, str]] = None,
                 log_dir: Union[str, Path, None] = None, gpus_per_worker: int = 0, keras_distribution: bool = False):
        if not isinstance(keras_distribution, bool):
            raise ValueError(f"keras_distribution must be True or False, got {keras_distribution!r}")
        self.keras_distribution = keras_distribution
        self.command = check_command(command)
        self.spec = local_cluster_spec(n_workers, ports)
        self.n_workers = n_workers
        self.cuda = gpu_assignment(n_workers, gpus_per_worker, visible_gpu_ids() if gpus_per_worker else [])
        self.extra_env = {str(k): str(v) for k, v in (env or {}).items()}
        self._temp_logs = not log_dir
        self.log_dir = Path(log_dir) if log_dir else temp_dir("cluster-logs-")
        self.cpu_threads = max(1, usable_cores() // n_workers)
        self.workers: list[Child] = []
        self._t0 = self.seconds = 0.0

    def start(self) -> "LocalCluster":
        if self.workers:
            raise RuntimeError("this cluster was already started; create a new LocalCluster to run again")
        self._t0 = time.time()
        try:
            check_ports_free(self.spec)
            self.log_dir.mkdir(parents=True, exist_ok=True)
            for i in range(self.n_workers):
                self.workers.append(Child([sys.executable, *self.command], self.log_dir / f"worker-{i}.log",
                                           self.worker_env(i), name=f"worker {i}"))
        except BaseException:
            self.stop()
            raise
        return self

    def worker_env(self, i: int) -> dict[str, str]:
        """Worker ``i``'s environment: :func:`helpers.subproc.child_env`, its ``TF_CONFIG`` (and, with
        ``keras_distribution``, the ``KERAS_DISTRIBUTION_*`` variables), CPU threads, GPUs (with memory growth: the
        kernel shares them), then the cluster's ``env``."""
        int_between("i", i, 0, self.n_workers - 1, what="a worker index")
        env = child_env()
        env["TF_NUM_INTRAOP_THREADS"] = env["TF_NUM_INTEROP_THREADS"] = str(self.cpu_threads)
        env.update(TF_CONFIG=tf_config(self.spec, "worker", i), CUDA_VISIBLE_DEVICES=self.cuda[i])
        if self.keras_distribution:
            env.update(KERAS_DISTRIBUTION_JOB_ADDRESSES=",".join(self.spec["worker"]),
                       KERAS_DISTRIBUTION_NUM_PROCESSES=str(self.n_workers), KERAS_DISTRIBUTION_PROCESS_ID=str(i))
        if self.cuda[i] != "-1":
            env["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"
        env.update(self.extra_env)
        return env

    def __enter__(self) -> "LocalCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def pids(self) -> list[int]:
        return [c.pid for c in self.workers]

    @property
    def ok(self) -> bool:
        return all(w.returncode == 0 for w in self.workers)

    @property
    def returncodes(self) -> list[Optional[int]]:
        return [w.returncode for w in self.workers]

    @property
    def errors(self) -> dict[str, str]:
        """``{"worker 0": "ValueError: ...", ...}``: the final exception in every worker's log, in full."""
        return {w.name: err for w in self.workers if (err := final_exception(w.log))}

    def failure_message(self) -> str:
        """One line per worker that did not exit 0: how it ended and the error in its log."""
        return "; ".join(w.describe() for w in self.workers if w.returncode != 0)

    def raise_for_failure(self) -> "LocalCluster":
        """Raise :class:`WorkerFailedError` (quoting every worker's error) unless all exited 0."""
        if not self.ok:
            raise WorkerFailedError(f"{len([w for w in self.workers if w.returncode])} of "
                                    f"{len(self.workers)} worker(s) failed: {self.failure_message()}", self)
        return self

    def show_logs(self, tail: int = 12) -> None:
        """Print each worker's exit status and the last ``tail`` lines of its log, TF noise hidden."""
        for w in self.workers:
            lines = [ln for ln in strip_noise(w.log).splitlines() if ln.strip()]
            cut = max(0, len(lines) - tail)
            print(f"----- {w.describe()}" + (f"  (log: {w.log_path})" if w.log_path.exists() else ""))
            if cut:
                print(f"  ... {cut} earlier line(s)")
            for ln in lines[cut:]:
                print(f"  {ln}")

    def _started(self, worker: int = 0) -> Child:
        if not self.workers:
            raise RuntimeError("start the cluster first")
        return self.workers[int_between("worker", worker, 0, self.n_workers - 1, what="a worker index")]

    def kill(self, worker: Optional[int] = None) -> list[int]:
        """``SIGKILL`` (no cleanup, like a lost machine) worker ``worker`` (None: all); the pids signalled."""
        chosen = self.workers if worker is None else [self._started(worker)]
        return [c.pid for c in chosen if c.kill()]

    def stop(self) -> None:
        """Kill everything still running (whole process groups, and what they started) and reap it; remove the
        temporary log folder (the logs stay readable here). Idempotent."""
        for c in self.workers:
            c.stop()
        if self._temp_logs:
            remove_temp_dir(self.log_dir)

    def wait_for(self, pattern: str, timeout: float = 120, worker: int = 0) -> str:
        """Block until worker ``worker``'s whole log has a line matching ``pattern`` (regex); return that line.

        :class:`WorkerFailedError` if it exits first, :class:`ClusterTimeoutError` after ``timeout`` s (all killed).
        """
        child, rx = self._started(worker), re.compile(pattern)
        deadline = time.time() + positive_number("timeout", timeout, unit="seconds")
        while True:
            exited = child.returncode is not None  # before reading: nothing written later is missed
            lines = child.log.split("\n")
            for line in lines if exited else lines[:-1]:  # while it runs, the last line may be incomplete
                if rx.search(line):
                    return line
            if exited:
                raise WorkerFailedError(f"{child.describe()} before printing a line matching {pattern!r}", self)
            if time.time() > deadline:
                self.stop()
                raise ClusterTimeoutError(f"no line matching {pattern!r} from worker {worker} within {timeout} s; "
                                          "all workers killed")
            time.sleep(0.05)

    def wait(self, timeout: float = 300, grace: float = 5.0) -> "LocalCluster":
        """Wait for every process to exit; return this cluster, stopped (never raises on failure).

        Fail fast: once one failed, the others (a dead worker's peers hang in their next collective) get ``grace``
        s, then are killed. After ``timeout`` s all are killed and :class:`ClusterTimeoutError` raised.
        """
        self._started()
        deadline = time.time() + positive_number("timeout", timeout, unit="seconds")
        grace, failed_at = nonneg_number("grace", grace, unit="seconds"), None
        while None in (codes := [c.returncode for c in self.workers]):
            if failed_at is None and any(codes):  # a code other than None and 0
                failed_at = time.time()
            if failed_at is not None and time.time() - failed_at > grace:
                break
            if time.time() > deadline:
                self.stop()
                raise ClusterTimeoutError(
                    f"workers still running after {timeout} s; all killed."
                    + ("" if self._temp_logs else f" Logs: {self.log_dir}") + "\n" + self.failure_message())
            time.sleep(0.05)
        self.stop()
        self.seconds = time.time() - self._t0
        return self


def run(command: Union[str, Sequence[str]], n_workers: int = 2, *, timeout: float = 300, grace: float = 5.0,
        check: bool = True, echo: bool = True, tail: int = 12, **kwargs) -> LocalCluster:
    """Start a :class:`LocalCluster` (``kwargs``), wait for it, always clean up, print the logs (``echo``);
    with ``check``, :class:`WorkerFailedError` if a worker failed."""
    with LocalCluster(command, n_workers, **kwargs) as cluster:
        cluster.wait(timeout=timeout, grace=grace)
    if echo:
        print(f"{n_workers} worker(s) on {', '.join(cluster.spec['worker'])} finished in {cluster.seconds:.1f} s")
        cluster.show_logs(tail=tail)
    return cluster.raise_for_failure() if check else cluster
