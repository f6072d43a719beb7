"""helpers.config: the quick/full switch."""

import pytest

from helpers import config


def test_default_is_quick(monkeypatch):
    monkeypatch.delenv(config.ENV_VAR, raising=False)
    assert config.mode() == "quick" and config.is_quick()
    assert config.pick(quick=1, full=10) == 1


def test_full(monkeypatch):
    monkeypatch.setenv(config.ENV_VAR, " FULL ")
    assert config.mode() == "full" and not config.is_quick()
    assert config.pick(quick=1, full=10) == 10


def test_typo_is_an_error(monkeypatch):
    monkeypatch.setenv(config.ENV_VAR, "ful")
    with pytest.raises(ValueError, match="not a mode"):
        config.mode()
