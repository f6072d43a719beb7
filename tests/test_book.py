"""The website builder (tools/book.py) and the pure parts of its browser check (tools/book_check.py).

The browser itself runs in `make book-test`; these tests run anywhere, in the course's environment, without Sphinx.
"""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import book_check  # noqa: E402
import links  # noqa: E402  (tools/links.py)

import book  # noqa: E402

URL, BRANCH = links.REPO_URL, links.BRANCH
LESSONS_ON_DISK = sorted(f"notebooks/{p.name}" for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _executed(path: str, backend: str = "tensorflow", replicas: str = "2 (CPU split into logical CPUs) -> "
              "['/device:CPU:0', '/device:CPU:1']", figures: int = 0) -> dict:
    """A lesson as nbconvert leaves it after a run: the real notebook, with the Setup cell's printed lines."""
    nb = json.loads((ROOT / path).read_text())
    setup = next(c for c in nb["cells"] if c["cell_type"] == "code" and "setup_notebook" in "".join(c["source"]))
    setup["outputs"] = [{"output_type": "stream", "name": "stdout", "text": [
        "stack: python 3.11.7 | tensorflow 2.21.0 | keras 3.15.1 | jax 0.10.2 | numpy 2.4.6 "
        "(inside the supported range)\n",
        f"Keras backend: {backend} | mode: quick (set MULTIGPU_MODE=full to train for real) | running on: local\n",
        f"replicas: {replicas}\n"]}]
    setup["outputs"] += [{"output_type": "display_data", "metadata": {}, "data": {"image/png": "iVBORw0KGgo=",
                                                                                   "text/plain": "<Figure>"}}] * figures
    return nb


# ---- which lessons, in which order -------------------------------------------------------------

def test_every_lesson_on_disk_in_file_name_order():
    assert book.lessons() == LESSONS_ON_DISK and len(LESSONS_ON_DISK) >= 11


def test_a_new_lesson_is_picked_up_without_a_list_to_edit(tmp_path):
    (tmp_path / "notebooks").mkdir()
    for name in ("11_finetune_llm_across_devices.ipynb", "00_start_here.ipynb", "02_b.ipynb"):
        (tmp_path / "notebooks" / name).write_text("{}")
    assert book.lessons(root=tmp_path) == ["notebooks/00_start_here.ipynb", "notebooks/02_b.ipynb",
                                           "notebooks/11_finetune_llm_across_devices.ipynb"]


@pytest.mark.parametrize("bad", ["00_start_here.ipynb", "notebooks/start.ipynb", "docs/00_x.ipynb",
                                 "notebooks/00_x.py"])
def test_a_path_that_is_not_a_lesson_is_refused(bad):
    with pytest.raises(ValueError, match="not a lesson"):
        book.lessons([bad])


# ---- links ----------------------------------------------------------------------------------

PAGES = book.page_map(["notebooks/04_batchnorm_variable_error.ipynb", "notebooks/05_x.ipynb"])


@pytest.mark.parametrize("source, target, expected", [
    # between pages: relative, anchors kept (README is the site's index)
    ("notebooks/04_batchnorm_variable_error.ipynb", "../TROUBLESHOOTING.md#multi-worker", "../TROUBLESHOOTING.md#multi-worker"),
    ("notebooks/04_batchnorm_variable_error.ipynb", "05_x.ipynb", "05_x.ipynb"),
    ("notebooks/04_batchnorm_variable_error.ipynb", "../README.md", "../index.md"),
    ("TROUBLESHOOTING.md", "README.md#lessons", "index.md#lessons"),
    ("README.md", "notebooks/05_x.ipynb", "notebooks/05_x.ipynb"),
    ("README.md", "quickstart/train_2gpus.py", "quickstart/train_2gpus.md"),
    ("docs/workshop.md", "../notebooks/05_x.ipynb", "../notebooks/05_x.ipynb"),
    # repository files that are not pages: the code host
    ("README.md", "helpers/versions.py", f"{URL}/blob/{BRANCH}/helpers/versions.py"),
    ("notebooks/05_x.ipynb", "../helpers", f"{URL}/tree/{BRANCH}/helpers"),
    ("README.md", "notebooks/09_not_in_this_build.ipynb", f"{URL}/blob/{BRANCH}/notebooks/09_not_in_this_build.ipynb"),
    # kept as they are
    ("README.md", "https://docs.astral.sh/uv/", "https://docs.astral.sh/uv/"),
    ("TROUBLESHOOTING.md", "#setup-problems", "#setup-problems"),
    ("README.md", "mailto:someone@example.org", "mailto:someone@example.org"),
])
def test_rewrite_link(source, target, expected):
    assert book.rewrite_link(target, source, PAGES, URL, BRANCH) == expected


def test_the_quick_start_page_links_to_its_script_on_the_code_host():
    """README's section lands on quickstart/train_2gpus.md: its links resolve from README, point from that page."""
    page = PAGES[book.QUICKSTART]
    assert book.rewrite_link("quickstart/train_2gpus.py", "README.md", PAGES, URL, BRANCH, page=page) \
        == f"{URL}/blob/{BRANCH}/quickstart/train_2gpus.py"
    assert book.rewrite_link("TROUBLESHOOTING.md", "README.md", PAGES, URL, BRANCH, page=page) == "../TROUBLESHOOTING.md"


def test_links_in_code_are_left_alone():
    text = ("See [the helper](helpers/devices.py) and `[x](helpers/a.py)`.\n```python\nd[0](helpers/b.py)\n```\n"
            "[ref]: helpers/c.py\n")
    out = book.rewrite_markdown(text, "README.md", PAGES, URL, BRANCH)
    assert f"[the helper]({URL}/blob/{BRANCH}/helpers/devices.py)" in out
    assert "`[x](helpers/a.py)`" in out and "d[0](helpers/b.py)" in out
    assert f"[ref]: {URL}/blob/{BRANCH}/helpers/c.py" in out


def test_the_quick_start_page_is_readmes_section_with_the_script():
    section = book.markdown_section((ROOT / "README.md").read_text(), book.QUICKSTART_HEADING)
    assert section.startswith(book.QUICKSTART_HEADING)
    assert (ROOT / book.QUICKSTART).read_text().strip() in section   # the script's bytes (tests/test_quickstart.py)
    assert "\n## " not in section                                      # stops at the next section
    with pytest.raises(ValueError, match="no line"):
        book.markdown_section("# a\n", "## missing")


# ---- the "Ran on" label ----------------------------------------------------------------------

def test_the_label_says_what_the_setup_printed():
    nb = book.label_lesson(_executed("notebooks/01_data_vs_device_parallelism.ipynb"))
    box = nb["cells"][1]
    assert box["cell_type"] == "markdown" and "".join(nb["cells"][0]["source"]).startswith("# ")
    assert box["source"].startswith("```{admonition} Ran on 2 logical CPUs, TensorFlow 2.21.0, Keras 3.15.1\n")
    assert f":class: {book.RAN_ON_CLASS}" in box["source"] and "MULTIGPU_MODE=quick" in box["source"]


def test_a_jax_lesson_is_labelled_with_its_jax_devices():
    nb = _executed("notebooks/08_keras3_distribution_api.ipynb", backend="jax",
                   replicas="4 JAX devices -> ['TFRT_CPU_0', 'TFRT_CPU_1', 'TFRT_CPU_2', 'TFRT_CPU_3']")
    box = book.label_lesson(nb)["cells"][1]["source"]
    assert box.startswith("```{admonition} Ran on 4 JAX CPU devices, JAX 0.10.2, Keras 3.15.1\n")
    assert book.devices_phrase("2 (GPUs) -> ['/device:GPU:0', '/device:GPU:1']") == "2 GPUs"
    assert book.devices_phrase("2 JAX devices -> ['cuda:0', 'cuda:1']") == "2 JAX GPU devices"


def test_the_pytorch_lesson_is_labelled_with_its_processes():
    """Lesson 12's Setup prints its torchrun job ("a job here: ...") and PyTorch's version, not replicas."""
    nb = _executed("notebooks/12_pytorch_backend_across_devices.ipynb")
    nb["cells"][3]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": [
        "stack: python 3.11.7 | tensorflow 2.21.0 | keras 3.15.1 | jax 0.10.2 | numpy 2.4.6 (inside the supported "
        "range)\n", "PyTorch 2.13.0+cpu | Keras backend: torch | mode: quick (set MULTIGPU_MODE=full to train for "
        "real) | running on: local\n",
        "a job here: 2 processes, on the CPU (fewer than 2 GPUs), gloo between them -> ['cpu', 'cpu']\n"]}]
    box = book.label_lesson(nb)["cells"][1]["source"]
    assert box.startswith("```{admonition} Ran on 2 CPU processes (gloo), PyTorch 2.13.0+cpu, Keras 3.15.1\n"), box
    assert "Keras backend torch" in box
    assert book.devices_phrase("2 processes, one per GPU, nccl between them -> ['cuda:0', 'cuda:1']") == \
        "2 GPU processes (nccl)"


def test_a_lesson_that_was_not_executed_cannot_be_labelled():
    with pytest.raises(ValueError, match="no stack and no replicas line"):
        book.ran_on(json.loads((ROOT / LESSONS_ON_DISK[0]).read_text()))   # stored without outputs


# ---- the source tree -------------------------------------------------------------------------

def test_prepare_writes_every_page_with_lessons_in_order(tmp_path):
    executed, src = tmp_path / "executed", tmp_path / "src"
    executed.mkdir()
    chosen = ["notebooks/04_batchnorm_variable_error.ipynb", "notebooks/01_data_vs_device_parallelism.ipynb"]
    for path in chosen:
        (executed / Path(path).name).write_text(json.dumps(_executed(path)))
    written = book.prepare(executed, src, chosen)
    assert sorted(written) == sorted(["notebooks/01_data_vs_device_parallelism.ipynb",
                                      "notebooks/04_batchnorm_variable_error.ipynb", "index.md",
                                      "quickstart/train_2gpus.md", "TROUBLESHOOTING.md", "docs/workshop.md"])
    index = (src / "index.md").read_text()
    assert index.index("<notebooks/01_data_vs_device_parallelism>") < index.index("<notebooks/04_batchnorm_variable_error>")
    assert "](notebooks/01_data_vs_device_parallelism.ipynb)" in index                 # a page: relative
    assert f"]({URL}/blob/{BRANCH}/notebooks/00_start_here.ipynb)" in index            # not built: the code host
    lesson = json.loads((src / "notebooks/04_batchnorm_variable_error.ipynb").read_text())
    assert lesson["cells"][1]["source"].startswith("```{admonition} Ran on")
    assert "`moving_mean" not in index.split("```{toctree}")[2]   # toc titles are plain text (no backticks)


def test_the_contents_are_titled_by_the_registry():
    nb = _executed("notebooks/04_batchnorm_variable_error.ipynb")
    assert book.lesson_title(nb, "notebooks/04_batchnorm_variable_error.ipynb") == \
        "04 " + nb["metadata"]["course"]["title"].replace("`", "")
    del nb["metadata"]["course"]
    assert book.lesson_title(nb, "notebooks/04_x.ipynb").startswith("04 The BatchNorm")   # else its heading


def test_prepare_refuses_a_lesson_that_was_not_executed(tmp_path):
    with pytest.raises(FileNotFoundError, match="execute notebooks/01"):
        book.prepare(tmp_path, tmp_path / "src", ["notebooks/01_data_vs_device_parallelism.ipynb"])


def test_prepare_empties_only_a_folder_it_made_and_checks_its_inputs_first(tmp_path):
    executed, chosen = tmp_path / "executed", ["notebooks/04_batchnorm_variable_error.ipynb"]
    executed.mkdir()
    (executed / Path(chosen[0]).name).write_text(json.dumps(_executed(chosen[0])))
    mine = tmp_path / "mine"                                       # a folder of the user's, given as --out
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match=r"book.py prepare did not make it \(no \.made-by-book-prepare"):
        book.prepare(executed, mine, chosen)
    assert (mine / "notes.txt").read_text() == "keep me"
    assert book.main(["prepare", "--executed", str(executed), "--out", str(mine), *chosen]) == 1
    src = tmp_path / "src"
    book.prepare(executed, src, chosen)                            # made here: marked, and emptied next time
    (src / "stale.md").write_text("old page")
    with pytest.raises(FileNotFoundError):                         # a missing input: nothing deleted yet
        book.prepare(executed, src, chosen + ["notebooks/01_data_vs_device_parallelism.ipynb"])
    assert (src / "stale.md").exists()
    book.prepare(executed, src, chosen)
    assert not (src / "stale.md").exists() and (src / book.MARK).is_file() and (src / "index.md").is_file()
    empty = tmp_path / "empty"                                     # an empty folder: nothing to lose
    empty.mkdir()
    book.prepare(executed, empty, chosen)
    (tmp_path / "link").symlink_to(src)
    with pytest.raises(ValueError, match="is a symbolic link"):
        book.prepare(executed, tmp_path / "link", chosen)


def test_the_sites_requirements_stay_out_of_the_course_environment():
    site = {ln.split("==")[0] for ln in (ROOT / "requirements-book.txt").read_text().splitlines()
            if ln and not ln.startswith("#")}
    assert {"sphinx", "myst-nb", "sphinx-book-theme", "playwright"} <= site
    for req in ("requirements.txt", "requirements-hosted.txt", "requirements-kaggle.txt", "requirements-latest.txt",
                "requirements-nightly.txt", "environment.yml"):
        text = (ROOT / req).read_text().lower()
        assert not [name for name in site if name in text], req
    in_course_venv = Path(sys.prefix).resolve() in {(ROOT / v).resolve() for v in (".venv", ".venv-hosted")}
    if in_course_venv:
        for name in ("myst-nb", "sphinx-book-theme", "playwright"):
            assert importlib.util.find_spec(name.replace("-", "_")) is None, f"{name} is installed in {sys.prefix}"


# ---- the browser check's rules (the browser runs in make book-test) ----------------------------

def test_noise_lines_cover_the_notebook_checks_noise():
    import nblint

    for pattern in nblint.NOISE + nblint.NOISE_WITHOUT_DRIVER:
        assert pattern in book.NOISE, pattern


def test_noise_lines_flag_start_up_noise_and_nothing_else():
    planted = (f"{book_check.PLANTED_NOISE}\n"
               "I0000 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.\n"
               "E0000 cuda_dnn.cc:8310] Unable to register cuDNN factory: already registered\n"
               "UserWarning: Your input ran out of data\n")
    assert len(book.noise_lines(planted)) == 3
    assert book_check.stderr_problems([planted, "Epoch 1/2\n"]) == book.noise_lines(planted)
    assert book_check.stderr_problems(["replicas: 2\n", ""]) == []


def test_launch_links_must_be_the_course_links_of_that_notebook():
    path = "notebooks/04_batchnorm_variable_error.ipynb"
    good = [links.colab_url(path), links.kaggle_url(path), links.binder_url(path)]
    assert book_check.launch_problems(path, good, links) == []
    other = links.colab_url("notebooks/05_pickling_checkpoint_error.ipynb")
    problems = book_check.launch_problems(path, good[:2] + [other], links)
    assert problems == [f"no Binder link to {path}", f"a launch link that opens another notebook: {other}"]


def test_figures_and_cells_are_counted_from_the_executed_copy():
    nb = _executed("notebooks/01_data_vs_device_parallelism.ipynb", figures=3)
    assert book_check.image_outputs(nb) == 3
    assert book_check.code_cells(nb) == sum(c["cell_type"] == "code" for c in nb["cells"]) > 5


def test_the_browser_is_found_or_the_message_says_how_to_get_one():
    assert book_check.find_browser({"BOOK_BROWSER": "/opt/chrome"}, which=lambda n: None) == "/opt/chrome"
    assert book_check.find_browser({}, which=lambda n: "/usr/bin/" + n if n == "google-chrome" else None) \
        == "/usr/bin/google-chrome"
    with pytest.raises(RuntimeError, match="apt-get install -y chromium"):
        book_check.find_browser({}, which=lambda n: None)


def test_site_outputs_go_to_ignored_folders():
    for path in ("_build/book/html/index.html", "_output/book-test/lesson.png", ".venv-book/bin/python",
                 ".venv-latest/bin/python"):
        ignored = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT).returncode == 0
        assert ignored, f"{path} is not git-ignored: .ci/run would find it as a stray file"
