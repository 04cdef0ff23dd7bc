"""``divergence``: the loss rises and does not come back, or turns non-finite for good.

Two rules, per lineage (the trajectory, and each stretch a restart overwrote, which ends
where the team rewound):

- rising: the loss level (mean of the last ``smooth_records`` records of its running
  median of three) is at least
  ``min_ratio`` (1.3) times the best level reached before, and stays above half that
  rise until the last record, over at least ``min_records`` (5) records;
- non-finite: the last ``nonfinite_records`` (1) or more records all have a NaN/Inf loss
  or no loss at all (a ``nonfinite`` event), other than iterations the fp16 scaler
  skipped.

The finding starts at the first record of the final elevated (or non-finite) stretch and
fires where the ratio first reaches ``min_ratio``. Severity: critical.

Stays quiet on: a loss that takes negative values (the rising rule; a signed objective),
spikes that recover, the warm-up descent, a missing loss at the end when
the scaler skipped those iterations,
noise, constant input, runs shorter than ``min_records``.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from logbook.detectors._arrays import lineage_ends, runs, smooth_level, spans
from logbook.detectors._base import Detector, DetectorConfig, capped_exp, finding, fmt
from logbook.detectors._frame import Context
from logbook.detectors.nonfinite import overflow_steps
from logbook.schema import Finding, Nonfinite

NAME = "divergence"


class Config(DetectorConfig):
    """Divergence thresholds."""

    smooth_records: int = Field(5, ge=1, description="Records in the loss level.")
    min_ratio: float = Field(1.3, gt=1, description="Level / best earlier level that counts.")
    min_records: int = Field(5, ge=1, description="Records the final elevated stretch needs.")
    nonfinite_records: int = Field(
        1, ge=1, description="Final records with a non-finite or missing loss that count."
    )


def detect(ctx: Context, cfg: Config) -> list[Finding]:
    if "loss" not in ctx.columns or ctx.height == 0:
        return []
    return _rising(ctx, cfg) + _nonfinite(ctx, cfg)


def _rising(ctx: Context, cfg: Config) -> list[Finding]:
    if ctx.signed("loss"):
        return []  # (a signed objective rises and falls through zero: no ratio to judge)
    rows = ctx.rows("loss")
    if rows.size == 0:
        return []
    level = smooth_level(rows.y, rows.lineage, cfg.smooth_records)
    best = np.full(rows.size, np.nan)
    for lo, hi in spans(rows.lineage):
        best[lo:hi] = np.fmin.accumulate(level[lo:hi])  # NaN until the first level
    with np.errstate(invalid="ignore"):
        r = level - best
        up = r >= math.log(1 + (cfg.min_ratio - 1) / 2)
    first, last = runs(up, rows.lineage)
    final = (last == lineage_ends(rows.lineage, last) - 1) & (last - first + 1 >= cfg.min_records)
    out = []
    for i0, i1 in zip(first[final].tolist(), last[final].tolist(), strict=True):
        hit = np.flatnonzero(r[i0 : i1 + 1] >= math.log(cfg.min_ratio))
        if not hit.size:
            continue  # the final stretch of its lineage, but not high enough
        alarm = i0 + int(hit[0])
        if rows.report[alarm]:
            out.append(_rising_finding(rows, i0, i1, alarm, r, level))
    return out


def _rising_finding(rows, i0: int, i1: int, alarm: int, r, level) -> Finding:
    ratio = capped_exp(float(np.nanmax(r[i0 : i1 + 1])))
    best = capped_exp(level[i0] - r[i0])
    start, end = int(rows.step[i0]), int(rows.step[i1])
    lineage = int(rows.lineage[i0])
    msg = (
        f"loss rose {ratio:.2f}x above its best level ({fmt(best)}) from step {start} "
        f"and had not come back by step {end}"
    )
    if lineage:
        msg += " (in steps later recomputed after a restart)"
    return finding(
        "divergence",
        NAME,
        "critical",
        step=int(rows.step[alarm]),
        start_step=start,
        end_step=end,
        score=ratio,
        message=msg,
        segment=int(rows.segment[i0]),
        evidence={
            "rule": "rising",
            "best": best,
            "ratio": ratio,
            "records": i1 - i0 + 1,
            "superseded": True if lineage else None,
        },
    )


def _nonfinite(ctx: Context, cfg: Config) -> list[Finding]:
    col = ctx.column("loss")
    null = col.is_null().to_numpy()
    bad = ~null & ~np.isfinite(col.fill_null(0.0).to_numpy())
    lineage = ctx.column("lineage").to_numpy()
    step, segment = ctx.column("step").to_numpy(), ctx.column("segment").to_numpy()
    missing = _missing_losses(ctx)
    out = []
    for lo, hi in spans(lineage):
        ok = np.flatnonzero(~(bad[lo:hi] | null[lo:hi]))
        tail = lo + (int(ok[-1]) + 1 if ok.size else 0)  # the records after the last loss
        first = hi
        for i in range(hi - 1, tail - 1, -1):  # the tail only: usually empty
            if not (bad[i] or (int(segment[i]), int(step[i])) in missing):
                break
            first = i
        n = hi - first
        if n < cfg.nonfinite_records or not ctx.column("report")[first:hi].any():
            continue
        out.append(
            _nonfinite_finding(
                int(step[first]), int(step[hi - 1]), n, int(segment[first]), lineage[lo]
            )
        )
    return out


def _missing_losses(ctx: Context) -> set[tuple[int, int]]:
    """(segment, step) of records whose loss field was missing, other than iterations the
    fp16 scaler skipped (no loss because every iteration of the record was skipped)."""
    missing = {
        (e.segment, e.step)
        for e in ctx.events
        if isinstance(e, Nonfinite) and e.metric == "loss" and e.step is not None
    }
    if not missing:
        return missing
    handled = set(overflow_steps(ctx).select("segment", "step").iter_rows())
    return missing - handled


def _nonfinite_finding(start: int, end: int, n: int, segment: int, lineage: int) -> Finding:
    return finding(
        "divergence",
        NAME,
        "critical",
        step=start,
        start_step=start,
        end_step=end,
        score=float(n),
        message=f"loss non-finite or missing from step {start} to the last record ({end})",
        segment=segment,
        evidence={"rule": "nonfinite", "records": n, "superseded": True if lineage else None},
    )


DETECTOR = Detector(name=NAME, config=Config, fn=detect, kinds=("divergence",), doc=__doc__ or "")
