"""``logbook replay`` (being written). torch is imported only inside these commands."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the command group to the app."""
