"""Exercises of 02_picking_gpus."""

from __future__ import annotations

import os
from unittest import mock

from ..gpus import (
    SAMPLE_NVIDIA_SMI_CSV,
    parse_cuda_visible_devices,
    parse_nvidia_smi_csv,
    probe_cuda,
    resolve_visible,
)
from . import RANDOM, as_str_dict, describe, register

# ---- 02.1: choose the two freest GPUs from nvidia-smi's output, as settings for a fresh process ----------

#: nvidia-smi outputs the checker tries (this lesson's query): the SAMPLE server, a mixed workstation, and a
#: mixed server where the least used GPUs are not the freest (the totals differ).
_HEADER = "index, uuid, pci.bus_id, name, memory.used [MiB], memory.total [MiB]\n"
_MACHINES = [SAMPLE_NVIDIA_SMI_CSV, _HEADER + (
    "0, GPU-1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9, 00000000:01:00.0, NVIDIA GeForce GTX 1080 Ti, 312 MiB, 11264 MiB\n"
    "1, GPU-2a3b4c5d-6e7f-4a8b-9c0d-1e2f3a4b5c6d, 00000000:02:00.0, NVIDIA GeForce RTX 3090, 1 MiB, 24576 MiB\n"), _HEADER + (
    "0, GPU-0a1b2c3d-0000-4000-8000-000000000001, 00000000:07:00.0, NVIDIA A100-SXM4-80GB, 60000 MiB, 81920 MiB\n"
    "1, GPU-0a1b2c3d-0000-4000-8000-000000000002, 00000000:0F:00.0, Tesla T4, 0 MiB, 15360 MiB\n"
    "2, GPU-0a1b2c3d-0000-4000-8000-000000000003, 00000000:47:00.0, NVIDIA A100-SXM4-80GB, 1000 MiB, 81920 MiB\n"
    "3, GPU-0a1b2c3d-0000-4000-8000-000000000004, 00000000:4E:00.0, Tesla V100-SXM2-16GB, 100 MiB, 16160 MiB\n")]


#: GPU models of the random machine each check adds: (name, memory.total in MiB).
_MODELS = [("NVIDIA A100-SXM4-80GB", 81920), ("Tesla T4", 15360), ("Tesla V100-SXM2-16GB", 16160),
           ("NVIDIA GeForce RTX 3090", 24576), ("NVIDIA L4", 23034)]


def random_machine() -> str:
    """nvidia-smi's output for a machine of 2-8 random GPUs, drawn afresh for each check (no two equally free),
    so that an answer cannot know the machines by heart."""
    while True:
        gpus = [(i, *RANDOM.choice(_MODELS)) for i in range(RANDOM.randint(2, 8))]
        used = [RANDOM.randint(0, total) for _, _, total in gpus]
        if len({total - u for (_, _, total), u in zip(gpus, used)}) == len(gpus):
            break
    return _HEADER + "".join(
        f"{i}, GPU-{i:08x}-0000-4000-8000-{RANDOM.getrandbits(48):012x}, 00000000:{16 + i:02X}:00.0, {name}, "
        f"{u} MiB, {total} MiB\n" for (i, name, total), u in zip(gpus, used))


def _check_freest(answer):
    solve = _solve_freest()
    for text in [*_MACHINES, random_machine()]:
        rows = parse_nvidia_smi_csv(text)
        want, got = solve(text), answer(text)
        where = f"on a machine with {len(rows)} GPUs ({', '.join(sorted({r.name for r in rows}))})"
        if not isinstance(got, dict):
            return False, f"{where} freest_two returned {describe(got)}; return a dict of environment variables"
        try:
            got = as_str_dict("the environment", got)   # its stored strings, as plain str
        except TypeError:
            return False, "environment values are strings, e.g. {'CUDA_VISIBLE_DEVICES': '3,5'}"
        value = got.get("CUDA_VISIBLE_DEVICES")
        if value != want["CUDA_VISIBLE_DEVICES"]:
            free = ", ".join(f"GPU {r.index}: {r.memory_free_mib}" for r in rows)
            if value is not None and value.split(",")[::-1] == want["CUDA_VISIBLE_DEVICES"].split(","):
                return False, f"{where} you chose the right GPUs, {value!r}; list them lower index first"
            return False, (f"{where} CUDA_VISIBLE_DEVICES={value!r}, but the two with the most free memory (MiB "
                           f"free: {free}) are {want['CUDA_VISIBLE_DEVICES']!r}")
        if got.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
            return False, ("the indices are nvidia-smi's, but CUDA numbers GPUs fastest first by default: "
                           "also set CUDA_DEVICE_ORDER so that both count the same way")
    return True, ("the two freest GPUs of every machine, in nvidia-smi's numbering: a fresh process started "
                  "with these variables trains on them")


def _solve_freest():
    def freest_two(smi_csv):
        free = {}
        for line in smi_csv.strip().splitlines()[1:]:                  # skip the header
            index, _, _, _, used, total = [field.strip() for field in line.split(",")]
            free[int(index)] = int(total.split()[0]) - int(used.split()[0])   # "16160 MiB" -> 16160
        two = sorted(sorted(free, key=free.get, reverse=True)[:2])
        return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ",".join(map(str, two))}

    return freest_two


register("02.1", title="the two freest GPUs, for a fresh process", checker=_check_freest, solution=_solve_freest,
         expects="function", takes=1, wants="a function freest_two(smi_csv) that returns a dict",
         hint="free memory is what a GPU has minus what is in use; the index numbers are nvidia-smi's, and the "
              "child counts GPUs its own way unless told.",
         giveaways=["memory_free_mib", "sort", "PCI_BUS_ID", "total - used"])

# ---- 02.2: find and fix - CUDA_VISIBLE_DEVICES for a fresh process ------------------------------

def _check_child_env(answer):
    before = dict(os.environ)
    cases = {"3,5": (3, 5), " 3, 5": (3, 5), "3,,5": (3, 5), "5,3": (5, 3), "2": (2,)}
    picked = RANDOM.sample(range(8), 2)           # one more selection, new for each check
    cases[f" {picked[0]},, {picked[1]} "] = tuple(picked)
    with mock.patch.dict(os.environ):             # whatever the answer does to os.environ is undone
        results = {selection: answer(selection) for selection in cases}
        changed = sorted(k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k))
    if changed:
        return False, (f"child_env changed this process's own environment ({', '.join(changed)}): TensorFlow "
                       "has started here, so that selects nothing for it, and it leaks into every later "
                       "child. Build a new dict instead")
    for selection, env in results.items():
        if env is os.environ or not isinstance(env, dict):
            return False, (f"child_env({selection!r}) returned {type(env).__name__}; return a new dict (a copy "
                           "of os.environ plus your settings) for subprocess.run(..., env=...)")
        try:
            env = results[selection] = as_str_dict(f"child_env({selection!r})", env)
        except TypeError as exc:
            return False, f"{exc}: a process's environment holds strings only"
        if "PATH" in before and env.get("PATH") != before["PATH"]:
            return False, "keep the rest of the environment (PATH, HOME, ...): start from a copy of os.environ"
        value = env.get("CUDA_VISIBLE_DEVICES")
        try:
            parse_cuda_visible_devices(value)
        except ValueError as exc:
            return False, (f"child_env({selection!r}) sets {exc}. CUDA would stop at the first bad entry and "
                           "hide every GPU after it")
        visible = resolve_visible(value, 8).visible
        if visible != cases[selection]:
            return False, (f"child_env({selection!r}) gives CUDA_VISIBLE_DEVICES={value!r}: on 8 GPUs the child "
                           f"would see {list(visible)}, the user asked for {list(cases[selection])} in that order")
        if env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
            return False, ("the indices are nvidia-smi's, but CUDA numbers GPUs fastest first by default: "
                           "also set CUDA_DEVICE_ORDER so that both count the same way")
    seen = probe_cuda(results["3,,5"], timeout=30)    # a fresh process: does it get the variables?
    if seen.env.get("CUDA_VISIBLE_DEVICES") != "3,5" or seen.env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
        return False, f"a fresh process started with this environment saw {seen.env}"
    return True, ("this process is left alone, and a fresh process started with env= sees "
                  "CUDA_VISIBLE_DEVICES='3,5' and CUDA_DEVICE_ORDER='PCI_BUS_ID' (probed: "
                  f"{seen.error or str(seen.count) + ' GPU(s)'}): '3,,5' no longer hides GPU 5")


def _solve_child_env():
    def child_env(selection):
        entries = [e.strip() for e in selection.split(",") if e.strip()]   # drop spaces and empty entries
        env = dict(os.environ)                                              # a copy: this process stays as is
        env.update(CUDA_VISIBLE_DEVICES=",".join(entries), CUDA_DEVICE_ORDER="PCI_BUS_ID")
        return env

    return child_env


register("02.2", title="find and fix: the environment of a fresh process", checker=_check_child_env,
         solution=_solve_child_env, expects="function", takes=1,
         wants="a function child_env(selection) that returns a dict: your fixed version",
         hint="three problems: whose environment does it change (and is it too late for it)? What does "
              "CUDA do at an empty entry? Whose numbering do the indices use?",
         giveaways=["PCI_BUS_ID", "dict(os.environ)", "strip()"])
