"""Where the course lives (its URL is written here and nowhere else), and the launch badges it renders.

Why: notebooks carry rendered copies of the badges and Kaggle banners (``tools/nbtemplate.py``, checked by a test),
and the website links to the repository (``tools/book.py``, ``book/conf.py``), so a move of the repository is one
edit here plus ``make sync-notebooks``. Standard library only: the book's environment has no numpy.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from urllib.parse import quote

REPO_SLUG = "keras-multi-gpu-course/keras-multi-gpu"
BRANCH = "main"
REPO_URL = f"https://github.com/{REPO_SLUG}"
#: Environment variable that overrides the bootstrap's pip source (tests point it at a local clone).
HELPERS_SOURCE_ENV = "MULTIGPU_HELPERS"
#: What the bootstrap cell installs where the helpers are missing (Colab, Kaggle, a lone notebook).
HELPERS_SOURCE = f"git+{REPO_URL}"


def _check_path(notebook_path: str) -> PurePosixPath:
    path = PurePosixPath(notebook_path)
    if path.suffix != ".ipynb" or not path.parts or path.parts[0] != "notebooks":
        raise ValueError(f"expected a path like 'notebooks/NN_name.ipynb', got {notebook_path!r}")
    return path


def colab_url(notebook_path: str) -> str:
    """Colab link that opens ``notebook_path`` (relative to the repo root)."""
    path = _check_path(notebook_path)
    return f"https://colab.research.google.com/github/{REPO_SLUG}/blob/{BRANCH}/{path}"


def binder_url(notebook_path: str) -> str:
    """Binder link that opens ``notebook_path`` in JupyterLab."""
    path = _check_path(notebook_path)
    return f"https://mybinder.org/v2/gh/{REPO_SLUG}/{BRANCH}?labpath={quote(str(path), safe='')}"


def kaggle_url(notebook_path: str) -> str:
    """Kaggle link that imports ``notebook_path`` from GitHub into a new Kaggle notebook."""
    path = _check_path(notebook_path)
    return f"https://kaggle.com/kernels/welcome?src=https://github.com/{REPO_SLUG}/blob/{BRANCH}/{path}"


def badges_markdown(notebook_path: str) -> str:
    """The Colab + Kaggle + Binder badge line for a notebook."""
    return (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({colab_url(notebook_path)}) "
            f"[![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)]({kaggle_url(notebook_path)}) "
            f"[![Binder](https://mybinder.org/badge_logo.svg)]({binder_url(notebook_path)})")


#: The line every Kaggle learner needs once: two real GPUs are one setting away.
KAGGLE_GPU_LINE = "On Kaggle, choose Settings > Accelerator > **GPU T4 x2** before running."

#: What each lesson uses on Kaggle's GPU T4 x2, rendered after KAGGLE_GPU_LINE: no banner promises more than it runs.
KAGGLE_T4X2_USES = {
    "00": "The lesson uses both GPUs: two replicas, NCCL all-reduce between them.",
    "01": "The lesson uses both GPUs: two replicas, then one model split across the two.",
    "02": "The lesson lists, renumbers and hides both GPUs.",
    "03": "The lesson uses both GPUs: two replicas, NCCL all-reduce between them.",
    "04": "The lesson uses both GPUs for its TensorFlow replicas; its JAX comparison runs on 2 CPU devices.",
    "05": "The lesson uses both GPUs: two replicas, NCCL all-reduce between them.",
    "06": "The lesson measures 1 and 2 GPUs; its 4-replica row splits GPU 0 in four (4 real GPUs where there are).",
    "07": "The kernel uses both GPUs, then each of the two worker processes owns one GPU, with NCCL between them.",
    "08": "The JAX lesson runs on both GPUs: meshes of 2 (2x2 needs 4); its 2-process job runs on the CPU.",
    "09": "The lesson uses both GPUs: two replicas, NCCL all-reduce between them.",
    "10": "The JAX lesson runs on both GPUs: memory per GPU, FSDP over 2, mixed_float16 (no fast bfloat16 on a T4).",
    "11": "The JAX lesson splits its small Gemma over both GPUs, a (1, 2) mesh; in full mode it can load Gemma 2B.",
}


def kaggle_line(notebook_path: str) -> str:
    """The Kaggle banner of one notebook: how to get GPU T4 x2, then what that lesson uses on it."""
    number = _check_path(notebook_path).name[:2]
    uses = KAGGLE_T4X2_USES.get(number)
    return KAGGLE_GPU_LINE if uses is None else f"{KAGGLE_GPU_LINE} {uses}"
