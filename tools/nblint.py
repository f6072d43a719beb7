"""The notebook rules of the house style, as declarative checks (in the spirit of tensorflow/docs' nblint).

Each rule is a ``Rule``: a name, what it protects, and a check that returns one message per problem. Rules with
``scope="notebook"`` run on every lesson, ``scope="course"`` once. ``make lint`` runs them all with ruff, and
tests/test_nblint.py shows that each rule catches what it forbids.
Standard library only (``make lint`` runs it without the course's environment).

CLI::

    python tools/nblint.py                     # every rule, every lesson; exit 1 on any problem
    python tools/nblint.py --rule copy-box     # one rule
    python tools/nblint.py --list              # the rules and why they exist
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import error_index  # noqa: E402
import learnerpath  # noqa: E402
import nbtemplate  # noqa: E402
import registry  # noqa: E402
import wordcount  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


@dataclass(frozen=True)
class Rule:
    name: str
    why: str
    check: Callable[..., list]
    scope: str = "notebook"          # "notebook": check(nb, path) per lesson; "course": check(paths) once


def _src(cell: dict) -> str:
    return "".join(cell["source"])


def code_cells(nb: dict) -> list[tuple[int, str]]:
    """(cell index, source) of every code cell."""
    return [(i, _src(c)) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"]


def _code(nb: dict) -> str:
    return "\n".join(src for _, src in code_cells(nb))


# ---- template, naming, hygiene, exercises ------------------------------------------------------------------

def template_problems(nb: dict, path: Path) -> list[str]:
    return nbtemplate.problems(nb, f"notebooks/{path.name}")


def format_problems(nb: dict, path: Path) -> list[str]:
    return nbtemplate.format_problems(path.read_text(encoding="utf-8"))


def registry_problems(nb: dict, path: Path) -> list[str]:
    return registry.entry_problems(nb.get("metadata", {}).get("course"))


def numbering_problems(paths: list[Path]) -> list[str]:
    numbers = [int(nbtemplate.check_name(str(p)).group(1)) for p in paths]
    return [] if numbers == list(range(len(numbers))) else [f"lessons are numbered {numbers}, not 00, 01, 02..."]


def hygiene_problems(nb: dict, path: Path) -> list[str]:
    code, found = _code(nb), []
    if "enable_unsafe_deserialization(" in code or re.search(r"safe_mode\s*=\s*False", code):
        found.append("unsafe loading: never safe_mode=False or enable_unsafe_deserialization() in a cell")
    if "sys.path" in code:
        found.append("sys.path in a cell: notebooks import helpers as an installed package")
    if "_collective" + "_key_base" in code:
        found.append("a cell moves MirroredStrategy's private collective key base: follow the policy instead")
    return found


EXERCISES_PER_LESSON = (2, 3)


def exercise_problems(nb: dict, path: Path) -> list[str]:
    if path.name.startswith("00_"):
        return []
    headings = [ln for c in nb["cells"] if c["cell_type"] == "markdown"
                for ln in _src(c).splitlines() if re.match(r"## Exercise \d+", ln)]
    keys = set(re.findall(r'helpers\.exercises\.check\("(\d\d\.\d+)"', _code(nb)))
    found = [] if len(headings) == len(keys) and len(keys) in EXERCISES_PER_LESSON else [
        f"{len(headings)} '## Exercise N' headings and {len(keys)} checked exercises: a lesson has two or three "
        "of each"]
    return found + [f"exercise {k} is checked in lesson {path.name[:2]}" for k in sorted(keys)
                    if not k.startswith(path.name[:2] + ".")]


# ---- the calls each lesson teaches (written in its cells, not hidden in helpers) ---------------------------

TAUGHT_CALLS = {
    "01": ["tf.distribute.MirroredStrategy(", "experimental_distribute_dataset(", "strategy.run(",
           "tf.nn.compute_average_loss(", "apply_gradients(", "with tf.device(", "tf.GradientTape()"],
    "02": ["tf.config.set_logical_device_configuration(", "tf.config.set_visible_devices(",
           "tf.config.set_soft_device_placement(False)", "tf.config.experimental.set_memory_growth(",
           "tf.config.list_logical_devices(", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
           "tf.debugging.set_log_device_placement(True)", "MirroredStrategy(devices=", "--query-gpu=",
           "subprocess.run("],
    "03": ["tf.distribute.MirroredStrategy(", "with strategy.scope():", ".compile(", ".fit(",
           "* strategy.num_replicas_in_sync", ".batch(", ".prefetch(tf.data.AUTOTUNE)", "warmup_target=",
           ".distribute_strategy.num_replicas_in_sync", "strategy.extended.worker_devices",
           "layers.RandomTranslation(", "layers.RandomFlip(", "keras.callbacks.LearningRateScheduler(",
           "keras.callbacks.ReduceLROnPlateau(", "def lr_schedule(epoch, lr):"],
    "04": ["BatchNormalization(", "synchronized=", "tf.distribute.MirroredStrategy(", "with strategy.scope():",
           "strategy.experimental_local_results(", "kd.DataParallel("],
    "05": ["keras.callbacks.ModelCheckpoint(", "keras.models.load_model(", "with strategy.scope():",
           "save_best_only=True", "initial_epoch=", "keras.callbacks.BackupAndRestore(", "initial_value_threshold=",
           "%%writefile"],
    "06": ["with strategy.scope():", ".fit(", ".cache()", ".prefetch(tf.data.AUTOTUNE)",
           "keras.mixed_precision.set_global_policy(", "time.perf_counter()", "* strategy.num_replicas_in_sync",
           "strategy.extended.worker_devices", "compute_capability"],
    "07": ["%%writefile", "tf.distribute.MultiWorkerMirroredStrategy(", "TF_CONFIG", "strategy.run(",
           "tf.GradientTape()", "tf.nn.compute_average_loss(", "tf.train.CheckpointManager(",
           "TFConfigClusterResolver(", "NCCL_DEBUG", "epochs_done", "SlurmClusterResolver(",
           "srun --kill-on-bad-exit=1"],
    "08": ["set_distribution(None)", "DataParallel(", "ModelParallel(", "DeviceMesh(",
           "LayoutMap(", "layout_map[", ".sharding", "addressable_shards", "kd.initialize(", "jax.process_index()",
           "kd.initialize()\n", "srun --kill-on-bad-exit=1"],
    "09": ["strategy.experimental_local_results(", "tf.distribute.get_replica_context(", "strategy.reduce(",
           "tf.clip_by_global_norm(", "distribute_datasets_from_function("],
    "10": ["jax.jit(", ".memory_analysis()", "jax.profiler.trace(", "gradient_accumulation_steps=",
           "keras.RematScope(", "keras.mixed_precision.set_global_policy(", "strategy.run(", "ON_READ"],
    "11": ["keras_hub.models.GemmaBackbone(", "keras_hub.models.GemmaCausalLM(", "enable_lora(", "get_layout_map(",
           "kd.ModelParallel(", "kd.DeviceMesh(", "save_lora_weights(", "load_lora_weights(", ".fit(",
           "set_distribution(None)", "from_preset(", "keras_hub.models.Gemma3Backbone(", "kd.LayoutMap(",
           ".generate("],
    "12": ["torch.distributed.run", "init_process_group(", "DistributedDataParallel(", "DistributedSampler(",
           ".set_epoch(", "torch.cuda.set_device(", "with keras.device(", "dist.all_reduce(", "kd.DataParallel(",
           "tf.distribute.MirroredStrategy(", "%%writefile", "srun torchrun"],
    "13": ["keras.callbacks.OrbaxCheckpoint(", "max_to_keep=", ".load_weights(", "optimizer.build(", "kd.LayoutMap(",
           "kd.ModelParallel(", "initial_epoch=", "os.replace(", "signal.SIGKILL", "addressable_shards",
           "kd.initialize()", "auto_shard_dataset", "save_weights(", "model.save(", "enable_lora(",
           "srun --kill-on-bad-exit=1", "%%writefile"],
}


def taught_call_problems(nb: dict, path: Path) -> list[str]:
    number, code = path.name[:2], _code(nb)
    if number == "00":
        return []
    if number not in TAUGHT_CALLS:
        return [f"lesson {number} has no entry in TAUGHT_CALLS: list the calls it teaches"]
    return [f"the lesson teaches {call} but no cell writes it" for call in TAUGHT_CALLS[number] if call not in code]


# ---- the "Copy this" box (lessons 03-11) ----------------------------------------------------------------------

COPY_HEADING = "## Copy this"
_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def copy_boxes(nb: dict) -> list[tuple[int, str]]:
    """(cell index, markdown) of every "Copy this" cell."""
    return [(i, _src(c)) for i, c in enumerate(nb["cells"])
            if c["cell_type"] == "markdown" and _src(c).split("\n", 1)[0].strip() == COPY_HEADING]


def box_code(markdown: str) -> str:
    """The one python block of a box; ValueError when there is none or more than one."""
    found = _BLOCK.findall(markdown)
    if len(found) != 1:
        raise ValueError(f"a 'Copy this' box holds exactly one ```python block, found {len(found)}")
    return found[0]


def copy_box_problems(nb: dict, path: Path) -> list[str]:
    if not "03" <= path.name[:2]:
        return []
    boxes = copy_boxes(nb)
    if len(boxes) != 1:
        return [f"expected one '{COPY_HEADING}' markdown cell, found {len(boxes)}"]
    index, markdown = boxes[0]
    summary = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"
               and _src(c).startswith("## Summary")]
    found = [] if summary and index < summary[0] else ["the 'Copy this' box comes before the Summary"]
    try:
        code = box_code(markdown)
    except ValueError as err:
        return found + [str(err)]
    if "helpers" in code:
        found.append("the 'Copy this' box uses the course helpers: a learner cannot paste it into a project")
    if not re.search(r"^\s*assert ", code, re.M):
        found.append("the 'Copy this' box checks its own result with assert")
    return found


# ---- scripts written with %%writefile --------------------------------------------------------------------------

SCRIPT_MAX_LINES = 60
_IMPORTS_HELPERS = re.compile(r"^\s*(import helpers|from helpers[ .])", re.M)


def writefile_cells(nb: dict) -> list[tuple[int, str, str]]:
    """(cell index, magic line, body) of every %%writefile cell."""
    return [(i, *src.partition("\n")[::2]) for i, src in code_cells(nb) if src.startswith("%%writefile")]


def script_problems(nb: dict, path: Path) -> list[str]:
    found = []
    for i, magic, body in writefile_cells(nb):
        if re.match(r"%%writefile\s+(-a|--append)\b", magic):
            found.append(f"cell {i}: %%writefile -a appends again on every re-run; write the file in one cell")
        if _IMPORTS_HELPERS.search(body):
            found.append(f"cell {i}: the script imports the course helpers; a learner cannot copy it")
        if len(body.splitlines()) > SCRIPT_MAX_LINES:
            found.append(f"cell {i}: {len(body.splitlines())} lines; split the script into files "
                         f"of <= {SCRIPT_MAX_LINES}")
    return found


# ---- the collective-key policy (lesson 04, "A trap when you re-run cells") -----------------------------------
# A kernel has at most one multi-replica MirroredStrategy with the default (collective) all-reduce; any other
# multi-replica strategy in the same kernel passes cross_device_ops=tf.distribute.ReductionToOneDevice().
# Why: two default strategies that all-reduce tensors of different shapes abort every collective op in the
# process. tests/test_nblint.py shows the clash for real.

_REPEATS = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
            ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


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
    """One entry per ``MirroredStrategy(...)`` that may make a multi-replica strategy with the default all-reduce;
    a call in a loop, comprehension or function body may run more than once, so it counts twice."""
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
            repeated |= isinstance(up, _REPEATS)
            up = parents.get(up)
        found += [f"{where}, line {node.lineno}"] * (2 if repeated else 1)
    return found


def _without_main(tree: ast.Module) -> ast.Module:
    """The part of a script that runs when it is imported: all but ``if __name__ == "__main__":``."""
    def is_main(stmt):
        return isinstance(stmt, ast.If) and "__main__" in ast.unparse(stmt.test)
    return ast.Module(body=[s for s in tree.body if not is_main(s)], type_ignores=[])


def written_files(nb: dict) -> dict:
    """``%%writefile PATH`` cells: {file name: source}."""
    return {Path(magic.split()[-1]).name: body + "\n" for _, magic, body in writefile_cells(nb)}


def imported_by_kernel(nb: dict) -> list[str]:
    """Written files the kernel itself imports (``load_script(... "NAME")`` or ``import STEM``)."""
    cells = [src for _, src in code_cells(nb) if not src.startswith("%%writefile")]
    return [name for name in written_files(nb)
            if any((name in c and "load_script" in c)
                   or re.search(rf"^\s*(import|from)\s+{re.escape(Path(name).stem)}\b", c, re.M) for c in cells)]


_LINE_MAGIC = re.compile(r"^([ \t]*)(?:[%!].*|[\w.]+\?\??[ \t]*)$", re.M)
_ASSIGNED_MAGIC = re.compile(r"^([ \t]*[\w.]+(?:[ \t]*,[ \t]*[\w.]+)*[ \t]*=[ \t]*)[%!].*$", re.M)


def as_python(source: str) -> str:
    """A cell's source as plain Python, without IPython: a line magic, shell line or help line (``%time f()``,
    ``!pip ...``, ``obj??``) becomes ``pass``, and ``x = !ls`` becomes ``x = None``. IPython turns each into a
    call whose code is a string, so no statement that could build a strategy is lost; line numbers stay."""
    return _LINE_MAGIC.sub(r"\1pass", _ASSIGNED_MAGIC.sub(r"\1None", source))


def kernel_default_strategies(nb: dict) -> list[str]:
    """Every default multi-replica strategy the kernel may create: its cells and the importable part of the files
    it writes and imports (files only other processes run do not count)."""
    found = []
    for i, src in code_cells(nb):
        if src.startswith("%%writefile"):
            continue
        if src.startswith("%%"):                       # another cell magic (%%time ...): its body, if Python
            src = src.partition("\n")[2]
        try:
            tree = ast.parse(as_python(src))
        except SyntaxError:                             # %%bash and friends: not Python, no strategy
            continue
        found += default_strategies(tree, f"cell {i}")
    files = written_files(nb)
    for name in imported_by_kernel(nb):
        found += default_strategies(_without_main(ast.parse(files[name])), f"{name} (imported by the kernel)")
    return found


def collective_problems(nb: dict, path: Path) -> list[str]:
    found = kernel_default_strategies(nb)
    return [] if len(found) <= 1 else [
        f"{len(found)} default multi-replica MirroredStrategy objects in one kernel ({', '.join(found)}): make one "
        "and reuse it; any other passes cross_device_ops=tf.distribute.ReductionToOneDevice()"]


# ---- what a learner sees in a cell's outputs (checked live by the nbval plugin, tools/pytest_course.py) -----

NOISE = (r"absl::InitializeLog", r"cudart_stub\.cc", r"Could not find cuda drivers")
NOISE_WITHOUT_DRIVER = (r"failed call to cuInit",)
STRAY_RESULT = re.compile(r"^(False|None|True|<function .*>|<bound method .*>)$")


def output_problems(outputs, driver: bool | None = None) -> list[str]:
    """What a learner should not see in one cell's outputs: TensorFlow's harmless native start-up lines on stderr
    (a lesson that quotes one prints it on stdout) and bare results nobody asked for (``False``, a function)."""
    driver = shutil.which("nvidia-smi") is not None if driver is None else driver
    noise = NOISE + (() if driver else NOISE_WITHOUT_DRIVER)
    problems = []
    for out in outputs or []:
        kind = out.get("output_type")
        if kind == "stream" and out.get("name") == "stderr":
            problems += [f"native start-up noise in stderr: {line.strip()[:120]}"
                         for line in out.get("text", "").splitlines() if any(re.search(p, line) for p in noise)]
        elif kind == "execute_result":
            text = out.get("data", {}).get("text/plain", "").strip()
            if STRAY_RESULT.match(text):
                problems.append(f"stray result shown: Out[...]: {text[:80]} (end the line with ';' or return nothing)")
    return problems


def stored_output_problems(nb: dict, path: Path) -> list[str]:
    return [f"cell {i}: {p}" for i, c in enumerate(nb["cells"]) for p in output_problems(c.get("outputs"))]


# ---- prose budgets -----------------------------------------------------------------------------------------------

def word_budget_problems(paths: list[Path]) -> list[str]:
    return wordcount.report(paths[0].parent)["over_budget"] if paths else []


# ---- the learner's path (tools/learnerpath.py) and the error index -------------------------------------------

def learner_path_problems(paths: list[Path]) -> list[str]:
    return learnerpath.report([p for p in paths if re.match(r"\d\d_", p.name)])["over_budget"] if paths else []


def error_index_problems(paths: list[Path]) -> list[str]:
    index = ROOT / "TROUBLESHOOTING.md"
    try:
        error_index.load(index)
    except (OSError, ValueError) as err:
        return [f"{index.name}: {err}"]
    return []


RULES = [
    Rule("template", "title, paragraph, badges, Setup; stripped outputs; the python3 kernel", template_problems),
    Rule("format", "the one notebook format, nbformat's writer's (make sync-notebooks rewrites it)", format_problems),
    Rule("registry", "each lesson's metadata.course entry is complete (tools/registry.py)", registry_problems),
    Rule("numbering", "lessons are NN_snake_case, numbered from 00 without gaps", numbering_problems, "course"),
    Rule("hygiene", "no unsafe loading, no sys.path, no private collective keys", hygiene_problems),
    Rule("exercises", "two or three exercises per lesson, each checked under the lesson's number",
         exercise_problems),
    Rule("taught-calls", "every API call a lesson teaches is written in its cells", taught_call_problems),
    Rule("copy-box", "lessons 03-11 end with one helper-free 'Copy this' box that asserts", copy_box_problems),
    Rule("scripts", "%%writefile scripts: one cell per file, no helpers, short", script_problems),
    Rule("collective", "at most one default multi-replica MirroredStrategy per kernel", collective_problems),
    Rule("output-noise", "no native start-up noise and no stray results in outputs", stored_output_problems),
    Rule("words", "the prose budgets (tools/wordcount.py)", word_budget_problems, "course"),
    Rule("learner-path", "the learner's-path budgets (tools/learnerpath.py)", learner_path_problems, "course"),
    Rule("error-index", "TROUBLESHOOTING.md's messages parse: none empty, none twice", error_index_problems, "course"),
]


def lint(paths: list[Path], rules: list[Rule] = RULES) -> list[str]:
    """Every problem, as 'file: rule: message' (or 'course: rule: message')."""
    problems = []
    notebooks = {path: json.loads(path.read_text(encoding="utf-8")) for path in paths}
    for rule in rules:
        if rule.scope == "course":
            problems += [f"course: {rule.name}: {m}" for m in rule.check(paths)]
            continue
        for path, nb in notebooks.items():
            problems += [f"{path.name}: {rule.name}: {m}" for m in rule.check(nb, path)]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rule", action="append", choices=[r.name for r in RULES], help="only these rules")
    parser.add_argument("--list", action="store_true", help="list the rules")
    args = parser.parse_args(argv)
    if args.list:
        for r in RULES:
            print(f"{r.name:13} {r.why}")
        return 0
    rules = [r for r in RULES if not args.rule or r.name in args.rule]
    problems = lint(sorted(NOTEBOOKS.glob("*.ipynb")), rules)
    for p in problems:
        print(p)
    print(f"nblint: {len(rules)} rule(s), {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
