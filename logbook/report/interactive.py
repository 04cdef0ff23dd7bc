"""The HTML report's interactive overview: a Plotly figure (zoom, pan, hover) of every
metric group the run has, on a step, wall-time or tokens axis.

The figure is built as plain JSON (no Plotly Python objects: a million-record run builds
as fast as a short one) and drawn by the plotly.js bundled with the ``plotly`` package,
embedded once in the page: nothing is fetched when the report is opened. Panels are shown
only for metrics present in the log: loss, validation loss, learning rate, grad norm,
loss scale, the norms that drift, step time, throughput, MFU / TFLOPs and memory. Lines
are downsampled and broken at gaps as in the static figures (:mod:`logbook.report.downsample`:
first/min/max/last per bin, so no spike is lost; more than ten log intervals without a
record are drawn as a gap).
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl

from logbook.incidents import first_step, last_step
from logbook.report import _marks as mk
from logbook.report._groups import COLORS, panels, validation_color, validation_points
from logbook.report.downsample import OverviewLines, plot_frame
from logbook.run import Run
from logbook.schema import Finding

MAX_SHAPES = 400  # event lines and finding spans drawn, at most (the largest first)
MARK_AXIS = "y99"  # the overlay axis of the findings' and events' hover markers
FADED = "#9a9a9a"


class Axes:
    """Step -> wall time and step -> tokens, read off the trajectory (for the axis
    switch); absent when the log has no timestamps or no token counts."""

    def __init__(self, traj: pl.DataFrame) -> None:
        t = traj.select("step", "time", *(["tokens"] if "tokens" in traj.columns else []))
        t = t.filter(pl.col("step").is_not_null()).sort("step")
        self.time = self._map(t, "time")
        self.tokens = self._map(t, "tokens") if "tokens" in t.columns else None

    @staticmethod
    def _map(t: pl.DataFrame, col: str) -> tuple[np.ndarray, np.ndarray] | None:
        ok = t.filter(pl.col(col).is_not_null())
        if ok.height < 2:
            return None
        v = ok.get_column(col)
        if col == "time":
            v = v.dt.epoch("ms")
        x, y = ok.get_column("step").to_numpy(), v.cast(pl.Float64).to_numpy()
        return x.astype(np.float64), y

    def names(self) -> list[str]:
        return ["step", *(["time"] if self.time else []), *(["tokens"] if self.tokens else [])]

    def convert(self, axis: str, steps: np.ndarray) -> list:
        steps = np.asarray(steps, dtype=np.float64)
        if axis == "step":
            return _nums(steps)
        x, y = self.time if axis == "time" else self.tokens
        v = np.interp(steps, x, y)
        v[~np.isfinite(steps)] = np.nan
        if axis == "time":  # milliseconds since the epoch: what a Plotly date axis takes
            return [None if not np.isfinite(ms) else int(round(ms)) for ms in v]
        return _nums(v)


def _nums(v: np.ndarray) -> list:
    out = []
    for x in v.tolist():
        if x != x or x in (np.inf, -np.inf):
            out.append(None)
        elif x == int(x) and abs(x) < 2**53:
            out.append(int(x))  # steps and token counts as integers
        else:
            out.append(float(f"{x:.6g}"))
    return out


def overview_spec(
    run: Run, findings: list[Finding], traj: pl.DataFrame, lines: OverviewLines | None = None
) -> dict | None:
    """The Plotly figure (``data``, ``layout``, ``config``) of the whole run, plus the
    x values of every axis for the axis switch; None when there is nothing to draw."""
    groups = panels(run)
    if not groups:
        return None
    axes = Axes(traj)
    names = axes.names()
    n = len(groups)
    gap = 0.03 if n > 1 else 0.0
    height = (1.0 - gap * (n - 1)) / n
    layout: dict = {
        "height": 150 + 190 * n,
        "margin": {"l": 70, "r": 20, "t": 40, "b": 40},
        "hovermode": "x unified",
        "showlegend": True,
        "legend": {"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0},
        "plot_bgcolor": "#ffffff",
    }
    data: list[dict] = []
    xs: dict[str, list] = {a: [] for a in names}
    if lines is None:
        lines = OverviewLines(plot_frame(run, [c for _, cols in groups for c in cols], traj))
    panel_of: dict[str, int] = {}
    shown_faded = False
    for i, (g, cols) in enumerate(groups):
        ax = "" if i == 0 else str(i + 1)
        top = 1.0 - i * (height + gap)
        layout[f"yaxis{ax}"] = {
            "title": {"text": g.title, "font": {"size": 11}},
            "domain": [max(top - height, 0.0), top],
            "type": "log" if g.scale != "linear" else "linear",
            "zeroline": False,
            "gridcolor": "#eeeeee",
            **_log_ticks(run.metrics, cols, g.scale),
        }
        layout[f"xaxis{ax}"] = {
            "anchor": f"y{ax}",
            "showticklabels": i == n - 1,
            "gridcolor": "#eeeeee",
            **({"matches": "x"} if i else {}),
        }
        for c in cols:
            panel_of.setdefault(c, i)
        for j, c in enumerate(cols):
            for faded in (True, False):
                s, v = lines.get(c, recomputed=faded)
                if g.scale != "linear":
                    v = np.where(v > 0, v, np.nan)
                if not s.size:
                    continue
                label = "recomputed after a restart" if faded else c
                color = FADED if faded else COLORS[j % len(COLORS)]
                tr = _trace(label, ax, v, color, faded)
                if not faded and len(cols) == 1:
                    tr["showlegend"] = False  # the panel's title names it
                if faded:
                    tr["showlegend"] = not shown_faded
                    shown_faded = True
                data.append(tr)
                for a in names:
                    xs[a].append(axes.convert(a, s))
        if g.title == "validation loss":
            for j, (label, s, vals) in enumerate(validation_points(run)):
                tr = _trace(label, ax, vals, validation_color(j), False)
                tr["mode"] = "lines+markers"
                data.append(tr)
                for a in names:
                    xs[a].append(axes.convert(a, s))
    shapes, marks = _overlays(run, findings, panel_of)
    if marks:  # hover markers ride on an invisible 0..1 axis over the first panel
        layout["yaxis" + MARK_AXIS[1:]] = {
            "overlaying": "y",
            "range": [0, 1.04],
            "visible": False,
            "fixedrange": True,
        }
    for tr, steps in marks:
        data.append(tr)
        for a in names:
            xs[a].append(axes.convert(a, steps))
    for k, tr in enumerate(data):
        tr["x"] = xs["step"][k]
    layout[f"xaxis{'' if n == 1 else n}"]["title"] = {"text": "step"}
    layout["shapes"] = [_shape(sh, "step", axes) for sh in shapes]
    switch = {  # the step axis's x values are the traces' own (not repeated here)
        a: {
            "x": xs[a] if a != "step" else None,
            "shapes": [_shape(sh, a, axes) for sh in shapes],
            "title": {"step": "step", "time": "wall time (UTC)", "tokens": "tokens consumed"}[a],
            "type": "date" if a == "time" else "linear",
        }
        for a in names
    }
    config = {"displaylogo": False, "responsive": True, "scrollZoom": False}
    steps = traj.get_column("step")
    caption = (
        f"{n} panels over steps {steps.min()}..{steps.max()}: "
        + ", ".join(g.title for g, _ in groups)
        + "; shaded: findings by severity; grey: records recomputed after a restart"
    )
    return {
        "data": data,
        "layout": layout,
        "config": config,
        "axes": switch,
        "panels": n,
        "caption": caption,
    }


def _log_ticks(m: pl.DataFrame, cols: list[str], scale: str) -> dict:
    """Tick values of a log axis written plainly: powers of two (``2^12``) for the loss
    scale; 1-2-5 per decade, or decades only over a wide range, for the others."""
    if scale == "linear" or not cols:
        return {}
    v = pl.concat([m.get_column(c).cast(pl.Float64) for c in cols])
    v = v.filter(v.is_finite() & (v > 0))
    if not v.len():
        return {}
    lo, hi = float(v.min()), float(v.max())
    if scale == "log2":
        a, b = int(np.floor(np.log2(lo))), int(np.ceil(np.log2(hi)))
        step = max(1, (b - a) // 8 + 1)
        e = range(a, b + 1, step)
        return {"tickvals": [2.0**k for k in e], "ticktext": [f"2^{k}" for k in e]}
    a, b = int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi)))
    subs = (1, 2, 5) if b - a <= 2 else (1,)
    vals = [m * 10.0**k for k in range(a, b + 1) for m in subs]
    return {"tickvals": vals, "ticktext": [f"{x:g}" for x in vals]}


def _trace(name: str, ax: str, v: np.ndarray, color: str, faded: bool) -> dict:
    return {
        "type": "scatter",  # downsampled: a few thousand points at most
        "mode": "lines",
        "name": name,
        "xaxis": f"x{ax}",
        "yaxis": f"y{ax}",
        "y": _nums(v),
        "line": {"color": color, "width": 0.8 if faded else 1.2},
        "connectgaps": False,
        "hovertemplate": "%{y:.5g}",
        **({"legendgroup": "recomputed"} if faded else {}),
    }


def _overlays(run: Run, findings: list[Finding], panel_of: dict[str, int]):
    """Finding spans (shaded on their metric's panel, or on every panel) and event lines
    (across all panels), with a hover marker for each on the first panel."""
    shapes: list[tuple] = []
    marks = []
    order = {"critical": 0, "warning": 1, "info": 2}
    fs = sorted(
        (f for f in findings if first_step(f) is not None),
        key=lambda f: (order.get(f.severity, 3), first_step(f)),
    )
    for f in fs[: MAX_SHAPES // 2]:
        a, b = first_step(f), last_step(f)
        panel = panel_of.get(mk.FINDING_PANEL.get(f.kind, ""))
        color = mk.SEVERITY_COLORS.get(f.severity, "#7f7f9f")
        shapes.append(("rect", a - 0.5, b + 0.5, panel, color))
    hover: dict[str, tuple[list, list, str]] = {}  # name -> steps, texts, colour
    for f in fs:
        s = f.step if f.step is not None else f.start_step
        color = mk.SEVERITY_COLORS.get(f.severity, "#7f7f9f")
        steps, texts, _ = hover.setdefault(f"{f.severity} findings", ([], [], color))
        steps.append(s)
        texts.append(f"{f.kind} ({f.severity}) at {s}: {f.message}"[:240])
    lines = mk.event_lines(run)
    for kind, steps in lines.steps.items():
        label, color, _ = mk.EVENT_LINES[kind]
        for s in steps[: MAX_SHAPES // 2]:
            shapes.append(("line", float(s), float(s), None, color))
        if steps.size:
            h = hover.setdefault(label, ([], [], color))
            h[0].extend(float(s) for s in steps)
            h[1].extend(f"{label} at step {int(s):,}" for s in steps)
    ymark = {"critical findings": 1.0, "warning findings": 0.97, "info findings": 0.94}
    for name, (steps, texts, color) in hover.items():
        marks.append(
            (
                {
                    "type": "scatter",
                    "mode": "markers",
                    "name": name,
                    "xaxis": "x",
                    "yaxis": MARK_AXIS,
                    "y": [ymark.get(name, 0.9)] * len(steps),
                    "text": texts,
                    "hovertemplate": "%{text}<extra></extra>",
                    "marker": {"symbol": "triangle-down", "size": 8, "color": color},
                    "cliponaxis": False,
                },
                np.asarray(steps, dtype=np.float64),
            )
        )
    return shapes, marks


def _shape(sh: tuple, axis: str, axes: Axes) -> dict:
    kind, a, b, panel, color = sh
    x0, x1 = axes.convert(axis, np.array([a, b], dtype=np.float64))
    if kind == "line":
        return {
            "type": "line",
            "xref": "x",
            "yref": "paper",
            "x0": x0,
            "x1": x1,
            "y0": 0,
            "y1": 1,
            "line": {"color": color, "width": 1, "dash": "dash"},
            "opacity": 0.7,
        }
    yref = "paper" if panel is None else f"y{'' if panel == 0 else panel + 1} domain"
    return {
        "type": "rect",
        "xref": "x",
        "yref": yref,
        "x0": x0,
        "x1": x1,
        "y0": 0,
        "y1": 1,
        "fillcolor": color,
        "opacity": 0.2,
        "line": {"width": 0},
        "layer": "below",
    }


def to_json(spec: dict) -> str:
    """The spec as JSON safe inside a ``<script>`` element."""
    text = json.dumps(spec, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c")  # no "</script>" or "<!--" can close it


def plotly_js() -> str:
    """plotly.js as bundled with the plotly package (read from the package, no network)."""
    from importlib.resources import files

    return (files("plotly") / "package_data" / "plotly.min.js").read_text(encoding="utf-8")
