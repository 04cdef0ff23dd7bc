"""Deterministic generator of a large log in a layout no named format claims, for the
``text`` reader's benchmark: ``key=value`` records behind a time stamp and a logger
name, with an eval line every 500 steps and noise lines.

    python -m bench.gen_text --records 1000000 -o OUT.log
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import polars as pl

NOISE_EVERY = 97  # a noise line after every this many records
EVAL_EVERY = 500


def lines(records: int, seed: int = 0) -> pl.DataFrame:
    """The log's lines, built as columns (no Python loop over records)."""
    rng = np.random.default_rng(seed)
    step = np.arange(1, records + 1)
    loss = 2.0 + 8.0 * np.exp(-step / 20000.0) + rng.normal(0, 0.05, records)
    lr = np.minimum(step / 2000.0, 1.0) * 3e-4
    gnorm = np.abs(rng.normal(1.0, 0.2, records))
    tps = rng.integers(100_000, 200_000, records)
    ms = rng.normal(412.0, 5.0, records)
    secs = step * 0.4
    stamp = (
        pl.Series(secs.astype("int64") * 1_000_000)
        .cast(pl.Datetime("us"))
        .dt.strftime("%Y-%m-%d %H:%M:%S")
    )
    df = pl.DataFrame(
        {"stamp": stamp, "step": step, "loss": loss, "lr": lr, "g": gnorm, "tps": tps, "ms": ms}
    )
    rec = pl.format(
        "{} | trainer | step={} loss={} lr={} grad_norm={} tok/s={} time={}ms",
        pl.col("stamp"),
        pl.col("step"),
        pl.col("loss").round(4),
        pl.col("lr").round(8),
        pl.col("g").round(3),
        pl.col("tps"),
        pl.col("ms").round(1),
    )
    out = df.select(pl.col("step"), rec.alias("text"), pl.lit(0).alias("k"))
    evals = df.filter(pl.col("step") % EVAL_EVERY == 0).select(
        "step",
        pl.format(
            "{} | trainer | eval step={} val_loss={}", "stamp", "step", pl.col("loss").round(4)
        ).alias("text"),
        pl.lit(1).alias("k"),
    )
    noise = df.filter(pl.col("step") % NOISE_EVERY == 0).select(
        "step",
        pl.format("{} | data | shard {} opened", "stamp", pl.col("step") // NOISE_EVERY).alias(
            "text"
        ),
        pl.lit(2).alias("k"),
    )
    return pl.concat([out, evals, noise]).sort(["step", "k"]).select("text")


def generate(path: str | Path, records: int, seed: int = 0) -> Path:
    """Write a log of ``records`` records to ``path``."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(lines(records, seed).get_column("text").to_list()) + "\n"
    p.write_text(text)
    return p


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--output", type=Path, required=True)
    args = ap.parse_args()
    print(generate(args.output, args.records, args.seed))


if __name__ == "__main__":
    main()
