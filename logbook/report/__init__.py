"""The audit report of a run: what happened, what it cost, what to do next time.

:func:`build_report` gathers everything from a run and its findings (summary, figures,
restart and goodput accounting, remedies, tables); :func:`write_report` writes it as one
self-contained HTML file (figures embedded, a small inline script to sort the tables) or
as Markdown with the figures as PNG files next to it. matplotlib is imported only when
figures are drawn.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from logbook.report.goodput import Goodput, account
from logbook.report.incidents import Incident, incidents
from logbook.report.remedies import Remedy, remedies
from logbook.report.summary import Summary, summarize
from logbook.report.tables import Table, event_table, finding_table, notes_apart_table
from logbook.run import Run
from logbook.schema import Finding

FORMATS = ("html", "md")
MAX_ZOOMS = 12  # incidents zoomed and detailed in full; the largest first
REPORT_MODE = 0o644  # reports are for sharing (temp files are created owner-only)

__all__ = ["FORMATS", "MAX_ZOOMS", "Report", "build_report", "render", "write_report"]


@dataclass
class Report:
    """Everything a report shows, computed once; renderers only format it."""

    title: str
    summary: Summary
    goodput: Goodput
    incidents: list[Incident]
    remedies: list[Remedy]
    finding_table: Table
    event_table: Table
    figures: list = field(default_factory=list)  # figures.Rendered, overview first
    undrawn_incidents: int = 0
    featured: list[int] = field(default_factory=list)  # incidents drawn and detailed
    figures_note: str = ""  # why there are no figures
    notes_apart: Table | None = None  # chronicle events off the log's steps

    def incident_number(self, inc_main: Finding) -> int:
        """1-based position of the incident whose main finding is ``inc_main``."""
        for i, inc in enumerate(self.incidents, 1):
            if inc.main is inc_main:
                return i
        return 0

    def numbered_remedies(self) -> Iterator[tuple[int, Remedy]]:
        for rem in self.remedies:
            yield self.incident_number(rem.finding), rem


def build_report(
    run: Run,
    findings: list[Finding],
    *,
    figures: bool = True,
    max_zooms: int = MAX_ZOOMS,
) -> Report:
    """The report of ``run`` given the detectors' ``findings`` (ids and precursor links
    set, as :func:`logbook.detectors.detect` returns them)."""
    found = incidents(findings)
    traj = run.trajectory()
    summary = summarize(run, findings, traj)
    report = Report(
        title=f"Audit report: {run.meta.name or 'run'}",
        summary=summary,
        goodput=account(run),
        incidents=found,
        remedies=remedies(run, findings, found),
        finding_table=finding_table(run, findings),
        event_table=event_table(run),
        notes_apart=notes_apart_table(run),
    )
    report.featured = _featured(found, max_zooms)
    if not figures:
        report.figures_note = "Figures were not drawn (--no-figures)."
    elif traj.height == 0:
        report.figures_note = "No metric records with a step: nothing to draw."
    else:
        _draw(report, run, findings, max_zooms, traj)
    return report


def _draw(report: Report, run: Run, findings: list[Finding], max_zooms: int, traj) -> None:
    from logbook.report import figures as fg
    from logbook.report.interactive import overview_spec

    marks = fg.run_marks(run, findings)
    traj = run.trajectory() if traj is None else traj
    lines = fg.shared_lines(run, traj)  # (downsampled once for both overviews)
    overview = fg.overview(run, findings, marks, traj, lines)
    interval = report.summary.interval or 1
    overview.interactive = overview_spec(run, findings, traj, lines)
    report.figures.append(overview)
    for number in report.featured:
        inc = report.incidents[number - 1]
        report.figures.append(fg.zoom(run, inc, number, interval, marks))
    report.undrawn_incidents = len(report.incidents) - len(report.featured)


def _featured(found: list[Incident], limit: int) -> list[int]:
    """Numbers (1-based, in step order) of the incidents shown in full: those with a loss
    spike or divergence first, then by score, at most ``limit``."""
    ranked = sorted(range(len(found)), key=lambda i: (not found[i].has_target, -found[i].score, i))
    return sorted(i + 1 for i in ranked[:limit])


def render(
    report: Report, fmt: str = "html", figure_dir: str | None = None, plotly_src: str | None = None
) -> str:
    """The report as HTML (figures embedded) or Markdown (figures linked under
    ``figure_dir``, a path relative to the Markdown file). ``plotly_src``: a relative
    path to plotly.js shared by many reports (else it is inlined: 4.6 MB a report)."""
    from logbook.report.document import document

    doc = document(report)
    if fmt == "html":
        from logbook.report.html import to_html

        return to_html(doc, plotly_src)
    from logbook.report.markdown import to_markdown

    return to_markdown(doc, figure_dir or "figures")


def write_report(
    report: Report, path: str | Path, fmt: str = "html", plotly_src: str | None = None
) -> list[Path]:
    """Write the report; returns the files written (the document first). ``plotly_src``:
    see :func:`render`."""
    from logbook.atomic import atomic_open

    out = Path(path)
    written = [out]
    figure_dir = f"{out.stem}_files"
    if fmt == "md" and report.figures:
        folder = out.parent / figure_dir
        folder.mkdir(parents=True, exist_ok=True)
        for fig in report.figures:
            target = folder / f"{fig.name}.png"
            with atomic_open(target, "wb") as fh:
                fh.write(fig.png)
            written.append(target)
    text = render(report, fmt, figure_dir, plotly_src)
    with atomic_open(out, "wb") as fh:
        fh.write(text.encode("utf-8"))
    for p in written:
        p.chmod(REPORT_MODE)
    return written
