"""The notebook template: what every lesson starts with, and the checks that enforce it.

Why: nine notebooks written by several people drift apart unless one piece of
code renders their common cells and one test compares each notebook with it.

CLI::

    python tools/nbtemplate.py new notebooks/09_my_topic.ipynb "My topic"
    python tools/nbtemplate.py sync      # re-render badges + bootstrap in every notebook
    python tools/nbtemplate.py check     # list template problems (exit 1 if any)
"""

from __future__ import annotations

import json
import re
import sys
import uuid
from pathlib import Path
from typing import Optional

import links  # tools/links.py: the repository's address and the badges

NAME_RE = re.compile(r"^(\d\d)_[a-z0-9]+(?:_[a-z0-9]+)*\.ipynb$")
BADGE_MARK = "<!-- badges -->"

BOOTSTRAP_SOURCE = f'''# Setup 1/2 - on Colab or Kaggle, install the course helpers (TensorFlow, Keras and JAX are already there).
import importlib.util, os, subprocess, sys
if importlib.util.find_spec("helpers") is None:
    source = os.environ.get("{links.HELPERS_SOURCE_ENV}", "{links.HELPERS_SOURCE}")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", source], check=True)'''

#: The kernelspec every notebook records. `make lab` installs its kernel under the same name and display name
#: (the Makefile's KERNEL_DISPLAY_NAME; a test keeps them equal), so JupyterLab opens a notebook unmodified.
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}

SETUP_PREFIX = "# Setup 2/2 - versions, mode and replica devices.\nimport helpers\n"


def setup_source(devices: int = 2, backend: Optional[str] = None) -> str:
    """Source of the second setup cell."""
    args = f"devices={devices}" + (f", backend={backend!r}" if backend else "")
    return SETUP_PREFIX + f"REPLICAS = helpers.setup_notebook({args})"


def _md(text: str) -> dict:
    return {"cell_type": "markdown", "id": uuid.uuid4().hex[:8], "metadata": {}, "source": text}


def _code(text: str) -> dict:
    return {"cell_type": "code", "execution_count": None, "id": uuid.uuid4().hex[:8], "metadata": {},
            "outputs": [], "source": text}


def header_markdown(path: str, title: str, learn: str) -> str:
    """Title, badges and the 'what you will learn' paragraph."""
    return f"# {title}\n\n{badge_block(path)}\n\n**What you will learn.** {learn}"


def badge_block(path: str) -> str:
    """The marker, the badge line and the Kaggle GPU line, as they stand in a notebook's first cell."""
    return f"{BADGE_MARK}\n{links.badges_markdown(path)}  \n{links.kaggle_line(path)}"


def new_notebook(path: str, title: str, learn: str = "TODO", devices: int = 2) -> dict:
    """A notebook dict that follows the template (header, setup, summary, exercises)."""
    check_name(path)
    cells = [
        _md(header_markdown(path, title, learn)),
        _md("## Setup\n\nRun these two cells first. They install nothing outside Colab."),
        _code(BOOTSTRAP_SOURCE),
        _code(setup_source(devices)),
        _md("## Summary\n\n- TODO"),
        _md("## Exercise 1\n\nTODO"),
        _md("## Exercise 2\n\nTODO"),  # nblint's rule: exactly two, each checked by helpers.exercises.check
    ]
    return {"cells": cells, "metadata": {
        "kernelspec": dict(KERNELSPEC),
        "language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}


def check_name(path: str) -> re.Match:
    """``ValueError`` unless the file name is ``NN_snake_case.ipynb``."""
    m = NAME_RE.match(Path(path).name)
    if not m:
        raise ValueError(f"notebook names look like 'NN_snake_case.ipynb', got {Path(path).name!r}")
    return m


def _src(cell: dict) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def problems(nb: dict, path: str) -> list[str]:
    """Every way ``nb`` (stored at repo-relative ``path``) departs from the template."""
    out = []
    try:
        check_name(path)
    except ValueError as e:
        out.append(str(e))
    cells = nb.get("cells", [])
    if nb.get("metadata", {}).get("kernelspec", {}).get("name") != "python3":
        out.append("kernelspec name must be 'python3'")
    elif nb.get("metadata", {}).get("kernelspec") != KERNELSPEC:
        out.append(f"kernelspec must be {KERNELSPEC} (what `make lab` installs; run: python tools/nbtemplate.py sync)")
    for i, c in enumerate(cells):
        if c.get("cell_type") == "code" and (c.get("outputs") or c.get("execution_count")):
            out.append(f"cell {i} has stored outputs/execution count (strip them)")
    if len(cells) < 4:
        return out + ["fewer than 4 cells: header, Setup, bootstrap and setup cells are required"]
    head = _src(cells[0])
    if not head.startswith("# ") or head.count("\n# ") > 0:
        out.append("first cell must start with one '# Title'")
    if badge_block(path) not in head:
        out.append("badges (Colab, Kaggle, Binder + the Kaggle GPU line) missing or not pointing at this notebook's "
                   "own path (run: python tools/nbtemplate.py sync)")
    if "**What you will learn.**" not in head:
        out.append("first cell needs the '**What you will learn.**' paragraph")
    if not _src(cells[1]).startswith("## Setup"):
        out.append("second cell must be the '## Setup' heading")
    if _src(cells[2]) != BOOTSTRAP_SOURCE:
        out.append("third cell must be the template's bootstrap cell (run: python tools/nbtemplate.py sync)")
    if not (_src(cells[3]).startswith(SETUP_PREFIX) and "helpers.setup_notebook(" in _src(cells[3])):
        out.append("fourth cell must start with the template's setup (import helpers; helpers.setup_notebook)")
    headings = [ln for c in cells if c.get("cell_type") == "markdown" for ln in _src(c).splitlines()
                if ln.startswith("## ")]
    if "## Summary" not in headings:
        out.append("missing a '## Summary' section")
    if not any(h.startswith("## Exercise") for h in headings):
        out.append("missing '## Exercise N' sections")
    return out


def sync(nb: dict, path: str) -> bool:
    """Re-render badges, the bootstrap cell and the kernelspec of ``nb`` in place; True if anything changed."""
    cells = nb["cells"]
    meta = nb.setdefault("metadata", {})
    spec_changed = meta.get("kernelspec") != KERNELSPEC
    meta["kernelspec"] = dict(KERNELSPEC)
    head = _src(cells[0])
    new_head = re.sub(re.escape(BADGE_MARK) + r"\n[^\n]*(?:\n[^\n]+)*", badge_block(path).replace("\\", "\\\\"),
                      head, count=1)
    changed = new_head != head or spec_changed
    cells[0]["source"] = new_head
    if len(cells) > 2 and cells[2].get("cell_type") == "code" and _src(cells[2]) != BOOTSTRAP_SOURCE:
        cells[2]["source"] = BOOTSTRAP_SOURCE
        changed = True
    return changed


def _root() -> Path:
    return Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> int:
    root = _root()
    if argv[:1] == ["new"] and len(argv) >= 3:
        path = Path(argv[1])
        rel = str(path.resolve().relative_to(root)) if path.is_absolute() else argv[1]
        if (root / rel).exists():
            print(f"{rel} exists; not overwritten")
            return 1
        (root / rel).write_text(json.dumps(new_notebook(rel, argv[2]), indent=1) + "\n")
        print("created", rel)
        return 0
    if argv[:1] in (["sync"], ["check"]):
        bad = 0
        for p in sorted((root / "notebooks").glob("*.ipynb")):
            rel = str(p.relative_to(root))
            nb = json.loads(p.read_text())
            if argv[0] == "sync":
                if sync(nb, rel):
                    p.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
                    print("synced", rel)
            else:
                for msg in problems(nb, rel):
                    bad += 1
                    print(f"{rel}: {msg}")
        return 1 if bad else 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
