"""The time capsule: run the blog's 2017 code on the 2017 stack, or show a recorded run.

Why: the blog's two errors only exist on Python 3.6 + TensorFlow 1.3.0 + Keras 2.1.3.  ``make capsule``
builds that stack into ``.capsule/``; lessons 04 and 05 run ``helpers/capsule_scripts/`` in it, or replay
``helpers/transcripts/`` where there is none, and say which (``time capsule: live`` or ``time capsule:
recorded transcript``).  ``make capsule-record`` (tools/capsule_record.py) re-records the transcripts.
"""

from __future__ import annotations

import itertools
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .checks import positive_number
from .subproc import child_env, final_exception
from .subproc import run as run_child

#: Set to a Python interpreter to use as the capsule (a missing path means "no capsule").
CAPSULE_ENV = "MULTIGPU_CAPSULE_PYTHON"
HERE = Path(__file__).resolve().parent
SCRIPTS_DIR = HERE / "capsule_scripts"
TRANSCRIPTS_DIR = HERE / "transcripts"
LIVE = "live"
RECORDED = "recorded transcript"
OUTPUT_MARK = "----- output -----"


#: Each 2017-style script of the capsule and the line its output must contain.
SCRIPTS = {
    "bn_multi_gpu": "ValueError: Variable batch_normalization_1/moving_mean/biased already exists, disallowed. "
                    "Did you mean to set reuse=True in VarScope? Originally defined at:",   # error 1
    "checkpoint_multi_gpu": "TypeError: can't pickle module objects",                        # error 2
    "parallel_checkpoint": "reloaded the template model: 2 layers",                          # the blog's fix
    "keras2_defaults": "keras 2 numbers: {",          # what the defaults that changed computed (test_keras2_script)
}


@dataclass
class CapsuleRun:
    """The output of one capsule script, live or recorded."""

    name: str
    source: str  # LIVE or RECORDED
    returncode: int
    output: str  # stdout and stderr interleaved, machine paths shortened
    command: str = ""
    recorded_on: str = ""
    versions: dict = field(default_factory=dict)

    @property
    def expected(self) -> str:
        return SCRIPTS[self.name]

    @property
    def ok(self) -> bool:
        """True when the output contains the script's expected line."""
        return self.expected in self.output

    def error_lines(self, max_lines: int = 8) -> list[str]:
        """The final exception (``SomeError: message`` and the lines of its message), or []."""
        return [ln for ln in final_exception(self.output).splitlines() if ln.strip()][:max_lines]

    def frames(self) -> list[str]:
        """The traceback's frames as ``file:line in function``; runs of 3+ frames in one file collapsed."""
        start = self.output.rfind("Traceback (most recent call last):")
        if start < 0:
            return []
        block = self.output[start:]
        err = re.search(r"^[A-Za-z_][\w.]*(Error|Exception): ", block, re.M)
        block = block[: err.start()] if err else block
        found = [(_short(p), ln, fn) for p, ln, fn in
                 re.findall(r'^  File "([^"]+)", line (\d+), in (\S+)', block, re.M)]
        out = []
        for _, group in itertools.groupby(found, key=lambda f: f[0]):
            g = list(group)
            if len(g) >= 3:
                out.append(f"{g[0][0]}: {len(g)} frames ({g[0][2]} -> ... -> {g[-1][2]})")
            else:
                out.extend(f"{p}:{ln} in {fn}" for p, ln, fn in g)
        return out

    def key_lines(self) -> list[str]:
        """What a reader needs: the script's own prints, the frames, the error."""
        error = self.error_lines(99)
        own = [ln for ln in self.output.splitlines()
               if ln and not ln.startswith((" ", "Traceback", "capsule versions:")) and ln not in error]
        frames = self.frames()
        head = ["traceback (most recent call last, shortened):"] if frames else []
        return own + head + ["  " + f for f in frames] + self.error_lines()


def _short(path: str) -> str:
    for marker in ("site-packages/", "capsule_scripts/", "python3.6/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def sanitize(text: str) -> str:
    """Shorten machine-specific paths so live and recorded output look the same."""
    text = text.replace(str(SCRIPTS_DIR) + "/", "capsule_scripts/")
    return re.sub(r'(?:/[^\s"/]+)+/lib/(python\d\.\d+)/', r".../\1/", text)


def _check_name(name: str) -> str:
    if name not in SCRIPTS:
        raise ValueError(f"unknown capsule script {name!r}; known: {', '.join(sorted(SCRIPTS))}")
    return SCRIPTS[name]


def find_capsule() -> Optional[Path]:
    """The capsule's Python, or None: ``$MULTIGPU_CAPSULE_PYTHON`` if set (a missing path means no capsule: tests
    force the transcript so), else ``.capsule/bin/python`` once ``make capsule`` finished (``.capsule/.installed``)."""
    override = os.environ.get(CAPSULE_ENV, "").strip()
    if override:
        path = Path(override).expanduser()
        return path if path.is_file() and os.access(path, os.X_OK) else None
    root = HERE.parent / ".capsule"
    python = root / "bin" / "python"
    return python if python.exists() and (root / ".installed").exists() else None


def _parse_versions(output: str) -> dict:
    m = re.search(r"^capsule versions: (.+)$", output, re.M)
    return dict(part.strip().split(" ", 1) for part in m.group(1).split("|")) if m else {}


def run_live(name: str, timeout: float = 180) -> CapsuleRun:
    """Run capsule script ``name`` in the capsule interpreter (``FileNotFoundError`` if none), in a temporary working
    directory and ``HOME`` (Keras 2 writes ``~/.keras/keras.json``)."""
    _check_name(name)
    positive_number("timeout", timeout, unit="seconds")
    python = find_capsule()
    if python is None:
        raise FileNotFoundError("no time capsule found (run `make capsule`, or set "
                                f"{CAPSULE_ENV} to a Python 3.6 with tensorflow 1.3.0 + keras 2.1.3)")
    # helpers.subproc's child policy minus what would steer a *different* interpreter (Python 3.6, TF 1.3)
    # wrongly: today's Python paths, virtualenv, Keras/TF/CUDA settings.
    env = {k: v for k, v in child_env(fresh_devices=True).items()
           if not k.startswith(("PYTHON", "KERAS", "TF_", "CUDA_", "XLA_", "VIRTUAL_ENV"))}
    with tempfile.TemporaryDirectory(prefix="capsule-", ignore_cleanup_errors=True) as work:
        env.update(HOME=work, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1",
                   PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1", KERAS_BACKEND="tensorflow")
        proc = run_child([str(python), str(SCRIPTS_DIR / f"{name}.py")], env, timeout=timeout, cwd=work,
                         merge_stderr=True)
    output = sanitize(proc.stdout)
    return CapsuleRun(name, LIVE, proc.returncode, output, command=f"python capsule_scripts/{name}.py",
                      versions=_parse_versions(output))


def transcript_path(name: str, directory: Optional[os.PathLike] = None) -> Path:
    """``<directory>/<name>.txt``, by default under ``helpers/transcripts/``."""
    _check_name(name)
    return Path(directory or TRANSCRIPTS_DIR) / f"{name}.txt"


def load_transcript(name: str, directory: Optional[os.PathLike] = None) -> CapsuleRun:
    """Read a recorded transcript (``FileNotFoundError`` if it was never recorded)."""
    path = transcript_path(name, directory)
    text = path.read_text()
    if OUTPUT_MARK not in text:
        raise ValueError(f"{path} is not a capsule transcript (no {OUTPUT_MARK!r} line)")
    header, output = text.split(OUTPUT_MARK + "\n", 1)
    meta = dict(re.findall(r"^# ([a-z ]+): (.*)$", header, re.M))
    date = re.search(r"recorded on (\S+)", header)
    return CapsuleRun(name, RECORDED, int(meta.get("exit code", "0")), output,
                      command=meta.get("command", ""), recorded_on=date.group(1) if date else "",
                      versions=_parse_versions(output))


def run(name: str) -> CapsuleRun:
    """Live if a capsule exists, otherwise the recorded transcript."""
    return run_live(name) if find_capsule() else load_transcript(name)


def show(name: str) -> CapsuleRun:
    """Run (or replay) ``name`` and print where it came from, the versions and the key lines. ``AssertionError``
    when the output lacks the script's expected line, so a lesson fails the day the error stops happening."""
    expected = _check_name(name)
    result = run(name)
    print(f"time capsule: {result.source}")
    if result.source == RECORDED:
        print(f"  (no capsule here: replaying helpers/transcripts/{name}.txt, recorded on "
              f"{result.recorded_on or 'an earlier date'}; `make capsule` builds one where Python 3.6 exists)")
    print("  " + " | ".join(f"{k} {v}" for k, v in result.versions.items()))
    print(f"  $ {result.command}   (exit code {result.returncode})")
    for line in result.key_lines():
        print("  " + line)
    if expected not in result.output:
        raise AssertionError(f"time capsule ({result.source}): the output of {name!r} lacks {expected!r}. "
                             "The 2017 behaviour this lesson shows did not happen.")
    return result


def script_source(name: str) -> str:
    """The source of capsule script ``name`` without its docstring and imports."""
    _check_name(name)
    lines = (SCRIPTS_DIR / f"{name}.py").read_text().splitlines()
    start = max(i for i, ln in enumerate(lines) if ln.startswith(("import ", "from "))) + 1
    return "\n".join(lines[start:]).strip() + "\n"
