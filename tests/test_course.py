"""helpers.course: badge URLs derived from the notebook's own path."""

import pytest

from helpers import course


def test_urls_point_at_path():
    p = "notebooks/03_x_y.ipynb"
    assert course.colab_url(p).endswith(f"/{course.REPO_SLUG}/blob/{course.BRANCH}/{p}")
    assert course.binder_url(p).endswith("?labpath=notebooks%2F03_x_y.ipynb")
    md = course.badges_markdown(p)
    assert course.colab_url(p) in md and course.binder_url(p) in md


@pytest.mark.parametrize("bad", ["03_x.ipynb", "notebooks/03_x.py", "other/03_x.ipynb"])
def test_bad_paths(bad):
    with pytest.raises(ValueError, match="notebooks/NN_name.ipynb"):
        course.colab_url(bad)


def test_course_map_matches_notebooks_and_readme():
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    on_disk = sorted(p.name for p in (root / "notebooks").glob("*.ipynb"))
    assert [name for name, _, _ in course.LESSONS] == on_disk
    readme = (root / "README.md").read_text()
    for name, _, _ in course.LESSONS:
        assert f"notebooks/{name}" in readme, name


def test_print_course_map(capsys):
    course.print_course_map()
    assert capsys.readouterr().out.count("\n") == len(course.LESSONS)
