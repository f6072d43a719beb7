"""helpers.course: the course map stays in step with the notebooks and README."""

from helpers import course


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
