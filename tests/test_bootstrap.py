"""The Colab bootstrap path: a notebook copied outside the repo installs the helpers from a git URL.

We cannot run Colab in CI, so we rebuild its situation: a fresh virtualenv that
already has TensorFlow & co. (like Colab) but not the helpers, a local git clone
standing in for GitHub (``MULTIGPU_HELPERS=git+file://...``). The bootstrap installs the helpers whenever
they are missing, as on Colab and Kaggle. Then 00_start_here runs top to bottom.
"""

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
DIST = "keras_multigpu_course_helpers"


def _local_clone(dest: Path) -> str:
    """A git repo holding the current working tree (tracked + untracked-not-ignored files)."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    for f in files:
        if (ROOT / f).is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, dest / f)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(git + ["init", "-q", "-b", "main"], cwd=dest, check=True)
    subprocess.run(git + ["add", "-A"], cwd=dest, check=True)
    subprocess.run(git + ["commit", "-q", "-m", "snapshot"], cwd=dest, check=True)
    return f"file://{dest}"


def _colab_like_venv(dest: Path) -> Path:
    """A venv that sees every package of ours except the helpers (like Colab: TF present, no helpers)."""
    subprocess.run([sys.executable, "-m", "venv", str(dest / "venv")], check=True)
    ours = Path(sysconfig.get_paths()["purelib"])
    view = dest / "site-view"
    view.mkdir()
    for entry in ours.iterdir():
        if entry.name.startswith(("__editable__", DIST, "helpers", "pip")) or entry.suffix == ".pth":
            continue
        (view / entry.name).symlink_to(entry)
    py = dest / "venv" / "bin" / "python"
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    (Path(purelib) / "colab_like.pth").write_text(str(view) + "\n")
    return py


@pytest.mark.slow
@pytest.mark.one_stack(reason="it rebuilds Colab's situation (a git install into a venv that has the frameworks); "
                       "lesson 00 itself runs on every stack through nbval, so the first stack's run covers it")
def test_notebook_bootstraps_from_git_outside_repo(tmp_path, monkeypatch):
    (tmp_path / "clone").mkdir()
    url = _local_clone(tmp_path / "clone")
    py = _colab_like_venv(tmp_path)
    probe = subprocess.run([str(py), "-c", "import importlib.util as u; print(u.find_spec('helpers'), "
                            "u.find_spec('tensorflow') is not None)"], capture_output=True, text=True, cwd=tmp_path)
    assert probe.stdout.split() == ["None", "True"], probe

    kernels = tmp_path / "jupyter" / "kernels" / "colab-like"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [str(py), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "colab-like", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("MULTIGPU_HELPERS", f"git+{url}")

    work = tmp_path / "elsewhere"
    work.mkdir()
    shutil.copy(ROOT / "notebooks" / "00_start_here.ipynb", work)
    nb = nbformat.read(work / "00_start_here.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("import helpers; print('HELPERS_FROM', helpers.__file__)"))
    NotebookClient(nb, timeout=300, kernel_name="colab-like",
                   resources={"metadata": {"path": str(work)}}).execute()

    def text(cell):
        return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")
    install = nb.cells[2]                                   # the setup cell that pip-installs the helpers
    assert "pip" in install.source and "install" in install.source and install.get("execution_count"), install
    assert not [o for o in install.get("outputs", []) if o.get("output_type") == "error"]
    origin = text(nb.cells[-1]).split("HELPERS_FROM", 1)[1].strip()
    assert origin.startswith(str(tmp_path / "venv")) and str(ROOT) not in origin
