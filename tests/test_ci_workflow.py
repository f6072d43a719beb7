"""The CI workflow calls only what runs here (Makefile targets, .ci/run), and .ci/run calls only Makefile targets.

The workflow cannot run on this machine, so its steps are kept to the repository's own entry points, and this
test checks each `make X` against the Makefile's targets and each STACK=... against the stacks it accepts.
"""

import os
import re
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "ci.yml"


def _env() -> dict:
    """This environment without make's own variables (under `make test STACK=hosted` they carry that STACK)."""
    return {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "STACK")}


def _workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def _runs(flow: dict) -> list[str]:
    return [line.strip() for job in flow["jobs"].values() for step in job["steps"] if "run" in step
            for line in step["run"].splitlines() if line.strip()]


def makefile_targets(text: str) -> set[str]:
    """Targets a `make X` can name: explicit rules (not variables, not pattern or special targets)."""
    return {m.group(1) for m in re.finditer(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)\s*:(?!=)", text, re.M)}


def test_makefile_targets_are_read_correctly():
    targets = makefile_targets((ROOT / "Makefile").read_text())
    assert {"test", "book", "book-test", "rerun-each", "help"} <= targets
    assert "STACK" not in targets and "PY_VERSION" not in targets and not any("%" in t for t in targets)


def _make_lines(text: str) -> list[str]:
    """The `make ...` commands of a shell script (`phase "NAME" make X ...`, `background "NAME" make X ...` and
    `step "NAME" make X ...` count as `make X ...`)."""
    found = []
    for line in re.sub(r"\\\n\s*", " ", text).splitlines():   # a command continued on the next line is one line
        m = (re.search(r'(?:^|\s)(?:phase|background|step) "[^"]*"\s+(make .*)$', line)
             or re.match(r"\s*(make .*)$", line))
        if m and not line.lstrip().startswith("#"):
            found.append(re.sub(r"\s*(&&|\|\||\\)$", "", m.group(1).strip()))   # a command chained to the next
    return found


def test_every_step_is_ci_run_or_a_makefile_target():
    runs = _runs(_workflow())
    assert runs, "the workflow has no run steps"
    ci_run = (ROOT / ".ci" / "run").read_text()
    commands = [ln for ln in runs if ln not in ("bash .ci/run", "bash .ci/run fast")] + _make_lines(ci_run)
    assert {"bash .ci/run", "bash .ci/run fast"} <= set(runs) and any(c.split()[:2] == ["make", "test"]
                                                                       for c in commands)
    targets = makefile_targets((ROOT / "Makefile").read_text())
    for line in commands:
        words = line.split()
        assert words[0] == "make", f"a workflow step that is not `bash .ci/run` or a make target: {line!r}"
        named = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        assert named and set(named) <= targets, f"{line!r}: not Makefile targets: {set(named) - targets}"
        for stack in re.findall(r"STACK=(\S+)", line):   # the Makefile refuses a stack it does not know
            ok = subprocess.run(["make", "-n", "--no-print-directory", "help", f"STACK={stack}"], cwd=ROOT,
                                capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, env=_env())
            assert ok.returncode == 0, f"{line!r}: {ok.stderr.strip()}"


def test_the_full_run_is_make_test_on_both_stacks():
    """.ci/run calls the README's test command on both stacks, each split in its tests and its lessons (on the pinned
    stack each cell runs twice: the Makefile's TEST_RERUN; the hosted stack's tests are those that touch it), each
    session writing what it printed to a file of its own, and the error-index check reads every one of them; and
    the other checks CI promises."""
    text = (ROOT / ".ci" / "run").read_text()
    lines = _make_lines(text)
    full = {" ".join(w for w in line.split() if not w.startswith(("TEST_PATHS=", "PYTEST_ARGS=", "--"))
                     and w != "\\") for line in lines}
    assert {"make test", "make test STACK=hosted", "make book-test", "make slurm-check", "make lint",
            "make capsule", "make chaos KILLS=2"} <= full, full
    written = []
    for stack, extra in (("", ""), (" STACK=hosted", "--stack-only ")):
        halves = [ln for ln in lines if ln.startswith(f"make test{stack} TEST_PATHS=")]
        assert sorted(ln.split("TEST_PATHS=")[1].split()[0] for ln in halves) == ["notebooks", "tests"], halves
        [tests_half] = [ln for ln in halves if "TEST_PATHS=tests" in ln]
        assert extra in tests_half, tests_half
        assert lines.index(tests_half) < lines.index(*set(halves) - {tests_half}), "a stack's lessons before its tests"
        for half in halves:
            [path] = re.findall(r"--outputs-file=(\S+?)\"?(?:\s|$)", half)
            shards = re.findall(r"--shard=\$1/(\d+)", half)   # K/N: each of the N sessions writes its own file
            written += [path.replace("$1", str(k)) for k in range(1, int(shards[0]) + 1)] if shards else [path]
    assert len(set(written)) == len(written) == 5, written
    [check] = re.findall(r"python3 tools/error_index.py check (\S+)", text)
    assert check == '"$outputs"/{pinned,hosted}-*.txt', check
    assert all(re.fullmatch(r"\$outputs/(pinned|hosted)-[^/]*\.txt", path) for path in written), written
    dry = subprocess.run(["make", "-n", "--no-print-directory", "test"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, stdin=subprocess.DEVNULL, env=_env())
    assert " NB_RERUN=each " in dry.stdout.splitlines()[-1], dry.stdout[-500:]


def test_an_unknown_stack_is_refused():
    """The check above would pass a made-up stack if the Makefile accepted anything."""
    bad = subprocess.run(["make", "-n", "help", "STACK=tpu"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, stdin=subprocess.DEVNULL, env=_env())
    assert bad.returncode != 0 and "not a stack" in bad.stderr


def test_the_latest_stack_is_the_pinned_one_with_lower_bounds():
    def entries(name, sep):
        return [ln.split(sep) for ln in (ROOT / name).read_text().splitlines() if ln and not ln.startswith("#")]

    assert entries("requirements-latest.txt", ">=") == entries("requirements.txt", "==")


def test_the_nightly_stack_is_the_pinned_one_with_keras_nightly():
    def entries(name):
        return [ln.split("==")[0] if "==" in ln else ln for ln in (ROOT / name).read_text().splitlines()
                if ln and not ln.startswith("#")]

    pinned = entries("requirements.txt")
    assert entries("requirements-nightly.txt") == [
        "keras-nightly>=3.16.0.dev0" if name == "keras" else name for name in pinned]
    pins = [ln for ln in (ROOT / "requirements-nightly.txt").read_text().splitlines() if "==" in ln]
    assert pins == [ln for ln in (ROOT / "requirements.txt").read_text().splitlines()
                    if "==" in ln and not ln.startswith(("#", "keras=="))]


def test_the_schedule_runs_the_kaggle_and_nightly_stacks():
    """The scheduled workflow runs every lesson on the Kaggle stack, and lesson 12 with its tests on the nightly
    stack, each on the Python its Makefile entry asks for (tests/test_environment.py checks those)."""
    jobs = _workflow()["jobs"]
    for job, command, python in (("kaggle", "make notebooks STACK=kaggle", "3.12"),
                                 ("nightly", "make test STACK=nightly", "3.11")):
        steps = jobs[job]["steps"]
        assert "schedule" in jobs[job]["if"] and [st["run"] for st in steps if "run" in st] == [command], job
        assert [st["with"]["python-version"] for st in steps if "setup-python" in st.get("uses", "")] == [python]
    paths = jobs["nightly"]["env"]["TEST_PATHS"].split()
    assert "notebooks/12_pytorch_backend_across_devices.ipynb" in paths and "tests/test_lesson12.py" in paths
    assert all((ROOT / p).is_file() for p in paths), paths
    dry = subprocess.run(["make", "-n", "--no-print-directory", "test", "STACK=nightly"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, stdin=subprocess.DEVNULL, env=_env())
    # Keras's main branch is outside the range whose messages TROUBLESHOOTING.md indexes: no index check there
    assert dry.stdout.splitlines()[-1].startswith("CHECK_ERROR_INDEX=0 "), dry.stdout[-500:]


def test_contributing_names_only_real_targets():
    named = set(re.findall(r"`make (?:-\S+ )*([a-z][a-z-]*)", (ROOT / "CONTRIBUTING.md").read_text()))
    assert {"test", "notebooks", "rerun-each", "book-test", "memcheck", "sync-notebooks"} <= named
    assert named <= makefile_targets((ROOT / "Makefile").read_text()), named - makefile_targets((ROOT / "Makefile").read_text())


def test_lint_needs_no_course_environment(tmp_path):
    """`make lint` installs ruff's pin alone (into its own venv) and runs nblint with the system's Python: nothing
    of the course's 3 GB environment, whichever VENV is asked for."""
    dry = subprocess.run(["make", "-n", "--no-print-directory", "lint", f"VENV={tmp_path}/course-venv",
                          f"LINT_VENV={tmp_path}/lint"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL, env=_env())
    assert dry.returncode == 0, dry.stderr
    assert "course-venv" not in dry.stdout and "requirements.txt" not in dry.stdout, dry.stdout
    pin = re.search(r"^ruff==\S+$", (ROOT / "requirements.txt").read_text(), re.M).group(0)
    assert f"pip install -q --disable-pip-version-check {pin}" in dry.stdout


def test_ci_stops_first_when_the_disk_is_too_full():
    """The landing run once died halfway through an install, "No space left on device": now it stops before any
    install, saying how much is free and how much it needs."""
    done = subprocess.run(["bash", ".ci/run"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**_env(), "CI_MIN_FREE_GB": "100000"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "=== not enough disk:" in done.stdout and "CI needs about 100000 GB" in done.stdout
    assert "=== lint" not in done.stdout    # nothing ran before the check
