"""logbook: audit large-model training runs from their logs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from logbook.run import Run, RunMeta
    from logbook.schema import SCHEMA_VERSION

__all__ = ["Run", "RunMeta", "SCHEMA_VERSION"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # loaded on first use: the command line sets polars up before polars is imported
    if name in ("Run", "RunMeta"):
        from logbook import run

        return getattr(run, name)
    if name == "SCHEMA_VERSION":
        from logbook.schema import SCHEMA_VERSION

        return SCHEMA_VERSION
    raise AttributeError(f"module 'logbook' has no attribute {name!r}")
