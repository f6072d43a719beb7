"""`make html` writes executed copies a learner can read: outputs AND figures, and a closing line that is true."""

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LESSON = "notebooks/01_data_vs_device_parallelism.ipynb"


@pytest.mark.slow
def test_make_html_keeps_figures(tmp_path):
    # MPLBACKEND=Agg in the caller's environment (tests/conftest.py sets it) must not reach the kernel.
    result = subprocess.run(["make", "--no-print-directory", "html", f"HTML_DIR={tmp_path}", f"HTML_NOTEBOOKS={LESSON}"],
                            cwd=ROOT, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
                            env=dict(os.environ, MPLBACKEND="Agg"))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    page = tmp_path / "01_data_vs_device_parallelism.html"
    html = page.read_text()
    figures = re.findall(r'<img[^>]+src="data:image/png;base64,', html)
    assert len(figures) >= 3, f"lesson 01 draws 3 figures (two parallelism diagrams, the pipeline); found {len(figures)}"
    assert "replicas in sync: 2" in html                      # outputs, not just code
    said = re.search(r"\(open (\S+)\)", result.stdout).group(1)
    assert Path(said) == page and page.exists()               # the closing message names a page that exists
