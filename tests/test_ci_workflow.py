"""Ready to publish: the CI workflow calls only what runs here (Makefile targets, .ci/run), LICENSE, CITATION.cff.

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
    return {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}


def _workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def _triggers(flow: dict) -> dict:
    return flow.get("on", flow.get(True))   # YAML 1.1 reads the bare key `on` as True


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


def test_every_step_is_ci_run_or_a_makefile_target():
    runs = _runs(_workflow())
    assert runs, "the workflow has no run steps"
    targets = makefile_targets((ROOT / "Makefile").read_text())
    for line in runs:
        if line == "bash .ci/run":
            continue
        words = line.split()
        assert words[0] == "make", f"a workflow step that is not `bash .ci/run` or a make target: {line!r}"
        named = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        assert named and set(named) <= targets, f"{line!r}: not Makefile targets: {set(named) - targets}"
        for stack in re.findall(r"STACK=(\S+)", line):   # the Makefile refuses a stack it does not know
            ok = subprocess.run(["make", "-n", "--no-print-directory", "help", f"STACK={stack}"], cwd=ROOT,
                                capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, env=_env())
            assert ok.returncode == 0, f"{line!r}: {ok.stderr.strip()}"


def test_an_unknown_stack_is_refused():
    """The check above would pass a made-up stack if the Makefile accepted anything."""
    bad = subprocess.run(["make", "-n", "help", "STACK=nightly"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, stdin=subprocess.DEVNULL, env=_env())
    assert bad.returncode != 0 and "not a stack" in bad.stderr


def test_push_runs_ci_weekly_runs_the_latest_stack_main_publishes_the_site():
    flow = _workflow()
    on, jobs = _triggers(flow), flow["jobs"]
    assert "push" in on and on["schedule"][0]["cron"].split()[-1] in {"0", "1", "2", "3", "4", "5", "6"}
    steps = lambda job: [s.get("run", "") for s in jobs[job]["steps"]]  # noqa: E731
    assert "bash .ci/run" in steps("test") and "schedule" in jobs["test"]["if"]
    assert "make test STACK=latest" in steps("latest") and "schedule" in jobs["latest"]["if"]
    # The site make book-test checked is the one published: the Makefile's output folder, then deploy-pages.
    book_dir = re.search(r"^BOOK_DIR \?= (\S+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    upload = [s for s in jobs["test"]["steps"] if s.get("uses", "").startswith("actions/upload-pages-artifact")]
    assert len(upload) == 1 and upload[0]["with"]["path"].rstrip("/") == f"{book_dir}/html"
    assert "refs/heads/main" in upload[0]["if"] and "refs/heads/main" in jobs["pages"]["if"]
    assert jobs["pages"]["needs"] == "test" and jobs["pages"]["permissions"]["pages"] == "write"
    assert any(s.get("uses", "").startswith("actions/deploy-pages") for s in jobs["pages"]["steps"])
    assert "make book-test" in (ROOT / ".ci" / "run").read_text()


def test_the_latest_stack_is_the_pinned_one_with_lower_bounds():
    def entries(name, sep):
        return [ln.split(sep) for ln in (ROOT / name).read_text().splitlines() if ln and not ln.startswith("#")]

    assert entries("requirements-latest.txt", ">=") == entries("requirements.txt", "==")


def test_license_is_apache_2_as_pyproject_says():
    text = (ROOT / "LICENSE").read_text()
    assert 'license = "Apache-2.0"' in (ROOT / "pyproject.toml").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text
    assert len(text.split()) > 1500   # the full text, not a pointer to it


def test_citation_file_is_valid_cff_1_2():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    for key in ("message", "title", "authors", "type", "license", "version"):
        assert cff.get(key), f"CITATION.cff has no {key}"
    assert all(a.get("name") or a.get("family-names") for a in cff["authors"])
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'license = "{cff["license"]}"' in pyproject and f'version = "{cff["version"]}"' in pyproject


def test_contributing_names_only_real_targets():
    named = set(re.findall(r"`make ([a-z-]+)", (ROOT / "CONTRIBUTING.md").read_text()))
    assert {"test", "rerun-each", "book-test", "memcheck"} <= named
    assert named <= makefile_targets((ROOT / "Makefile").read_text()), named - makefile_targets((ROOT / "Makefile").read_text())
