"""``nonfinite``: NaN or infinite metric values, and records whose loss field is missing.

Fires on every record (of any segment, overwritten or not) where a watched metric (and
any column whose name holds ``loss``: the parts of a loss) is NaN or +-Inf, and on the
parsers' ``nonfinite`` events (a Megatron record printed without its ``lm loss`` field:
the column is null there), and on a script's own word that the loss was not finite as
it stopped (a ``hardware_failure`` of cause ``nonfinite_loss``: ``Loss is nan, stopping
training``), at the step after the record before it. Records within ``gap_records`` log
intervals of each other make one finding, from its first to its last step, naming the
metrics. Severity: critical; info when every record of the episode was an fp16
overflow the loss scaler handled (``skipped`` > 0 or an ``overflow_skip`` event at that
step: Megatron prints no loss for an interval whose iterations were all skipped).

Stays quiet on: null values without a ``nonfinite`` event (a metric that is simply not
logged on that record), and finite values however large.
"""

from __future__ import annotations

import polars as pl
from pydantic import Field

from logbook.detectors._base import Detector, DetectorConfig, finding
from logbook.detectors._frame import Context
from logbook.schema import Finding, HardwareFailure, Nonfinite, OverflowSkip

NAME = "nonfinite"
WATCHED = (
    "loss",
    "grad_norm",
    "lr",
    "loss_scale",
    "act_norm",
    "param_norm",
    "attn_logit_max",
    "logz",
)


class Config(DetectorConfig):
    """Non-finite value grouping."""

    gap_records: int = Field(
        1, ge=1, description="Bad records at most this many log intervals apart are one finding."
    )
    columns: tuple[str, ...] = Field(WATCHED, description="Metric columns checked for NaN/Inf.")


def bad_records(ctx: Context, columns: tuple[str, ...]) -> pl.DataFrame:
    """One row per (segment, step, metric) that is non-finite: ``value`` is nan, inf,
    -inf or missing. Values read from the columns and from ``nonfinite`` events."""
    m = ctx.run.metrics.filter(pl.col("step").is_not_null())
    parts = []
    # the parts of a loss that frameworks print without a total (mmseg's
    # ``decode.loss_seg``, detectron2's ``loss_cls``) are watched with the loss
    watched = "loss" in columns
    schema = m.schema  # (once: a run may have thousands of columns)
    parts_of_loss = [c for c in m.columns if watched and "loss" in c and c not in columns]
    floats = [c for c in dict.fromkeys((*columns, *parts_of_loss)) if c in schema]
    floats = [c for c in floats if schema[c].is_float()]
    # one pass for which columns have a non-finite value at all (most have none)
    flagged = (
        m.select((pl.col(c).is_not_null() & ~pl.col(c).is_finite()).any() for c in floats).row(0)
        if floats and m.height
        else (False,) * len(floats)  # (no record with a step: nothing to flag)
    )
    for col, any_bad in zip(floats, flagged, strict=True):
        if not any_bad:
            continue
        c = pl.col(col)
        bad = m.filter(c.is_not_null() & ~c.is_finite()).select(
            "segment",
            "step",
            pl.lit(col).alias("metric"),
            pl.when(c.is_nan())
            .then(pl.lit("nan"))
            .when(c > 0)
            .then(pl.lit("inf"))
            .otherwise(pl.lit("-inf"))
            .alias("value"),
        )
        parts.append(bad)
    ev = [e for e in ctx.events if isinstance(e, Nonfinite) and e.step is not None]
    if ev:
        parts.append(
            pl.DataFrame(
                {
                    "segment": [e.segment for e in ev],
                    "step": [e.step for e in ev],
                    "metric": [e.metric for e in ev],
                    "value": [e.value for e in ev],
                },
                schema={
                    "segment": pl.Int32,
                    "step": pl.Int64,
                    "metric": pl.String,
                    "value": pl.String,
                },
            )
        )
    stopped = _stopped(ctx, parts)
    if stopped is not None:
        parts.append(stopped)
    if not parts:
        return pl.DataFrame(
            schema={"segment": pl.Int32, "step": pl.Int64, "metric": pl.String, "value": pl.String}
        )
    out = pl.concat([p.with_columns(pl.col("segment").cast(pl.Int32)) for p in parts])
    return out.unique(["segment", "step", "metric"], keep="first").sort(
        ["segment", "step", "metric"]
    )


def detect(ctx: Context, cfg: Config) -> list[Finding]:
    bad = bad_records(ctx, cfg.columns)
    if bad.height == 0:
        return []
    per = bad.group_by(["segment", "step"], maintain_order=True).agg(
        pl.col("metric").unique(maintain_order=True), pl.col("value").unique(maintain_order=True)
    )
    per = per.join(overflow_steps(ctx), on=["segment", "step"], how="left").with_columns(
        pl.col("handled").fill_null(False)
    )
    gap = cfg.gap_records * max(ctx.interval, 1)
    new = (pl.col("segment") != pl.col("segment").shift(1)) | (pl.col("step").diff() > gap)
    per = per.with_columns(new.fill_null(True).cast(pl.Int64).cum_sum().alias("_ep"))
    eps = per.group_by("_ep", maintain_order=True).agg(
        pl.col("segment").first(),
        pl.col("step").first().alias("start"),
        pl.col("step").last().alias("end"),
        pl.len().alias("records"),
        pl.col("metric")
        .list.explode(keep_nulls=False, empty_as_null=False)
        .unique(maintain_order=True)
        .alias("metrics"),
        pl.col("value")
        .list.explode(keep_nulls=False, empty_as_null=False)
        .unique(maintain_order=True)
        .alias("values"),
        pl.col("handled").all().alias("handled"),
    )
    return [_finding(row) for row in eps.iter_rows(named=True)]


def _stopped(ctx: Context, parts: list[pl.DataFrame]) -> pl.DataFrame | None:
    """The loss steps a script said were not finite as it stopped (``Loss is nan,
    stopping training``, TensorFlow's ``Model diverged with loss = NaN``): at the step the
    line states, else the step after the record before it (the step whose loss it
    checked), unless that record's own loss is the non-finite one."""
    said = [
        e
        for e in ctx.events
        if isinstance(e, HardwareFailure) and e.cause == "nonfinite_loss" and e.step is not None
    ]
    if not said:
        return None
    loss_steps = set()
    for part in parts:
        bad_loss = part.filter(pl.col("metric") == "loss").select("segment", "step")
        loss_steps.update(bad_loss.iter_rows())
    rows = []
    for e in said:
        seg, step = e.segment or 0, e.step
        if e.step_source == "record" and (seg, step) not in loss_steps:
            step += 1  # (placed at the record before it: the step after is the one)
        text = (e.text or "").lower()
        rows.append((seg, step, "loss", "inf" if "inf" in text and "nan" not in text else "nan"))
    return pl.DataFrame(
        rows,
        schema={"segment": pl.Int32, "step": pl.Int64, "metric": pl.String, "value": pl.String},
        orient="row",
    )


def overflow_steps(ctx: Context) -> pl.DataFrame:
    """(segment, step) of records that were fp16 overflow skips."""
    m = ctx.run.metrics
    parts = []
    if "skipped" in m.columns:
        parts.append(m.filter(pl.col("skipped") > 0).select("segment", "step"))
    ev = [e for e in ctx.events if isinstance(e, OverflowSkip) and e.step is not None]
    if ev:
        parts.append(
            pl.DataFrame(
                {"segment": [e.segment for e in ev], "step": [e.step for e in ev]},
                schema={"segment": pl.Int32, "step": pl.Int64},
            )
        )
    if not parts:
        return pl.DataFrame(schema={"segment": pl.Int32, "step": pl.Int64, "handled": pl.Boolean})
    both = pl.concat([p.with_columns(pl.col("segment").cast(pl.Int32)) for p in parts])
    return both.unique().with_columns(pl.lit(True).alias("handled"))


def _finding(row: dict) -> Finding:
    metrics = ", ".join(row["metrics"])
    values = "/".join(row["values"])
    span = (
        f"at step {row['start']}"
        if row["start"] == row["end"]
        else f"from step {row['start']} to {row['end']} ({row['records']} records)"
    )
    msg = f"{metrics} {values} {span}"
    if row["handled"]:
        msg += "; iterations skipped by the fp16 loss scaler"
    return finding(
        "nonfinite",
        NAME,
        "info" if row["handled"] else "critical",
        step=row["start"],
        start_step=row["start"],
        end_step=row["end"],
        score=float(row["records"]),
        message=msg,
        segment=row["segment"],
        evidence={
            "metrics": list(row["metrics"]),
            "values": list(row["values"]),
            "records": row["records"],
            "overflow_skipped": row["handled"],
        },
    )


DETECTOR = Detector(name=NAME, config=Config, fn=detect, kinds=("nonfinite",), doc=__doc__ or "")
