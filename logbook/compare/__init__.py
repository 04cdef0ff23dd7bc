"""``logbook compare``: several runs side by side.

:func:`build_comparison` reads nothing: it takes runs already loaded, runs the detectors
on each, and gathers what the terminal table and the HTML page show: each run's
headline figures, its findings, and the config keys whose values differ.
:func:`write_comparison` draws one overlay figure per metric (runs aligned by step,
tokens or wall time) and writes one self-contained HTML file. matplotlib is imported
only when figures are drawn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from logbook.compare.align import ALIGNS, check_axis, labels_for
from logbook.compare.config_diff import ConfigDiff, config_diff
from logbook.compare.table import Headline, headline
from logbook.run import Run
from logbook.schema import Finding

__all__ = ["ALIGNS", "Comparison", "build_comparison", "write_comparison"]

REPORT_MODE = 0o644  # like a report: for sharing


@dataclass
class Comparison:
    """Everything ``logbook compare`` shows, computed once; renderers only format it."""

    runs: list[Run]
    labels: list[str]
    align: str
    findings: list[list[Finding]]
    headlines: list[Headline]
    config: ConfigDiff
    figures: list = field(default_factory=list)  # compare.figures.Overlay, one per metric
    undrawn: list[str] = field(default_factory=list)  # metrics past the figures' limit
    drawn: bool = False


def build_comparison(
    runs: list[Run], align: str = "step", detect_config: dict | None = None
) -> Comparison:
    """The comparison of ``runs`` aligned by ``align`` (``step``, ``tokens``, ``time``);
    a :class:`~logbook.errors.UsageError` when fewer than two runs are given or a run
    lacks the column to align by."""
    from logbook.detectors import detect
    from logbook.errors import UsageError

    if len(runs) < 2:
        raise UsageError(f"compare needs at least 2 runs, got {len(runs)}")
    labels = labels_for(runs)
    check_axis(runs, labels, align)
    findings = [detect(r, detect_config) for r in runs]
    heads = [headline(r, name, f) for r, name, f in zip(runs, labels, findings, strict=True)]
    return Comparison(runs, labels, align, findings, heads, config_diff(runs))


def draw(comparison: Comparison) -> Comparison:
    """Draw the overlay figures (one per metric at least one run has)."""
    from logbook.compare.figures import overlays

    comparison.figures, comparison.undrawn = overlays(
        comparison.runs, comparison.labels, comparison.align
    )
    comparison.drawn = True
    return comparison


def write_comparison(comparison: Comparison, path: str | Path) -> Path:
    """Draw the figures (unless drawn) and write the HTML page atomically."""
    from logbook.atomic import atomic_open
    from logbook.compare.html import to_html

    if not comparison.drawn:
        draw(comparison)
    out = Path(path)
    with atomic_open(out, "wb") as fh:
        fh.write(to_html(comparison).encode("utf-8"))
    out.chmod(REPORT_MODE)
    return out
