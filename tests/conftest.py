"""Shared test set-up."""

import pytest


@pytest.fixture(autouse=True)
def _no_terminal_width(monkeypatch):
    """The CLI's tables wrap at ``COLUMNS`` when it is set; parallel test workers inherit
    one (80), a plain run does not: every test sees the output of a non-terminal."""
    monkeypatch.delenv("COLUMNS", raising=False)
