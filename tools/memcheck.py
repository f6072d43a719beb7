"""Run notebooks the way a learner does and measure the memory of the whole kernel process tree.

Usage: python tools/memcheck.py [notebooks/NN_x.ipynb ...] [--one-core] [--limit-mib 2048] [--json PATH]
(default: every notebook in notebooks/; ``make memcheck`` runs it with the test environment)

Each notebook runs top to bottom in a fresh ``python3`` kernel whose working directory is a temporary
folder holding a copy of the notebook (nothing is written into the repository). While it runs, a thread
samples every ``--interval`` seconds (0.2 s) the memory of the kernel process *and every descendant*
(benchmark children, workers, the time capsule): PSS from ``/proc/PID/smaps_rollup`` (shared pages
divided among the processes sharing them, so the sum is what the tree really costs), or RSS where PSS
cannot be read. The table shows per notebook the peak of that sum, the most processes seen at once,
the wall time (kernel start included) and whether it ran to the end.

Why: Binder gives about one CPU and 1-2 GiB; a lesson whose kernel plus subprocesses peaks above that
is killed there without a useful message. ``--one-core`` pins this script, and so the kernel and all
its children (they inherit the affinity), to one CPU to imitate Binder's CPU share. The limit checked
is 2 GiB (``--limit-mib``); the target is 1.8 GiB (``--target-mib``: reported, not fatal).

Run it on a quiet machine: PSS also divides the pages shared with unrelated processes (another kernel
loading the same TensorFlow libraries), so on a busy machine it reads low.

Exit status: 1 if any notebook fails or peaks above ``--limit-mib``, else 0. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_LIMIT_MIB = 2048.0
DEFAULT_TARGET_MIB = 1843.0          # 1.8 GiB
#: Where process information is read from (a fake folder in the unit tests).
PROC = "/proc"
PACKAGES = ("tensorflow", "keras", "jax", "jaxlib", "tf-keras", "numpy", "nbclient", "ipykernel")


# ---- measuring --------------------------------------------------------------------------------

def _ppid(pid: int) -> int | None:
    """Parent pid of ``pid`` from /proc/PID/stat, or None if the process is gone."""
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and ')': the fields after the last ')' are safe.
    return int(stat[stat.rindex(b")") + 2:].split()[1])


def process_tree(root_pid: int) -> list[int]:
    """``root_pid`` and all its living descendants (children, grandchildren, ...), root first.

    Built from one scan of /proc (parent pid of every process), so it works without
    CONFIG_PROC_CHILDREN. Returns [] if ``root_pid`` is gone.
    """
    if root_pid <= 0:
        raise ValueError(f"root_pid must be a positive process id, got {root_pid}")
    if not os.path.exists(f"{PROC}/{root_pid}"):
        return []
    children: dict[int, list[int]] = {}
    for entry in os.listdir(PROC):
        if entry.isdigit():
            parent = _ppid(int(entry))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry))
    tree, todo = [], [root_pid]
    while todo:
        pid = todo.pop(0)
        tree.append(pid)
        todo.extend(sorted(children.get(pid, [])))
    return tree


def memory_kib(pid: int) -> int:
    """Memory of one process in KiB: PSS from /proc/PID/smaps_rollup, else VmRSS; 0 if it is gone."""
    for path, key in ((f"{PROC}/{pid}/smaps_rollup", "Pss:"), (f"{PROC}/{pid}/status", "VmRSS:")):
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith(key):
                        return int(line.split()[1])
        except (OSError, ValueError):
            continue
    return 0


def tree_memory_kib(root_pid: int) -> tuple[int, int]:
    """(memory in KiB summed over the process tree of ``root_pid``, number of processes in it)."""
    pids = process_tree(root_pid)
    return sum(memory_kib(p) for p in pids), len(pids)


class TreeSampler(threading.Thread):
    """Samples ``tree_memory_kib(root_pid)`` every ``interval`` seconds and keeps the peaks."""

    def __init__(self, root_pid: int, interval: float = 0.2):
        if interval <= 0:
            raise ValueError(f"interval must be > 0 seconds, got {interval}")
        super().__init__(daemon=True)
        self.root_pid, self.interval = root_pid, interval
        self.peak_kib = 0
        self.peak_procs = 0
        self.samples = 0
        self._stop_event = threading.Event()

    def sample(self) -> None:
        kib, procs = tree_memory_kib(self.root_pid)
        self.peak_kib = max(self.peak_kib, kib)
        self.peak_procs = max(self.peak_procs, procs)
        self.samples += 1

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.sample()
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        """Stop sampling (one last sample first) and wait for the thread."""
        if self.is_alive():
            self.sample()
        self._stop_event.set()
        if self.is_alive():
            self.join()

    @property
    def peak_mib(self) -> float:
        return self.peak_kib / 1024


@dataclass
class Result:
    """One notebook's run: peak memory of the kernel's process tree, time, outcome."""

    notebook: str
    peak_mib: float
    peak_procs: int
    seconds: float
    ok: bool
    error: str = ""
    samples: int = 0
    kernel_log_tail: str = ""


def _kernel_pid(client) -> int:
    km = client.km
    pid = getattr(getattr(km, "provisioner", None), "pid", None)   # jupyter_client >= 7
    if pid is None and getattr(km, "kernel", None) is not None:    # older jupyter_client
        pid = km.kernel.pid
    if not pid:
        raise RuntimeError("cannot find the kernel's process id")
    return int(pid)


def run_notebook(path: Path, *, timeout: int = 600, interval: float = 0.2,
                 kernel_name: str = "python3") -> Result:
    """Execute ``path`` top to bottom in a fresh kernel from a temporary directory, sampling memory."""
    import nbformat
    from nbclient import NotebookClient

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    sampler, error, kernel_died = None, "", False
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="memcheck-") as cwd:
        shutil.copy(path, cwd)                                     # the learner's working copy
        client = NotebookClient(nb, timeout=timeout, kernel_name=kernel_name,
                                resources={"metadata": {"path": cwd}})
        log_path = Path(cwd) / "kernel-output.log"
        try:
            # The kernel's own stdout/stderr (TensorFlow's start-up chatter; the reason if it dies) go to
            # a log file whose tail is reported when the notebook fails.
            with open(log_path, "wb") as log, client.setup_kernel(stdout=log, stderr=log):
                sampler = TreeSampler(_kernel_pid(client), interval)
                sampler.start()
                for index, cell in enumerate(nb.cells):
                    if cell.cell_type == "code":
                        client.execute_cell(cell, index)
                sampler.stop()                                     # before the kernel shuts down
        except Exception as exc:                                   # report it, go on with the others
            text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))             # tracebacks come coloured
            lines = [ln for ln in text.strip().splitlines() if ln.strip()]
            error = f"{type(exc).__name__}: {lines[-1] if lines else ''}"[:300]
            kernel_died = type(exc).__name__ != "CellExecutionError"
        finally:
            if sampler is not None:
                sampler.stop()
        log_tail = ""
        if kernel_died and log_path.exists():
            log_tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-20:])
    return Result(notebook=path.name, peak_mib=round(sampler.peak_mib if sampler else 0.0, 1),
                  peak_procs=sampler.peak_procs if sampler else 0,
                  seconds=round(time.monotonic() - start, 1), ok=not error, error=error,
                  samples=sampler.samples if sampler else 0, kernel_log_tail=log_tail)


# ---- judging and reporting --------------------------------------------------------------------

def problems(results: list[Result], limit_mib: float) -> list[str]:
    """One line per notebook that failed or peaked above ``limit_mib``; empty when all is well."""
    if limit_mib <= 0:
        raise ValueError(f"limit_mib must be > 0, got {limit_mib}")
    out = []
    for r in results:
        if not r.ok:
            out.append(f"{r.notebook}: failed ({r.error})")
        if r.peak_mib > limit_mib:
            out.append(f"{r.notebook}: peak {r.peak_mib:.0f} MiB is over the {limit_mib:.0f} MiB limit")
    return out


def verdict(r: Result, limit_mib: float, target_mib: float) -> str:
    """The table's last column: 'FAILED', 'over limit', 'over target' or 'ok'."""
    if not r.ok:
        return "FAILED"
    if r.peak_mib > limit_mib:
        return "over limit"
    if r.peak_mib > target_mib:
        return "over target"
    return "ok"


def format_table(results: list[Result], limit_mib: float = DEFAULT_LIMIT_MIB,
                 target_mib: float = DEFAULT_TARGET_MIB) -> str:
    """A plain-text table: notebook, peak MiB (whole tree), peak processes, wall seconds, verdict."""
    width = max([len("max / total")] + [len(r.notebook) for r in results])
    lines = [f"{'notebook':<{width}}  {'peak MiB':>8}  {'procs':>5}  {'wall s':>7}  result",
             f"{'-' * width}  {'-' * 8}  {'-' * 5}  {'-' * 7}  ------"]
    for r in results:
        lines.append(f"{r.notebook:<{width}}  {r.peak_mib:8.0f}  {r.peak_procs:5d}  {r.seconds:7.1f}  "
                     f"{verdict(r, limit_mib, target_mib)}")
    if results:
        lines.append(f"{'max / total':<{width}}  {max(r.peak_mib for r in results):8.0f}  "
                     f"{max(r.peak_procs for r in results):5d}  {sum(r.seconds for r in results):7.1f}")
    lines.append(f"(limit {limit_mib:.0f} MiB, target {target_mib:.0f} MiB; memory = PSS summed over the "
                 "kernel and its descendants)")
    for r in results:
        if r.error:
            lines.append(f"{r.notebook}: {r.error}")
            if r.kernel_log_tail:
                lines.append("  last lines of the kernel's output:")
                lines.extend("    " + ln for ln in r.kernel_log_tail.splitlines())
    return "\n".join(lines)


def environment() -> dict:
    """Machine and stack of this run, for the JSON file."""
    from helpers import config
    from helpers.versions import installed

    packages = {name: installed(name) for name in PACKAGES if installed(name)}
    cpu_model = ""
    try:
        cpu_model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                          if ln.startswith("model name")), "")
    except OSError:
        pass
    return {"date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "machine": {"cpus_online": os.cpu_count(), "cpus_used": len(os.sched_getaffinity(0)),
                        "cpu_model": cpu_model, "memory_gib": round(os.sysconf("SC_PAGE_SIZE")
                                                                   * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)},
            "python": platform.python_version(), "packages": packages,
            "mode": config.mode()}


def pin_to_one_core() -> int:
    """Pin this process (and so every kernel and child started later) to one CPU; returns it."""
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    parser.add_argument("--one-core", action="store_true", help="pin the kernels to one CPU (Binder-like)")
    parser.add_argument("--limit-mib", type=float, default=DEFAULT_LIMIT_MIB, help="fail above this peak")
    parser.add_argument("--target-mib", type=float, default=DEFAULT_TARGET_MIB, help="report above this peak")
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    parser.add_argument("--interval", type=float, default=0.2, help="sampling period in seconds")
    parser.add_argument("--timeout", type=int, default=600, help="per-cell timeout in seconds")
    args = parser.parse_args(argv)
    if args.limit_mib <= 0 or args.target_mib <= 0:
        parser.error("--limit-mib and --target-mib must be > 0")
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    if args.one_core:
        print(f"memcheck: pinned to CPU {pin_to_one_core()} (kernels and their children inherit it)", flush=True)
    results = []
    for path in paths:
        print(f"memcheck: running {path} ...", flush=True)
        results.append(run_notebook(path, timeout=args.timeout, interval=args.interval))
        r = results[-1]
        print(f"memcheck: {r.notebook}: peak {r.peak_mib:.0f} MiB, {r.peak_procs} processes, "
              f"{r.seconds:.1f} s, {'ok' if r.ok else 'FAILED'}", flush=True)
    print()
    print(format_table(results, args.limit_mib, args.target_mib))
    if args.json:
        data = environment()
        data.update({"tool": "tools/memcheck.py", "command": " ".join(["tools/memcheck.py", *(argv or sys.argv[1:])]),
                     "one_core": args.one_core, "limit_mib": args.limit_mib, "interval_s": args.interval,
                     "notebooks": {r.notebook: {k: v for k, v in asdict(r).items() if k != "notebook"}
                                   for r in results}})
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(data, indent=1) + "\n")
        print(f"memcheck: results written to {args.json}")
    found = problems(results, args.limit_mib)
    for line in found:
        print(f"memcheck: PROBLEM: {line}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
