"""Where the course lives (its URL is written here and nowhere else), the helpers release the notebooks install,
and the launch badges it renders.

Why: notebooks carry rendered copies of the badges, Kaggle banners and the Setup cell that installs the helpers
(``tools/nbtemplate.py``, checked by nblint's template rule), and the website links to the repository
(``tools/book.py``, ``book/conf.py``), so a move of the repository, or a release, is one edit plus
``make sync-notebooks``. Standard library only: the book's environment has no numpy.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path, PurePosixPath
from urllib.parse import quote

REPO_SLUG = "keras-multi-gpu-course/keras-multi-gpu"
BRANCH = "main"
REPO_URL = f"https://github.com/{REPO_SLUG}"
PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def helpers_version(pyproject: Path = PYPROJECT) -> str:
    """The helpers package's version, as pyproject.toml's ``[project]`` table gives it."""
    text = Path(pyproject).read_text(encoding="utf-8")
    project = text.split("[project]", 1)[1] if "[project]" in text else ""
    m = re.search(r'^version\s*=\s*"([^"]+)"', project, re.M)
    if not m:
        raise ValueError(f"{pyproject} has no version in its [project] table")
    return m.group(1)


#: The one place that names what the notebooks' Setup cell installs on Colab and Kaggle: a commit (40 hex digits,
#: immutable, unlike a tag) whose ``helpers/`` and ``pyproject.toml`` are this tree's. `make pin-helpers` writes it
#: after a commit that changed them; tests/test_links.py checks the equality with git (CONTRIBUTING: "Releasing").
HELPERS_COMMIT = "5a1bac329dce77de42f4182b3f49fad5254387ed"
#: The distribution the Setup cell looks for by name (pyproject.toml's ``[project] name``), never an importable
#: ``helpers`` (a learner's own helpers.py would do).
HELPERS_DIST = "keras-multigpu-course-helpers"
#: Environment variable that overrides the bootstrap's pip source (tests point it at a local clone).
HELPERS_SOURCE_ENV = "MULTIGPU_HELPERS"
#: What the bootstrap cell installs where the helpers are missing (Colab, Kaggle, a lone notebook): that commit.
HELPERS_SOURCE = f"git+{REPO_URL}@{HELPERS_COMMIT}"
COMMIT_RE = re.compile(r"[0-9a-f]{40}")


def pin_helpers(commit: str, path: Path = Path(__file__)) -> bool:
    """Write ``commit`` as :data:`HELPERS_COMMIT` into this file; True if it changed. ``ValueError`` unless 40 hex."""
    if not isinstance(commit, str) or not COMMIT_RE.fullmatch(commit):
        raise ValueError(f"commit must be 40 lower-case hex digits, got {commit!r}")
    text = Path(path).read_text(encoding="utf-8")
    new = re.sub(r'^HELPERS_COMMIT = "[0-9a-f]*"$', f'HELPERS_COMMIT = "{commit}"', text, count=1, flags=re.M)
    if new == text:
        return False
    Path(path).write_text(new, encoding="utf-8")
    return True


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


def kaggle_line(notebook_path: str, uses: str | None) -> str:
    """The Kaggle banner of one notebook: how to get GPU T4 x2, then what that lesson uses on it (its registry
    entry's ``kaggle``, tools/registry.py): no banner promises more than the lesson runs."""
    _check_path(notebook_path)
    return KAGGLE_GPU_LINE if not uses else f"{KAGGLE_GPU_LINE} {uses}"


#: What the Setup cell's install must equal: the helpers package and its build recipe.
PINNED_PATHS = ("helpers", "pyproject.toml")


def last_helpers_commit(root: Path = PYPROJECT.parent) -> str:
    """The newest commit that changed :data:`PINNED_PATHS`; ``RuntimeError`` if they have uncommitted changes
    (a commit cannot name files that are not in it yet)."""
    git = ["git", "-C", str(root)]
    dirty = subprocess.run(git + ["status", "--porcelain", "--", *PINNED_PATHS], check=True, capture_output=True,
                           text=True).stdout.strip()
    if dirty:
        raise RuntimeError(f"commit these first, then pin:\n{dirty}")
    return subprocess.run(git + ["log", "-1", "--format=%H", "--", *PINNED_PATHS], check=True, capture_output=True,
                          text=True).stdout.strip()


if __name__ == "__main__":  # `make pin-helpers`: python3 tools/links.py pin
    if sys.argv[1:] != ["pin"]:
        sys.exit("usage: python3 tools/links.py pin")
    commit = last_helpers_commit()
    changed = pin_helpers(commit)
    print(f"HELPERS_COMMIT = {commit} ({'written to tools/links.py' if changed else 'already pinned'}); "
          "now run make sync-notebooks and commit")
