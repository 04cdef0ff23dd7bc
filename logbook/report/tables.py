"""The report's tables as plain data: headers, then rows of cells with a sort key each.

Both renderers (HTML, Markdown) draw from these, so the two documents list the same
things. Each row names its source line: an event's own, and for a finding the record
at its step (the line a reader opens to see it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

import polars as pl

from logbook.run import Run
from logbook.schema import EventBase, Finding, Source

MAX_ROWS = 3000  # rows per table; the rest are counted, never dropped silently
_BASE_FIELDS = {
    "kind", "step", "time", "segment", "run", "source", "text", "step_source", "assumed_tz",
}  # fmt: skip


@dataclass
class Cell:
    text: str
    key: str | float | None = None  # sort key; the text when None
    href: str | None = None  # a link (a relative path) the text is drawn as


@dataclass
class Table:
    """Headers, rows (cells), and how many rows were left out to keep the table short."""

    headers: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    omitted: int = 0


def num(v: float | int | None, text: str | None = None) -> Cell:
    if v is None:
        return Cell("", None)
    return Cell(text if text is not None else str(v), float(v))


def source_text(src: Source | None) -> str:
    if src is None or (src.file is None and src.line is None):
        return ""
    name = PurePath(src.file).name if src.file else "?"
    return f"{name}:{src.line}" if src.line is not None else name


def _score(v: float | None) -> Cell:
    return num(v, None if v is None else f"{v:.3g}")


def finding_table(run: Run, findings: list[Finding], limit: int = MAX_ROWS) -> Table:
    """Severity, kind, steps, score, what, precursor link and source of each finding."""
    t = Table(
        ["severity", "kind", "step", "start", "end", "score", "what", "precursor of", "lead",
         "segment", "source"]
    )  # fmt: skip
    rank = {"critical": 0, "warning": 1, "info": 2}
    shown = findings[:limit]
    sources = record_sources(run, shown)
    for f, src in zip(shown, sources, strict=True):
        t.rows.append(
            [
                Cell(f.severity, float(rank.get(f.severity, 3))),
                Cell(f.kind),
                num(f.step),
                num(f.start_step),
                num(f.end_step),
                _score(f.score),
                Cell(f.message),
                Cell(f.precedes or ""),
                num(f.lead_steps),
                num(f.segment),
                Cell(src),
            ]
        )
    t.omitted = len(findings) - len(shown)
    return t


def record_sources(run: Run, findings: list[Finding]) -> list[str]:
    """``file:line`` of the record at each finding's step in its segment (the first such
    record), or of the finding's own source."""
    keys = pl.DataFrame(
        {
            "i": list(range(len(findings))),
            "segment": [f.segment for f in findings],
            "step": [f.step for f in findings],
        },
        schema={"i": pl.Int64, "segment": pl.Int32, "step": pl.Int64},
    )
    recs = (
        run.metrics.select("segment", "step", "source", "line")
        .filter(pl.col("step").is_not_null())
        .unique(subset=["segment", "step"], keep="first", maintain_order=True)
    )
    hit = keys.join(recs, on=["segment", "step"], how="left").sort("i")
    names = run.meta.sources
    out = []
    for f, (src, line) in zip(findings, hit.select("source", "line").iter_rows(), strict=True):
        if f.source is not None:
            out.append(source_text(f.source))
        elif line is not None:
            file = names[src] if src is not None and 0 <= src < len(names) else None
            out.append(source_text(Source(file=file, line=line)))
        else:
            out.append("")
    return out


def details(e: EventBase) -> str:
    """The kind-specific fields of an event, ``key=value`` joined."""
    data: dict[str, Any] = e.model_dump(mode="json", exclude_none=True)
    parts = []
    for k, v in data.items():
        if k in _BASE_FIELDS or v in ({}, []):
            continue
        if isinstance(v, float):
            v = f"{v:.6g}"
        parts.append(f"{k}={v}")
    return ", ".join(parts)


def event_table(run: Run, limit: int = MAX_ROWS) -> Table:
    """Every event of the run (restarts, LR and loss-scale changes, saves, notes, ...)."""
    t = Table(["kind", "step", "segment", "time", "details", "text", "source"])
    shown = run.events[:limit]
    for e in shown:
        when = e.time.strftime("%Y-%m-%d %H:%M:%S") if e.time is not None else ""
        t.rows.append(
            [
                Cell(e.kind),
                num(e.step),
                num(e.segment),
                Cell(when),
                Cell(details(e)),
                Cell((e.text or "")[:300]),
                Cell(source_text(e.source)),
            ]
        )
    t.omitted = len(run.events) - len(shown)
    return t


def notes_apart_table(run: Run, limit: int = MAX_ROWS) -> Table:
    """The chronicle events set apart (``meta.unplaced_notes``): no step, or a step
    outside the log's."""
    notes = list(getattr(run.meta, "unplaced_notes", None) or [])
    t = Table(["kind", "step", "time", "text", "source"])
    for n in notes[:limit]:
        src = n.get("source") or {}
        where = f"{src.get('file', '')}:{src.get('line', '')}" if src else ""
        t.rows.append(
            [
                Cell(str(n.get("kind", ""))),
                num(n.get("step")),
                Cell(str(n.get("time", "") or "")[:19].replace("T", " ")),
                Cell(str(n.get("text", "") or "")[:300]),
                Cell(where.rsplit("/", 1)[-1]),
            ]
        )
    t.omitted = max(0, len(notes) - limit)
    return t
