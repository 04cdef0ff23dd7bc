"""One overlay figure per metric: every run that has the metric, its own colour and
legend label, on one shared x axis (step, tokens or wall time).

Lines are downsampled as the report's are (first/min/max/last per bin, a gap in the
log drawn as a gap), and the report's y scales are kept (grad norm on a log scale, loss
scale in powers of two). PNGs carry no software tag: the same input, the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from logbook.compare.align import AXIS_LABELS, aligned, metric_columns
from logbook.report.blocks import Rendered
from logbook.report.downsample import broken_at_gaps, minmax_bins
from logbook.report.figures import DPI, PANELS, WIDTH_IN, _png, _scale, _step_axis
from logbook.run import Run

# tab10: distinct colours for up to ten runs, then they repeat
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
          "#7f7f7f", "#bcbd22", "#17becf")  # fmt: skip
HEIGHT_IN = 3.0
FEW_POINTS = 200  # runs with at most this many points drawn also get a dot per point
MAX_FIGURES = 40  # metrics drawn at most; the rest are named on the page
LABELS = {col: label for col, label, _ in PANELS} | {"step_time_s": "step time (s)"}
SCALES = {col: scale for col, _, scale in PANELS}


@dataclass
class Overlay:
    """One metric's figure: the runs drawn in it (label, colour, points) and the PNG."""

    metric: str
    label: str
    runs: list[tuple[str, str, int]]
    rendered: Rendered


def color(index: int) -> str:
    return COLORS[index % len(COLORS)]


def overlays(runs: list[Run], labels: list[str], align: str) -> tuple[list[Overlay], list[str]]:
    """The overlay figures, one per metric that at least one run has (the first
    ``MAX_FIGURES``), and the metrics left out."""
    frames = [aligned(r, align) for r in runs]
    span = max((float(f.get_column("x").max()) for f in frames if f.height), default=0.0)
    unit = time_unit(span) if align == "time" else None
    metrics = metric_columns(runs)
    out = []
    for metric in metrics[:MAX_FIGURES]:
        fig = overlay(metric, frames, labels, align, unit)
        if fig is not None:
            out.append(fig)
    return out, metrics[MAX_FIGURES:]


def time_unit(span_s: float) -> tuple[str, float]:
    """The unit of a wall-time axis spanning ``span_s`` seconds, and its size in s."""
    if span_s >= 2 * 3600:
        return "h", 3600.0
    if span_s >= 120:
        return "min", 60.0
    return "s", 1.0


def _series(frame: pl.DataFrame, metric: str, scale: str) -> tuple[np.ndarray, np.ndarray]:
    if metric not in frame.columns or not frame.height:
        return np.array([]), np.array([])
    x = frame.get_column("x").to_numpy()
    y = frame.get_column(metric).cast(pl.Float64).to_numpy()
    if scale != "linear":
        y = np.where(y > 0, y, np.nan)
    px, py = minmax_bins(x, y)
    return broken_at_gaps(px, py, x)


def overlay(
    metric: str,
    frames: list[pl.DataFrame],
    labels: list[str],
    align: str,
    unit: tuple[str, float] | None = None,
) -> Overlay | None:
    """The figure of one metric, or None when no run has a value to draw."""
    scale = SCALES.get(metric, "linear")
    series = [_series(f, metric, scale) for f in frames]
    if scale != "linear" and not any(np.isfinite(y).any() for _, y in series):
        scale = "linear"
        series = [_series(f, metric, scale) for f in frames]
    label = LABELS.get(metric, metric)
    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    fig.suptitle(_literal(f"{label} by {AXIS_LABELS[align]}"), fontsize=11, x=0.01, ha="left")
    drawn = []
    for i, ((x, y), name) in enumerate(zip(series, labels, strict=True)):
        points = int(np.isfinite(y).sum())
        if not points:
            continue
        xs = x / unit[1] if unit else x
        marker = "." if points <= FEW_POINTS else None  # a lone record between gaps shows
        ax.plot(xs, y, color=color(i), linewidth=1.0, marker=marker, markersize=3,
                label=_literal(name), gid=f"run:{i}")  # fmt: skip
        drawn.append((name, color(i), points))
    if not drawn:
        return None
    _scale(ax, scale)
    ax.set_ylabel(_literal(label), fontsize=8)
    ax.tick_params(which="both", labelsize=7)
    _x_axis(ax, align, unit)
    ax.legend(loc="best", fontsize=7, frameon=False)
    names = ", ".join(name for name, _, _ in drawn)
    caption = f"{label}: {len(drawn)} of {len(frames)} runs ({names})"
    rendered = Rendered(f"overlay_{metric}", label, caption, _png(fig), fig)
    return Overlay(metric, label, drawn, rendered)


def _literal(text: str) -> str:
    """A label matplotlib draws as written (a ``$`` would start mathtext)."""
    return text.replace("$", r"\$")


def _x_axis(ax, align: str, unit: tuple[str, float] | None) -> None:
    if align == "step":
        _step_axis(ax)
        return
    ax.xaxis.set_major_locator(MaxNLocator(nbins=10))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.6g}"))
    text = AXIS_LABELS[align] + (f" ({unit[0]})" if unit else "")
    ax.set_xlabel(text, fontsize=8)
