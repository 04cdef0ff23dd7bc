"""``activation_norm_drift`` and the same trend detector on other norms.

Fires when a metric that should stay level rises by a sustained factor: its current level
(the mean of the last ``short_records`` (5) records, filtered by a running median of
three) is at least ``min_ratio`` (1.25) times the mean of the ``baseline_records`` (1000)
records before them, ``z`` (4) noise deviations above it, for ``min_records`` (3)
consecutive records. The finding gives the onset (``start_step``: the first record of the
rise), the step at which it fired (``step``, computed from past records only) and the
ratio of the highest level to the baseline at the onset. Severity: warning from
``warn_ratio`` (2x); a rise between ``min_ratio`` and ``warn_ratio`` is kept (as info)
only when it precedes a loss spike or a divergence.

Registered for: ``act_norm`` (``activation_norm_drift``), ``param_norm``
(``param_norm_drift``), ``attn_logit_max`` (``attn_logit_drift``), ``logz``
(``logz_drift``, its absolute value) and ``grad_norm`` (``grad_norm_drift``).

In a run trained from scratch (its first record at step 10 or one log interval at most)
the initial growth is left out: norms and logits rise from their initialisation scale,
in stages, while the model first learns (the attention logits of a small GPT grow 50x
in its first 80 steps, with a pause on the way). Records count, for the baseline and
for firing, from the first one at which both the loss has stopped falling fast (its
mean over 10 records less than 5% below that of 20 records before) and the level rose
less than half of ``min_ratio`` over the last ``2 * short_records`` records (a metric
that did not rise by as much meanwhile, such as a gradient norm falling from its first
steps, keeps its whole history).

In a young run from scratch (at most 200 loss records before the onset), a rise that
fires within 20 records of its onset while the loss is still falling (its mean log from
the onset to the alarm 0.005 below that over the 20 records before the onset) and has fallen
by 14% or more (0.15 below its mean over all earlier records) is learning, not drift:
the norms and logits of a model still learning fast grow with it. It is not reported, and
is no precursor.

Stays quiet on: the initial growth of a run from scratch, slow growth (a doubling spread
over many more than ``baseline_records`` records), noise, falls, constant input, absent
or all-null columns, fewer than ``min_history`` records of history.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from logbook.detectors._arrays import NOISE_BLOCK, Rows
from logbook.detectors._base import Detector, fmt
from logbook.detectors._frame import Context
from logbook.detectors._trend import (
    TrendConfig,
    episode_finding,
    loss_settled_step,
    trend_episodes,
)
from logbook.schema import Finding


class Config(TrendConfig):
    """Drift thresholds."""

    magnitude: bool = Field(
        False, description="Watch the absolute value (for a signed metric such as logz)."
    )


def _detect(kind: str):
    def detect(ctx: Context, cfg: Config) -> list[Finding]:
        if not ctx.has(cfg.column):
            return []
        rows = ctx.rows(cfg.column, cfg.magnitude)
        noise = ctx.noise(cfg.column, cfg.magnitude, NOISE_BLOCK)
        scratch = max(10, ctx.interval)
        calm = loss_settled_step(ctx.rows("loss"), scratch) if ctx.has("loss") else None
        eps = trend_episodes(rows, cfg, noise, scratch, calm)
        loss = ctx.rows("loss") if ctx.has("loss") and not ctx.signed("loss") else None
        return [
            _finding(r, cfg, kind)
            for r in eps.iter_rows(named=True)
            if _learning(loss, r, scratch) is None
        ]

    return detect


LEARNING_FALL = 0.15  # log-loss fall over a rise (about 14%) that makes it learning, not drift
LEARNING_RECORDS = 20  # records from onset to alarm, at most, of a learning rise
STILL_FALLING = 0.005  # log-loss fall from the records before the onset, at least
YOUNG_RECORDS = 200  # loss records before the onset, at most, of a learning rise


def _learning(loss: Rows | None, r: dict, scratch: int) -> float | None:
    """How far the loss fell before a quick rise of a young run trained from scratch
    (its first record at step ``scratch`` or before): its mean log from the onset to the
    alarm against its mean over all earlier records, when that is ``LEARNING_FALL`` or
    more and the loss is still falling (``STILL_FALLING`` below its mean over the
    ``LEARNING_RECORDS`` records before the onset); None
    otherwise, or when the onset comes after ``YOUNG_RECORDS`` loss records, or the
    alarm more than ``LEARNING_RECORDS`` records after the onset."""
    if loss is None or loss.size == 0:
        return None
    same = loss.lineage == r["lineage"]
    step, y = loss.step[same], loss.y[same]
    if step.size == 0 or step[0] > scratch:
        return None  # not trained from scratch here
    past = y[step < r["start"]]
    recent = past[-LEARNING_RECORDS:]
    during = y[(step >= r["start"]) & (step <= r["alarm"])]
    if not LEARNING_RECORDS <= past.size <= YOUNG_RECORDS:
        return None
    if not 0 < during.size <= LEARNING_RECORDS:
        return None
    fall = float(np.mean(past) - np.mean(during))
    still = float(np.mean(recent) - np.mean(during))
    return fall if fall >= LEARNING_FALL and still >= STILL_FALLING else None


def _finding(r: dict, cfg: Config, kind: str) -> Finding:
    warn = r["ratio"] >= cfg.warn_ratio
    msg = (
        f"{cfg.column} rose {r['ratio']:.2f}x ({fmt(r['baseline'])} -> {fmt(r['peak'])}) "
        f"from step {r['start']} to {r['end']}"
    )
    evidence = {
        "metric": cfg.column,
        "baseline": r["baseline"],
        "peak": r["peak"],
        "peak_step": r["peak_step"],
        "ratio": r["ratio"],
        "superseded": True if r["lineage"] else None,
        "precursor_only": None if warn else True,
    }
    return episode_finding(kind, kind, "warning" if warn else "info", r, msg, evidence)


def _entry(kind: str, column: str, **defaults) -> Detector:
    return Detector(
        name=kind,
        config=Config,
        fn=_detect(kind),
        kinds=(kind,),
        doc=__doc__ or "",
        defaults={"column": column, **defaults},
    )


DETECTORS = {
    d.name: d
    for d in (
        _entry("activation_norm_drift", "act_norm"),
        _entry("param_norm_drift", "param_norm"),
        _entry("attn_logit_drift", "attn_logit_max"),
        _entry("logz_drift", "logz", magnitude=True),
        _entry("grad_norm_drift", "grad_norm"),
    )
}
