"""The report's figures (matplotlib, Agg): stacked panels sharing the step axis.

The overview has one panel per metric group the run has, in the order of the
interactive overview (:mod:`logbook.report._groups` finds them for both): loss (spikes
and divergence shaded, non-finite steps marked), validation loss, learning rate (manual
changes), grad norm (log scale), loss scale (log2, overflow-skipped iterations marked),
activation norm and the other norms that can drift, step time, throughput, MFU / TFLOPs
and memory. Restarts, crashes, manual LR changes and chronicle notes are vertical
lines on every panel; checkpoint saves are ticks on the bottom axis. Records that a
restart recomputed are drawn in grey: the spike that made a team rewind is often there.
Each incident gets a zoomed figure of its own line of training, precursors shaded.

Lines are downsampled with :mod:`logbook.report.downsample` (first/min/max/last per
bin), so a million-step run draws as fast as a short one and no spike is lost. PNGs are
written without a software tag: the same input gives the same bytes.
"""

from __future__ import annotations

import io

import numpy as np
import polars as pl
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from logbook.report import _marks as mk
from logbook.report._groups import COLORS, GROUPS, panels, validation_color, validation_points
from logbook.report._lines import window_line
from logbook.report.blocks import Rendered
from logbook.report.downsample import OverviewLines, lineage_series, plot_frame
from logbook.report.incidents import Incident, lineage
from logbook.run import Run
from logbook.schema import Finding

# (column, label, y scale) in drawing order; panels without data are left out. The
# labels are the titles of the same groups in _groups.GROUPS; the overview adds the
# other groups of GROUPS (validation loss, step time, throughput, MFU / TFLOPs, memory)
PANELS = (
    ("loss", "loss (nats)", "linear"),
    ("lr", "learning rate", "linear"),
    ("grad_norm", "grad norm", "log"),
    ("loss_scale", "loss scale", "log2"),
    ("act_norm", "activation norm", "linear"),
    ("param_norm", "param norm", "linear"),
    ("attn_logit_max", "max attn logit", "linear"),
    ("logz", "log Z", "linear"),
)
ZOOM_DEFAULT = ("loss", "grad_norm", "loss_scale", "act_norm")
WIDTH_IN, PANEL_IN, HEADER_IN, DPI = 12.0, 1.9, 0.45, 100
MAIN_COLOR, FADED_COLOR = "#1f77b4", "#6f6f6f"
RECOMPUTED = "#3a3a3a"  # a recomputed segment's own line, when an incident zoom is on it
ORDER = {g.title: i for i, g in enumerate(GROUPS)}  # the overview's panels, top to bottom
CORE = {label for _, label, _ in PANELS}


def _present(frame: pl.DataFrame, columns: list[str]) -> list[tuple[str, str, str]]:
    out = []
    for col, label, scale in PANELS:
        if col not in columns or col not in frame.columns:
            continue
        v = frame.get_column(col).cast(pl.Float64)
        ok = v.is_finite() & (v > 0) if scale != "linear" else v.is_finite()
        if ok.any():
            out.append((col, label, scale))
    return out


def _axes(n: int, title: str) -> tuple[Figure, list]:
    fig = Figure(figsize=(WIDTH_IN, PANEL_IN * n + HEADER_IN), dpi=DPI)
    FigureCanvasAgg(fig)
    axes = fig.subplots(n, 1, sharex=True, squeeze=False)[:, 0].tolist()
    fig.suptitle(title, fontsize=11, x=0.01, ha="left")
    return fig, axes


def _scale(ax, scale: str) -> None:
    """Log axes get plain-text labels (``0.5``, ``2^12``): no mathtext to lay out."""
    if scale == "linear":
        return
    base = 2 if scale == "log2" else 10
    ax.set_yscale("log", base=base)
    subs = (1.0,) if base == 2 else (1.0, 2.0, 5.0)
    ax.yaxis.set_major_locator(LogLocator(base=base, subs=subs, numticks=10))
    ax.yaxis.set_major_formatter(FuncFormatter(_pow2 if base == 2 else _plain))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _plain(v: float, _pos=None) -> str:
    return f"{v:g}"


def _pow2(v: float, _pos=None) -> str:
    e = np.log2(v) if v > 0 else 0.0
    return f"2^{e:.0f}" if abs(e - round(e)) < 1e-9 else f"{v:g}"


def _line(ax, x: np.ndarray, y: np.ndarray, scale: str, main: bool, color: str = "") -> None:
    """``main``: the line in focus (drawn thicker); colours are blue for the trajectory
    and grey for recomputed records in every figure, unless ``color`` says otherwise."""
    if scale != "linear":
        y = np.where(y > 0, y, np.nan)
    gid = "main" if main else "other"
    color = color or (MAIN_COLOR if main else FADED_COLOR)
    ax.plot(x, y, color=color, linewidth=1.0 if main else 0.8, gid=gid)


def _extra_panels(run: Run, columns: list[str] | None) -> list[tuple[str, str, list[str]]]:
    """(title, y scale, columns) of the overview's panels beyond ``PANELS``, those the
    run has (found as the interactive overview finds them); ``columns``: only those of
    the named columns."""
    out = []
    for g, cols in panels(run):
        if g.title in CORE:
            continue
        if columns is not None:
            cols = [c for c in cols if c in columns]
            if not cols:
                continue
        out.append((g.title, g.scale, cols))
    return out


def _draw_panel(ax, lines: OverviewLines, cols: list[str], scale: str) -> list:
    """The lines of ``cols`` on one panel: the trajectory (blue, then the next colours
    for a second and third column) over the recomputed records (grey); returns a legend
    handle for each column."""
    handles = []
    for j, col in enumerate(c for c in cols if c in lines.frame.columns):
        x, y = lines.get(col)
        if lines.rest.height:
            fx, fy = lines.get(col, recomputed=True)
            _line(ax, fx, fy, scale, False)
        color = MAIN_COLOR if j == 0 else COLORS[j % len(COLORS)]
        _line(ax, x, y, scale, True, color)
        handles.append(Line2D([], [], color=color, label=col))
    return handles


FEW_POINTS = 200  # validation losses drawn with a dot each, when there are at most this many


def _draw_validation(ax, run: Run) -> list:
    """The losses of the validation records, as lines (a dot on each, when few)."""
    handles = []
    for j, (label, steps, values) in enumerate(validation_points(run)):
        color, dot = validation_color(j), "o" if steps.size <= FEW_POINTS else ""
        ax.plot(steps, values, color=color, marker=dot, ms=3, linewidth=1.0, gid="validation")
        handles.append(Line2D([], [], color=color, marker=dot, ms=3, label=label))
    return handles


def _draw_marks(ax, col: str, findings: list[Finding], marks: dict) -> None:
    xaxis = ax.get_xaxis_transform()
    for sev, sp in mk.spans(findings, col).items():
        ax.broken_barh(
            sp,
            (0, 1),
            transform=xaxis,
            color=mk.SEVERITY_COLORS[sev],
            alpha=0.22,
            gid=f"finding:{sev}",
        )
    if col == "loss":
        for sev, steps in marks["targets"].items():
            ax.plot(
                steps,
                np.full(steps.size, 0.92),  # inside the panel: the one above hides none
                "v",
                transform=xaxis,
                ms=6,
                color=mk.SEVERITY_COLORS[sev],
                clip_on=False,
                gid=f"target:{sev}",
            )
        bad = marks["nonfinite"]
        if bad.size:
            ax.plot(
                bad,
                np.full(bad.size, 0.9),
                "x",
                transform=xaxis,
                color="#d62728",
                ms=5,
                gid="nonfinite",
            )
    if col == "loss_scale" and marks["overflow"].size:
        s = marks["overflow"]
        ax.plot(
            s, np.full(s.size, 0.04), "^", transform=xaxis, color="#ff7f0e", ms=4, gid="overflow"
        )


def _draw_lines(axes: list, lines: mk.EventLines) -> None:
    for kind, steps in lines.steps.items():
        if not steps.size:
            continue
        _, color, style = mk.EVENT_LINES[kind]
        for ax in axes:
            ax.vlines(
                steps,
                0,
                1,
                transform=ax.get_xaxis_transform(),
                colors=color,
                linestyles=style,
                linewidth=0.9,
                alpha=0.8,
                gid=f"event:{kind}",
            )


def _legend(
    ax,
    lines: mk.EventLines,
    labels: tuple[str, str | None],
    extra: list,
    colors: tuple[str, str] = (MAIN_COLOR, FADED_COLOR),
) -> None:
    handles = [Line2D([], [], color=colors[0], label=labels[0])]
    if labels[1]:
        handles.append(Line2D([], [], color=colors[1], label=labels[1]))
    for kind, steps in lines.steps.items():
        if steps.size:
            label, color, style = mk.EVENT_LINES[kind]
            handles.append(Line2D([], [], color=color, linestyle=style, label=label))
    handles += [Line2D([], [], label=label, **kw) for label, kw in extra]
    ax.figure.legend(
        handles=handles,
        loc="upper right",
        bbox_to_anchor=(0.995, 0.995),
        fontsize=7,
        ncol=min(len(handles), 5),
        frameon=False,
    )


def _step_axis(ax) -> None:
    """Whole steps, written in full with thousands separators (no 1e6 offset)."""
    ax.xaxis.set_major_locator(MaxNLocator(nbins=10, steps=[1, 2, 2.5, 5, 10], integer=True))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}"))
    ax.set_xlabel("step", fontsize=8)


def _png(fig: Figure) -> bytes:
    h = fig.get_figheight()
    fig.subplots_adjust(left=0.07, right=0.99, bottom=0.45 / h, top=1 - HEADER_IN / h, hspace=0.12)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _extra_legend(findings: list[Finding]) -> list[tuple[str, dict]]:
    sev = sorted({f.severity for f in findings if f.kind in mk.FINDING_PANEL})
    return [
        (f"{s} finding", {"color": mk.SEVERITY_COLORS[s], "linewidth": 6, "alpha": 0.3})
        for s in sev
    ]


def overview(
    run: Run,
    findings: list[Finding],
    marks: dict | None = None,
    traj: pl.DataFrame | None = None,
    lines: OverviewLines | None = None,
) -> Rendered:
    """The stacked overview figure of the whole run (``marks``: from :func:`run_marks`;
    ``traj``: the run's trajectory, when already computed; ``lines``: the downsampled
    lines, when shared with the interactive overview)."""
    fig, panels, frame = overview_figure(run, findings, marks, traj, lines=lines)
    caption = (
        f"{len(panels)} panels over steps {_span(frame)}; shaded: findings by severity; "
        "grey: records recomputed after a restart"
    )
    return Rendered("overview", "Overview", caption, _png(fig), fig)


def shared_lines(run: Run, traj: pl.DataFrame | None = None) -> OverviewLines:
    """The lines both overviews draw (this one's panels and the interactive one's)."""
    cols = [c for c, _, _ in PANELS] + [c for _, group in panels(run) for c in group]
    return OverviewLines(plot_frame(run, cols, traj))


def overview_figure(
    run: Run,
    findings: list[Finding],
    marks: dict | None = None,
    traj: pl.DataFrame | None = None,
    columns: list[str] | None = None,
    lines: OverviewLines | None = None,
) -> tuple[Figure, list[tuple[str, str, list[str]]], pl.DataFrame]:
    """The overview as a matplotlib figure, with its panels (title, y scale, columns
    drawn; top to bottom) and the records drawn: ``columns`` picks panels by metric
    column (default: every metric group the run has, and the validation records'
    losses)."""
    extra = _extra_panels(run, columns)
    drawn = [c for c, _, _ in PANELS] + [c for _, _, cols in extra for c in cols]
    if lines is None:
        lines = OverviewLines(plot_frame(run, drawn, traj))
    frame = lines.frame
    wanted = frame.columns if columns is None else [c for c in columns if c in frame.columns]
    core = [(label, scale, [col]) for col, label, scale in _present(frame, wanted)]
    shown = sorted(core + extra, key=lambda p: ORDER[p[0]])
    shown = shown or [("loss (nats)", "linear", ["loss"])]
    name = run.meta.name or "run"
    fig, axes = _axes(len(shown), f"{name}: metrics by step")
    marks = run_marks(run, findings) if marks is None else marks
    faded = lines.rest.height > 0
    for ax, (label, scale, cols) in zip(axes, shown, strict=True):
        handles = _draw_panel(ax, lines, cols, scale)
        if label == "validation loss" and columns is None:
            handles += _draw_validation(ax, run)
        if len(handles) > 1:  # the panel's title names a single line
            ax.legend(handles=handles, loc="upper left", fontsize=7, frameon=False)
        _scale(ax, scale)
        ax.set_ylabel(label, fontsize=8)
        ax.tick_params(which="both", labelsize=7)
        for col in cols:
            _draw_marks(ax, col, findings, marks)
    lines = marks["lines"]
    _draw_lines(axes, lines)
    saves = marks["checkpoints"]
    ckpt = thinned(saves, MAX_TICKS)
    if ckpt.size:
        axes[-1].plot(
            ckpt,
            np.zeros(ckpt.size),
            "|",
            transform=axes[-1].get_xaxis_transform(),
            color="#555555",
            ms=6,
            clip_on=False,
            gid="checkpoints",
        )
    _step_axis(axes[-1])
    legend = _extra_legend(findings)
    if ckpt.size:
        what = "checkpoint save"
        if ckpt.size < saves.size:
            what = f"checkpoint saves ({saves.size:,}; {ckpt.size} drawn, evenly)"
        legend.append((what, {"color": "#555555", "marker": "|", "linestyle": ""}))
    _legend(axes[0], lines, ("trajectory", "recomputed after a restart" if faded else None), legend)
    return fig, shown, frame


MAX_TICKS = 150  # checkpoint ticks drawn on the bottom axis, at most (a thousand make a bar)


def thinned(steps: np.ndarray, most: int) -> np.ndarray:
    """At most ``most`` of ``steps`` (sorted), evenly spread, the first and last kept."""
    if steps.size <= most:
        return steps
    return steps[np.unique(np.linspace(0, steps.size - 1, most).round().astype(np.int64))]


def run_marks(run: Run, findings: list[Finding]) -> dict:
    """What is drawn over the lines, gathered once for all the figures of a report."""
    return {
        "lines": mk.event_lines(run),
        "targets": mk.target_steps(findings),
        "nonfinite": mk.nonfinite_steps(run),
        "overflow": mk.overflow_steps(run),
        "checkpoints": mk.checkpoint_steps(run),
    }


def _span(frame: pl.DataFrame) -> str:
    if not frame.height:
        return "none"
    s = frame.get_column("step")
    return f"{s.min()}..{s.max()}"


def zoom(
    run: Run, inc: Incident, number: int, interval: int = 1, marks: dict | None = None
) -> Rendered:
    """One incident up close: its own line of training, precursors shaded in amber."""
    seg = inc.main.segment if lineage(inc.main)[0] else None
    width = max(inc.end - inc.start, 1)
    margin = max(10 * interval, int(0.25 * width), 5)
    lo, hi = inc.start - margin, inc.end + margin
    cols = [c for c, _, _ in PANELS if c in run.metrics.columns]
    want = list(
        dict.fromkeys([*ZOOM_DEFAULT, *(mk.FINDING_PANEL.get(p.kind, "") for p in inc.precursors)])
    )
    line = window_line(run.metrics, seg, lo, hi)
    main = line.select(["step", *cols])
    every = run.metrics.filter(pl.col("step").is_between(lo, hi)).select(["step", "segment", *cols])
    other = every.join(line.select("segment", "step"), on=["segment", "step"], how="anti")
    panels = _present(main, want) or [("loss", "loss (nats)", "linear")]
    fig, axes = _axes(len(panels), f"incident {number}: {inc.label}")
    found = [*inc.findings, *inc.precursors]
    # the same colours as the overview: on a segment a restart recomputed, its own line
    # is grey and the records around it (the final trajectory) blue
    own_color, other_color = (MAIN_COLOR, FADED_COLOR) if seg is None else (RECOMPUTED, MAIN_COLOR)
    marks = {**(run_marks(run, []) if marks is None else marks)}
    marks["targets"] = mk.target_steps(inc.findings)
    for ax, (col, label, scale) in zip(axes, panels, strict=True):
        if col in main.columns:
            if other.height:
                fx, fy = lineage_series(other.with_columns(pl.col("segment").alias("lineage")), col)
                _line(ax, fx, fy, scale, False, other_color)
            x, y = lineage_series(main.with_columns(pl.lit(0).alias("lineage")), col)
            _line(ax, x, y, scale, True, own_color)
        _scale(ax, scale)
        ax.set_ylabel(label, fontsize=8)
        ax.tick_params(which="both", labelsize=7)
        _shade_precursors(ax, col, inc.precursors, {c for c, _, _ in panels})
        _draw_marks(ax, col, inc.findings, marks)
    axes[-1].set_xlim(lo, hi)
    _step_axis(axes[-1])
    lines = marks["lines"].within(lo, hi)
    _draw_lines(axes, lines)
    extra = _extra_legend(inc.findings)
    if inc.precursors:
        extra.append(("precursor", {"color": mk.PRECURSOR_COLOR, "linewidth": 6, "alpha": 0.4}))
    own = "trajectory" if seg is None else f"segment {seg} (later recomputed)"
    rest = "other records" if seg is None else "trajectory and other records"
    _legend(axes[0], lines, (own, rest if other.height else None), extra, (own_color, other_color))
    names = ", ".join(f.id or f.kind for f in found)
    caption = f"steps {lo}..{hi}: {names}"
    title = f"Incident {number}: {inc.label}"
    return Rendered(f"incident_{number}", title, caption, _png(fig), fig)


def _shade_precursors(ax, col: str, precursors: list[Finding], shown: set[str]) -> None:
    """Shade each precursor on its metric's panel (on every panel when that one is not
    drawn)."""
    sp = []
    for p in precursors:
        if mk.FINDING_PANEL.get(p.kind) in shown and mk.FINDING_PANEL.get(p.kind) != col:
            continue
        a = p.start_step if p.start_step is not None else p.step
        b = p.end_step if p.end_step is not None else p.step
        if a is not None and b is not None:
            sp.append((a - 0.5, b - a + 1.0))
    if sp:
        ax.broken_barh(
            sp,
            (0, 1),
            transform=ax.get_xaxis_transform(),
            color=mk.PRECURSOR_COLOR,
            alpha=0.3,
            gid="precursor",
        )
