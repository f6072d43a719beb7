"""helpers.versions: version parsing, the supported range, the one-line stack report."""

import sys

import pytest

from helpers import versions
from helpers.subproc import run_python


@pytest.mark.parametrize("text, want", [("3.15.1", (3, 15, 1)), ("2.21.0rc1", (2, 21, 0)), ("0.7.2", (0, 7, 2)),
                                        ("3.13.0+local", (3, 13, 0)), ("2.20", (2, 20))])
def test_version_tuple(text, want):
    assert versions.version_tuple(text) == want


@pytest.mark.parametrize("bad", ["", "abc", None, 3.15])
def test_version_tuple_rejects(bad):
    with pytest.raises(ValueError, match="not a version"):
        versions.version_tuple(bad)


def test_at_least_reads_the_installed_version(monkeypatch):
    monkeypatch.setattr(versions, "installed", lambda d: {"keras": "3.13.2", "jax": "0.10.2"}.get(d))
    assert not versions.at_least("keras", "3.14") and versions.at_least("keras", "3.13")
    assert versions.at_least("jax", "0.8") and not versions.at_least("jax", "0.11")
    with pytest.raises(ValueError, match="not installed"):
        versions.at_least("torch", "2.0")


def test_keras_nightly_counts_as_keras(monkeypatch):
    """keras-nightly installs the import name keras: the Setup line and at_least must see its version."""
    found = {"keras-nightly": "3.16.0.dev2026102704", "tensorflow": "2.21.0"}

    def version(name):
        if name not in found:
            raise versions.md.PackageNotFoundError(name)
        return found[name]

    monkeypatch.setattr(versions.md, "version", version)
    assert versions.installed("keras") == "3.16.0.dev2026102704" and versions.at_least("keras", "3.16")
    assert versions.installed("jax") is None and versions.versions()["keras"] == "3.16.0.dev2026102704"
    assert "keras 3.16.0.dev2026102704 (supported: 3.13-3.15)" in versions.stack_line()


def test_outside_the_range_is_a_note_not_an_error():
    old = {"python": "3.10.12", "tensorflow": "2.19.0", "keras": "3.16.0", "jax": "0.10.2"}
    assert versions.outside_range(old) == ["python 3.10.12 (supported: 3.11-3.13)",
                                           "tensorflow 2.19.0 (supported: 2.20-2.21)",
                                           "keras 3.16.0 (supported: 3.13-3.15)"]
    line = versions.stack_line(old)
    assert line.count("\n") == 1 and "may differ" in line and "keras 3.16.0" in line


def test_this_stack_is_supported():
    assert versions.outside_range() == [], versions.stack_line()


def test_importing_versions_imports_no_framework():
    r = run_python("import sys, helpers.versions as v; v.stack_line(); "
                   "print(sorted(m for m in ('tensorflow', 'keras', 'jax') if m in sys.modules))", echo=False)
    assert r.ok and r.stdout.strip() == "[]", r.stderr[-1000:]


def test_pickle_wording_live_or_recorded():
    rows = versions.pickle_wording(("3.6", "3.8"))
    assert [r["python"] for r in rows[:2]] == ["3.6", "3.8"]
    assert rows[0]["message"] == "TypeError: can't pickle module objects"
    assert rows[1]["message"] == "TypeError: cannot pickle 'module' object"
    assert rows[-1] == {"python": f"{sys.version_info.major}.{sys.version_info.minor} (this kernel)",
                        "message": "TypeError: cannot pickle 'module' object", "source": "live"}
    with pytest.raises(ValueError, match="version"):
        versions.find_interpreter("three")
