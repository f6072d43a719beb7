"""The course's one collective-key policy, checked statically in every notebook and once for real.

The policy (lesson 04, "A trap when you re-run cells"): make a multi-replica strategy once per kernel and
reuse it. A kernel has at most one multi-replica MirroredStrategy with the default (collective) all-reduce;
any other multi-replica strategy in the same kernel (a checker's, a comparison's, a throw-away one) passes
cross_device_ops=tf.distribute.ReductionToOneDevice(). A one-replica strategy has nothing to all-reduce.

Why: every MirroredStrategy numbers its collective ops from the same keys, so two default strategies that
all-reduce tensors of different shapes abort every collective op in the process (only a restart helps).
The last sentence is TensorFlow's: ``CrossDeviceOps.reduce`` and ``CrossDeviceOps.batch_reduce``
(tensorflow/python/distribute/cross_device_ops.py) return a single value on matching devices without
calling the all-reduce implementation.
"""

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
#: The policy's key sentence, as every place that cites it writes it (whitespace, "#" and backticks aside).
POLICY = ("a kernel has at most one multi-replica MirroredStrategy with the default (collective) all-reduce; "
          "any other multi-replica strategy in the same kernel (a checker's, a comparison's, a throw-away one) "
          "passes cross_device_ops=tf.distribute.ReductionToOneDevice()")
LESSON_04_PLACE = 'A trap when you re-run cells'


# -- the static rule ---------------------------------------------------------------------------------

def _name(node) -> str:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def _one_replica(devices) -> bool:
    """``[d]``, ``(d,)``, ``X[:1]`` or ``X[0:1]``: a devices argument that names exactly one device."""
    if isinstance(devices, (ast.List, ast.Tuple)):
        return len(devices.elts) == 1 and not isinstance(devices.elts[0], ast.Starred)
    if isinstance(devices, ast.Subscript) and isinstance(devices.slice, ast.Slice):
        s = devices.slice
        lower_ok = s.lower is None or (isinstance(s.lower, ast.Constant) and s.lower.value == 0)
        return lower_ok and s.step is None and isinstance(s.upper, ast.Constant) and s.upper.value == 1
    return False


def default_strategies(tree: ast.AST, where: str) -> list[str]:
    """One entry per ``MirroredStrategy(...)`` that may create a multi-replica strategy with the default all-reduce.

    Counted: every call whose ``cross_device_ops`` is not ``ReductionToOneDevice()`` and whose devices are not
    one device (no devices at all = every GPU: counted). A call inside a loop, a comprehension or a function
    body can run more than once, so it counts twice.
    """
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _name(node.func) == "MirroredStrategy"):
            continue
        kw = {k.arg: k.value for k in node.keywords}
        ops = kw.get("cross_device_ops")
        if isinstance(ops, ast.Call) and _name(ops.func) == "ReductionToOneDevice":
            continue
        devices = node.args[0] if node.args else kw.get("devices")
        if devices is not None and _one_replica(devices):
            continue
        repeated, up = False, parents.get(node)
        while up is not None:
            repeated |= isinstance(up, (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp,
                                        ast.GeneratorExp, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            up = parents.get(up)
        found += [f"{where}, line {node.lineno}"] * (2 if repeated else 1)
    return found


def _python(cell_source: str) -> str:
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(cell_source)


def _without_main(tree: ast.Module) -> ast.Module:
    """The part of a script that runs when it is imported: all but ``if __name__ == "__main__":``."""
    def is_main(stmt):
        return isinstance(stmt, ast.If) and "__main__" in ast.unparse(stmt.test) and "__name__" in ast.unparse(stmt.test)
    return ast.Module(body=[s for s in tree.body if not is_main(s)], type_ignores=[])


def written_files(nb: dict) -> dict:
    """``%%writefile [-a] PATH`` cells, joined per file as IPython writes them: {file name: source}."""
    files: dict = {}
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] == "code" and src.startswith("%%writefile"):
            first, _, body = src.partition("\n")
            name = Path(first.split()[-1]).name
            files[name] = (files.get(name, "") if "-a" in first.split() else "") + body + "\n"
    return files


def kernel_cells(nb: dict) -> list[tuple]:
    """(cell number, source) of every code cell the kernel runs (all but ``%%writefile`` cells)."""
    return [(i, "".join(c["source"])) for i, c in enumerate(nb["cells"])
            if c["cell_type"] == "code" and not "".join(c["source"]).startswith("%%writefile")]


def imported_by_kernel(nb: dict) -> list[str]:
    """Written files that the kernel itself imports (``load_script(... "NAME")`` or ``import STEM``)."""
    cells = [src for _, src in kernel_cells(nb)]
    out = []
    for name in written_files(nb):
        stem = re.escape(Path(name).stem)
        if any((name in c and "load_script" in c) or re.search(rf"^\s*(import|from)\s+{stem}\b", c, re.M)
               for c in cells):
            out.append(name)
    return out


def kernel_default_strategies(nb: dict) -> list[str]:
    """Every default multi-replica strategy the notebook's kernel may create (the policy allows one).

    Kernel cells count, and so does the importable part of every file the notebook writes and the kernel
    imports. Files only other processes run (workers, the fresh benchmark process's ``__main__``) do not.
    """
    found = []
    for i, src in kernel_cells(nb):
        if src.startswith("%%"):                   # another cell magic (%%time ...): its body, if it is Python
            src = src.partition("\n")[2]
        try:
            tree = ast.parse(_python(src))
        except SyntaxError:                         # %%bash and friends: not Python, no strategy
            continue
        found += default_strategies(tree, f"cell {i}")
    files = written_files(nb)
    for name in imported_by_kernel(nb):
        found += default_strategies(_without_main(ast.parse(files[name])), f"{name} (imported by the kernel)")
    return found


# -- the rule itself, on small fake notebooks ---------------------------------------------------------

def _nb(*sources):
    return {"cells": [{"cell_type": "code", "source": s} for s in sources]}


KERNEL = "strategy = tf.distribute.MirroredStrategy(REPLICAS)"


@pytest.mark.parametrize("sources", [
    (KERNEL,),
    (KERNEL, "one = tf.distribute.MirroredStrategy(devices=REPLICAS[:1])\nalso = tf.distribute.MirroredStrategy([d])",
     "c = tf.distribute.MirroredStrategy(REPLICAS, cross_device_ops=tf.distribute.ReductionToOneDevice())",
     "for n in (1, 2):\n    s = tf.distribute.MirroredStrategy(REPLICAS, cross_device_ops=ReductionToOneDevice())",
     "%%writefile worker.py\nimport tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()",
     "w = tf.distribute.MultiWorkerMirroredStrategy()\n!echo hello"),
    ("%%writefile {SCRATCH}/child.py\ndef f(s):\n    return s\nif __name__ == '__main__':\n"
     "    s = tf.distribute.MirroredStrategy(devices.ensure_devices(4))", "child = bench.load_script(SCRATCH / 'child.py')",
     KERNEL),
])
def test_the_rule_accepts_notebooks_that_follow_the_policy(sources):
    assert len(kernel_default_strategies(_nb(*sources))) <= 1


@pytest.mark.parametrize("sources", [
    (KERNEL, "again = tf.distribute.MirroredStrategy(devices=REPLICAS)"),          # two default strategies
    (KERNEL, "%%time\nagain = tf.distribute.MirroredStrategy(REPLICAS)"),           # hidden in a cell magic
    ("for n in (1, 2):\n    s = tf.distribute.MirroredStrategy(REPLICAS[:n])",),      # one per loop turn
    ("def make():\n    return tf.distribute.MirroredStrategy(REPLICAS)",),             # one per call
    ("s = tf.distribute.MirroredStrategy()", KERNEL),                                  # every GPU + REPLICAS
    (KERNEL, "c = tf.distribute.MirroredStrategy(REPLICAS, cross_device_ops=tf.distribute.NcclAllReduce())"),
    ("%%writefile {SCRATCH}/child.py\nimport tensorflow as tf\ndef measure(devs):\n"
     "    return tf.distribute.MirroredStrategy(devs)", "child = bench.load_script(SCRATCH / 'child.py')"),
    ("%%writefile helper_mod.py\nimport tensorflow as tf\nS = tf.distribute.MirroredStrategy(['/gpu:0', '/gpu:1'])",
     "import helper_mod", KERNEL),
])
def test_the_rule_catches_notebooks_that_break_the_policy(sources):
    assert len(kernel_default_strategies(_nb(*sources))) >= 2


# -- the real notebooks ----------------------------------------------------------------------------------

@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem[:2])
def test_every_kernel_has_at_most_one_default_multi_replica_strategy(path):
    found = kernel_default_strategies(json.loads(path.read_text(encoding="utf-8")))
    assert len(found) <= 1, f"{path.name}: {len(found)} default multi-replica strategies ({found}); " + POLICY


def test_lesson_06_benchmark_script_makes_no_strategy_when_the_kernel_imports_it():
    """The kernel imports bench_child.py (and its bench_lib.py): strategies come from the caller; only the fresh
    process makes one."""
    from helpers import bench

    nb = json.loads((ROOT / "notebooks" / "06_scaling_and_performance.ipynb").read_text(encoding="utf-8"))
    assert imported_by_kernel(nb) == ["bench_lib.py", "bench_child.py"]       # bench_child imports bench_lib
    script = written_files(nb)["bench_child.py"]
    assert script == bench.notebook_scripts()["bench_child.py"]          # what `make bench` runs
    tree = ast.parse(script)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _name(n.func) == "MirroredStrategy"]
    assert len(calls) == 1 and len(default_strategies(tree, "script")) == 1            # the fresh process's one
    assert default_strategies(_without_main(tree), "imported") == []
    assert len(kernel_default_strategies(nb)) == 1                                     # the kernel's `strategy`


def test_no_private_collective_key_base_anywhere():
    """Nothing moves TensorFlow's private MirroredStrategy._collective_key_base: the policy makes it unnecessary."""
    word = "_collective" + "_key_base"
    me = Path(__file__).resolve()
    hits = []
    for folder in ("helpers", "notebooks", "tests", "docs"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.resolve() != me and "__pycache__" not in path.parts:
                try:
                    text = path.read_text(encoding="utf-8")
                except (UnicodeDecodeError, OSError):
                    continue
                hits += [str(path.relative_to(ROOT))] if word in text else []
    hits += [p.name for p in ROOT.glob("*.md") if word in p.read_text(encoding="utf-8")]
    assert hits == []


def _plain(text: str) -> str:
    """Text without comment markers, backticks and line breaks, for comparing wording."""
    return " ".join(re.sub(r"^\s*#", " ", text, flags=re.M).replace("`", "").split())


def test_the_policy_is_explained_once_and_cited_in_the_same_words():
    lesson04 = json.loads((ROOT / "notebooks" / "04_batchnorm_variable_error.ipynb").read_text(encoding="utf-8"))
    trap = ["".join(c["source"]) for c in lesson04["cells"] if "".join(c["source"]).startswith(f"**{LESSON_04_PLACE}.**")]
    assert len(trap) == 1 and "Shape mismatch in the collective instance 100" in trap[0]
    assert "make a multi-replica strategy once per kernel and reuse it" in _plain(trap[0])
    assert "A one-replica strategy has nothing to all-reduce" in trap[0]
    citing = [ROOT / "TROUBLESHOOTING.md"] + [ROOT / "helpers" / "exercises" / f"lesson{n}.py"
                                             for n in ("01", "03", "04", "06", "09")]
    for path in citing + [ROOT / "tests" / "test_batchnorm.py", ROOT / "tests" / "test_replica_checks.py"]:
        assert POLICY.lower() in _plain(path.read_text(encoding="utf-8")).lower(), path.name
    for path in citing[1:]:
        assert f'lesson 04, "{LESSON_04_PLACE}"' in path.read_text(encoding="utf-8"), path.name
    lesson06 = (ROOT / "notebooks" / "06_scaling_and_performance.ipynb").read_text(encoding="utf-8")
    assert LESSON_04_PLACE in lesson06 and "Shape mismatch" not in lesson06        # a pointer, not a copy


# -- the clash the policy prevents, for real (in a fresh process: it breaks every collective op) ---------

CLASH = """
import numpy as np
import tensorflow as tf
from helpers.devices import ensure_devices
from helpers.models import small_mlp

replicas = ensure_devices(2)

def train(strategy, hidden):                       # a model of another shape for every hidden size
    with strategy.scope():
        model = small_mlp(4, 2, hidden=hidden)
        model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    model.fit(np.zeros((8, 4), "float32"), np.zeros(8, "int64"), batch_size=4, verbose=0)
    print("trained hidden", hidden, "on", strategy.num_replicas_in_sync, "replica(s)", flush=True)

default = tf.distribute.MirroredStrategy(replicas)              # the process's one default strategy
train(default, 3)
train(tf.distribute.MirroredStrategy(replicas[:1]), 5)          # one replica: nothing to all-reduce
train(tf.distribute.MirroredStrategy(replicas, cross_device_ops=tf.distribute.ReductionToOneDevice()), 7)
train(default, 9)                                               # reused: new keys, no clash
print("policy followed: no clash", flush=True)
train(tf.distribute.MirroredStrategy(replicas), 11)             # a second default strategy: the clash
print("no clash after all", flush=True)
"""


def test_two_default_strategies_clash_and_the_policy_does_not():
    from helpers.subproc import run_python

    result = run_python(CLASH, env={"CUDA_VISIBLE_DEVICES": ""}, timeout=300, echo=False)
    out = result.stdout
    assert "policy followed: no clash" in out, (out, result.stderr[-3000:])
    assert "trained hidden 5 on 1 replica(s)" in out and "trained hidden 9 on 2 replica(s)" in out
    assert not result.ok and "no clash after all" not in out, out
    assert "Shape mismatch in the collective instance" in result.stderr, result.stderr[-3000:]
