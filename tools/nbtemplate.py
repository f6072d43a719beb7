"""The notebook template: what every lesson starts with, the one file format, and the checks that enforce them.

Why: notebooks written by several people drift apart unless one piece of code renders their common cells and one
check compares each notebook with it. The format is the one ``nbformat.write`` gives (sources as lists of lines,
sorted keys, indent 1): :func:`canonical_text` writes it with the standard library alone, byte for byte (a test
compares it with nbformat on every notebook), so a save in JupyterLab never rewrites a whole file in the diff.

CLI (``make sync-notebooks`` runs ``sync`` through tools/generate.py)::

    python tools/nbtemplate.py new notebooks/12_my_topic.ipynb "My topic"
    python tools/nbtemplate.py sync      # re-render badges, Kaggle line, bootstrap; rewrite in the one format
    python tools/nbtemplate.py check     # list template problems (exit 1 if any)
"""

from __future__ import annotations

import copy
import json
import re
import sys
import uuid
from pathlib import Path
from typing import Optional

import links  # tools/links.py: the repository's address, the helpers release and the badges

NAME_RE = re.compile(r"^(\d\d)_[a-z0-9]+(?:_[a-z0-9]+)*\.ipynb$")
BADGE_MARK = "<!-- badges -->"

BOOTSTRAP_SOURCE = f'''# Setup 1/2 - on Colab or Kaggle, install the course helpers (TensorFlow, Keras and JAX are already there).
import importlib.metadata, importlib.util, os, subprocess, sys
try:                                                  # installed? asked by the distribution's name
    importlib.metadata.version("{links.HELPERS_DIST}")
except importlib.metadata.PackageNotFoundError:       # one reviewed commit, nothing else resolved or upgraded
    source = os.environ.get("{links.HELPERS_SOURCE_ENV}", "{links.HELPERS_SOURCE}")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", source], check=True)
importlib.invalidate_caches()
found = importlib.util.find_spec("helpers").origin    # a helpers.py of your own would hide the course's package
if not found.endswith(os.path.join("helpers", "__init__.py")):
    raise ImportError(f"{{found}} hides the course's helpers package: rename it, then restart the kernel")'''

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


def header_markdown(path: str, title: str, learn: str, kaggle: Optional[str] = None) -> str:
    """Title, badges and the 'what you will learn' paragraph."""
    return f"# {title}\n\n{badge_block(path, kaggle)}\n\n**What you will learn.** {learn}"


def kaggle_uses(nb: dict) -> Optional[str]:
    """What the lesson uses on Kaggle's T4 x2: its registry entry's ``kaggle`` (tools/registry.py)."""
    entry = nb.get("metadata", {}).get("course")
    return entry.get("kaggle") if isinstance(entry, dict) else None


def badge_block(path: str, kaggle: Optional[str] = None) -> str:
    """The marker, the badge line and the Kaggle GPU line, as they stand in a notebook's first cell."""
    return f"{BADGE_MARK}\n{links.badges_markdown(path)}  \n{links.kaggle_line(path, kaggle)}"


def new_notebook(path: str, title: str, learn: str = "TODO", devices: int = 2) -> dict:
    """A notebook dict that follows the template (header, setup, summary, exercises, a registry entry to fill)."""
    check_name(path)
    course = {"title": title, "summary": "TODO", "kaggle": "TODO", "words": 2600, "dominates": "TODO",
              "workshop": [{"session": "optional", "minutes": 30, "part": "", "notes": "TODO"}],
              "taught": ["TODO"], "stacks": ["pinned", "hosted", "kaggle", "latest"], "jax": False, "slurm": []}
    cells = [
        _md(header_markdown(path, title, learn, course["kaggle"])),
        _md("## Setup\n\nRun these two cells first. They install nothing outside Colab."),
        _code(BOOTSTRAP_SOURCE),
        _code(setup_source(devices)),
        _md("## Summary\n\n- TODO"),
        _md("## Exercise 1\n\nTODO"),
        _md("## Exercise 2\n\nTODO"),  # nblint's rule: two or three, each checked by helpers.exercises.check
    ]
    return {"cells": cells, "metadata": {
        "course": course,
        "kernelspec": dict(KERNELSPEC),
        "language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}


# ---- the one file format (nbformat's writer, in the standard library) ------------------------------------

#: Output mimetypes nbformat splits into lines besides ``text/*``.
_SPLIT_MIMES = {"application/javascript", "image/svg+xml"}


def _is_json_mime(mime: str) -> bool:
    return mime == "application/json" or (mime.startswith("application/") and mime.endswith("+json"))


def _lines(bundle: dict) -> None:
    """Rejoin, then split into lines, the text fields of a mimebundle, as nbformat's reader and writer do."""
    for key, value in list(bundle.items()):
        if isinstance(value, list) and not _is_json_mime(key) and all(isinstance(v, str) for v in value):
            value = bundle[key] = "".join(value)
        if isinstance(value, str) and (key.startswith("text/") or key in _SPLIT_MIMES):
            bundle[key] = value.splitlines(True)


def canonical_text(nb: dict) -> str:
    """``nb`` as ``nbformat.write`` stores it: multi-line strings as lists of lines, transient keys dropped,
    sorted keys, indent 1, UTF-8 characters as they are, one final newline."""
    nb = copy.deepcopy(nb)
    for key in ("orig_nbformat", "orig_nbformat_minor", "signature"):
        nb.get("metadata", {}).pop(key, None)
    for cell in nb.get("cells", []):
        cell.get("metadata", {}).pop("trusted", None)
        source = cell.get("source")
        if isinstance(source, list):
            source = "".join(source)
        if isinstance(source, str):
            cell["source"] = source.splitlines(True)
        for attachment in cell.get("attachments", {}).values():
            _lines(attachment)
        for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            if out.get("output_type") in ("execute_result", "display_data"):
                _lines(out.get("data", {}))
            elif out.get("output_type") and isinstance(out.get("text"), (str, list)):
                text = out["text"] if isinstance(out["text"], str) else "".join(out["text"])
                out["text"] = text.splitlines(True)
    text = json.dumps(nb, sort_keys=True, indent=1, separators=(",", ": "), ensure_ascii=False)
    return text if text.endswith("\n") else text + "\n"


def format_problems(text: str) -> list[str]:
    """One problem when a notebook file is not in the one format (``make sync-notebooks`` rewrites it)."""
    try:
        want = canonical_text(json.loads(text))
    except ValueError as err:
        return [f"not JSON: {err}"]
    if text == want:
        return []
    have, good = text.splitlines(), want.splitlines()
    line = next((i for i, (a, b) in enumerate(zip(have, good)) if a != b), min(len(have), len(good))) + 1
    return [f"not in the one notebook format (nbformat's writer), from line {line}: run `make sync-notebooks`"]


def write(path: Path, nb: dict) -> bool:
    """Write ``nb`` to ``path`` in the one format; True if the file changed."""
    text = canonical_text(nb)
    path = Path(path)
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    path.write_text(text, encoding="utf-8")
    return True


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
        out.append(f"kernelspec must be {KERNELSPEC} (what `make lab` installs; run: make sync-notebooks)")
    for i, c in enumerate(cells):
        if c.get("cell_type") == "code" and (c.get("outputs") or c.get("execution_count")):
            out.append(f"cell {i} has stored outputs/execution count (strip them)")
    if len(cells) < 4:
        return out + ["fewer than 4 cells: header, Setup, bootstrap and setup cells are required"]
    head = _src(cells[0])
    if not head.startswith("# ") or head.count("\n# ") > 0:
        out.append("first cell must start with one '# Title'")
    if badge_block(path, kaggle_uses(nb)) not in head:
        out.append("badges (Colab, Kaggle, Binder + the Kaggle GPU line of its registry entry) missing or not "
                   "pointing at this notebook's own path (run: make sync-notebooks)")
    if "**What you will learn.**" not in head:
        out.append("first cell needs the '**What you will learn.**' paragraph")
    if not _src(cells[1]).startswith("## Setup"):
        out.append("second cell must be the '## Setup' heading")
    if _src(cells[2]) != BOOTSTRAP_SOURCE:
        out.append("third cell must be the template's bootstrap cell (run: make sync-notebooks)")
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
    """Re-render badges and the Kaggle line (from the registry entry), the bootstrap cell and the kernelspec of
    ``nb`` in place; True if anything changed."""
    cells = nb["cells"]
    meta = nb.setdefault("metadata", {})
    spec_changed = meta.get("kernelspec") != KERNELSPEC
    meta["kernelspec"] = dict(KERNELSPEC)
    head = _src(cells[0])
    block = badge_block(path, kaggle_uses(nb)).replace("\\", "\\\\")
    new_head = re.sub(re.escape(BADGE_MARK) + r"\n[^\n]*(?:\n[^\n]+)*", block, head, count=1)
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
        write(root / rel, new_notebook(rel, argv[2]))
        print("created", rel, "- fill in its registry entry (metadata.course, tools/registry.py)")
        return 0
    if argv[:1] in (["sync"], ["check"]):
        bad = 0
        for p in sorted((root / "notebooks").glob("*.ipynb")):
            rel = str(p.relative_to(root))
            nb = json.loads(p.read_text(encoding="utf-8"))
            if argv[0] == "sync":
                sync(nb, rel)
                if write(p, nb):
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
