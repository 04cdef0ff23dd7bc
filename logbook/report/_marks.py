"""What is drawn over the metric lines: finding spans, event lines, skip and NaN marks.

Everything is gathered into arrays first and drawn with one call per style, so that a
run with thousands of events still draws quickly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from logbook.run import Run
from logbook.schema import EventBase, Finding, LrChange, Restart

SEVERITY_COLORS = {"critical": "#d62728", "warning": "#ff7f0e", "info": "#7f7f9f"}
PRECURSOR_COLOR = "#ffbf00"

# finding kind -> the panel (metric column) whose span it shades
FINDING_PANEL = {
    "loss_spike": "loss",
    "divergence": "loss",
    "zero_loss": "loss",
    "stall": "loss",
    "grad_norm_spike": "grad_norm",
    "grad_norm_drift": "grad_norm",
    "loss_scale_collapse": "loss_scale",
    "loss_scale_drop": "loss_scale",
    "activation_norm_drift": "act_norm",
    "param_norm_drift": "param_norm",
    "attn_logit_drift": "attn_logit_max",
    "logz_drift": "logz",
    "lr_change": "lr",
    "throughput_drop": "step_time_s",
}

# event kind -> (legend label, color, line style) of its vertical line on every panel
EVENT_LINES = {
    "restart": ("restart", "#222222", "--"),
    "hardware_failure": ("hardware failure", "#d62728", ":"),
    "lr_change": ("manual LR change", "#9467bd", "-."),
    "note": ("chronicle note", "#2ca02c", "-"),
    "config_change": ("config change", "#8c564b", ":"),
    "data_skip": ("data skip", "#8c564b", "--"),
}


def event_step(e: EventBase) -> int | None:
    """Where an event is drawn: its step; a restart without one at its resume point."""
    if e.step is not None:
        return e.step
    if isinstance(e, Restart):
        if e.resume_step is not None:
            return e.resume_step + 1
        return e.last_step_before
    return None


@dataclass
class EventLines:
    """Steps of the vertical lines, by event kind."""

    steps: dict[str, np.ndarray]

    def within(self, lo: float, hi: float) -> EventLines:
        return EventLines({k: v[(v >= lo) & (v <= hi)] for k, v in self.steps.items()})


def event_lines(run: Run) -> EventLines:
    steps: dict[str, list[int]] = {}
    for e in run.events:
        if e.kind not in EVENT_LINES:
            continue
        if isinstance(e, LrChange) and e.manual is not True:
            continue
        s = event_step(e)
        if s is not None:
            steps.setdefault(e.kind, []).append(s)
    return EventLines({k: np.unique(np.array(v, dtype=np.float64)) for k, v in steps.items()})


def spans(findings: list[Finding], column: str) -> dict[str, list[tuple[float, float]]]:
    """Severity -> (start, width) spans of the findings shaded on ``column``'s panel."""
    out: dict[str, list[tuple[float, float]]] = {}
    for f in findings:
        if FINDING_PANEL.get(f.kind) != column:
            continue
        lo = f.start_step if f.start_step is not None else f.step
        hi = f.end_step if f.end_step is not None else lo
        if lo is None or hi is None:
            continue
        out.setdefault(f.severity, []).append((lo - 0.5, hi - lo + 1.0))
    return out


def overflow_steps(run: Run) -> np.ndarray:
    """Steps with overflow-skipped iterations: the ``skipped`` column and the events."""
    parts = [np.array([e.step for e in run.events_of("overflow_skip") if e.step is not None])]
    if "skipped" in run.metrics.columns:
        m = run.metrics.filter(pl.col("skipped") > 0)
        parts.append(m.get_column("step").drop_nulls().to_numpy())
    return np.unique(np.concatenate([p.astype(np.float64) for p in parts]))


def nonfinite_steps(run: Run) -> np.ndarray:
    """Steps with a NaN/Inf or missing loss: non-finite values and ``nonfinite`` events."""
    parts = [np.array([e.step for e in run.events_of("nonfinite") if e.step is not None])]
    if "loss" in run.metrics.columns:
        m = run.metrics.filter(pl.col("loss").is_nan() | pl.col("loss").is_infinite())
        parts.append(m.get_column("step").drop_nulls().to_numpy())
    return np.unique(np.concatenate([p.astype(np.float64) for p in parts]))


def checkpoint_steps(run: Run) -> np.ndarray:
    steps = [e.step for e in run.events_of("checkpoint_save") if e.step is not None]
    return np.unique(np.array(steps, dtype=np.float64))


def target_steps(findings: list[Finding]) -> dict[str, np.ndarray]:
    """Severity -> steps of loss spikes and divergences (marked above the loss line)."""
    out: dict[str, list[int]] = {}
    for f in findings:
        if f.kind in ("loss_spike", "divergence") and f.step is not None:
            out.setdefault(f.severity, []).append(f.step)
    return {k: np.array(v, dtype=np.float64) for k, v in out.items()}
