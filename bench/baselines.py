"""The three reactive loss-spike rules in trainers today, as baselines for ``eval_detect``.

Each rule sees what a trainer callback sees: the loss of each launch, record by record,
its state reset at every relaunch (segment). Each returns alarm episodes as dicts with
``kind`` (``loss_spike``), ``step`` (when it fired), ``start`` and ``end`` (the run of
consecutive outlier records around it).

- ``llm_foundry``: a record is an outlier when the loss is at least ``multiplier`` (2)
  times the mean of the previous ``window`` (100) records; the rule fires after
  ``patience`` (5) consecutive outliers.
- ``olmo_core``: fires when the loss exceeds the mean plus ``sigmas`` (6) standard
  deviations of the previous ``window`` (128) records (a full window).
- ``megatron``: fires when the loss exceeds ``multiplier`` (10) times the largest loss of
  the first ``early`` (100) records of the launch.
"""

from __future__ import annotations

import polars as pl

from logbook.run import Run


def _per_launch(run: Run) -> pl.DataFrame:
    m = run.metrics.filter(pl.col("step").is_not_null() & pl.col("loss").is_finite())
    return m.select("segment", "step", "loss").with_columns(pl.col("segment").fill_null(0))


def _episodes(df: pl.DataFrame, flag: pl.Expr, patience: int = 1) -> list[dict]:
    d = df.with_columns(flag.fill_null(False).alias("f"))
    change = (pl.col("f") != pl.col("f").shift(1)).fill_null(True).over("segment")
    d = d.with_columns(change.cast(pl.Int64).cum_sum().alias("run")).filter(pl.col("f"))
    eps = d.group_by("run", maintain_order=True).agg(
        pl.col("step").first().alias("start"),
        pl.col("step").get(patience - 1, null_on_oob=True).alias("step"),
        pl.col("step").last().alias("end"),
        pl.len().alias("n"),
    )
    eps = eps.filter(pl.col("n") >= patience)
    return [
        {"kind": "loss_spike", "step": r["step"], "start": r["start"], "end": r["end"]}
        for r in eps.iter_rows(named=True)
    ]


def llm_foundry(
    run: Run, window: int = 100, multiplier: float = 2.0, patience: int = 5
) -> list[dict]:
    df = _per_launch(run)
    mean = pl.col("loss").shift(1).rolling_mean(window, min_samples=1).over("segment")
    return _episodes(df, pl.col("loss") >= multiplier * mean, patience)


def olmo_core(run: Run, window: int = 128, sigmas: float = 6.0) -> list[dict]:
    df = _per_launch(run)
    prev = pl.col("loss").shift(1)
    mean = prev.rolling_mean(window, min_samples=window).over("segment")
    std = prev.rolling_std(window, min_samples=window).over("segment")
    return _episodes(df, pl.col("loss") > mean + sigmas * std)


def megatron(run: Run, early: int = 100, multiplier: float = 10.0) -> list[dict]:
    df = _per_launch(run)
    first = pl.col("loss").head(early).max().over("segment")
    return _episodes(df, pl.col("loss") > multiplier * first)


BASELINES = {"llm-foundry": llm_foundry, "olmo-core": olmo_core, "megatron": megatron}
