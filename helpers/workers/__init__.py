"""Worker scripts started as separate processes by :mod:`helpers.cluster` (lesson 07).

Why a package: the scripts ship with the helpers (also on Colab, where only the
installed package exists), run as ``python -m helpers.workers.<name>``, and a
notebook can print parts of their source with :func:`show` without importing
them (importing would start TensorFlow with the wrong settings).
"""

from __future__ import annotations

import ast
from pathlib import Path

HERE = Path(__file__).resolve().parent


def path(name: str) -> Path:
    """File of worker script ``name`` (e.g. ``"mwms_train"``); ``ValueError`` if there is none."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"worker script names are module names like 'mwms_train', got {name!r}")
    p = HERE / f"{name}.py"
    if not p.is_file():
        known = sorted(q.stem for q in HERE.glob("*.py") if not q.stem.startswith("_"))
        raise ValueError(f"no worker script {name!r}; known: {', '.join(known)}")
    return p


def module(name: str) -> list[str]:
    """``["-m", "helpers.workers.<name>"]``: the command prefix for :func:`helpers.cluster.run`."""
    path(name)
    return ["-m", f"{__name__}.{name}"]


def source(name: str, *functions: str) -> str:
    """Source of the named top-level functions of script ``name`` (whole file if none are named)."""
    text = path(name).read_text()
    if not functions:
        return text
    tree = ast.parse(text)
    found = {n.name: ast.get_source_segment(text, n) for n in tree.body
             if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    missing = [f for f in functions if f not in found]
    if missing:
        raise ValueError(f"{name}.py has no top-level {', '.join(missing)}; it has {', '.join(found)}")
    return "\n\n".join(found[f] for f in functions)


def show(name: str, *functions: str) -> None:
    """Print :func:`source` - how a notebook shows what each worker process runs."""
    print(f"# --- helpers/workers/{name}.py" + (f" ({', '.join(functions)})" if functions else ""))
    print(source(name, *functions))


def read_history(out_dir) -> dict[str, list[dict]]:
    """Per task (``"worker-0"``...), the epoch rows a run of ``mwms_train`` appended to its history file."""
    import json

    out = {}
    for p in sorted(Path(out_dir).glob("history-*.jsonl")):
        rows = [json.loads(ln) for ln in p.read_text().splitlines() if ln.strip()]
        out[p.stem[len("history-"):]] = rows
    return out


def read_results(out_dir) -> dict[str, dict]:
    """Per task, the ``result-<task>.json`` a *finished* run of ``mwms_train`` wrote (none if killed)."""
    import json

    return {p.stem[len("result-"):]: json.loads(p.read_text()) for p in sorted(Path(out_dir).glob("result-*.json"))}
