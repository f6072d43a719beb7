"""Sphinx configuration of the course website (`make book`; the source tree is written by tools/book.py).

Sphinx + myst-nb + sphinx-book-theme: pure Python, nothing fetched from the web at build time. Execution is off:
the lessons arrive executed (the Makefile runs them once in .venv), so this environment needs no TensorFlow.
The repository URL and branch come from tools/links.py, the one place they are written.
"""

import importlib.util
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("links", _ROOT / "tools" / "links.py")
links = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(links)

project = "Multi-GPU training with Keras"
author = "the course's contributors"
copyright = "the course's contributors, Apache-2.0"
root_doc = "index"
extensions = ["myst_nb"]
exclude_patterns = ["_build", "**.ipynb_checkpoints"]

# The lessons are executed before Sphinx runs (tools/book.py's docstring says how).
nb_execution_mode = "off"
nb_output_stderr = "show"          # stderr stays visible: the browser test fails on native noise there
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 4           # links like TROUBLESHOOTING.md#some-heading resolve (GitHub-style slugs)
# The error index and the README quote headings and HTML comments that are fine as they are. A notebook's cells
# are all lexed as Python, so a %%writefile cell that writes a Slurm job script (bash: `$((...))`) fails the
# Python lexer; Sphinx then shows it without colours, which is right for bash.
suppress_warnings = ["myst.header", "misc.highlighting_failure"]

html_theme = "sphinx_book_theme"
html_title = project
html_static_path = []
html_last_updated_fmt = "%Y-%m-%d"
html_theme_options = {
    "repository_url": links.REPO_URL,
    "repository_branch": links.BRANCH,
    "path_to_docs": "",            # the source tree mirrors the repository: notebooks/NN_x.ipynb
    "use_repository_button": True,
    "use_download_button": True,
    "launch_buttons": {"colab_url": "https://colab.research.google.com", "binderhub_url": "https://mybinder.org",
                       "notebook_interface": "jupyterlab"},
    "show_toc_level": 2,
}
