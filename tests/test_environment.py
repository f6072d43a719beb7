"""The environment files agree, the two README commands exist, CI calls make test."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _pins(lines):
    out = {}
    for ln in lines:
        ln = ln.split("#")[0].strip().lstrip("- ").strip()
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)$", ln)
        if m:
            out[m.group(1).lower()] = m.group(2)
    return out


def test_requirements_and_environment_yml_agree():
    req = _pins((ROOT / "requirements.txt").read_text().splitlines())
    env_text = (ROOT / "environment.yml").read_text()
    env = _pins(env_text.split("- pip:")[1].splitlines())
    assert req == env
    assert req["tensorflow"] == "2.21.0" and req["keras"].startswith("3.15.")
    assert "python=3.11" in env_text


def test_requirements_are_exact_pins():
    for ln in (ROOT / "requirements.txt").read_text().splitlines():
        ln = ln.split("#")[0].strip()
        if ln:
            assert "==" in ln, f"not an exact pin: {ln}"


def test_readme_commands_and_ci():
    readme = (ROOT / "README.md").read_text()
    assert "make lab" in readme and "make test" in readme and "MULTIGPU_MODE" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci


def test_helpers_dist_name_and_no_tf_dependency():
    text = (ROOT / "pyproject.toml").read_text()
    deps = re.search(r"dependencies = \[(.*?)\]", text).group(1)
    assert 'name = "keras-multigpu-course-helpers"' in text
    assert "tensorflow" not in deps and "keras" not in deps   # never reinstall TF on Colab


def test_repo_url_written_once():
    from helpers import course
    hits = [p for p in ROOT.rglob("*") if p.is_file() and p.suffix in {".py", ".toml", ".yml", ".md", ".txt"}
            and ".venv" not in p.parts and ".capsule" not in p.parts and course.REPO_SLUG in p.read_text()]
    assert [p.relative_to(ROOT).as_posix() for p in hits if p.name != "README.md"] == ["helpers/course.py"]
