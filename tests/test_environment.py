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
    assert "\nmake test\n" in ci and "\nmake test STACK=hosted\n" in ci   # both stacks, end to end


def test_hosted_pins_are_exact_and_the_same_packages():
    hosted = _pins((ROOT / "requirements-hosted.txt").read_text().splitlines())
    assert hosted["jax"] == hosted["jaxlib"]
    for ln in (ROOT / "requirements-hosted.txt").read_text().splitlines():
        ln = ln.split("#")[0].strip()
        assert not ln or "==" in ln, f"not an exact pin: {ln}"
    pinned = _pins((ROOT / "requirements.txt").read_text().splitlines())
    assert set(hosted) == set(pinned)          # the same packages, other versions


def test_both_stacks_sit_at_the_ends_of_the_supported_range():
    from helpers import versions
    for req in ("requirements.txt", "requirements-hosted.txt"):
        pins = _pins((ROOT / req).read_text().splitlines())
        assert versions.outside_range({d: pins[d] for d in ("tensorflow", "keras", "jax")}) == [], req
    readme = (ROOT / "README.md").read_text()
    for dist, (low, high) in versions.SUPPORTED.items():
        assert f"{low}-{high}" in readme, f"README must state the supported {dist} range"


def test_readme_badges_are_the_rendered_ones():
    import links  # tools/links.py
    assert links.badges_markdown("notebooks/00_start_here.ipynb") in (ROOT / "README.md").read_text()


def test_lab_overrides_turn_off_the_news_popup():
    import json
    settings = json.loads((ROOT / "lab-overrides.json").read_text())
    assert settings["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    assert "lab-overrides.json" in (ROOT / "Makefile").read_text() and "lab-overrides.json" in (ROOT / "postBuild").read_text()


def test_missing_python_gets_one_clear_line(tmp_path):
    import subprocess
    r = subprocess.run(["make", "--no-print-directory", "install", "STACK=hosted", f"VENV={tmp_path}/v",
                        "PYTHON="], cwd=ROOT, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert r.returncode != 0
    assert "needs Python 3.13: none found" in r.stdout + r.stderr and "Traceback" not in r.stdout + r.stderr
    r = subprocess.run(["make", "--no-print-directory", "help", "STACK=colab"], cwd=ROOT, capture_output=True,
                       text=True, stdin=subprocess.DEVNULL)
    assert r.returncode != 0 and "STACK=colab is not a stack" in r.stderr


def test_helpers_dist_name_and_no_tf_dependency():
    text = (ROOT / "pyproject.toml").read_text()
    deps = re.search(r"dependencies = \[(.*?)\]", text).group(1)
    assert 'name = "keras-multigpu-course-helpers"' in text
    assert "tensorflow" not in deps and "keras" not in deps   # never reinstall TF on Colab


def test_repo_url_written_once():
    import subprocess

    import links  # tools/links.py
    tracked = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout.split()
    hits = [p for p in map(ROOT.joinpath, tracked) if p.is_file() and p.suffix in {".py", ".toml", ".yml", ".md", ".txt"}
            and links.REPO_SLUG in p.read_text()]
    assert [p.relative_to(ROOT).as_posix() for p in hits if p.name != "README.md"] == ["tools/links.py"]
