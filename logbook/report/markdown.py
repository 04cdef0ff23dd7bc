"""The report as Markdown (GitHub-flavoured tables) for a pull request or a wiki. Figures
are PNG files in a folder next to the document, linked by relative path."""

from __future__ import annotations

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
from logbook.report.tables import Table


def to_markdown(doc: Document, figure_dir: str) -> str:
    """The whole document; images point to ``figure_dir/<name>.png``."""
    parts = [_block(b, figure_dir) for b in doc.blocks]
    parts.append("_Written by `logbook report` (schema logbook/1)._")
    return "\n\n".join(parts) + "\n"


def cell(text: str) -> str:
    """Text made safe for one table cell: pipes escaped, line breaks flattened."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _block(b: Block, figure_dir: str) -> str:
    if isinstance(b, Heading):
        return "#" * b.level + " " + b.text
    if isinstance(b, Para):
        return f"> **Note:** {b.text}" if b.css == "warn" else b.text
    if isinstance(b, Items):
        return "\n".join(f"- {i}" for i in b.items)
    if isinstance(b, KeyValues):
        rows = [f"| {cell(k)} | {cell(v)} |" for k, v in b.pairs]
        return "\n".join(["| | |", "|---|---|", *rows])
    if isinstance(b, TableBlock):
        return table(b.table)
    if isinstance(b, Code):
        title = f"{b.title}:\n\n" if b.title else ""
        return title + "```bash\n" + "\n".join(b.lines) + "\n```"
    if isinstance(b, Image):
        fig = b.figure
        return f"![{fig.title}]({figure_dir}/{fig.name}.png)\n\n_{fig.caption}_"
    raise TypeError(f"unknown block {type(b).__name__}")


def table(t: Table) -> str:
    """A GitHub-flavoured Markdown table; numeric columns right-aligned."""
    numeric = [
        bool(t.rows) and all(_is_number(r[i].text) or not r[i].text for r in t.rows)
        for i in range(len(t.headers))
    ]
    head = "| " + " | ".join(cell(h) for h in t.headers) + " |"
    rule = "|" + "|".join("---:" if n else "---" for n in numeric) + "|"
    rows = ["| " + " | ".join(cell(c.text) for c in r) + " |" for r in t.rows]
    return "\n".join([head, rule, *rows])


def _is_number(text: str) -> bool:
    try:
        float(text.replace(",", ""))
    except ValueError:
        return False
    return True
