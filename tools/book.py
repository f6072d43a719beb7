"""The course as a website (`make book`): the Sphinx source tree, written from the executed lessons.

Why: the notebooks are stored without outputs, so a learner reading them on the code host sees no output at all.
The site renders the outputs of a run that already happened: the nbval run of `make notebooks` / `make test`
(pinned stack, quick mode) leaves an executed copy of each lesson that passed in _build/book/executed/ (the course's
pytest plugin, tools/pytest_course.py); `make book` runs only the lessons whose copy is missing or older than the
notebook or the helpers. This module writes a Sphinx source tree from those copies and the course's pages, and
Sphinx (myst-nb, sphinx-book-theme: pure Python, no template fetched from the web at build time) renders it with
execution off, so the site's environment (.venv-book) needs no TensorFlow.

What ``prepare`` writes into the source tree (it mirrors the repository's layout, so relative links resolve):
- ``index.md``: README.md, with the table of contents appended (lessons in file-name order, each titled by its
  registry entry, tools/registry.py);
- ``quickstart/train_2gpus.md``: README's "2 GPUs in 5 minutes" section (the script's bytes; tests/test_quickstart.py);
- ``TROUBLESHOOTING.md`` (the error index) and ``docs/workshop.md`` (the instructor's guide);
- ``notebooks/NN_*.ipynb``: every executed lesson, with a "Ran on" label under its title, read from its own Setup
  output (stack line, replicas line or lesson 12's job line, mode), so no CPU figure is taken for a GPU one.
Links to repository files that are not pages (a helper module, a folder) become links to the code host
(tools/links.py holds the URL); links between pages stay relative.

Usage (the Makefile calls it): python tools/book.py prepare --executed DIR --out SRC notebooks/NN_x.ipynb ...
Standard library only: it runs in .venv-book and in the unit tests.
"""

from __future__ import annotations

import argparse
import json
import posixpath
import re
import shutil
import sys
from pathlib import Path

import links  # tools/links.py: the repository's address

ROOT = Path(__file__).resolve().parent.parent
LESSON_NAME = re.compile(r"^\d\d_[a-z0-9_]+\.ipynb$")
QUICKSTART = "quickstart/train_2gpus.py"
QUICKSTART_HEADING = "## 2 GPUs in 5 minutes"
#: Repository file -> its page in the source tree (lessons are added by :func:`page_map`).
PAGES = {
    "README.md": "index.md",
    QUICKSTART: "quickstart/train_2gpus.md",
    "TROUBLESHOOTING.md": "TROUBLESHOOTING.md",
    "docs/workshop.md": "docs/workshop.md",
}
#: The class of the "Ran on" box on every lesson page (the browser test looks for it).
RAN_ON_CLASS = "ran-on"
#: Native start-up noise on stderr (the root conftest's NOISE, NOISE_WITHOUT_DRIVER and helpers.quiet's CUDA
#: lines; tests/test_book.py keeps them covered). A lesson that quotes such a line prints it on stdout.
NOISE = (r"absl::InitializeLog", r"cudart_stub\.cc", r"Could not find cuda drivers", r"failed call to cuInit",
         r"Unable to register cu(DNN|FFT|BLAS) factory", r"TF-TRT Warning", r"computation placer already registered")


def lessons(paths: list[str] | None = None, root: Path = ROOT) -> list[str]:
    """The lessons, ``notebooks/NN_name.ipynb``, in file-name order: every one on disk, or those in ``paths``."""
    if paths is None:
        paths = [f"notebooks/{p.name}" for p in (root / "notebooks").glob("*.ipynb")]
    out = []
    for p in paths:
        path = posixpath.normpath(str(p).replace("\\", "/"))
        name = posixpath.basename(path)
        if posixpath.dirname(path) != "notebooks" or not LESSON_NAME.match(name):
            raise ValueError(f"not a lesson: {p!r} (expected notebooks/NN_snake_case.ipynb)")
        out.append(path)
    if len(set(out)) != len(out):
        raise ValueError(f"a lesson is listed twice: {paths}")
    return sorted(out, key=posixpath.basename)


def page_map(lesson_paths: list[str]) -> dict[str, str]:
    """Repository path -> source-tree path of every page of the site."""
    return {**PAGES, **{p: p for p in lesson_paths}}


def _split_target(target: str) -> tuple[str, str]:
    path, _, frag = target.partition("#")
    return path, ("#" + frag if frag else "")


def rewrite_link(target: str, source: str, pages: dict[str, str], repo_url: str, branch: str,
                 root: Path = ROOT, page: str | None = None) -> str:
    """Where a markdown link written in the repository file ``source`` points on the site page ``page``.

    ``page`` (default: ``source``'s page) is where the text lands: README's quick-start section lands on the quick
    start's page. A link to another page becomes a relative link to that page; a link to any other repository file
    (or from the quick start's page to its script) becomes a link to the code host; web links, in-page anchors and
    links out of the repository are kept.
    """
    page = pages[source] if page is None else page
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith(("#", "/")) or not target:
        return target
    path, frag = _split_target(target)
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(source), path))
    if resolved.startswith("../") or resolved == "..":
        return target
    if resolved in pages and not (resolved == QUICKSTART and pages[resolved] == page):   # the script: download it
        return posixpath.relpath(pages[resolved], posixpath.dirname(page) or ".") + frag
    kind = "tree" if (root / resolved).is_dir() else "blob"
    return f"{repo_url}/{kind}/{branch}/{resolved}{frag}"


_FENCE = re.compile(r"^(```|~~~)")
_INLINE_LINK = re.compile(r"(\]\()([^)\s]+)(\))")
_REF_LINK = re.compile(r"^(\s*\[[^\]]+\]:\s*)(\S+)(.*)$")
_INLINE_CODE = re.compile(r"`[^`\n]*`")


def rewrite_markdown(text: str, source: str, pages: dict[str, str], repo_url: str, branch: str,
                     root: Path = ROOT, page: str | None = None) -> str:
    """``text`` with every link outside code rewritten by :func:`rewrite_link`."""

    def fix(m: re.Match) -> str:
        return m.group(1) + rewrite_link(m.group(2), source, pages, repo_url, branch, root, page) + m.group(3)

    out, fenced = [], False
    for line in text.splitlines(keepends=True):
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            out.append(line)
            continue
        if fenced:
            out.append(line)
            continue
        pieces = re.split(r"(`[^`\n]*`)", line)   # never touch inline code
        line = "".join(p if _INLINE_CODE.fullmatch(p) else _INLINE_LINK.sub(fix, p) for p in pieces)
        out.append(_REF_LINK.sub(fix, line) if _REF_LINK.match(line) else line)
    return "".join(out)


def markdown_section(text: str, heading: str) -> str:
    """The section of ``text`` that starts at the line ``heading``, up to the next heading of its level or above."""
    level = len(heading) - len(heading.lstrip("#"))
    lines = text.splitlines(keepends=True)
    try:
        start = [ln.rstrip("\n") for ln in lines].index(heading)
    except ValueError:
        raise ValueError(f"no line {heading!r} in the text") from None
    out, fenced = [lines[start]], False
    for line in lines[start + 1:]:
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
        m = re.match(r"^(#+) ", line)
        if m and not fenced and len(m.group(1)) <= level:
            break
        out.append(line)
    return "".join(out)


def _text(output: dict) -> str:
    text = output.get("text", "")
    return "".join(text) if isinstance(text, list) else text


def ran_on(nb: dict) -> dict[str, str]:
    """What a lesson ran on, read from its Setup output: ``stack``, ``replicas``, ``backend``, ``mode``.

    Raises ValueError when the executed copy has no stack line or no replicas line (every Setup prints both;
    lesson 12 prints its job line for the replicas).
    """
    found: dict[str, str] = {}
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            if out.get("output_type") != "stream" or out.get("name") != "stdout":
                continue
            for line in _text(out).splitlines():
                if line.startswith("stack: ") and "stack" not in found:
                    found["stack"] = line[len("stack: "):].split(" (inside")[0].strip()
                elif line.startswith(("replicas: ", "a job here: ")) and "replicas" not in found:
                    found["replicas"] = line.partition(": ")[2].strip()     # PyTorch's lesson: its processes
                elif "Keras backend: " in line and "backend" not in found:
                    m = re.search(r"Keras backend: (\w+) \| mode: (\w+)", line)
                    if m:
                        found["backend"], found["mode"] = m.group(1), m.group(2)
                    torch = re.match(r"PyTorch (\S+) \| ", line)
                    if torch:
                        found["torch"] = torch.group(1)
        if {"stack", "replicas", "backend"} <= set(found):
            break
    missing = [k for k in ("stack", "replicas") if k not in found]
    if missing:
        raise ValueError(f"the executed lesson prints no {' and no '.join(missing)} line in its Setup output "
                         "(helpers.setup_notebook prints both): was it executed?")
    return found


_NAMES = {"python": "Python", "tensorflow": "TensorFlow", "keras": "Keras", "jax": "JAX", "numpy": "NumPy"}
#: How helpers.devices names the replica kinds (its KIND_* constants), as a label says it.
_KINDS = {"CPU split into logical CPUs": "logical CPUs", "GPU 0 split into logical GPUs": "logical GPUs on one GPU",
          "GPUs": "GPUs"}


def devices_phrase(replicas: str) -> str:
    """What the replicas line says, short: ``"2 (CPU split into logical CPUs) -> [...]"`` -> ``"2 logical CPUs"``;
    ``"4 JAX devices -> ['CpuDevice(id=0)', ...]"`` -> ``"4 JAX CPU devices"``; lesson 12's job line
    ``"2 processes, one per GPU, nccl between them -> [...]"`` -> ``"2 GPU processes (nccl)"``."""
    head, _, names = replicas.partition(" -> ")
    m = re.match(r"^(\d+) processes, (on the CPU|one per GPU)\b.*?\b(gloo|nccl) between them$", head.strip())
    if m:                                             # lesson 12's torchrun job (helpers.torch_backend.setup)
        return f"{m.group(1)} {'CPU' if 'CPU' in m.group(2) else 'GPU'} processes ({m.group(3)})"
    m = re.match(r"^(\d+) \((.+)\)$", head.strip())
    if m:
        return f"{m.group(1)} {_KINDS.get(m.group(2), m.group(2))}"
    m = re.match(r"^(\d+) JAX devices$", head.strip())
    if m:
        lowered = names.lower()
        kind = "GPU" if ("cuda" in lowered or "gpu" in lowered) else "CPU" if "cpu" in lowered else ""
        return f"{m.group(1)} JAX {kind} devices".replace("  ", " ")
    return head.strip()


def ran_on_markdown(info: dict[str, str]) -> str:
    """The "Ran on" box of a lesson page (a MyST admonition): "Ran on 2 logical CPUs, TensorFlow 2.21.0, ..."."""
    stack = {}
    for item in info["stack"].split(" | "):
        name, _, version = item.partition(" ")
        stack[name] = f"{_NAMES.get(name, name)} {version}"
    if "torch" in info:
        stack["torch"] = f"PyTorch {info['torch']}"
    backend = info.get("backend", "tensorflow")
    short = [stack[k] for k in (backend, "keras") if k in stack]
    return (f"```{{admonition}} Ran on {', '.join([devices_phrase(info['replicas'])] + short)}\n"
            f":class: {RAN_ON_CLASS}\n\n"
            f"The outputs below are one run of this notebook: {', '.join(stack.values())}; Keras backend {backend}, "
            f"`MULTIGPU_MODE={info.get('mode', '?')}`. Timings and figures come from these devices; launch the "
            "notebook (badges above) to see yours.\n```\n")


def label_lesson(nb: dict) -> dict:
    """A copy of an executed lesson with its "Ran on" box as a markdown cell right after the title cell."""
    info = ran_on(nb)
    out = json.loads(json.dumps(nb))
    box = {"cell_type": "markdown", "id": "book-ran-on", "metadata": {}, "source": ran_on_markdown(info)}
    out["cells"].insert(1, box)
    return out


def toc_markdown(lesson_paths: list[str], titles: dict[str, str]) -> str:
    """The site's table of contents (hidden toctrees: the theme's sidebar), lessons in file-name order."""
    def tree(caption: str, docs: list[str]) -> str:
        return "```{toctree}\n:hidden:\n:caption: " + caption + "\n\n" + "".join(
            f"{titles.get(d, '')} <{d}>\n" if titles.get(d) else f"{d}\n" for d in docs) + "```\n"

    lessons_docs = [p[: -len(".ipynb")] for p in lesson_paths]
    return ("\n\n" + tree("Start", ["quickstart/train_2gpus"]) + "\n" + tree("Lessons", lessons_docs) + "\n"
            + tree("Reference", ["TROUBLESHOOTING", "docs/workshop"]))


def lesson_title(nb: dict, path: str) -> str:
    """``"00 Start here"``: the number and the title of the lesson's registry entry (tools/registry.py), or of its
    first heading where it has none."""
    entry = nb.get("metadata", {}).get("course")
    if isinstance(entry, dict) and isinstance(entry.get("title"), str) and entry["title"].strip():
        return f"{posixpath.basename(path)[:2]} {entry['title'].strip().replace('`', '')}"
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            m = re.search(r"^# (.+)$", src, re.M)
            if m:
                return f"{posixpath.basename(path)[:2]} {m.group(1).strip().replace('`', '')}"   # a toc title is plain text
    return posixpath.basename(path)[:2]


def _rewrite_notebook(nb: dict, source: str, pages: dict[str, str], repo_url: str, branch: str) -> dict:
    for cell in nb["cells"]:
        if cell.get("cell_type") == "markdown":
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            cell["source"] = rewrite_markdown(src, source, pages, repo_url, branch)
    return nb


#: The file ``prepare`` writes into every source tree it makes: it empties only a folder that holds this file.
MARK = ".made-by-book-prepare"


def check_out(out: Path) -> None:
    """Refuse ``out`` unless :func:`prepare` may empty it: missing, an empty folder, or a folder holding :data:`MARK`
    (one ``prepare`` made). Why: the source tree is emptied first, and ``--out`` is a path anyone can mistype."""
    if out.is_symlink():
        raise ValueError(f"--out {out} is a symbolic link: give the folder itself")
    if not out.exists():
        return
    if not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a folder: not touching it")
    if any(out.iterdir()) and not (out / MARK).is_file():
        raise ValueError(f"--out {out} holds files, and book.py prepare did not make it (no {MARK} in it): it "
                         "empties the folder first, so it refuses a folder of yours. Remove it yourself if it is an "
                         "old source tree, or give another --out")


def prepare(executed: Path, out: Path, lesson_paths: list[str], root: Path = ROOT) -> list[str]:
    """Write the Sphinx source tree into ``out`` (emptied first: only a folder that ``prepare`` made, see
    :func:`check_out`); return the pages written. Every input is read and checked before anything is deleted."""
    repo_url, branch = links.REPO_URL, links.BRANCH
    lesson_paths = lessons(lesson_paths, root)
    if not lesson_paths:
        raise ValueError("no lessons to build")
    pages = page_map(lesson_paths)
    check_out(out)
    texts: dict[str, str] = {}            # page -> its text: all of it made before out is touched
    titles = {}
    for path in lesson_paths:
        copy = executed / posixpath.basename(path)
        if not copy.exists():
            raise FileNotFoundError(f"{copy} is missing: execute {path} first (make book does)")
        nb = json.loads(copy.read_text())
        try:
            nb = label_lesson(nb)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
        titles[path[: -len(".ipynb")]] = lesson_title(nb, path)
        texts[path] = json.dumps(_rewrite_notebook(nb, path, pages, repo_url, branch), indent=1) + "\n"
    readme = (root / "README.md").read_text()
    texts["index.md"] = (rewrite_markdown(readme, "README.md", pages, repo_url, branch, root)
                         + toc_markdown(lesson_paths, titles))
    quick = markdown_section(readme, QUICKSTART_HEADING).replace(QUICKSTART_HEADING, "# 2 GPUs in 5 minutes", 1)
    texts[pages[QUICKSTART]] = rewrite_markdown(quick, "README.md", pages, repo_url, branch, root, pages[QUICKSTART])
    for rel in ("TROUBLESHOOTING.md", "docs/workshop.md"):
        texts[pages[rel]] = rewrite_markdown((root / rel).read_text(), rel, pages, repo_url, branch, root)
    check_out(out)                        # still so after the reading
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / MARK).write_text("written by tools/book.py prepare, which empties this folder on its next run\n")
    for rel, text in texts.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    return list(texts)


def noise_lines(text: str) -> list[str]:
    """The lines of ``text`` (a cell's stderr output) that are native start-up noise."""
    return [ln.strip() for ln in text.splitlines() if any(re.search(p, ln) for p in NOISE)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="write the Sphinx source tree from executed lessons")
    p.add_argument("--executed", type=Path, required=True, help="folder of the executed lessons")
    p.add_argument("--out", type=Path, required=True,
                   help=f"the source tree to write (emptied first: only a folder it made, with {MARK} in it)")
    p.add_argument("notebooks", nargs="*", help="lessons to include (default: every notebooks/NN_*.ipynb)")
    args = parser.parse_args(argv)
    try:
        written = prepare(args.executed, args.out, args.notebooks or None)
    except (ValueError, FileNotFoundError) as e:
        print(f"book: {e}", file=sys.stderr)
        return 1
    print(f"book: {len(written)} pages written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
