"""The report's metric groups: which panels an overview figure has, and which columns
each draws, read off the run's column names.

One definition for both overviews, the interactive one of the HTML report
(:mod:`logbook.report.interactive`) and the static PNG of the Markdown report
(:mod:`logbook.report.figures`): a column's panel is the first group whose pattern
matches its whole name (case-insensitive), a panel is shown only when the run has a
finite value of one of its columns (a positive one on a log axis), and the validation
loss panel also when validation records carry a loss.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import polars as pl

from logbook.run import Run
from logbook.schema import CORE_COLUMNS, Validation


@dataclass(frozen=True)
class Group:
    """One panel: its title, y scale, and which columns it draws."""

    title: str
    scale: str  # linear, log, log2
    pattern: str  # a regular expression matched against the whole column name


GROUPS = (
    Group("loss (nats)", "linear", r"loss"),
    Group("validation loss", "linear", r"(eval|val|valid|validation|test)[_/.-]?(lm_)?loss"),
    Group("learning rate", "linear", r"lr"),
    Group("grad norm", "log", r"grad_norm"),
    Group("loss scale", "log2", r"loss_scale"),
    Group("activation norm", "linear", r"act_norm"),
    Group("param norm", "linear", r"param_norm"),
    Group("max attn logit", "linear", r"attn_logit_max"),
    Group("log Z", "linear", r"logz"),
    Group("step time (s)", "linear", r"step_time_s"),
    Group(
        "throughput",
        "linear",
        r"(tokens_per_s(ec|econd)?|samples_per_s(ec|econd)?|throughput\w*|tgs|wps|ups"
        r"|\w*_per_(sec|second)|tok(en)?s_per_gpu\w*)",
    ),
    Group("MFU / TFLOPs", "linear", r"(\w*mfu\w*|\w*tflops\w*)"),
    Group(
        "memory",
        "linear",
        r"(mem|memory\w*|\w*_mem|\w*_memory\w*|(cuda_)?gb_\w+|\w*_gb_(allocated|reserved|free)"
        r"|max_mem\w*|\w*mem_(allocated|reserved)\w*)",
    ),
)
# a panel's columns in turn, the same in both overviews (the first: the trajectory's blue)
COLORS = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
VALIDATION_KEYS = re.compile(r"((eval|val|valid|validation|test)[_/.-]?)?(lm_)?loss")


def panels(run: Run) -> list[tuple[Group, list[str]]]:
    """The panels the run has data for, each with its columns (a column drawn once)."""
    m = run.metrics
    taken: set[str] = set()
    out = []
    for g in GROUPS:
        rx = re.compile(g.pattern, re.IGNORECASE)
        cols = []
        for c in m.columns:
            if c in taken or c in CORE_COLUMNS:
                continue
            if not rx.fullmatch(c) or not m.schema[c].is_numeric():
                continue
            v = m.get_column(c).cast(pl.Float64)
            ok = v.is_finite() & (v > 0) if g.scale != "linear" else v.is_finite()
            if ok.any():
                cols.append(c)
        taken.update(cols)
        if cols or (g.title == "validation loss" and validation_points(run)):
            out.append((g, cols))
    return out


def validation_points(run: Run) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(label, steps, values) of each validation loss that validation records carry, in
    step order (``loss`` is labelled ``validation loss``)."""
    by_key: dict[str, list[tuple[int, float]]] = {}
    for e in run.events:
        if isinstance(e, Validation) and e.step is not None:
            for k, v in e.values.items():
                if v is not None and np.isfinite(v) and VALIDATION_KEYS.fullmatch(k):
                    by_key.setdefault(k, []).append((e.step, float(v)))
    out = []
    for key in sorted(by_key):
        pts = np.array(sorted(by_key[key]), dtype=np.float64)
        out.append(("validation loss" if key == "loss" else key, pts[:, 0], pts[:, 1]))
    return out


def validation_color(j: int) -> str:
    """The colour of the ``j``-th validation loss of :func:`validation_points` (apart
    from the validation columns' own)."""
    return COLORS[(j + 2) % len(COLORS)]
