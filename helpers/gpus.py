"""Picking GPUs: read ``nvidia-smi``, check ``CUDA_VISIBLE_DEVICES``, ask CUDA what a process sees.

Why: lesson 02 shows what goes wrong with ``os.environ["CUDA_VISIBLE_DEVICES"] = "3,5"``: CUDA parses
the value leniently (a typo silently hides GPUs), renumbers the visible GPUs from 0, and its default
order need not match ``nvidia-smi``'s.  The SAMPLE output (an imaginary 8-GPU server) is what the lesson shows
and what its exercises' checkers try answers on.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

from . import subproc
from .checks import nonneg_int

#: The query lesson 02 uses (``nvidia-smi`` + these arguments).
NVIDIA_SMI_QUERY = ["--query-gpu=index,uuid,pci.bus_id,name,memory.used,memory.total", "--format=csv"]

#: SAMPLE output of ``nvidia-smi --query-gpu=index,uuid,pci.bus_id,name,memory.used,memory.total
#: --format=csv`` on an imaginary 8-GPU server (not this machine). GPUs 0, 1, 4 and 6 are busy.
SAMPLE_NVIDIA_SMI_CSV = """\
index, uuid, pci.bus_id, name, memory.used [MiB], memory.total [MiB]
0, GPU-5a3f1c2e-8d4b-4f6a-9e21-0c7b3d5e6f01, 00000000:1A:00.0, Tesla V100-SXM2-16GB, 15211 MiB, 16160 MiB
1, GPU-6b4e2d3f-9e5c-4a7b-8f32-1d8c4e6f7a12, 00000000:1B:00.0, Tesla V100-SXM2-16GB, 9830 MiB, 16160 MiB
2, GPU-7c5f3e4a-af6d-4b8c-9a43-2e9d5f7a8b23, 00000000:3D:00.0, Tesla V100-SXM2-16GB, 517 MiB, 16160 MiB
3, GPU-8d6a4f5b-b07e-4c9d-8b54-3fae6a8b9c34, 00000000:3E:00.0, Tesla V100-SXM2-16GB, 0 MiB, 16160 MiB
4, GPU-9e7b5a6c-c18f-4dae-9c65-4abf7b9cad45, 00000000:88:00.0, Tesla V100-SXM2-16GB, 12288 MiB, 16160 MiB
5, GPU-af8c6b7d-d29a-4ebf-8d76-5bc08cadbe56, 00000000:89:00.0, Tesla V100-SXM2-16GB, 2 MiB, 16160 MiB
6, GPU-b09d7c8e-e3ab-4fc0-9e87-6cd19dbecf67, 00000000:B1:00.0, Tesla V100-SXM2-16GB, 16001 MiB, 16160 MiB
7, GPU-c1ae8d9f-f4bc-40d1-8f98-7de2aecfd078, 00000000:B2:00.0, Tesla V100-SXM2-16GB, 258 MiB, 16160 MiB
"""

_UUID_RE = re.compile(r"^(GPU|MIG)-[0-9a-fA-F][0-9a-fA-F-]*$")
_FIELDS = {"index": "index", "uuid": "uuid", "pci.bus_id": "pci_bus_id", "name": "name",
           "memory.used": "memory_used_mib", "memory.total": "memory_total_mib"}


@dataclass(frozen=True)
class GpuInfo:
    """One row of ``nvidia-smi --query-gpu=... --format=csv`` (missing columns are None)."""

    index: int
    uuid: Optional[str] = None
    pci_bus_id: Optional[str] = None
    name: Optional[str] = None
    memory_used_mib: Optional[int] = None
    memory_total_mib: Optional[int] = None

    @property
    def memory_free_mib(self) -> Optional[int]:
        """Total minus used memory, or None when either is unknown."""
        used, total = self.memory_used_mib, self.memory_total_mib
        return None if used is None or total is None else total - used



def _mib(value: str, column: str, lineno: int) -> Optional[int]:
    text = value.removesuffix("MiB").strip()
    if text in ("N/A", "[N/A]", "[Not Supported]", ""):
        return None
    if not text.isdigit():
        raise ValueError(f"line {lineno}: {column} should be a number of MiB like '1024 MiB', got {value!r}")
    return int(text)


def parse_nvidia_smi_csv(text: str) -> list[GpuInfo]:
    """``nvidia-smi --query-gpu=index,... --format=csv[,nounits]`` output as :class:`GpuInfo` rows (other columns
    ignored); ``ValueError`` naming the line for anything that is not such output."""
    if not isinstance(text, str):
        raise ValueError(f"expected the CSV text printed by nvidia-smi, got {type(text).__name__}")
    lines = [(n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip()]
    if not lines:
        raise ValueError("empty nvidia-smi output: no header line")
    header_no, header = lines[0]
    columns = [re.sub(r"\s*\[.*\]$", "", c.strip()) for c in header.split(",")]
    if "index" not in columns:
        raise ValueError(
            f"line {header_no}: {header.strip()[:80]!r} is not the header of "
            "'nvidia-smi --query-gpu=index,... --format=csv' output (no 'index' column; "
            "did you pass --format=csv,noheader, or did nvidia-smi print an error?)")
    rows: list[GpuInfo] = []
    for lineno, line in lines[1:]:
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(columns):
            raise ValueError(f"line {lineno}: expected {len(columns)} comma-separated fields "
                             f"({', '.join(columns)}), got {len(values)}: {line.strip()[:80]!r}")
        row = {_FIELDS[c]: v for c, v in zip(columns, values) if c in _FIELDS}
        if not row["index"].isdigit():
            raise ValueError(f"line {lineno}: index should be a whole number, got {row['index']!r}")
        if int(row["index"]) in [r.index for r in rows]:
            raise ValueError(f"line {lineno}: GPU index {row['index']} appears twice")
        for key in ("memory_used_mib", "memory_total_mib"):
            if key in row:
                row[key] = _mib(row[key], key, lineno)
        rows.append(GpuInfo(**{**row, "index": int(row["index"])}))
    return rows


def read_nvidia_smi() -> tuple[Optional[str], str]:
    """Run ``nvidia-smi`` with :data:`NVIDIA_SMI_QUERY`; return ``(csv_text or None, explanation)``.
    Never raises for a missing or failing ``nvidia-smi``: the explanation says why there is no text."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None, "nvidia-smi is not installed on this machine (no NVIDIA driver): no GPU to list"
    try:
        proc = subprocess.run([exe, *NVIDIA_SMI_QUERY], capture_output=True, text=True,
                              timeout=20, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"nvidia-smi could not run: {type(exc).__name__}: {exc}"
    if proc.returncode != 0:
        why = (proc.stdout + proc.stderr).strip().splitlines()
        return None, f"nvidia-smi failed (exit {proc.returncode}): {why[0] if why else 'no output'}"
    return proc.stdout, f"real output of {exe}"


def visible_gpu_ids(value: Optional[str] = None, gpus: Optional[Sequence[GpuInfo]] = None) -> list[str]:
    """The GPU ids a child process may be given (lessons 07, 08), without starting TensorFlow or CUDA.
    ``value``: a ``CUDA_VISIBLE_DEVICES`` value (default: this process's); ``gpus``: the machine's GPUs (default:
    from ``nvidia-smi``). Unset: every GPU; set: its entries, cut where CUDA would stop (:func:`resolve_visible`),
    or as written where there is no ``nvidia-smi`` to check them against."""
    value = os.environ.get("CUDA_VISIBLE_DEVICES") if value is None else value
    if gpus is None:
        text, _ = read_nvidia_smi()
        gpus = parse_nvidia_smi_csv(text) if text else []
    entries = parse_cuda_visible_devices(value)
    if entries is None:
        return [str(i) for i in range(len(gpus))]
    kept = len(resolve_visible(value, list(gpus)).visible) if gpus else len(entries)
    return [str(e) for e in entries[:kept]]


def normalize_bus_id(bus_id: str) -> str:
    """``00000000:1A:00.0`` (nvidia-smi) and ``0000:1a:00.0`` (CUDA) -> ``0000:1a:00.0``."""
    m = re.fullmatch(r"\s*([0-9a-fA-F]+):([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])\s*", str(bus_id))
    if not m:
        raise ValueError(f"not a PCI bus id like '00000000:1A:00.0': {bus_id!r}")
    domain, bus, dev, fn = m.groups()
    return f"{int(domain, 16):04x}:{int(bus, 16):02x}:{int(dev, 16):02x}.{fn}"


Entry = Union[int, str]


def parse_cuda_visible_devices(value: Optional[str]) -> Optional[list[Entry]]:
    """A ``CUDA_VISIBLE_DEVICES`` value as GPU indices (ints) and UUIDs or their prefixes (strings); None when unset
    (every GPU), ``[]`` for ``""`` or ``"-1"``. Stricter than CUDA, which silently drops everything from the first
    entry it cannot use: ``ValueError`` for spaces, empty, unknown, negative or repeated entries."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"CUDA_VISIBLE_DEVICES is a string like '3,5', got {value!r}")
    if value == "" or value == "-1":
        return []
    if any(c.isspace() for c in value):
        raise ValueError(f"CUDA_VISIBLE_DEVICES={value!r}: write it without spaces, e.g. '3,5'")
    entries: list[Entry] = []
    for pos, token in enumerate(value.split(","), 1):
        if token == "":
            raise ValueError(f"CUDA_VISIBLE_DEVICES={value!r}: entry {pos} is empty "
                             "(two commas in a row, or a comma at the start or end)")
        if re.fullmatch(r"-?\d+", token):
            index = int(token)
            if index < 0:
                raise ValueError(
                    f"CUDA_VISIBLE_DEVICES={value!r}: {token} is not a GPU index. '-1' alone hides every "
                    "GPU; inside a list CUDA would silently drop it and every entry after it")
            entry: Entry = index
        elif _UUID_RE.fullmatch(token):
            entry = token
        else:
            raise ValueError(
                f"CUDA_VISIBLE_DEVICES={value!r}: entry {token!r} is neither a GPU index like 3 "
                "nor a UUID like GPU-8932f937-... (see nvidia-smi -L)")
        if entry in entries:
            raise ValueError(f"CUDA_VISIBLE_DEVICES={value!r}: GPU {token} is listed twice")
        entries.append(entry)
    return entries


@dataclass(frozen=True)
class Visibility:
    """What a process would see: ``visible`` = physical positions, in the new order."""

    visible: tuple[int, ...]
    dropped: tuple[Entry, ...]

    @property
    def tf_names(self) -> dict[int, str]:
        """Physical position -> TensorFlow name (``/GPU:k``)."""
        return {phys: f"/GPU:{k}" for k, phys in enumerate(self.visible)}


def resolve_visible(value: Optional[str], gpus: Union[int, Sequence[GpuInfo]]) -> Visibility:
    """Apply CUDA's rules for ``CUDA_VISIBLE_DEVICES`` to ``gpus``: a GPU count, or :class:`GpuInfo` rows (to match
    UUIDs) in CUDA's order. CUDA numbers the listed GPUs from 0 and stops at the first entry it cannot use: that
    one and the rest are ``dropped``."""
    if isinstance(gpus, (list, tuple)) and all(isinstance(g, GpuInfo) for g in gpus):
        uuids: list[Optional[str]] = [g.uuid for g in gpus]
    else:
        uuids = [None] * nonneg_int("gpus (a GPU count, or GpuInfo rows)", gpus)
    entries = parse_cuda_visible_devices(value)
    if entries is None:
        return Visibility(tuple(range(len(uuids))), ())
    visible: list[int] = []
    for pos, entry in enumerate(entries):
        if isinstance(entry, int):
            found = entry if entry < len(uuids) else None
        else:
            matches = [i for i, u in enumerate(uuids) if u and u.lower().startswith(entry.lower())]
            found = matches[0] if len(matches) == 1 else None
        if found is None or found in visible:
            return Visibility(tuple(visible), tuple(entries[pos:]))
        visible.append(found)
    return Visibility(tuple(visible), ())


#: The script :func:`probe_cuda` runs: the CUDA driver via ctypes (no TensorFlow, ~50 ms).
CUDA_PROBE_SCRIPT = Path(__file__).resolve().parent / "scripts" / "cuda_probe.py"


@dataclass(frozen=True)
class CudaView:
    """The GPUs the CUDA driver reported in one process (``devices`` in CUDA's order)."""

    env: dict
    devices: tuple[dict, ...]
    driver: Optional[str]
    error: Optional[str]

    @property
    def count(self) -> int:
        return len(self.devices)

    def as_gpu_info(self) -> list[GpuInfo]:
        """The devices as :class:`GpuInfo` rows, indexed in CUDA's order (for :func:`resolve_visible`)."""
        return [GpuInfo(index=d["ordinal"], uuid=d.get("uuid"), pci_bus_id=d.get("pci_bus_id"),
                        name=d.get("name")) for d in self.devices]

    def summary(self) -> str:
        """One line: the environment and what CUDA saw."""
        shown = ", ".join(f"{k}={v!r}" for k, v in self.env.items()) or "(no CUDA variables set)"
        seen = ("; ".join(f"{d['ordinal']}: {d['name']} @ {d['pci_bus_id']}" for d in self.devices)
                if self.devices else f"0 GPUs ({self.error or 'none found'})")
        return f"{shown:<58} -> {seen}"


def probe_cuda(env: Optional[Mapping[str, str]] = None, timeout: float = 60) -> CudaView:
    """Ask the CUDA driver, in a fresh process with exactly the CUDA variables in ``env``, which GPUs it sees.
    Without an NVIDIA driver every probe reports 0 GPUs and says why."""
    env = dict(env or {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise ValueError(f"env must map strings to strings, got {env!r}")
    result = subproc.run([sys.executable, str(CUDA_PROBE_SCRIPT)], subproc.child_env(env, fresh_devices=True),
                         timeout=timeout, die_with_parent=False)   # no fork warning in a JAX kernel
    line = next((ln for ln in result.stdout.splitlines() if ln.startswith("CUDA_PROBE ")), None)
    if line is None:
        raise RuntimeError(f"the CUDA probe printed no result (exit {result.returncode}): "
                           f"{result.last_error_line() or result.stderr[-300:]}")
    data = json.loads(line[len("CUDA_PROBE "):])
    return CudaView(env=env, devices=tuple(data["devices"]), driver=data["driver"], error=data["error"])


def compare_numbering(smi_rows: Sequence[GpuInfo], fastest_first: CudaView, pci_bus_id: CudaView) -> list[dict]:
    """One row per nvidia-smi GPU: its index, bus id and name, and CUDA's index for it under each order
    (matched by PCI bus id; None where CUDA did not report one)."""
    fast, pci = ({normalize_bus_id(d["pci_bus_id"]): d["ordinal"] for d in view.devices if d.get("pci_bus_id")}
                 for view in (fastest_first, pci_bus_id))
    rows = []
    for r in smi_rows:
        bus = normalize_bus_id(r.pci_bus_id) if r.pci_bus_id else None
        rows.append({"nvidia-smi": r.index, "pci.bus_id": bus, "name": r.name,
                     "CUDA (FASTEST_FIRST)": fast.get(bus), "CUDA (PCI_BUS_ID)": pci.get(bus)})
    return rows
