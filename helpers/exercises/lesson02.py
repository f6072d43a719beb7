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
from . import register

# ---- 02.1: choose GPUs from nvidia-smi output --------------------------------------------------


def _check_freest(answer):
    try:
        entries = parse_cuda_visible_devices(answer)
    except ValueError as exc:
        return False, str(exc)
    want = [int(i) for i in _solve_freest().split(",")]
    if entries is None or len(entries) != 2:
        return False, f"{answer!r} selects {len(entries or [])} GPU(s); pick exactly two"
    if not all(isinstance(e, int) for e in entries):
        return False, "UUIDs work too, but here give the two nvidia-smi index numbers, e.g. '0,1'"
    if sorted(entries) == want:
        order = "" if entries == want else " (listed in that order, GPU %d becomes /GPU:0)" % entries[0]
        return True, f"GPUs {want[0]} and {want[1]} have the most free memory{order}"
    return False, (f"{answer!r}: compare memory.total - memory.used per row; the two freest GPUs are "
                   "not these (helpers.gpus.parse_nvidia_smi_csv gives memory_free_mib)")


def _solve_freest():
    rows = parse_nvidia_smi_csv(SAMPLE_NVIDIA_SMI_CSV)
    freest = sorted(rows, key=lambda r: r.memory_free_mib, reverse=True)[:2]
    return ",".join(str(r.index) for r in sorted(freest, key=lambda r: r.index))


register("02.1", title="pick the two freest GPUs", checker=_check_freest, solution=_solve_freest,
         expects="str", wants="the value of CUDA_VISIBLE_DEVICES as a string, like '0,1'",
         hint="free memory is what a GPU has minus what is in use; helpers.gpus can parse the "
              "sample table for you.")

# ---- 02.2: find and fix - CUDA_VISIBLE_DEVICES for a fresh process ------------------------------

def _check_child_env(answer):
    before = dict(os.environ)
    cases = {"3,5": (3, 5), " 3, 5": (3, 5), "3,,5": (3, 5), "5,3": (5, 3), "2": (2,)}
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
              "CUDA do at an empty entry? Whose numbering do the indices use?")
