"""The report as a list of simple blocks that both renderers (HTML, Markdown) draw.

Text in blocks is plain: renderers escape it. Numbers are formatted here, once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from logbook.report.tables import Table


@dataclass
class Rendered:
    """One rendered figure: a file-name stem, a title, a caption and the PNG bytes."""

    name: str
    title: str
    caption: str
    png: bytes
    figure: Any = field(default=None, repr=False, compare=False)  # the matplotlib Figure
    # the interactive version for HTML (a Plotly spec from logbook.report.interactive)
    interactive: dict | None = field(default=None, repr=False, compare=False)


@dataclass
class Heading:
    level: int
    text: str
    anchor: str = ""


@dataclass
class Para:
    text: str
    css: str = ""  # "warn" for warnings


@dataclass
class Items:
    items: list[str]
    css: str = ""


@dataclass
class KeyValues:
    pairs: list[tuple[str, str]]


@dataclass
class TableBlock:
    table: Table
    anchor: str = ""
    sortable: bool = True


@dataclass
class Code:
    lines: list[str]
    title: str = ""


@dataclass
class Image:
    figure: Rendered


Block = Heading | Para | Items | KeyValues | TableBlock | Code | Image


@dataclass
class Document:
    title: str
    blocks: list[Block] = field(default_factory=list)

    def add(self, *blocks: Block) -> None:
        self.blocks.extend(blocks)


def duration(seconds: float | None) -> str:
    """``5444`` -> ``1 h 30 min 44 s``; empty for None."""
    if seconds is None:
        return ""
    s = round(seconds)
    sign = "-" if s < 0 else ""
    s = abs(s)
    days, rest = divmod(s, 86400)
    h, rest = divmod(rest, 3600)
    m, sec = divmod(rest, 60)
    parts = [f"{days} d"] if days else []
    if h or days:
        parts.append(f"{h} h")
    if m or h or days:
        parts.append(f"{m} min")
    parts.append(f"{sec} s")
    return sign + " ".join(parts[:3])


def seconds(v: float | None) -> str:
    """Seconds with the duration after them: ``5444 s (1 h 30 min 44 s)``."""
    if v is None:
        return "unknown"
    base = f"{v:,.1f} s" if v != round(v) else f"{v:,.0f} s"
    return f"{base} ({duration(v)})" if abs(v) >= 60 else base


def percent(v: float | None) -> str:
    return "unknown" if v is None else f"{100 * v:.2f}%"


def integer(v: int | float | None) -> str:
    return "unknown" if v is None else f"{v:,.0f}"
