"""The course's settings from the environment, read in one place: mode, GPU memory, scratch folder, JAX devices.

Why: the same cells run "quick" (seconds, on a 2-core laptop or CI) and "full" (real training) without an edit:
``MULTIGPU_MODE=full make lab``. :func:`validate_environment` checks every setting in milliseconds, before
TensorFlow is imported, so a typo fails at once instead of after a ten-second import.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Optional, TypeVar

ENV_VAR = "MULTIGPU_MODE"
MODES = ("quick", "full")
#: Per-logical-GPU memory cap in MiB when one GPU is split (helpers.devices).
GPU_MEMORY_ENV = "MULTIGPU_GPU_MEMORY_MB"
MIN_GPU_MEMORY_MB = 64
#: Folder for the lessons' scratch files (helpers.notebook.scratch_dir); default :func:`scratch_root`.
SCRATCH_ENV = "MULTIGPU_SCRATCH"
#: The default scratch root in the temp directory is this name, then the user's id: one root per user.
SCRATCH_ROOT_NAME = "keras-multigpu-course"
#: CPU devices of the JAX lessons (08, 10, 11) when fewer than 2 GPUs are visible (helpers.meshes).
JAX_DEVICES_ENV = "MULTIGPU_JAX_DEVICES"
T = TypeVar("T")


def mode(default: str = "quick") -> str:
    """``"quick"`` or ``"full"`` (``default`` when unset: quick, except for a check made for GPU machines);
    ``ValueError`` for anything else (``MULTIGPU_MODE=ful``). Every reader of the mode calls this, the maintainer
    tools too (tools/pytest_course.py, memcheck.py, gpu_check.py)."""
    if default not in MODES:
        raise ValueError(f"default must be one of {', '.join(MODES)}, got {default!r}")
    value = os.environ.get(ENV_VAR, default).strip().lower() or default
    if value not in MODES:
        raise ValueError(f"{ENV_VAR}={value!r} is not a mode; use one of {', '.join(MODES)}.")
    return value


def is_quick() -> bool:
    """True in quick mode (CI, laptops): train for seconds, not minutes."""
    return mode() == "quick"


def pick(quick: T, full: T) -> T:
    """``quick`` or ``full`` depending on the mode: ``epochs = pick(quick=2, full=30)``."""
    return quick if is_quick() else full


def gpu_memory_mb() -> Optional[int]:
    """``MULTIGPU_GPU_MEMORY_MB`` as an int (at least 64), or None when unset or empty; ``ValueError`` otherwise."""
    memory = os.environ.get(GPU_MEMORY_ENV)
    if not memory:
        return None
    try:
        value = int(memory)
    except ValueError:
        raise ValueError(f"{GPU_MEMORY_ENV}={memory!r} is not a whole number of MiB "
                         f"(e.g. {GPU_MEMORY_ENV}=1024); unset it for the default.") from None
    if value < MIN_GPU_MEMORY_MB:
        raise ValueError(f"{GPU_MEMORY_ENV}={memory!r} is too small: each logical GPU needs at "
                         f"least {MIN_GPU_MEMORY_MB} MiB.")
    return value


def jax_devices_requested() -> Optional[int]:
    """``MULTIGPU_JAX_DEVICES`` as an int (1-64), or None when unset or blank; ``ValueError`` otherwise. Why: CI
    (and a learner) can rehearse Kaggle's two GPUs (``MULTIGPU_JAX_DEVICES=2``) on a CPU-only machine."""
    value = os.environ.get(JAX_DEVICES_ENV, "").strip()
    if not value:
        return None
    if not value.isdigit() or not 1 <= int(value) <= 64:
        raise ValueError(f"{JAX_DEVICES_ENV}={value!r} is not a device count; use a whole number "
                         f"from 1 to 64 (e.g. {JAX_DEVICES_ENV}=2), or unset it for the default.")
    return int(value)


class ScratchFolderError(ValueError):
    """The scratch folder is not a folder of this user's own: the lessons write scripts there and run them."""


def scratch_root() -> Path:
    """Where the lessons' scratch folders go: ``$MULTIGPU_SCRATCH``, else ``keras-multigpu-course-<uid>`` in the temp
    directory. Why the uid: a login node or a classroom's JupyterHub shares the temp directory between users, and
    one shared root, made by whoever came first, is another user's to write (or to plant a script in)."""
    value = os.environ.get(SCRATCH_ENV, "").strip()
    if value:
        return Path(value).expanduser()
    who = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
    return Path(tempfile.gettempdir()) / f"{SCRATCH_ROOT_NAME}-{who}"


def private_folder_problem(path: Path) -> Optional[str]:
    """Why ``path`` is not a folder of this user's own, in one sentence that says what to do; None if it is one.

    It must be a real folder (not a symbolic link: it could point anywhere), owned by this user, and writable by
    no one else (another user could put a script there that a lesson then runs). Unix only; None elsewhere.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return f"the scratch folder {path} does not exist"
    fix = (f"Set {SCRATCH_ENV} to a folder of your own (e.g. {SCRATCH_ENV}=~/.cache/{SCRATCH_ROOT_NAME}), "
           "or remove this one if it is yours")
    if stat.S_ISLNK(info.st_mode):
        return (f"the scratch folder {path} is a symbolic link (to {os.readlink(path)}): the lessons write and run "
                f"scripts there, and a link can point anywhere. {fix}")
    if not stat.S_ISDIR(info.st_mode):
        return f"the scratch folder {path} is not a folder. {fix}"
    if not hasattr(os, "getuid"):
        return None
    if info.st_uid != os.getuid():
        return (f"the scratch folder {path} belongs to user id {info.st_uid}, not to you (user id {os.getuid()}): "
                f"another user made it first, and the lessons would run the scripts they find there. {fix}")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return (f"the scratch folder {path} is writable by others (mode {stat.S_IMODE(info.st_mode):o}): anyone "
                f"could put a script there that a lesson then runs. Run `chmod go-w {path}`, or {fix[0].lower()}"
                f"{fix[1:]}")
    return None


def validate_environment() -> None:
    """Check every ``MULTIGPU_*`` setting (standard library only); ``ValueError`` with one clear line if one is bad."""
    mode()
    gpu_memory_mb()
    jax_devices_requested()
    scratch = os.environ.get(SCRATCH_ENV)
    if scratch and os.path.exists(scratch) and not os.path.isdir(scratch):
        raise ValueError(f"{SCRATCH_ENV}={scratch!r} is a file; point it at a folder (or unset it).")
    root = scratch_root()
    if os.path.lexists(root) and (problem := private_folder_problem(root)):
        raise ScratchFolderError(problem[0].upper() + problem[1:])
