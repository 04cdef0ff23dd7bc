"""The runs of the logs given on a command line, and ``--run`` to pick one."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from logbook.run import Run

RunOpt = Annotated[
    str | None,
    typer.Option("--run", help="Only this run, where the input holds several (see parse)."),
]


def load_runs(
    logs: list[Path], fmt: str | None, tz: str = "UTC", run: str | None = None
) -> list[Run]:
    """Every run in the logs (one unless a file holds several), or the one named."""
    from logbook.errors import UsageError
    from parsers import read_logs

    runs = read_logs(list(logs), fmt, tz)
    if run is None:
        return runs
    names = [run_name(r, i) for i, r in enumerate(runs)]
    if run not in names:
        raise UsageError(f"--run {run!r}: not in this input (runs: {', '.join(names)})")
    return [runs[names.index(run)]]


def run_name(run: Run, index: int) -> str:
    """A run's name as ``--run`` takes it."""
    return run.meta.name or (
        Path(run.meta.sources[0]).name if run.meta.sources else f"run{index + 1}"
    )


def file_stem(name: str) -> str:
    """A run name made safe as a file name."""
    return re.sub(r"[^\w.+-]+", "_", name).strip("._") or "run"
