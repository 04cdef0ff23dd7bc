"""Shared by the CLI tests: run ``logbook`` in-process and capture what it says."""

from __future__ import annotations

import sys

from logbook import cli


def invoke(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``logbook ARGS``."""
    monkeypatch.setattr(sys, "argv", ["logbook", *args])
    try:
        cli.main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    out = capsys.readouterr()
    return code, out.out, out.err
