"""MLflow's file store: a run's directory (``mlruns/<experiment>/<run>/``), its
``metrics/`` directory, or one metric file. Each metric is a file named for it (a key
with ``/`` in it is a path under ``metrics/``), one line a logged value::

    1628697792090 332.6841735839844 0

(milliseconds since the epoch, the value, the step). The values of one step are one
record (the latest time of them is its time); a metric logged twice at one step keeps its
last value (a caveat counts them). Keys keep their names, the usual ones mapped (``loss``,
``train_loss``, ``learning_rate`` -> ``lr``, ...); lines that are not three numbers are
unrecognized.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from logbook.errors import InputError
from logbook.parsed import Parsed
from parsers.columns import whole_counts, with_core
from parsers.reader import aliases

NAME = "mlflow"
DESCRIPTION = "an MLflow file-store run (mlruns/<experiment>/<run>/metrics/<key>)"
EXAMPLE = "1628697792090 332.6841735839844 0"
MAPS = "each metric file's key->its column (loss, lr, ... by name); its step->step"
SNIFF_MAX = 0  # (read by path only)
_LINE = re.compile(r"^\s*(\d{9,16})\s+(\S+)\s+(-?\d{1,18})\s*$")
_MAX_FILES = 2000  # metric files read from one run, at most


def sniff(head: list[str]) -> int:
    """MLflow's metric files are recognized by path (``sniff_path``)."""
    return 0


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    raise InputError(f"{name}: an MLflow metric file is read by its path: give the file")


def _metric_lines(path: Path) -> bool:
    """Whether a file's first line that is not a comment is a metric line."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for _ in range(50):
                line = fh.readline(4096)
                if not line:
                    return False
                if line.strip() and not line.lstrip().startswith("#"):
                    return bool(_LINE.match(line))
    except OSError:
        return False
    return False


def _metric_files(metrics: Path) -> list[Path]:
    return sorted(p for p in metrics.rglob("*") if p.is_file())[:_MAX_FILES]


def _runs_under(path: Path) -> list[Path]:
    """The run directories at or under ``path`` (a run directory holds ``metrics/``)."""
    if (path / "metrics").is_dir():
        return [path]
    return sorted(p.parent for p in path.glob("*/metrics") if p.is_dir()) + sorted(
        p.parent for p in path.glob("*/*/metrics") if p.is_dir()
    )


def sniff_path(path: Path) -> int:
    """95 for a run's directory or its ``metrics/`` directory whose files are metric
    files, or for such a file under a ``metrics`` directory; 60 for a lone file of metric
    lines; 50 for a directory of runs; else 0."""
    if path.is_dir():
        metrics = path if path.name == "metrics" else path / "metrics"
        if metrics.is_dir():
            files = _metric_files(metrics)
            return 95 if files and _metric_lines(files[0]) else 0
        runs = _runs_under(path)
        return (
            50
            if runs and any(_metric_lines(f) for f in _metric_files(runs[0] / "metrics")[:1])
            else 0
        )
    if not _metric_lines(path):
        return 0
    return 95 if "metrics" in path.parts[:-1] else 60


def read_path(path: Path) -> list[Parsed]:
    """One part: the run at ``path`` (a run directory, its ``metrics/``, or one file)."""
    if path.is_dir():
        metrics_dir = path if path.name == "metrics" else path / "metrics"
        runs = [] if metrics_dir.is_dir() else _runs_under(path)
        if len(runs) == 1:  # (an experiment's directory, or mlruns/, of one run)
            return read_path(runs[0])
        if not metrics_dir.is_dir():
            raise InputError(
                f"{path}: holds {len(runs)} MLflow runs: give one run's directory "
                "(mlruns/<experiment>/<run>)"
            )
        files = [
            (f, "/".join(f.relative_to(metrics_dir).parts)) for f in _metric_files(metrics_dir)
        ]
    else:
        metrics_dir = None
        files = [(path, path.name)]
    frames, lines, unrec, repeats = [], 0, [], 0
    for f, key in files:
        rows, bad, n = _read_metric(f)
        unrec += [lines + b for b in bad]  # (numbered over the files in their order)
        lines += n
        if rows.height:
            repeats += rows.height - rows.get_column("step").n_unique()
            col = aliases.canonical(key) or aliases.column_of(key)
            frames.append(
                rows.unique("step", keep="last", maintain_order=True).select(
                    "step", pl.col("value").alias(col), pl.col("ms").alias(f"_ms_{col}")
                )
            )
    if not frames:
        raise InputError(f"{path}: no MLflow metric lines")
    wide = frames[0]
    for fr in frames[1:]:
        wide = wide.join(fr, on="step", how="full", coalesce=True)
    ms = [c for c in wide.columns if c.startswith("_ms_")]
    wide = (
        wide.sort("step")
        .with_columns(
            pl.from_epoch(pl.max_horizontal(ms), time_unit="ms")
            .dt.replace_time_zone("UTC")
            .alias("time")
        )
        .drop(ms)
    )
    wide = wide.with_row_index("line", offset=1).with_columns(pl.col("line").cast(pl.Int64))
    caveats = [f"an MLflow run: {len(frames)} metric file(s), a record a step"]
    if repeats:
        caveats.append(f"{repeats} value(s) logged again at a step they had: the last kept")
    meta = {"file": str(metrics_dir or path), "lines": lines, "caveats": caveats}
    # (``line`` is the record's row: a record joins several files' lines)
    return [
        Parsed(
            metrics=with_core(whole_counts(wide)),
            meta=meta,
            unrecognized=pl.Series("line", unrec, dtype=pl.Int64),
            ignored=max(0, lines - wide.height - len(unrec)),
        )
    ]


def _read_metric(path: Path) -> tuple[pl.DataFrame, list[int], int]:
    """(ms, value, step) rows of one metric file, the lines that are none, the lines."""
    ms, values, steps, bad, n = [], [], [], [], 0
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            m = _LINE.match(line)
            try:
                value = float(m.group(2)) if m else None
            except ValueError:
                value = None
            if m is None or value is None:
                bad.append(n)
                continue
            ms.append(int(m.group(1)))
            values.append(value)
            steps.append(int(m.group(3)))
    rows = pl.DataFrame(
        {"ms": ms, "value": values, "step": steps},
        schema={"ms": pl.Int64, "value": pl.Float64, "step": pl.Int64},
    )
    return rows, bad, n
