"""The environment files agree, the README's commands exist, a missing Python gets one clear line."""

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


def test_readme_commands():
    readme = (ROOT / "README.md").read_text()
    assert "make lab" in readme and "make test" in readme and "make notebooks" in readme and "MULTIGPU_MODE" in readme


def test_hosted_and_kaggle_pins_are_exact_and_the_same_packages():
    pinned = _pins((ROOT / "requirements.txt").read_text().splitlines())
    for req in ("requirements-hosted.txt", "requirements-kaggle.txt"):
        pins = _pins((ROOT / req).read_text().splitlines())
        assert pins["jax"] == pins["jaxlib"], req
        for ln in (ROOT / req).read_text().splitlines():
            ln = ln.split("#")[0].strip()
            assert not ln or "==" in ln, f"{req}: not an exact pin: {ln}"
        assert set(pins) == set(pinned), req      # the same packages, other versions


def test_kaggle_is_colabs_frameworks_on_an_older_base():
    """Kaggle's image (2026-08) has Colab's TensorFlow, Keras, JAX and keras-hub, on Colab's base of 2026-05:
    Python 3.12, numpy 2.0.2, torch 2.10 (review-2026-12d.md, section 5); Colab has Python 3.13 and torch 2.11."""
    import subprocess
    hosted, kaggle = (_pins((ROOT / f"requirements-{s}.txt").read_text().splitlines()) for s in ("hosted", "kaggle"))
    for dist in ("tensorflow", "keras", "tf-keras", "jax", "jaxlib", "keras-hub"):
        assert kaggle[dist] == hosted[dist], dist
    assert kaggle["numpy"] == "2.0.2"
    assert _pins((ROOT / "requirements-torch-kaggle.txt").read_text().splitlines()) == {"torch": "2.10.0"}
    dry = subprocess.run(["make", "-n", "-B", "install", "STACK=kaggle", "PYTHON=", "VENV=_none_"], cwd=ROOT,
                         capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert "STACK=kaggle needs Python 3.12" in dry.stdout, dry.stdout + dry.stderr   # the Makefile asks for 3.12


def test_every_stack_sits_inside_the_supported_range():
    from helpers import versions
    for req in ("requirements.txt", "requirements-hosted.txt", "requirements-kaggle.txt"):
        pins = _pins((ROOT / req).read_text().splitlines())
        assert versions.outside_range({d: pins[d] for d in ("tensorflow", "keras", "jax")}) == [], req
    readme = (ROOT / "README.md").read_text()
    for dist, (low, high) in versions.SUPPORTED.items():
        assert f"{low}-{high}" in readme, f"README must state the supported {dist} range"


def test_readme_stacks_table_names_each_stacks_pins():
    """README's table of the five stacks: each pinned stack's row gives its requirements files' versions."""
    table = (ROOT / "README.md").read_text().split("All five stacks", 1)[1].split("\n## ", 1)[0]
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(\w+)` \|.*$", table, re.M)}
    assert set(rows) == {"pinned", "hosted", "kaggle", "latest", "nightly"}, rows
    files = {"pinned": ("requirements.txt", "requirements-torch.txt", "3.11"),
             "hosted": ("requirements-hosted.txt", "requirements-torch-hosted.txt", "3.13"),
             "kaggle": ("requirements-kaggle.txt", "requirements-torch-kaggle.txt", "3.12")}
    for stack, (req, torch, python) in files.items():
        pins = {**_pins((ROOT / req).read_text().splitlines()), **_pins((ROOT / torch).read_text().splitlines())}
        cells = [c.strip() for c in rows[stack].strip("|").split("|")]
        assert cells[2] == python, rows[stack]
        assert cells[3].startswith(f"{pins['tensorflow']} / {pins['keras']} / {pins['jax']}"), rows[stack]
        assert cells[4] == pins["torch"], rows[stack]
    makefile = (ROOT / "Makefile").read_text()
    for stack, python in (("pinned", "3.11"), ("hosted", "3.13"), ("kaggle", "3.12"), ("latest", "3.13"),
                          ("nightly", "3.11")):
        block = makefile.split(f"ifeq ($(STACK),{stack})", 1)[1].split("else", 1)[0]
        assert f"PY_VERSION := {python}" in block and f"| {python} |" in rows[stack], stack


def test_the_registry_knows_the_makefiles_stacks():
    """A lesson's registry entry names the stacks that run it (tools/pytest_course.py skips it elsewhere): the
    registry accepts exactly the stacks the Makefile builds, and every lesson runs on the kaggle stack."""
    import registry  # tools/registry.py
    assert set(re.findall(r"ifeq \(\$\(STACK\),(\w+)\)", (ROOT / "Makefile").read_text())) == set(registry.STACKS)
    lessons = registry.load(ROOT)
    assert lessons and all("kaggle" in ls.stacks for ls in lessons)
    assert [ls.number for ls in lessons if "nightly" in ls.stacks] == ["12"]


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
    """Written in tools/links.py; elsewhere only inside blocks `make sync-notebooks` generates from it."""
    import subprocess

    import links  # tools/links.py
    tracked = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout.split()
    generated = re.compile(r"<!-- ([\w-]+):begin: generated by `make sync-notebooks`.*?<!-- \1:end -->", re.S)
    hits = [p for p in map(ROOT.joinpath, tracked) if p.is_file() and p.suffix in {".py", ".toml", ".yml", ".md", ".txt"}
            and links.REPO_SLUG in generated.sub("", p.read_text())]
    assert [p.relative_to(ROOT).as_posix() for p in hits] == ["tools/links.py"]


def _locked(path: Path) -> dict:
    """{name: {versions}} of a `make lock` file, checking that every requirement in it carries a hash."""
    out, lines = {}, path.read_text().splitlines()
    for i, ln in enumerate(lines):
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;\\]+)", ln)
        if m:
            block = "\n".join(lines[i:i + 3])
            assert "--hash=sha256:" in block, f"{path.name}: {m.group(1)} has no hash"
            out.setdefault(m.group(1).lower().replace("_", "-"), set()).add(m.group(2))
    return out


def test_each_stack_installs_its_hashed_lock_of_every_package():
    """requirements.lock, requirements-hosted.lock and requirements-kaggle.lock (`make lock`) hold every package,
    dependencies included, with hashes, at the versions the requirements files pin; make install installs the lock
    with --require-hashes."""
    import subprocess

    for req, lock, stack in (("requirements.txt", "requirements.lock", "pinned"),
                             ("requirements-hosted.txt", "requirements-hosted.lock", "hosted"),
                             ("requirements-kaggle.txt", "requirements-kaggle.lock", "kaggle")):
        pins, locked = _pins((ROOT / req).read_text().splitlines()), _locked(ROOT / lock)
        for name, version in pins.items():
            assert locked.get(name.replace("_", "-")) == {version}, (
                f"{lock} has {name} {locked.get(name)}, {req} pins {version}: run `make lock`")
        assert len(locked) > 3 * len(pins), f"{lock} should hold the dependencies too ({len(locked)} packages)"
        recipe = subprocess.run(["make", "-n", "-B", "install", f"STACK={stack}", "INSTALLER=pip", "PYTHON=python3"],
                                cwd=ROOT, capture_output=True, text=True, check=True).stdout
        assert f"--require-hashes -r {lock}" in recipe, recipe
