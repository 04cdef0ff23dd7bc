"""The fleet report's figures (matplotlib, Agg), drawn from the store's tables across
runs: loss spikes per 1,000 steps by run, the lead of precursors by kind, and restarts
and lost steps by cause. A figure without data is one sentence that says so."""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import polars as pl

from logbook.report.blocks import Rendered

TOP_RUNS = 30  # runs drawn in the spike-rate figure (the highest rates)
WIDTH_IN, BAR_IN, DPI = 10.0, 0.26, 100
LABEL_CHARS = 48
SPIKE, LEAD, CAUSE = "#b00020", "#1f77b4", "#a15c00"


@dataclass
class FleetFigure:
    """One figure of the fleet report: its heading, and the drawing or, without data,
    the sentence that stands in for it."""

    heading: str
    anchor: str
    figure: Rendered | None = None
    note: str = ""  # a sentence under the figure, or in its place


def fleet_figures(index: pl.DataFrame, findings: pl.DataFrame, events: pl.DataFrame):
    """The three figures of the fleet (``index``: runs.parquet; ``findings`` with
    run_id, kind, precedes, lead_steps; ``events`` with run_id, kind, cause, lost_steps)."""
    return [spike_rates(index, findings), precursor_leads(findings), restart_causes(events)]


def spike_rate_table(index: pl.DataFrame, findings: pl.DataFrame) -> pl.DataFrame:
    """run_id, run, spikes, steps and rate (spikes per 1,000 steps) of each readable run
    with a step range, the highest rate first."""
    counts = (
        findings.filter(pl.col("kind") == "loss_spike")
        .group_by("run_id")
        .agg(pl.len().cast(pl.Int64).alias("spikes"))
    )
    runs = index.filter(
        pl.col("error").is_null() & pl.col("first_step").is_not_null()
    ).with_columns((pl.col("last_step") - pl.col("first_step") + 1).alias("steps"))
    return (
        runs.join(counts, on="run_id", how="left")
        .with_columns(pl.col("spikes").fill_null(0))
        .with_columns((1000 * pl.col("spikes") / pl.col("steps")).alias("rate"))
        .select("run_id", "run", "input", "spikes", "steps", "rate")
        .sort(["rate", "spikes", "run", "run_id"], descending=[True, True, False, False])
    )


def spike_rates(index: pl.DataFrame, findings: pl.DataFrame) -> FleetFigure:
    out = FleetFigure("Loss spikes per 1,000 steps", "fig-spike-rate")
    table = spike_rate_table(index, findings)
    spiked = table.filter(pl.col("spikes") > 0)
    none = table.height - spiked.height
    if spiked.height == 0:
        out.note = f"No loss spike in any of the {table.height} run(s) with steps: nothing to draw."
        return out
    top = spiked.head(TOP_RUNS)
    labels = [_label(r["run"] or r["input"]) for r in top.iter_rows(named=True)]
    rates = top.get_column("rate").to_numpy()
    fig, ax = _figure(top.height, "Loss spikes per 1,000 steps, by run")
    y = np.arange(top.height)
    ax.barh(y, rates, height=0.7, color=SPIKE, alpha=0.8)
    for yi, (rate, n) in enumerate(zip(rates, top.get_column("spikes").to_list(), strict=True)):
        ax.text(rate, yi, f" {n}", va="center", fontsize=7)
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("loss spikes per 1,000 steps (the number of spikes at the bar's end)")
    shown = f"the top {top.height} of {spiked.height}" if spiked.height > top.height else "all"
    out.figure = _rendered(
        fig,
        "spike_rate",
        "Loss spikes per 1,000 steps by run",
        f"Findings of kind loss_spike per 1,000 steps of the run's step range "
        f"(last step - first step + 1): {shown} run(s) with a loss spike.",
    )
    out.note = f"{none} run(s) with steps have no loss spike."
    return out


def precursor_leads(findings: pl.DataFrame) -> FleetFigure:
    out = FleetFigure("Precursor lead by kind", "fig-precursor-lead")
    leads = findings.filter(pl.col("precedes").is_not_null() & pl.col("lead_steps").is_not_null())
    if leads.height == 0:
        out.note = (
            "No finding precedes a loss spike or divergence in any run: no precursor lead to draw."
        )
        return out
    by_kind = leads.group_by("kind").agg(pl.col("lead_steps")).sort("kind")
    kinds = by_kind.get_column("kind").to_list()
    values = [np.asarray(v, dtype=float) for v in by_kind.get_column("lead_steps").to_list()]
    fig, ax = _figure(len(kinds), "Precursor lead (steps before the finding it precedes)", 2)
    y = np.arange(len(kinds))
    ax.boxplot(values, positions=y, widths=0.6, showfliers=False, **_horizontal(ax))
    rng = np.random.default_rng(0)  # (a fixed jitter: the same store draws the same PNG)
    for yi, v in zip(y, values, strict=True):
        ax.scatter(v, yi + rng.uniform(-0.2, 0.2, v.size), s=9, color=LEAD, alpha=0.6, zorder=3)
    ax.set_yticks(y, [f"{_label(k)} (n={v.size})" for k, v in zip(kinds, values, strict=True)])
    ax.tick_params(axis="y", labelsize=7)
    ax.invert_yaxis()
    ax.set_xlim(left=0)
    ax.set_xlabel("lead (steps)")
    out.figure = _rendered(
        fig,
        "precursor_lead",
        "Precursor lead by kind",
        f"Steps from each precursor to the loss spike or divergence it precedes, by the "
        f"precursor's kind: {leads.height} precursor(s) of {len(kinds)} kind(s), across "
        f"{leads.get_column('run_id').n_unique()} run(s) (box: quartiles; points: each one).",
    )
    return out


def restart_causes(events: pl.DataFrame) -> FleetFigure:
    out = FleetFigure("Restarts and lost steps by cause", "fig-restart-cause")
    restarts = events.filter(pl.col("kind") == "restart")
    if restarts.height == 0:
        out.note = "No restart in any run: nothing to draw."
        return out
    by_cause = (
        restarts.with_columns(pl.col("cause").fill_null("unknown"))
        .group_by("cause")
        .agg(pl.len().alias("restarts"), pl.col("lost_steps").fill_null(0).sum().alias("lost"))
        .sort(["lost", "restarts", "cause"], descending=[True, True, False])
    )
    from matplotlib.ticker import MaxNLocator

    causes = [_label(c) for c in by_cause.get_column("cause").to_list()]
    fig, (left, right) = _figure(len(causes), "Restarts and lost steps by cause", 2, cols=2)
    y = np.arange(len(causes))
    for ax, col, what in ((left, "restarts", "restarts"), (right, "lost", "lost steps")):
        v = by_cause.get_column(col).to_numpy()
        ax.barh(y, v, height=0.7, color=CAUSE, alpha=0.8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        for yi, x in enumerate(v):
            ax.text(x, yi, f" {x:,}", va="center", fontsize=7)
        ax.set_xlabel(what)
        ax.invert_yaxis()
    left.set_yticks(y, causes, fontsize=7)
    right.set_yticks(y, [])
    out.figure = _rendered(
        fig,
        "restart_cause",
        "Restarts and lost steps by cause",
        f"{restarts.height} restart(s) across {restarts.get_column('run_id').n_unique()} run(s), "
        "by the crash evidence seen before each (unknown: none seen); lost steps are the "
        "steps computed again after it.",
    )
    return out


def _horizontal(ax) -> dict:
    """Boxes along the x axis: ``orientation`` from matplotlib 3.10 (``vert`` before)."""
    import inspect

    if "orientation" in inspect.signature(ax.boxplot).parameters:
        return {"orientation": "horizontal"}
    return {"vert": False}


def _label(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 3] + "..."


def _figure(rows: int, title: str, least: int = 3, cols: int = 1):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    height = 1.2 + BAR_IN * max(rows, least)
    fig = Figure(figsize=(WIDTH_IN, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, cols, squeeze=True)
    fig.suptitle(title, fontsize=11, x=0.01, ha="left")
    for ax in np.atleast_1d(axes):
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(axis="x", labelsize=8)
    return fig, axes


def _rendered(fig, name: str, title: str, caption: str) -> Rendered:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return Rendered(name=name, title=title, caption=caption, png=buf.getvalue())
