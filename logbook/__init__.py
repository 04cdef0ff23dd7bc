"""logbook: audit large-model training runs from their logs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from logbook.findings import Findings
    from logbook.live import LiveDetector
    from logbook.run import Run, RunMeta
    from logbook.schema import SCHEMA_VERSION
    from parsers import read_log, read_logs

__all__ = [
    "Findings",
    "LiveDetector",
    "Run",
    "RunMeta",
    "SCHEMA_VERSION",
    "read_log",
    "read_logs",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # loaded on first use: the command line sets polars up before polars is imported
    if name in ("Run", "RunMeta"):
        from logbook import run

        return getattr(run, name)
    if name in ("read_log", "read_logs"):
        import parsers

        return getattr(parsers, name)
    if name == "Findings":
        from logbook.findings import Findings

        return Findings
    if name == "live":  # (a subpackage: ``logbook.live.LiveDetector``)
        import importlib

        return importlib.import_module("logbook.live")
    if name == "LiveDetector":
        from logbook.live import LiveDetector

        return LiveDetector
    if name == "SCHEMA_VERSION":
        from logbook.schema import SCHEMA_VERSION

        return SCHEMA_VERSION
    raise AttributeError(f"module 'logbook' has no attribute {name!r}")
