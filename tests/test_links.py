"""tools/links.py: launch URLs and Kaggle banners derived from the notebook's own path."""

import links  # tools/links.py
import pytest


def test_urls_point_at_path():
    p = "notebooks/03_x_y.ipynb"
    assert links.colab_url(p).endswith(f"/{links.REPO_SLUG}/blob/{links.BRANCH}/{p}")
    assert links.binder_url(p).endswith("?labpath=notebooks%2F03_x_y.ipynb")
    md = links.badges_markdown(p)
    assert links.colab_url(p) in md and links.binder_url(p) in md


@pytest.mark.parametrize("bad", ["03_x.ipynb", "notebooks/03_x.py", "other/03_x.ipynb"])
def test_bad_paths(bad):
    with pytest.raises(ValueError, match="notebooks/NN_name.ipynb"):
        links.colab_url(bad)


def test_kaggle_line_of_a_jax_lesson_matches_what_the_code_chooses_on_two_gpus(fresh_jax_choice):
    """On T4 x2, a JAX lesson's banner must say what its setup really picks: both GPUs."""
    import json
    import re
    from pathlib import Path

    import registry  # tools/registry.py

    from helpers import meshes

    root = Path(__file__).resolve().parent.parent
    fresh_jax_choice.setattr("helpers.gpus.visible_gpu_ids", lambda: ["0", "1"])
    seen = 0
    for nb in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        code = "".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"])
        found = re.search(r'setup_notebook\((?:devices=(\d+), )?backend="jax"\)', code)
        if not found:
            continue
        seen += 1
        fresh_jax_choice.setattr(meshes, "_PLANS", [])
        plan = meshes.choose_jax_platform(int(found.group(1)) if found.group(1) else None)
        line = links.kaggle_line(f"notebooks/{nb.name}", registry.lesson(nb).kaggle)
        assert plan.platform == "gpu" and plan.devices == 2, (nb.name, plan)
        assert "both GPUs" in line and "CPU devices" not in line, (nb.name, line)
    assert seen >= 2  # 08 and 10 (and 11) run on JAX


def test_kaggle_line_refuses_bad_paths():
    with pytest.raises(ValueError):
        links.kaggle_line("08_x.ipynb", "The lesson uses both GPUs.")
    assert links.kaggle_line("notebooks/08_x.ipynb", None) == links.KAGGLE_GPU_LINE


def test_the_helpers_version_agrees_everywhere(tmp_path):
    """pyproject.toml, helpers.__version__ and CITATION.cff give one version (CONTRIBUTING, "Releasing")."""
    import re
    from pathlib import Path

    import helpers

    root = Path(__file__).resolve().parent.parent
    assert links.helpers_version() == helpers.__version__
    cff = re.search(r"^version: (\S+)$", (root / "CITATION.cff").read_text(), re.M).group(1)
    assert cff == helpers.__version__
    (tmp_path / "pyproject.toml").write_text('[build-system]\nrequires = []\n[project]\nname = "x"\n')
    with pytest.raises(ValueError, match="no version"):
        links.helpers_version(tmp_path / "pyproject.toml")


def _git(*args: str) -> str:
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_the_setup_cell_installs_a_commit_whose_helpers_are_this_tree():
    """The Setup cell installs an immutable commit, and that commit's helpers/ and pyproject.toml are the ones
    here, byte for byte (git's tree hashes): what a learner installs on Colab is what was reviewed and tested.
    After a commit that changes them: `make pin-helpers`, `make sync-notebooks`, commit."""
    import subprocess

    assert links.COMMIT_RE.fullmatch(links.HELPERS_COMMIT), links.HELPERS_COMMIT
    assert links.HELPERS_SOURCE == f"git+{links.REPO_URL}@{links.HELPERS_COMMIT}"
    try:
        _git("cat-file", "-e", f"{links.HELPERS_COMMIT}^{{commit}}")
    except subprocess.CalledProcessError:
        pytest.fail(f"HELPERS_COMMIT {links.HELPERS_COMMIT} is not in this clone's history (a shallow clone? "
                    "CI needs the whole history: fetch-depth 0)")
    dirty = _git("status", "--porcelain", "--", *links.PINNED_PATHS)
    for path in links.PINNED_PATHS:
        pinned, here = _git("rev-parse", f"{links.HELPERS_COMMIT}:{path}"), _git("rev-parse", f"HEAD:{path}")
        assert pinned == here, (f"{path} differs between HEAD and the pinned commit {links.HELPERS_COMMIT}: "
                                "run `make pin-helpers` and `make sync-notebooks`, then commit")
    assert not dirty, f"uncommitted changes the Setup cell would not install (commit, then make pin-helpers):\n{dirty}"


def test_pin_helpers_writes_one_commit_and_refuses_others(tmp_path):
    copy = tmp_path / "links.py"
    copy.write_text('X = 1\nHELPERS_COMMIT = "' + "a" * 40 + '"\nY = 2\n')
    assert links.pin_helpers("b" * 40, copy) is True
    assert copy.read_text() == 'X = 1\nHELPERS_COMMIT = "' + "b" * 40 + '"\nY = 2\n'
    assert links.pin_helpers("b" * 40, copy) is False
    for bad in ("v0.2.0", "B" * 40, "b" * 39, 40):
        with pytest.raises(ValueError, match="40 lower-case hex"):
            links.pin_helpers(bad, copy)
