"""tools/nbtemplate.py: the skeleton passes its own checks; each rule catches its violation."""

import copy
import json

import nbtemplate as template  # maintainer code: tools/nbtemplate.py
import pytest

PATH = "notebooks/07_some_topic.ipynb"


@pytest.fixture
def nb():
    return template.new_notebook(PATH, "Some topic", learn="Things.")


def test_new_notebook_is_clean(nb):
    assert template.problems(nb, PATH) == []


@pytest.mark.parametrize("bad", ["notebooks/7_x.ipynb", "notebooks/07-x.ipynb", "notebooks/07_X.ipynb"])
def test_bad_names(bad):
    with pytest.raises(ValueError, match="NN_snake_case"):
        template.check_name(bad)


def _broken(nb, edit):
    nb = copy.deepcopy(nb)
    edit(nb)
    return template.problems(nb, PATH)


@pytest.mark.parametrize("edit, words", [
    (lambda nb: nb["cells"][2].update(outputs=[{"output_type": "stream", "name": "stdout", "text": "x"}]),
     "stored outputs"),
    (lambda nb: nb["metadata"]["kernelspec"].update(name="py311"), "kernelspec"),
    (lambda nb: nb["metadata"]["kernelspec"].update(display_name="Python 3"), "kernelspec"),
    (lambda nb: nb["cells"][2].update(source="print(1)"), "bootstrap"),
    (lambda nb: nb["cells"][3].update(source="import helpers"), "setup"),
    (lambda nb: nb["cells"][0].update(source=nb["cells"][0]["source"].replace("07_some", "08_some")), "badges"),
    (lambda nb: nb["cells"].pop(4), "Summary"),
    (lambda nb: nb.update(cells=nb["cells"][:5]), "Exercise"),   # both exercise cells gone
    (lambda nb: nb["cells"][1].update(source="## Set up"), "Setup"),
])
def test_each_rule_catches(nb, edit, words):
    assert any(words in p for p in _broken(nb, edit))


def test_sync_repairs_badges_and_bootstrap(nb):
    nb["metadata"]["kernelspec"]["display_name"] = "Python 3"
    nb["cells"][0]["source"] = nb["cells"][0]["source"].replace("07_some", "08_some")
    nb["cells"][2]["source"] = "old bootstrap"
    assert template.sync(nb, PATH) is True
    assert template.problems(nb, PATH) == []
    assert template.sync(nb, PATH) is False


def test_cli_new_refuses_overwrite(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(template, "_root", lambda: tmp_path)
    (tmp_path / "notebooks").mkdir()
    assert template.main(["new", "notebooks/09_new_one.ipynb", "New one"]) == 0
    nb = json.loads((tmp_path / "notebooks/09_new_one.ipynb").read_text())
    assert "".join(nb["cells"][0]["source"]).startswith("# New one")
    assert nb["metadata"]["course"]["title"] == "New one"        # a registry entry to fill in
    assert template.main(["new", "notebooks/09_new_one.ipynb", "New one"]) == 1
    assert template.main(["check"]) == 0
    assert template.main(["bogus"]) == 2


def test_badges_include_kaggle_and_url_in_one_place():
    import links
    line = links.badges_markdown("notebooks/03_x.ipynb")
    assert line.count("](") == 6 and "kaggle.com/kernels/welcome?src=https://github.com/" in line
    assert links.kaggle_url("notebooks/03_x.ipynb").endswith("/blob/main/notebooks/03_x.ipynb")
    with pytest.raises(ValueError):
        links.kaggle_url("03_x.ipynb")


def test_sync_renders_the_kaggle_line_of_the_registry_entry(nb):
    nb["metadata"]["course"]["kaggle"] = "The lesson uses both GPUs for something new."
    assert template.problems(nb, PATH) and "badges" in template.problems(nb, PATH)[0]
    assert template.sync(nb, PATH) is True and template.problems(nb, PATH) == []
    assert "GPU T4 x2** before running. The lesson uses both GPUs for something new.\n" in nb["cells"][0]["source"]


def test_the_bootstrap_installs_this_release_of_the_helpers():
    import links

    assert f'"{links.HELPERS_SOURCE}"' in template.BOOTSTRAP_SOURCE and links.HELPERS_SOURCE.endswith(
        f"@{links.HELPERS_COMMIT}")
    assert f'importlib.metadata.version("{links.HELPERS_DIST}")' in template.BOOTSTRAP_SOURCE
    assert '"--no-deps"' in template.BOOTSTRAP_SOURCE


def test_the_one_format_is_nbformats_writer_byte_for_byte(tmp_path):
    """canonical_text (standard library) gives what nbformat.write gives: on every notebook, on a new one, and on
    one with outputs, strings in place of line lists and a transient key."""
    from pathlib import Path

    import nbformat

    root = Path(__file__).resolve().parent.parent
    texts = [p.read_text(encoding="utf-8") for p in sorted((root / "notebooks").glob("*.ipynb"))]
    executed = template.new_notebook(PATH, "Some topic")
    executed["cells"][2].update(execution_count=1, outputs=[
        {"output_type": "stream", "name": "stdout", "text": "a\nb\n"},
        {"output_type": "display_data", "metadata": {},
         "data": {"image/png": "iVBOR\n", "text/plain": ["<Fig", "ure>\n"], "application/json": {"a": [1]}}},
        {"output_type": "execute_result", "execution_count": 1, "metadata": {}, "data": {"text/html": "<b>\n</b>"}}])
    executed["cells"][1]["metadata"]["trusted"] = True
    texts += [json.dumps(template.new_notebook(PATH, "Some topic")), json.dumps(executed)]
    for text in texts:
        path = tmp_path / "nb.ipynb"
        nbformat.write(nbformat.reads(text, as_version=4), path)
        assert template.canonical_text(json.loads(text)) == path.read_text(encoding="utf-8")
    assert len(texts) >= 13


def test_format_problems_and_sync_rewrites_in_the_one_format(tmp_path, monkeypatch):
    nb = template.new_notebook("notebooks/09_new_one.ipynb", "New one")
    assert template.format_problems(template.canonical_text(nb)) == []
    loose = json.dumps(nb, indent=2)
    [problem] = template.format_problems(loose)
    assert "from line 2" in problem and "make sync-notebooks" in problem
    assert "not JSON" in template.format_problems("{")[0]
    monkeypatch.setattr(template, "_root", lambda: tmp_path)
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks/09_new_one.ipynb").write_text(loose)
    assert template.main(["sync"]) == 0
    assert template.format_problems((tmp_path / "notebooks/09_new_one.ipynb").read_text()) == []


def _run_setup_cell(cwd, *python_flags, env_extra=None):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    src = cwd.parent / "src"          # the helpers package alone: the checkout may hold the editable install's
    if not src.exists():              # *.egg-info, which importlib.metadata would find on PYTHONPATH
        src.mkdir()
        (src / "helpers").symlink_to(root / "helpers")
    env = {**os.environ, "PYTHONPATH": str(src), "MULTIGPU_HELPERS": str(cwd / "no-such-source"),
           **(env_extra or {})}
    return subprocess.run([sys.executable, *python_flags, "-c", template.BOOTSTRAP_SOURCE], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_setup_cell_asks_for_the_distribution_by_name(tmp_path):
    tmp_path = tmp_path / "work"
    tmp_path.mkdir()
    """Installed by name: nothing is installed (the bogus source is never tried). Importable but not installed
    (python -S: no site-packages, helpers on PYTHONPATH): it installs, and fails here on the bogus source."""
    import tomllib
    from pathlib import Path

    import links

    root = Path(__file__).resolve().parent.parent
    assert tomllib.loads((root / "pyproject.toml").read_text())["project"]["name"] == links.HELPERS_DIST
    assert _run_setup_cell(tmp_path).returncode == 0
    importable_only = _run_setup_cell(tmp_path, "-S")
    assert importable_only.returncode != 0 and "no-such-source" in importable_only.stderr, importable_only.stderr


def test_the_setup_cell_names_a_helpers_py_that_hides_the_package(tmp_path):
    tmp_path = tmp_path / "work"
    tmp_path.mkdir()
    (tmp_path / "helpers.py").write_text("x = 1\n")
    run = _run_setup_cell(tmp_path)
    assert run.returncode != 0
    assert f"ImportError: {tmp_path / 'helpers.py'} hides the course's helpers package: rename it" in run.stderr
