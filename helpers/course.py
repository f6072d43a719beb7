"""Where the course lives: the repository URL is written here and nowhere else.

Why: badges and the Colab bootstrap cell must point at the real repository.
Notebooks carry rendered copies (see :mod:`helpers.template`); a hygiene test
checks that every copy matches what this module renders, so a move of the
repository is one edit here plus ``make sync-notebooks``.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from urllib.parse import quote

REPO_SLUG = "keras-multi-gpu-course/keras-multi-gpu"
BRANCH = "main"
REPO_URL = f"https://github.com/{REPO_SLUG}"
#: Environment variable that overrides the bootstrap's install source (tests point it at a local clone).
REPO_URL_ENV = "MULTIGPU_COURSE_REPO_URL"
DIST_NAME = "keras-multigpu-course-helpers"


def _check_path(notebook_path: str) -> PurePosixPath:
    path = PurePosixPath(notebook_path)
    if path.suffix != ".ipynb" or not path.parts or path.parts[0] != "notebooks":
        raise ValueError(
            f"expected a path like 'notebooks/NN_name.ipynb', got {notebook_path!r}"
        )
    return path


def colab_url(notebook_path: str) -> str:
    """Colab link that opens ``notebook_path`` (relative to the repo root)."""
    path = _check_path(notebook_path)
    return f"https://colab.research.google.com/github/{REPO_SLUG}/blob/{BRANCH}/{path}"


def binder_url(notebook_path: str) -> str:
    """Binder link that opens ``notebook_path`` in JupyterLab."""
    path = _check_path(notebook_path)
    return f"https://mybinder.org/v2/gh/{REPO_SLUG}/{BRANCH}?labpath={quote(str(path), safe='')}"


def badges_markdown(notebook_path: str) -> str:
    """The Colab + Binder badge line for a notebook."""
    return (
        f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({colab_url(notebook_path)}) "
        f"[![Binder](https://mybinder.org/badge_logo.svg)]({binder_url(notebook_path)})"
    )
