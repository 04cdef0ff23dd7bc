"""The report as Markdown (GitHub-flavoured tables) for a pull request or a wiki. Figures
are PNG files in a folder next to the document, linked by relative path."""

from __future__ import annotations

import re

from logbook.report.blocks import (
    Block,
    Code,
    Document,
    Heading,
    Image,
    Items,
    KeyValues,
    Para,
    TableBlock,
)
from logbook.report.tables import Cell, Table


def to_markdown(doc: Document, figure_dir: str) -> str:
    """The whole document; images point to ``figure_dir/<name>.png``."""
    parts = [_block(b, figure_dir) for b in doc.blocks]
    parts.append("_Written by `logbook report` (schema logbook/1)._")
    return "\n\n".join(parts) + "\n"


def safe(text: str) -> str:
    """Plain text (run names, notes, log lines) made inert in Markdown: ``&``, ``<``
    and ``>`` as character references, so that no HTML in a log is ever live."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def cell(text: str) -> str:
    """Text made safe for one table cell: HTML inert, pipes escaped, line breaks
    flattened."""
    text = safe(text).replace("\\", "\\\\").replace("|", "\\|")
    return text.replace("\r", " ").replace("\n", " ")


def _fence(lines: list[str]) -> str:
    """A code fence longer than any run of backticks in ``lines`` (which could close
    a shorter one)."""
    longest = max((len(r) for ln in lines for r in re.findall("`+", ln)), default=0)
    return "`" * max(3, longest + 1)


def _block(b: Block, figure_dir: str) -> str:
    if isinstance(b, Heading):
        return "#" * b.level + " " + safe(b.text)
    if isinstance(b, Para):
        text = safe(b.text).replace("\n", " ")
        return f"> **Note:** {text}" if b.css == "warn" else text
    if isinstance(b, Items):
        return "\n".join(f"- {safe(i)}" for i in b.items)
    if isinstance(b, KeyValues):
        rows = [f"| {cell(k)} | {cell(v)} |" for k, v in b.pairs]
        return "\n".join(["| | |", "|---|---|", *rows])
    if isinstance(b, TableBlock):
        return table(b.table)
    if isinstance(b, Code):
        title = f"{safe(b.title)}:\n\n" if b.title else ""
        fence = _fence(b.lines)  # (no HTML is live inside a fence)
        return title + fence + "bash\n" + "\n".join(b.lines) + "\n" + fence
    if isinstance(b, Image):
        fig = b.figure
        alt = safe(fig.title).replace("[", "(").replace("]", ")")
        return f"![{alt}]({figure_dir}/{fig.name}.png)\n\n_{safe(fig.caption)}_"
    raise TypeError(f"unknown block {type(b).__name__}")


def table(t: Table) -> str:
    """A GitHub-flavoured Markdown table; numeric columns right-aligned."""
    numeric = [
        bool(t.rows) and all(_is_number(r[i].text) or not r[i].text for r in t.rows)
        for i in range(len(t.headers))
    ]
    head = "| " + " | ".join(cell(h) for h in t.headers) + " |"
    rule = "|" + "|".join("---:" if n else "---" for n in numeric) + "|"
    rows = ["| " + " | ".join(_cell(c) for c in r) + " |" for r in t.rows]
    return "\n".join([head, rule, *rows])


def _cell(c: Cell) -> str:
    if not c.href:
        return cell(c.text)
    text = cell(c.text).replace("[", "\\[").replace("]", "\\]")
    return f"[{text}]({c.href})"


def _is_number(text: str) -> bool:
    try:
        float(text.replace(",", ""))
    except ValueError:
        return False
    return True
