"""``Run``: a training run's metadata, metrics frame and events, and its on-disk forms.

On disk a run is logbook JSONL (a header object, then ``metrics`` rows, then ``event``
rows) or Parquet (the metrics table, with the header and events in the file's
key-value metadata). Both round-trip exactly, NaN and infinities included.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from logbook.atomic import atomic_open, atomic_path
from logbook.errors import InputError
from logbook.schema import (
    CORE_COLUMNS,
    METRIC_COLUMNS,
    SCHEMA_VERSION,
    EventBase,
    event_from_dict,
    event_sort_key,
    event_to_dict,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from logbook.detectors import DetectorConfig
    from logbook.findings import Findings


class ParseStats(BaseModel):
    """What parsing one file used and what it could not read."""

    model_config = ConfigDict(extra="allow")
    file: str
    format: str
    lines: int = 0
    records: int = 0
    unrecognized: int = 0
    first_unrecognized: list[int] = Field(default_factory=list)
    # every line in exactly one of these and ``unrecognized`` (parsers.accounting)
    record_lines: int = 0
    event_lines: int = 0
    continuation_lines: int = 0
    ignored: int = 0
    overcounted: int = 0  # lines a parser counted twice (taken off ``ignored``)
    invalid_utf8_lines: int = 0
    crlf: bool = False
    gzip: bool = False


class RunMeta(BaseModel):
    """The run's header: name, formats, source files, unit conversions, caveats."""

    model_config = ConfigDict(extra="allow")
    name: str | None = None
    format: str | None = None
    sources: list[str] = Field(default_factory=list)
    units: dict[str, str] = Field(default_factory=dict)  # e.g. {"loss": "bits -> nats"}
    caveats: list[str] = Field(default_factory=list)
    parse: list[ParseStats] = Field(default_factory=list)


def empty_metrics() -> pl.DataFrame:
    """A metrics frame with the core columns and no rows."""
    return pl.DataFrame(schema={c: METRIC_COLUMNS[c] for c in CORE_COLUMNS})


def normalize_metrics(df: pl.DataFrame) -> pl.DataFrame:
    """Cast canonical columns to their dtypes, add missing core columns, order columns."""
    exprs = []
    for name in CORE_COLUMNS:
        if name not in df.columns:
            exprs.append(pl.lit(None, dtype=METRIC_COLUMNS[name]).alias(name))
    if exprs:
        df = df.with_columns(exprs)
    casts = [
        pl.col(c).cast(t)
        for c, t in METRIC_COLUMNS.items()
        if c in df.columns and df.schema[c] != t
    ]
    if casts:
        df = df.with_columns(casts)
    canonical = [c for c in METRIC_COLUMNS if c in df.columns]
    others = sorted(c for c in df.columns if c not in METRIC_COLUMNS)
    return df.select(canonical + others)


@dataclass
class Run:
    """One training run: metadata, a metrics frame (schema ``logbook/1``) and events."""

    metrics: pl.DataFrame = field(default_factory=empty_metrics)
    events: list[EventBase] = field(default_factory=list)
    meta: RunMeta = field(default_factory=RunMeta)

    def __post_init__(self) -> None:
        self.metrics = normalize_metrics(self.metrics)
        self.events = sorted(self.events, key=event_sort_key)

    def trajectory(self) -> pl.DataFrame:
        """For each step, the record of the last segment that reached it (what survived
        the rewinds), in step order. Records without a step are left out."""
        df = self.metrics.filter(pl.col("step").is_not_null())
        order = pl.int_range(pl.len()).alias("_order")
        return (
            df.with_columns(order)
            .sort(["segment", "_order"])
            .unique(subset="step", keep="last", maintain_order=True)
            .sort("step")
            .drop("_order")
        )

    def events_of(self, *kinds: str) -> list[EventBase]:
        """The events of these kinds, in timeline order."""
        return [e for e in self.events if e.kind in kinds]

    def events_frame(self) -> pl.DataFrame:
        """The events as a polars frame (``.to_pandas()`` for pandas), in timeline order:
        kind, step, segment, time, file and line where it was read, the original text,
        and the kind's own fields (``resume_step``, ``old``/``new``, ``cause``...) as a
        JSON string in ``detail``."""
        from logbook.event_table import events_frame

        return events_frame(self.events)

    # ---- analysis ------------------------------------------------------------------

    def detect(
        self, config: str | Path | dict[str, DetectorConfig | dict[str, Any]] | None = None
    ) -> Findings:
        """Run every detector on this run, precursors linked, as ``logbook detect`` does.

        ``config``: a thresholds file (TOML, or JSON when it ends in ``.json``), or a
        dict mapping detector names to their config objects or to dicts of fields
        (``{"loss_spike": {"min_ratio": 1.5}}``); missing detectors keep their defaults.
        """
        from logbook.detectors import detect
        from logbook.detectors._config import build_config, read_config_file
        from logbook.findings import Findings

        if config is None or isinstance(config, str | Path):
            tables = read_config_file(config) if config is not None else None
            cfg = build_config(tables)
        else:
            given = {k: v for k, v in config.items() if not isinstance(v, dict)}
            cfg = build_config({k: v for k, v in config.items() if isinstance(v, dict)})
            cfg |= given
        return Findings(detect(self, cfg))

    def plot(self, findings: list | None = None, metrics: list[str] | None = None) -> Figure:
        """The run's metrics by step as a matplotlib figure (one panel per metric, as the
        report's overview draws them): the trajectory in blue and the records a restart
        recomputed in grey (a spike that made a team rewind is often among those: the
        trajectory alone does not show it), restarts and crashes as vertical lines, and
        ``findings`` (e.g. ``run.detect()``) shaded by severity. ``metrics`` picks the
        panels (``["loss", "grad_norm"]``); by default every metric the run has."""
        from logbook.report.figures import overview_figure

        fig, _panels, _frame = overview_figure(self, list(findings or []), columns=metrics)
        return fig

    # ---- on disk -------------------------------------------------------------------

    def write(self, path: str | Path) -> None:
        """Write atomically as logbook JSONL, or Parquet when the name ends in .parquet."""
        if str(path).endswith(".parquet"):
            _write_parquet(self, Path(path))
        else:
            _write_jsonl(self, Path(path))

    @classmethod
    def read(cls, path: str | Path) -> Run:
        """Read a run written by :meth:`write`."""
        from logbook.textio import local

        p = local(path)
        if str(path).endswith(".parquet"):
            return _read_parquet(p)
        return _read_jsonl(p)


def header_dict(run: Run) -> dict[str, Any]:
    head = {"type": "run", "schema": SCHEMA_VERSION}
    head.update(run.meta.model_dump(mode="json"))
    head["columns"] = {c: str(t) for c, t in run.metrics.schema.items()}
    return head


_DTYPES = {str(t): t for t in METRIC_COLUMNS.values()} | {
    "Float64": pl.Float64(),
    "Int64": pl.Int64(),
    "Int32": pl.Int32(),
    "String": pl.String(),
    "Boolean": pl.Boolean(),
}

# Non-finite floats are written as the strings "NaN", "Infinity", "-Infinity"
# (the convention of proto3's JSON mapping), so that the file stays valid JSON.
_NONFINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
_SENTINELS = (-7.77e-301, -7.71e-301, -7.73e-301)


def _metrics_ndjson(df: pl.DataFrame) -> bytes:
    """The metrics frame as ``{"type":"metrics",...}`` lines, non-finite floats kept."""
    floats = [c for c, t in df.schema.items() if t.is_float()]
    replaced: list[tuple[float, str]] = []
    if floats:
        nonfinite = df.select(pl.any_horizontal(~pl.col(floats).is_finite()).any()).item()
        if nonfinite:
            sentinels = _free_sentinels(df, floats)
            df = df.with_columns(
                pl.when(pl.col(c).is_nan())
                .then(sentinels[0])
                .when(pl.col(c) == float("inf"))
                .then(sentinels[1])
                .when(pl.col(c) == float("-inf"))
                .then(sentinels[2])
                .otherwise(pl.col(c))
                .alias(c)
                for c in floats
            )
            replaced = list(zip(sentinels, _NONFINITE, strict=True))
    buf = io.BytesIO()
    df.with_columns(pl.lit("metrics").alias("type")).select(["type", *df.columns]).write_ndjson(buf)
    out = buf.getvalue()
    for value, token in replaced:
        out = out.replace(_float_text(value), f'"{token}"'.encode())
    return out


def _free_sentinels(df: pl.DataFrame, floats: list[str]) -> tuple[float, float, float]:
    """Three marker values that no real value equals (the usual ones unless the data
    holds one of them: then the next free ones)."""
    candidates = [*_SENTINELS, *(-(7.0 + k / 1000) * 1e-301 for k in range(1, 1000))]
    free: list[float] = []
    for v in dict.fromkeys(candidates):
        if not df.select(pl.any_horizontal(pl.col(floats) == v).any()).item():
            free.append(v)
            if len(free) == 3:
                return free[0], free[1], free[2]
    raise ValueError("no free marker for non-finite values")  # (1,002 values taken)


def _float_text(value: float) -> bytes:
    buf = io.BytesIO()
    pl.DataFrame({"x": [value]}).write_ndjson(buf)
    return buf.getvalue().split(b":", 1)[1].rstrip(b"}\n")


def _write_jsonl(run: Run, path: Path) -> None:
    with atomic_open(path, "wb") as fh:
        fh.write(json.dumps(header_dict(run), sort_keys=False).encode() + b"\n")
        fh.write(_metrics_ndjson(run.metrics))
        for e in run.events:
            fh.write(json.dumps({"type": "event", **event_to_dict(e)}).encode() + b"\n")


def _check_schema(head: dict, name: str | Path) -> None:
    if head.get("schema") != SCHEMA_VERSION:
        raise InputError(
            f"{name}: written with schema {head.get('schema')!r}; this logbook reads "
            f"{SCHEMA_VERSION!r} (upgrade logbook, or parse the raw log again)"
        )


def _header(meta: dict, path: str | Path) -> RunMeta:
    """The run header of a logbook file, checked: a bad field is a one-line error."""
    from pydantic import ValidationError

    try:
        return RunMeta.model_validate(meta)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "header"
        raise InputError(f"{path}: damaged logbook header ({where}: {err['msg']})") from None


def _read_jsonl(path: Path) -> Run:
    from logbook.textio import read_lines

    lines, _ = read_lines(path)
    return run_from_lines(lines, str(path))


def run_from_lines(lines: pl.DataFrame, name: str) -> Run:
    """Build a run from the physical lines of a logbook JSONL file."""
    text = lines.get_column("text")
    if text.len() == 0 or not text[0].startswith("{"):
        raise InputError(f"{name}: not a logbook JSONL file (no header line)")
    try:
        head = json.loads(text[0])
    except (ValueError, RecursionError):
        raise InputError(f"{name}: not a logbook JSONL file (header is not JSON)") from None
    if (
        not isinstance(head, dict)
        or head.get("type") != "run"
        or not str(head.get("schema", "")).startswith("logbook/")
    ):
        raise InputError(f"{name}: not a logbook JSONL file (first object is not a run header)")
    _check_schema(head, name)
    columns = {c: _DTYPES.get(t, pl.String()) for c, t in head.get("columns", {}).items()}
    is_metrics = text.str.contains(r'^\{\s*"type"\s*:\s*"metrics"')
    body = text.filter(is_metrics)
    metrics = _parse_metric_rows(body, columns, name)
    events = []
    for ln, row in lines.filter(~is_metrics).slice(1).iter_rows():
        if not row.strip():
            continue
        try:
            obj = json.loads(row)
            obj.pop("type", None)
            events.append(event_from_dict(obj))
        except (ValueError, RecursionError, TypeError, AttributeError) as exc:
            first = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
            raise InputError(f"{name}:{ln}: bad event row ({first})") from None
    meta = {k: v for k, v in head.items() if k not in ("type", "schema", "columns")}
    return Run(metrics=metrics, events=events, meta=_header(meta, name))


def _parse_metric_rows(body: pl.Series, columns: dict, name: str) -> pl.DataFrame:
    if body.len() == 0:
        return pl.DataFrame(schema=columns) if columns else empty_metrics()
    read_schema = {
        c: (pl.String() if t.is_float() or t == pl.Datetime("us", "UTC") else t)
        for c, t in columns.items()
    }
    payload = ("\n".join(body.to_list()) + "\n").encode()
    try:
        df = pl.read_ndjson(io.BytesIO(payload), schema=read_schema)
    except pl.exceptions.PolarsError as exc:
        first = str(exc).splitlines()[0]
        raise InputError(f"{name}: bad metrics rows ({first})") from None
    casts = []
    for c, t in columns.items():
        if t.is_float():
            casts.append(pl.col(c).cast(pl.Float64, strict=False))
        elif t == pl.Datetime("us", "UTC"):
            casts.append(pl.col(c).str.to_datetime(time_zone="UTC", time_unit="us", strict=False))
    return df.with_columns(casts) if casts else df


_META_KEY = b"logbook"
_EVENTS_KEY = b"logbook_events"


def _write_parquet(run: Run, path: Path) -> None:
    # the header and events go in the file's key-value metadata (the footer)
    events = "\n".join(json.dumps(event_to_dict(e)) for e in run.events)
    meta = {_META_KEY.decode(): json.dumps(header_dict(run)), _EVENTS_KEY.decode(): events}
    with atomic_path(path) as tmp:
        # zstd level 1: a third faster to write than the default level, a fifth larger
        run.metrics.write_parquet(tmp, compression="zstd", compression_level=1, metadata=meta)


def parquet_metadata(path: str | Path) -> dict[bytes, bytes]:
    """A Parquet file's key-value metadata (the footer's; a file written by pyarrow with
    schema metadata has it there too)."""
    import pyarrow.parquet as pq

    return dict(pq.read_metadata(path).metadata or {})


def _read_parquet(path: Path) -> Run:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise InputError(f"{path}: not a readable Parquet file ({exc})") from None
    meta = {**(table.schema.metadata or {}), **parquet_metadata(path)}
    if _META_KEY not in meta:
        raise InputError(f"{path}: Parquet file without a logbook header")
    try:
        head = json.loads(meta[_META_KEY])
        rows = meta.get(_EVENTS_KEY, b"").decode().splitlines()
        events = [event_from_dict(json.loads(x)) for x in rows]
    except (ValueError, TypeError, AttributeError, RecursionError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        raise InputError(
            f"{path}: damaged logbook header in the Parquet metadata ({first})"
        ) from None
    if not isinstance(head, dict):
        raise InputError(f"{path}: damaged logbook header in the Parquet metadata")
    _check_schema(head, path)
    metrics = pl.from_arrow(table.replace_schema_metadata(None))
    info = {k: v for k, v in head.items() if k not in ("type", "schema", "columns")}
    return Run(metrics=metrics, events=events, meta=_header(info, path))
