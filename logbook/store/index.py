"""``runs.parquet``: one row per run of the store, the first thing a fleet query reads."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from logbook.atomic import atomic_path
from logbook.errors import InputError

INDEX = "runs.parquet"
TABLES = ("metrics", "events", "findings")

SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String(),  # stable: from the input's path and the run's place in it
    "run": pl.String(),  # the run's name
    "input": pl.String(),  # the path given (resolved)
    "sources": pl.List(pl.String()),  # the files read for it
    "stamp": pl.String(),  # size:mtime of the input when read
    "content_hash": pl.String(),  # SHA-256 of the input's files
    "format": pl.String(),
    "records": pl.Int64(),
    "first_step": pl.Int64(),
    "last_step": pl.Int64(),
    "segments": pl.Int64(),
    "restarts": pl.Int64(),
    "lost_steps": pl.Int64(),  # steps computed again after restarts
    "goodput": pl.Float64(),  # where the log's times tell it, else null
    "critical": pl.Int64(),  # findings by severity
    "warning": pl.Int64(),
    "info": pl.Int64(),
    "worst": pl.String(),  # the worst finding: "severity kind at step"
    "incidents": pl.String(),  # JSON: {kind: {severity: count}}
    "caveats": pl.List(pl.String()),
    "error": pl.String(),  # why the input could not be read (then no tables)
    "seconds": pl.Float64(),  # time the audit of its input took
}


def empty() -> pl.DataFrame:
    return pl.DataFrame(schema=SCHEMA)


def frame(rows: list[dict]) -> pl.DataFrame:
    """Index rows as a frame of :data:`SCHEMA`."""
    return pl.DataFrame([{c: r.get(c) for c in SCHEMA} for r in rows], schema=SCHEMA)


def read_index(store: str | Path) -> pl.DataFrame:
    """The store's index (empty when the store is new); a damaged one is an input error."""
    path = Path(store) / INDEX
    if not path.exists():
        return empty()
    try:
        df = pl.read_parquet(path)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise InputError(f"{path}: not a readable run index ({exc})") from None
    missing = [c for c in SCHEMA if c not in df.columns]
    if missing:
        raise InputError(f"{path}: not a run index (no {', '.join(missing)})")
    return df.select(pl.col(c).cast(t) for c, t in SCHEMA.items())


def write_index(store: Path, df: pl.DataFrame) -> None:
    with atomic_path(store / INDEX) as tmp:
        df.sort("input", "run_id").write_parquet(tmp)


def partition(store: Path, table: str, run_id: str) -> Path:
    return store / table / f"run_id={run_id}" / "part.parquet"
