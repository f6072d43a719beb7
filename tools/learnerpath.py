"""How much of a lesson reads as the learner's own code: the course's one rule for the learner's path.

Rule:
- the cells counted are the code cells after the two Setup cells;
- a cell is *collapsed* when its metadata has ``jupyter.source_hidden`` and its tags ``hide-input`` (JupyterLab
  folds it, the website folds it; it still runs and its output stays visible);
- a cell is *optional* when it stands under a ``## How we know`` heading (the proofs at the end of a lesson);
- every other cell is *visible*. A visible cell *drives course machinery* when it uses a name that comes from the
  course's ``helpers`` package, other than the interfaces meant for learners: ``expect_error``, the exercises,
  ``scratch_dir``, ``config.pick``, plots and tables. Names reach a cell through ``import helpers`` (then
  ``helpers.x``) or ``from helpers[.m] import x``, in any earlier cell;
- a visible cell is *plumbing* (its own column, no budget) when it launches a process, parses output, or only
  checks. It *launches* when it calls ``subprocess``, ``os.system``/``os.popen``, ``multiprocessing``/``torch``'s
  process starters or a course launcher (``cluster.run``, ``cluster.LocalCluster``, ``subproc.run*``), or has a
  ``!`` shell line; it *parses* when it calls a ``re`` function or ``.splitlines()`` (picking lines out of a log, a
  child's output or XLA's program text) or reads a file's text back (``.read_text()``, ``json.load``/``loads``);
  it *only checks* when every statement is an ``assert``, an ``assert*`` call (``np.testing.assert_allclose``) or
  a ``for``/``if``/``with`` holding only those: it shows the learner nothing and computes nothing new;
- visible code lines are the non-blank lines of visible cells: at most 1,800 over lessons 00-11 and 200 in any
  one lesson.

Usage: python tools/learnerpath.py [--json] [--cells] [NOTEBOOK ...]   (a table per lesson and the totals; --cells
names each machinery and plumbing cell)
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"

#: The budgets of the learner's path: machinery share over all lessons, in any one lesson, the visible code lines
#: of lessons 00-11 together and of any one lesson, and the collapsed share of a lesson's code cells.
COURSE_MACHINERY = 0.35
LESSON_MACHINERY = 0.50
VISIBLE_LINES = 1_850   # 1,800, then +50 for lesson 11's layout map written by hand (Gemma 3), as its +400 words
CORE_LAST = "11"
LESSON_VISIBLE_LINES = 200
COLLAPSED_SHARE = 0.30

#: The course interfaces a learner is meant to use: helpers.X, or helpers.X.Y for a dotted entry.
LEARNER_INTERFACES = ("expect_error", "errors.expect_error", "exercises", "scratch_dir", "notebook.scratch_dir",
                      "config.pick", "plotting", "tables")
OPTIONAL_HEADING = "## How we know"
_MAGIC = re.compile(r"^\s*[%!].*$", re.M)
_SHELL = re.compile(r"^\s*!", re.M)
#: What launches a process: a call whose dotted name ends with one of these (``subprocess.run``, ``sp.Popen``,
#: ``helpers.cluster.run``, ``cluster.LocalCluster``, ``mp.spawn``...), checked against the module it comes from.
LAUNCHERS = {"subprocess": ("run", "Popen", "call", "check_call", "check_output", "getoutput", "getstatusoutput"),
             "os": ("system", "popen", "execv", "execvp", "spawnv", "spawnl"),
             "multiprocessing": ("Process", "Pool", "get_context"),
             "torch.multiprocessing": ("spawn", "start_processes", "Process"),
             "cluster": ("run", "LocalCluster"),
             "subproc": ("run", "run_python", "Popen", "popen")}
_RE_FUNCTIONS = ("search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split", "compile")
_READERS = ("splitlines", "read_text", "read_bytes")


def _src(cell: dict) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def is_collapsed(cell: dict) -> bool:
    """True when JupyterLab and the website both fold the cell's source."""
    meta = cell.get("metadata", {})
    return bool(meta.get("jupyter", {}).get("source_hidden")) and "hide-input" in meta.get("tags", [])


def _python(source: str) -> ast.Module | None:
    """The cell as Python (line magics blanked); None for a cell magic (%%writefile: a script, not a helper call)
    or a cell that does not parse."""
    if source.lstrip().startswith("%%"):
        return None
    try:
        return ast.parse(_MAGIC.sub("", source))
    except SyntaxError:
        return None


def _dotted(node: ast.AST) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"]; None for anything that is not a plain name chain."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id] + parts[::-1]


def _allowed(path: list[str]) -> bool:
    """``path`` is what follows ``helpers.``: allowed when it starts with a learner interface."""
    joined = ".".join(path)
    return any(joined == i or joined.startswith(i + ".") for i in LEARNER_INTERFACES)


def _bound(node: ast.AST) -> list[str]:
    """Names a statement binds: assignment and loop targets, ``with ... as``, functions and classes."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    targets = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
        targets = [node.target]
    elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
        targets = [node.target]
    elif isinstance(node, ast.withitem) and node.optional_vars is not None:
        targets = [node.optional_vars]
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def _source_of(node: ast.AST) -> list[ast.AST]:
    """The parts of a binding statement its names take their value from."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.body + getattr(node, "decorator_list", [])
    if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
        return [node.iter]
    if isinstance(node, ast.withitem):
        return [node.context_expr]
    value = getattr(node, "value", None)
    return [value] if value is not None else []


def machinery_uses(tree: ast.Module, names: dict[str, list[str]], tainted: set[str]) -> list[str]:
    """Every helpers path (or name made from one) the cell uses that is not a learner interface.

    ``names`` maps a local name to the helpers path it stands for (``{"helpers": [], "bench": ["bench"]}``);
    ``tainted`` holds the names earlier cells bound from course machinery (``REPLICAS = helpers.setup_notebook()``,
    a function whose body calls a helper). The cell's own imports and bindings are added to both."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "helpers" or a.name.startswith("helpers."):
                    names[(a.asname or a.name).split(".")[0]] = [] if not a.asname else a.name.split(".")[1:]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and (
                node.module == "helpers" or node.module.startswith("helpers.")):
            base = node.module.split(".")[1:]
            for a in node.names:
                names[a.asname or a.name] = base + [a.name]

    def uses(parts: list[ast.AST]) -> list[str]:
        found, seen = [], set()
        for part in parts:
            for node in ast.walk(part):
                if isinstance(node, (ast.Import, ast.ImportFrom)) or id(node) in seen:
                    continue
                chain = _dotted(node) if isinstance(node, (ast.Attribute, ast.Name)) else None
                if not chain:
                    continue
                inner = node                          # the longest chain only: a.b.c, not also a.b and a
                while isinstance(inner, ast.Attribute):
                    inner = inner.value
                    seen.add(id(inner))
                if chain[0] in names:
                    path = names[chain[0]] + chain[1:]
                    if not path or not _allowed(path):
                        found.append("helpers." + ".".join(path) if path else "helpers")
                elif chain[0] in tainted and isinstance(node.ctx if hasattr(node, "ctx") else None, ast.Load):
                    found.append(chain[0])
        return found

    for node in ast.walk(tree):                       # bindings, in source order: x = helper() taints x
        bound = _bound(node)
        if bound and uses(_source_of(node)):
            tainted.update(b for b in bound if b not in names)
    return sorted(set(uses([tree])))


def _assertion(node: ast.AST) -> bool:
    """An ``assert`` statement, or a call statement of an ``assert*`` function (``np.testing.assert_allclose``)."""
    if isinstance(node, ast.Assert):
        return True
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        chain = _dotted(node.value.func)
        return bool(chain) and chain[-1].startswith("assert")
    return False


def _checks_only(body: list[ast.stmt]) -> tuple[bool, int]:
    """(every statement is a check or a block of checks; how many checks)."""
    checks = 0
    for node in body:
        if _assertion(node):
            checks += 1
        elif isinstance(node, (ast.For, ast.If, ast.With)):
            ok, n = _checks_only(node.body + getattr(node, "orelse", []))
            if not ok:
                return False, checks
            checks += n
        else:
            return False, checks
    return True, checks


def plumbing(source: str, tree: ast.Module | None) -> list[str]:
    """Why a cell is plumbing: any of ``"launches"``, ``"parses"``, ``"only checks"`` (the rule above); [] if not.
    A shell cell magic (``%%bash``) launches; a ``%%writefile`` script is none of them."""
    if tree is None:
        first = source.split(None, 1)[0] if source.strip() else ""
        return ["launches"] if first in ("%%bash", "%%sh", "%%script", "%%system") else []
    aliases = {}                                      # a name the cell imports -> its full dotted name
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            aliases.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
        elif isinstance(node, ast.Import):
            aliases.update({a.asname: a.name for a in node.names if a.asname})
    calls = []                                        # every call's dotted name, imports resolved
    for node in ast.walk(tree):
        chain = _dotted(node.func) if isinstance(node, ast.Call) else None
        if chain:
            calls.append(aliases.get(chain[0], chain[0]).split(".") + chain[1:])
    why = []
    if _SHELL.search(source) or any(
            len(c) > 1 and c[-1] in names and (".".join(c[:-1]) == module or ".".join(c[:-1]).endswith("." + module))
            for c in calls for module, names in LAUNCHERS.items()):
        why.append("launches")
    if any(c[:1] == ["re"] and c[-1] in _RE_FUNCTIONS or c[-1] in _READERS or c in (["json", "load"], ["json", "loads"])
           for c in calls):
        why.append("parses")
    ok, checks = _checks_only(tree.body)
    if ok and checks:
        why.append("only checks")
    return why


def lesson_figures(path: Path) -> dict:
    """One lesson's counts by the rule above."""
    cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    names: dict[str, list[str]] = {}
    tainted: set[str] = set()
    code_seen, optional = 0, False
    fig = {"cells": 0, "collapsed": 0, "optional": 0, "visible": 0, "machinery": 0, "plumbing": 0,
           "visible_lines": 0, "machinery_cells": [], "plumbing_cells": []}
    for index, cell in enumerate(cells):
        source = _src(cell)
        if cell["cell_type"] == "markdown":
            headings = [line.strip() for line in source.splitlines() if line.startswith("## ")]
            if headings:                              # a section runs to the next "## " heading
                optional = headings[-1] == OPTIONAL_HEADING
            continue
        if cell["cell_type"] != "code":
            continue
        code_seen += 1
        tree = _python(source)
        uses = machinery_uses(tree, names, tainted) if tree is not None else []
        if code_seen <= 2:                            # Setup 1/2 and 2/2
            continue
        fig["cells"] += 1
        if is_collapsed(cell):
            fig["collapsed"] += 1
        elif optional:
            fig["optional"] += 1
        else:
            fig["visible"] += 1
            fig["visible_lines"] += sum(1 for line in source.splitlines() if line.strip())
            if uses:
                fig["machinery"] += 1
                fig["machinery_cells"].append((index, uses))
            why = plumbing(source, tree)
            if why:
                fig["plumbing"] += 1
                fig["plumbing_cells"].append((index, why))
    return fig


def report(paths: list[Path]) -> dict:
    """Per-lesson figures, the totals, and every budget broken."""
    per = {Path(p).name[:2]: lesson_figures(p) for p in paths}
    total = {k: sum(f[k] for f in per.values())
             for k in ("cells", "collapsed", "optional", "visible", "machinery", "plumbing", "visible_lines")}
    over = []
    for number, f in per.items():
        if f["visible"] and f["machinery"] / f["visible"] > LESSON_MACHINERY:
            over.append(f"{number}: {f['machinery']} of {f['visible']} visible code cells drive course machinery "
                        f"(budget {LESSON_MACHINERY:.0%})")
        if f["visible_lines"] > LESSON_VISIBLE_LINES:
            over.append(f"{number}: {f['visible_lines']} visible code lines (budget {LESSON_VISIBLE_LINES})")
        if f["cells"] and f["collapsed"] / f["cells"] > COLLAPSED_SHARE:
            over.append(f"{number}: {f['collapsed']} of {f['cells']} code cells collapsed "
                        f"(budget {COLLAPSED_SHARE:.0%})")
    if total["visible"] and total["machinery"] / total["visible"] > COURSE_MACHINERY:
        over.append(f"course: {total['machinery']} of {total['visible']} visible code cells drive course machinery "
                    f"(budget {COURSE_MACHINERY:.0%})")
    core = sum(f["visible_lines"] for number, f in per.items() if number <= CORE_LAST)
    if core > VISIBLE_LINES:
        over.append(f"lessons 00-{CORE_LAST}: {core:,d} visible code lines (budget {VISIBLE_LINES:,d})")
    return {"per_lesson": per, "total": total, "over_budget": over}


def _pct(a: int, b: int) -> str:
    return f"{a / b:.0%}" if b else "-"


def table(rep: dict) -> str:
    """The report as a markdown table."""
    rows = ["| lesson | code cells | collapsed | optional | visible | drive machinery | launch, parse, only check "
            "| visible lines |", "|---|---|---|---|---|---|---|---|"]
    for number, f in list(rep["per_lesson"].items()) + [("all", rep["total"])]:
        rows.append(f"| {number} | {f['cells']} | {f['collapsed']} ({_pct(f['collapsed'], f['cells'])}) | "
                    f"{f['optional']} | {f['visible']} | {f['machinery']} ({_pct(f['machinery'], f['visible'])}) | "
                    f"{f['plumbing']} ({_pct(f['plumbing'], f['visible'])}) | {f['visible_lines']:,d} |")
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    paths = [Path(a) for a in args] or sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    rep = report(paths)
    if "--json" in argv:
        print(json.dumps(rep, indent=1))
        return 0
    print(table(rep))
    if "--cells" in argv:
        for number, f in rep["per_lesson"].items():
            for index, uses in f["machinery_cells"]:
                print(f"{number} cell {index}: {', '.join(uses)}")
            for index, why in f["plumbing_cells"]:
                print(f"{number} cell {index}: {', '.join(why)}")
    for line in rep["over_budget"]:
        print("OVER:", line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
