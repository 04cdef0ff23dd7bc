"""The comparison as one self-contained HTML page, in the report's style: its CSS, its
table renderer and its sorting script. Every text from a log (run names, messages,
config values) is escaped. Each overlay figure says which metric it draws and which
runs are in it (``data-metric``, ``data-runs``, a legend of run names), each run's
incidents are a column of their own (``data-run``)."""

from __future__ import annotations

import base64
import json
from html import escape
from typing import TYPE_CHECKING

from logbook.compare.config_diff import MISSING
from logbook.compare.table import HEADERS, SEVERITIES, cells
from logbook.report.blocks import Heading, Para, TableBlock
from logbook.report.html import CSS, SCRIPT
from logbook.report.html import _block as block
from logbook.report.tables import Cell, Table, num
from logbook.schema import Finding

if TYPE_CHECKING:
    from logbook.compare import Comparison
    from logbook.compare.figures import Overlay

MAX_INCIDENTS = 500  # rows per run's incident table; the rest are counted
EXTRA_CSS = """
.side{display:flex;gap:16px;align-items:flex-start;overflow-x:auto}
.side>section{flex:1 1 0;min-width:320px}
ul.legend{list-style:none;padding:0;margin:4px 0;font-size:12px}
ul.legend li{display:inline-block;margin-right:16px}
.swatch{display:inline-block;width:14px;height:4px;margin-right:6px;vertical-align:middle}
"""
RANK = {s: float(i) for i, s in enumerate(SEVERITIES)}


def to_html(c: Comparison) -> str:
    """The whole comparison as an HTML page."""
    title = "Comparison: " + " vs ".join(c.labels)
    parts = [
        f"<h1>{escape(title)}</h1>",
        block(Para(f"{len(c.runs)} runs aligned by {c.align}; {c.config.sentence()}.")),
        *_runs(c),
        *_figures(c),
        *_incidents(c),
        *_config(c),
    ]
    body = "\n".join(parts)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(title)}</title>\n<style>{CSS}{EXTRA_CSS}</style>\n</head>\n<body>\n"
        f"{body}\n"
        '<p class="foot">Written by <code>logbook compare</code> (schema logbook/1).</p>\n'
        f"<script>{SCRIPT}</script>\n</body>\n</html>\n"
    )


def _runs(c: Comparison) -> list[str]:
    t = Table(list(HEADERS))
    for h in c.headlines:
        t.rows.append([Cell(text, _key(text, i)) for i, text in enumerate(cells(h))])
    return [block(Heading(2, "Runs", "runs")), block(TableBlock(t, "runs-table"))]


def _key(text: str, column: int) -> str | float | None:
    """Numbers sort by value; names and ``-`` as text."""
    if column < 2:
        return None
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _figures(c: Comparison) -> list[str]:
    out = [block(Heading(2, "Metrics", "metrics"))]
    if not c.figures:
        out.append(block(Para("No metric with a value to draw in any run.")))
    out += [_figure(o) for o in c.figures]
    if c.undrawn:
        note = f"{len(c.undrawn)} more metric(s) not drawn: {', '.join(c.undrawn)}."
        out.append(block(Para(note, "warn")))
    return out


def _figure(o: Overlay) -> str:
    fig = o.rendered
    data = base64.b64encode(fig.png).decode("ascii")
    names = json.dumps([name for name, _, _ in o.runs])
    legend = "".join(
        f'<li data-run="{escape(name)}" data-points="{points}"><span class="swatch" '
        f'style="background:{colour}"></span>{escape(name)} ({points:,} points)</li>'
        for name, colour, points in o.runs
    )
    return (
        f'<figure class="overlay" id="fig-{escape(fig.name)}" '
        f'data-metric="{escape(o.metric)}" data-runs="{escape(names)}">'
        f'<img src="data:image/png;base64,{data}" alt="{escape(fig.title)}">'
        f'<figcaption>{escape(fig.caption)}</figcaption><ul class="legend">{legend}</ul></figure>'
    )


def _incidents(c: Comparison) -> list[str]:
    out = [block(Heading(2, "Incidents", "incidents")), '<div class="side">']
    for i, (label, found) in enumerate(zip(c.labels, c.findings, strict=True), 1):
        counts = ", ".join(f"{c.headlines[i - 1].findings[s]} {s}" for s in SEVERITIES)
        out.append(
            f'<section class="run-incidents" data-run="{escape(label)}" '
            f'data-findings="{len(found)}">'
        )
        out.append(block(Heading(3, label)))
        out.append(block(Para(f"{len(found)} finding(s): {counts}.")))
        if found:
            out.append(block(TableBlock(incident_table(found), f"incidents-{i}")))
        if len(found) > MAX_INCIDENTS:
            more = f"{len(found) - MAX_INCIDENTS:,} more not listed (logbook detect --all)."
            out.append(block(Para(more, "warn")))
        out.append("</section>")
    out.append("</div>")
    return out


def incident_table(findings: list[Finding], limit: int = MAX_INCIDENTS) -> Table:
    """Kind, severity, step and summary of each finding, in step order."""
    t = Table(["kind", "severity", "step", "summary"])
    for f in findings[:limit]:
        t.rows.append(
            [Cell(f.kind), Cell(f.severity, RANK.get(f.severity, 3.0)), num(f.step),
             Cell(f.message)]
        )  # fmt: skip
    t.omitted = max(0, len(findings) - limit)
    return t


def _config(c: Comparison) -> list[str]:
    out = [block(Heading(2, "Config", "config"))]
    diff = c.config
    out.append(block(Para(diff.sentence()[:1].upper() + diff.sentence()[1:] + ".")))
    if diff.rows:
        t = Table(["key", "from", *c.labels])
        for key, source, values in diff.rows:
            t.rows.append([Cell(key), Cell(source), *(Cell(v or MISSING) for v in values)])
        out.append(block(TableBlock(t, "config-table")))
    return out
