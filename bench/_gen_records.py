"""One job attempt of a synthetic run: per-step values -> log records -> ``Parsed``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import polars as pl

from bench import _gen_series as gs
from logbook.parsed import Parsed
from logbook.schema import HardwareFailure, Nonfinite, Restart, Source

LOSS_CLIP = 8.0
NOISE = {"grad_norm": None, "act_norm": 0.02, "attn_logit_max": 0.02, "logz": 0.01}


def segment_part(
    spec: Any,
    curves: dict[str, np.ndarray],
    lr: np.ndarray,
    level: np.ndarray | None,
    skipped: np.ndarray | None,
    a: int,
    c: int,
    done: int,
    prev: dict | None,
    restart: dict | None,
    t0: float,
    rng: np.random.Generator,
) -> tuple[Parsed, float]:
    """Steps ``a``..``c`` as one attempt's file. Steps up to ``done`` are recomputed
    (fresh noise); ``prev`` is the restart that launched this attempt, ``restart`` the
    one that ends it (its ``mod`` changes this attempt only)."""
    lo, hi = a - 1, c
    s = np.arange(a, c + 1)
    vals = {}
    for col, base in curves.items():
        if col == "step_time_s":
            vals[col] = base[lo:hi] * np.exp(rng.normal(0, 0.02, hi - lo))
            continue
        sigma = spec.noise if col == "loss" else (NOISE[col] or spec.grad_noise)
        # the loss of a batch averages millions of tokens: its tails are heavy but
        # bounded (8 deviations); a single 3x batch would be a real incident
        clip = LOSS_CLIP if col == "loss" else None
        vals[col] = base[lo:hi] + gs.heavy_noise(rng, hi - lo, sigma, clip)
    if prev is not None:  # the first records after a launch are a little off
        bump = rng.uniform(0, 0.04) * np.exp(-(s - a) / 3.0)
        vals["loss"] = vals["loss"] + np.log1p(bump)
    _modify(vals, s, restart)
    skip = skipped[lo:hi].astype(bool) if skipped is not None else np.zeros(hi - lo, bool)
    steps = pl.DataFrame(
        {
            "s": s,
            "rec": (s + spec.interval - 1) // spec.interval * spec.interval,
            "skip": skip,
            "loss": np.exp(vals["loss"]),
            "grad_norm": np.exp(vals["grad_norm"]),
            "lr": lr[lo:hi],
            "step_time_s": vals["step_time_s"],
            "act_norm": np.exp(vals["act_norm"]),
            "attn_logit_max": np.exp(vals["attn_logit_max"]),
            "logz": np.exp(vals["logz"]),
            "ls": 2.0 ** np.maximum(level[lo:hi], 0)
            if level is not None
            else np.full(hi - lo, np.nan),
        }
    )
    rec = _records(steps.filter(pl.col("rec") <= c), spec, t0)
    events = _events(rec, prev, restart, spec)
    end = rec.get_column("time")[-1].timestamp() if rec.height else t0
    return Parsed(metrics=rec.drop("_missing"), events=events), end


def _modify(vals: dict[str, np.ndarray], s: np.ndarray, restart: dict | None) -> None:
    mod = restart["mod"] if restart else None
    if not mod:
        return
    if mod["kind"] == "nan":
        bad = (s >= mod["start"]) & (s <= mod["end"])
        vals["loss"][bad] = np.nan
        vals["grad_norm"][bad] = np.nan
    elif mod["kind"] == "divergence":
        up = np.clip((s - mod["start"]) / mod["dur"], 0, None)
        vals["loss"] = vals["loss"] + np.log(mod["ratio"]) * up


def _records(steps: pl.DataFrame, spec: Any, t0: float) -> pl.DataFrame:
    ok = ~pl.col("skip")
    rec = steps.group_by("rec", maintain_order=True).agg(
        pl.col("loss").filter(ok).mean(),
        pl.col("grad_norm").filter(ok).last(),
        pl.col("lr").last(),
        pl.col("step_time_s").mean(),
        pl.col("step_time_s").sum().alias("_dt"),
        pl.col("act_norm").last(),
        pl.col("attn_logit_max").last(),
        pl.col("logz").last(),
        pl.col("ls").last().alias("loss_scale"),
        pl.col("skip").sum().cast(pl.Int64).alias("skipped"),
        ok.any().not_().alias("_missing"),
    )
    time = (t0 + rec.get_column("_dt").cum_sum()) * 1e6
    rec = rec.with_columns(
        pl.col("rec").alias("step"),
        pl.Series("time", time).cast(pl.Int64).cast(pl.Datetime("us", "UTC")),
        pl.int_range(2, rec.height + 2).cast(pl.Int64).alias("line"),
    ).drop("rec", "_dt")
    if not spec.fp16:
        rec = rec.drop("loss_scale", "skipped")
    if not spec.logs_act:
        rec = rec.drop("act_norm", "attn_logit_max", "logz")
    return rec


def _events(rec: pl.DataFrame, prev: dict | None, restart: dict | None, spec: Any) -> list:
    events: list = []
    name = f"{spec.name}.log"
    if prev is not None:
        t = rec.get_column("time")[0] if rec.height else None
        events.append(
            Restart(resume_step=prev["resume"], source=Source(file=name, line=1), time=_minus(t))
        )
    for step, line in rec.filter(pl.col("_missing")).select("step", "line").iter_rows():
        events.append(
            Nonfinite(
                step=step, metric="loss", value="missing", source=Source(file=name, line=line)
            )
        )
    if restart is not None and restart["cause"]:
        events.append(
            HardwareFailure(cause=restart["cause"], source=Source(file=name, line=rec.height + 2))
        )
    return events


def _minus(t: datetime | None) -> datetime | None:
    return None if t is None else datetime.fromtimestamp(t.timestamp() - 60, tz=UTC)
