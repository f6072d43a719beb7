"""Exercises of 02_picking_gpus."""

from __future__ import annotations

from . import register

# ---- 02.1: choose GPUs from nvidia-smi output --------------------------------------------------


def _freest_two() -> list[int]:
    from helpers.gpus import SAMPLE_NVIDIA_SMI_CSV, parse_nvidia_smi_csv

    rows = parse_nvidia_smi_csv(SAMPLE_NVIDIA_SMI_CSV)
    return sorted(r.index for r in sorted(rows, key=lambda r: -r.memory_free_mib)[:2])


def _check_freest(answer):
    from helpers.gpus import parse_cuda_visible_devices

    try:
        entries = parse_cuda_visible_devices(answer)
    except ValueError as exc:
        return False, str(exc)
    want = _freest_two()
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
    from helpers.gpus import SAMPLE_NVIDIA_SMI_CSV, parse_nvidia_smi_csv

    rows = parse_nvidia_smi_csv(SAMPLE_NVIDIA_SMI_CSV)
    freest = sorted(rows, key=lambda r: r.memory_free_mib, reverse=True)[:2]
    return ",".join(str(r.index) for r in sorted(freest, key=lambda r: r.index))


register("02.1", title="pick the two freest GPUs", checker=_check_freest, solution=_solve_freest,
         expects="str", wants="the value of CUDA_VISIBLE_DEVICES as a string, like '0,1'",
         hint="free memory is what a GPU has minus what is in use; helpers.gpus can parse the "
              "sample table for you.")

# ---- 02.2: renumbering --------------------------------------------------------------------------


def _check_names(answer):
    from helpers.placement import short_device

    try:
        given = {int(k): short_device(str(v)) for k, v in answer.items()}
    except (ValueError, TypeError) as exc:
        return False, f"keys must be GPU numbers and values TensorFlow names like '/GPU:0' ({exc})"
    want = {5: "GPU:0", 3: "GPU:1", 0: "GPU:2"}
    if given == want:
        return True, "5 -> /GPU:0, 3 -> /GPU:1, 0 -> /GPU:2: visible GPUs are renumbered from 0 in the listed order"
    if given == {k: f"GPU:{k}" for k in want}:
        return False, "TensorFlow does not keep nvidia-smi's numbers: the visible GPUs are renumbered from 0"
    if set(given) != set(want):
        return False, f"the keys should be the three listed GPUs 5, 3 and 0; got {sorted(given)}"
    return False, f"{answer}: the order of the list decides the new numbers (first listed -> /GPU:0)"


def _solve_names():
    from helpers.gpus import tensorflow_names

    return tensorflow_names("5,3,0")


register("02.2", title="what TensorFlow calls each GPU", checker=_check_names, solution=_solve_names,
         expects="dict", wants='a dict from the nvidia-smi number to the TensorFlow name, like {5: "/GPU:?"}',
         hint="does TensorFlow keep nvidia-smi's numbers, or number only the GPUs it can see? In "
              "which order?")

# ---- 02.3: choose one GPU of a mixed box, robustly ----------------------------------------------


def _check_env(answer):
    from helpers.gpus import SAMPLE_MIXED_NVIDIA_SMI_CSV, parse_cuda_visible_devices, parse_nvidia_smi_csv

    if not all(isinstance(k, str) and isinstance(v, str) for k, v in answer.items()):
        return False, ("an environment maps names to strings: every key and value must be a str, "
                       f"got {answer!r}")
    target = parse_nvidia_smi_csv(SAMPLE_MIXED_NVIDIA_SMI_CSV)[1]
    value = answer.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return False, "without CUDA_VISIBLE_DEVICES the process sees both GPUs"
    try:
        entries = parse_cuda_visible_devices(value)
    except ValueError as exc:
        return False, str(exc)
    order = answer.get("CUDA_DEVICE_ORDER")
    if order not in (None, "PCI_BUS_ID", "FASTEST_FIRST"):
        return False, f"CUDA_DEVICE_ORDER={order!r} is not a value CUDA knows (PCI_BUS_ID or FASTEST_FIRST)"
    if not entries or len(entries) != 1:
        return False, f"{value!r} selects {len(entries or [])} GPUs; select exactly one"
    entry = entries[0]
    if isinstance(entry, str):
        if len(entry) >= 8 and target.uuid.lower().startswith(entry.lower()):
            return True, f"{value} names the RTX 3090 by UUID: right whatever the order (the most robust choice)"
        return False, f"{value} is not (a prefix of) the RTX 3090's UUID {target.uuid}"
    if entry != target.index:
        return False, f"nvidia-smi shows the RTX 3090 as GPU {target.index}, not {entry}"
    if order != "PCI_BUS_ID":
        return False, ("index 1 alone is ambiguous: with CUDA's default FASTEST_FIRST order, CUDA's GPU 1 may be "
                       "the GTX 1080 Ti. Also set the variable that makes CUDA number GPUs like nvidia-smi does")
    return True, "PCI_BUS_ID makes CUDA number GPUs like nvidia-smi, so '1' is the RTX 3090"


def _solve_env():
    return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "1"}


register("02.3", title="select one GPU of a mixed workstation", checker=_check_env, solution=_solve_env,
         expects="dict", wants="the process's environment as a dict of strings",
         hint="an index alone means different cards depending on how CUDA orders them: make the "
              "order explicit, or use an identifier that never changes (lesson 02 showed both).")
