"""Deterministic generator of a large Megatron training log, for the parse benchmark.

    python -m bench.gen_megatron --records 1000000 [--variant deepspeed] -o OUT.log

Variants: ``deepspeed`` (Megatron-DeepSpeed record lines with consumed tokens, loss
scale, samples per second and TFLOPs), ``timestamped`` (Megatron-LM records that start
with ``[YYYY-mm-dd HH:MM:SS]``), ``ranked`` (the deepspeed lines behind a launcher's
``[default0]:`` prefix on every line). Every variant has restarts (a crash traceback,
a start-up banner and a checkpoint load, after which the iteration goes back to the
last saved checkpoint), overflow records without loss and grad norm, checkpoint saves,
validation blocks, and framework noise (NCCL, memory reports, timers, warnings).

Lines are built as polars string columns from numpy arrays: no Python loop over
records, so a million records take seconds. The same arguments give the same bytes.
The number formatters and the step/curve plan are shared with ``gen_metaseq``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

VARIANTS = ("deepspeed", "timestamped", "ranked")
SAVE_INTERVAL = 1000
EVAL_INTERVAL = 1000
NOISE_RATE = 0.13
START_TIME_US = 1_646_956_800_000_000  # 2022-03-11 00:00:00 UTC
RESTART_GAP_S = 1800.0


# ---- vectorized number formatting ------------------------------------------------
# Same layout as Python's format specs; on a rounding boundary the last digit may be one
# off from Python's (the value is scaled before rounding): harmless for benchmark data.


def ints(values: np.ndarray, width: int = 0) -> pl.Series:
    """Integers as text, right-aligned to ``width`` like ``{:Nd}``."""
    s = pl.Series(values.astype(np.int64)).cast(pl.String)
    return s.str.pad_start(width) if width else s


def fixed(values: np.ndarray, decimals: int) -> pl.Series:
    """Non-negative floats with a fixed number of decimals, like ``{:.Nf}``."""
    scale = 10**decimals
    k = np.rint(np.abs(values) * scale).astype(np.int64)
    whole = pl.Series(k // scale).cast(pl.String)
    if decimals == 0:
        return whole
    frac = pl.Series(k % scale).cast(pl.String).str.zfill(decimals)
    return whole + "." + frac


def _sci_parts(values: np.ndarray, digits: int) -> tuple[np.ndarray, np.ndarray]:
    """Mantissa (as an integer with ``digits`` decimals) and exponent of each value."""
    a = np.abs(values)
    safe = np.where(a > 0, a, 1.0)
    ex = np.floor(np.log10(safe)).astype(np.int64)
    m = np.rint(safe / 10.0**ex * 10**digits).astype(np.int64)
    carry = m >= 10 ** (digits + 1)
    m = np.where(carry, m // 10, m)
    ex = ex + carry
    return np.where(a > 0, m, 0), np.where(a > 0, ex, 0)


def sci(values: np.ndarray, digits: int, e: str = "E") -> pl.Series:
    """Floats in scientific notation, like ``{:.NE}`` (``1.234E-04``)."""
    m, ex = _sci_parts(values, digits)
    sign = pl.Series(np.where(values < 0, "-", ""))
    mant = ints(m // 10**digits) + "." + ints(m % 10**digits).str.zfill(digits)
    exp = pl.Series(np.where(ex < 0, "-", "+")) + ints(np.abs(ex)).str.zfill(2)
    return sign + mant + e + exp


def general(values: np.ndarray) -> pl.Series:
    """Floats like Python's ``{:g}`` (6 significant digits, trailing zeros dropped)."""
    m, ex = _sci_parts(values, 5)
    plain = (ex >= -4) & (ex < 6)
    dec = np.clip(5 - ex, 0, 9)
    k = np.rint(np.abs(values) * 10.0**dec).astype(np.int64)
    frac = ints(k % 10**dec).str.zfill(pl.Series(dec)).str.strip_chars_end("0")
    fixed_s = ints(k // 10**dec) + pl.Series(np.where(dec > 0, ".", "")) + frac
    fixed_s = fixed_s.str.strip_chars_end(".")
    mant = (ints(m // 10**5) + "." + ints(m % 10**5).str.zfill(5)).str.strip_chars_end("0")
    exp = pl.Series(np.where(ex < 0, "-", "+")) + ints(np.abs(ex)).str.zfill(2)
    sci_s = mant.str.strip_chars_end(".") + "e" + exp
    sign = pl.Series(np.where(values < 0, "-", ""))
    return sign + pl.select(pl.when(pl.Series(plain)).then(fixed_s).otherwise(sci_s)).to_series()


def timestamps(us: np.ndarray, fmt: str = "%Y-%m-%d %H:%M:%S") -> pl.Series:
    """Microseconds since the epoch as wall-clock text."""
    return pl.Series(us.astype(np.int64)).cast(pl.Datetime("us")).dt.strftime(fmt)


# ---- the run being logged: steps with rewinds, curves, wall clock ----------------


@dataclass
class Plan:
    """One record per index: its step, and the restarts between records."""

    steps: np.ndarray
    restart_at: np.ndarray  # record index of the first record after each restart
    resume_from: np.ndarray  # checkpoint step loaded at each restart
    time_us: np.ndarray  # wall clock of each record
    step_ms: np.ndarray


def plan(records: int, restarts: int, rng: np.random.Generator, step_ms: float = 25_600.0) -> Plan:
    """Steps 1, 2, ... that go back to the last saved checkpoint at each restart."""
    lo = min(2 * SAVE_INTERVAL, records // 2)
    pool = np.arange(max(lo, 1), max(records - 1, 1))
    restarts = min(restarts, pool.size)
    at = np.sort(rng.choice(pool, restarts, replace=False)) if restarts else pool[:0]
    bounds = [0, *at.tolist(), records]
    steps = np.empty(records, dtype=np.int64)
    resume = []
    cur = 1
    for j in range(len(bounds) - 1):
        n = bounds[j + 1] - bounds[j]
        steps[bounds[j] : bounds[j + 1]] = np.arange(cur, cur + n)
        last = cur + n - 1
        ckpt = max((last - 1) // SAVE_INTERVAL * SAVE_INTERVAL, 0)
        resume.append(ckpt)
        cur = ckpt + 1
    ms = np.abs(rng.normal(step_ms, step_ms / 64, records))
    gaps = np.zeros(records)
    gaps[at] = RESTART_GAP_S * 1e6
    time_us = START_TIME_US + np.cumsum(ms * 1e3 + gaps)
    return Plan(steps, at, np.array(resume[:-1], dtype=np.int64), time_us, ms)


def curves(steps: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Loss, LR, grad norm, loss scale and overflows as functions of the step, plus noise."""
    n = steps.size
    s = steps.astype(np.float64)
    warm = 2000.0
    total = max(float(steps.max()), warm * 2)
    decay = np.clip((s - warm) / (total - warm), 0.0, 1.0)
    lr = np.where(s < warm, 6e-5 * s / warm, 6e-6 + 0.5 * 5.4e-5 * (1 + np.cos(np.pi * decay)))
    loss = 2.0 + 9.0 * np.exp(-s / 3000.0) + np.exp(-s / 200_000.0) + rng.normal(0, 0.03, n)
    spikes = rng.random(n) < 2e-4
    loss = loss + spikes * rng.uniform(0.5, 3.0, n)
    grad = rng.lognormal(np.log(0.3), 0.3, n) * (1 + spikes * rng.uniform(10, 1000, n))
    overflow = rng.random(n) < 1e-4
    grow = (np.arange(n) % 1000) == 999
    scale_exp = np.clip(12 + np.cumsum(grow.astype(np.int64) - overflow), 0, 24)
    return {
        "lr": lr,
        "loss": np.abs(loss),
        "grad_norm": grad,
        "loss_scale": 2.0**scale_exp,
        "overflow": overflow,
    }


# ---- lines -------------------------------------------------------------------------


def _record_text(p: Plan, c: dict[str, np.ndarray], variant: str) -> pl.Series:
    gbs, seq = 2048, 2048
    total = ints(np.full(p.steps.size, 1_200_000), 8)
    lead = " iteration "
    if variant == "timestamped":
        lead = " [" + timestamps(p.time_us) + "] iteration "
    head = lead + ints(p.steps, 8) + "/" + total
    samples = p.steps * gbs
    loss = pl.select(
        pl.when(pl.Series(c["overflow"]))
        .then(pl.lit(""))
        .otherwise(" lm loss: " + sci(c["loss"], 6) + " |")
    ).to_series()
    loss_grad = loss + " loss scale: " + fixed(c["loss_scale"], 1) + " |"
    grad = pl.select(
        pl.when(pl.Series(c["overflow"]))
        .then(pl.lit(""))
        .otherwise(" grad norm: " + fixed(c["grad_norm"], 3) + " |")
    ).to_series()
    skipped = ints(c["overflow"].astype(np.int64), 3)
    tail = " number of skipped iterations: " + skipped + " | number of nan iterations:   0 |"
    if variant == "timestamped":
        return (
            head + " | consumed samples: " + ints(samples, 12)
            + " | elapsed time per iteration (ms): " + fixed(p.step_ms, 1)
            + " | throughput per GPU (TFLOP/s/GPU): " + fixed(3.7e6 / p.step_ms, 1)
            + " | learning rate: " + sci(c["lr"], 6) + " | global batch size: " + ints(
                np.full(p.steps.size, gbs), 5) + " |" + loss_grad + grad + tail
        )  # fmt: skip
    return (
        head + " | consumed samples: " + ints(samples, 12)
        + " | consumed tokens: " + ints(samples * seq, 12)
        + " | elapsed time per iteration (ms): " + fixed(p.step_ms, 1)
        + " | learning rate: " + sci(c["lr"], 3) + " | global batch size: " + ints(
            np.full(p.steps.size, gbs), 5) + " |" + loss_grad + grad + " num zeros: 0.0 |" + tail
        + " samples per second: " + fixed(gbs * 1000.0 / p.step_ms, 3)
        + " | TFLOPs: " + fixed(3.7e6 / p.step_ms, 2) + " |"
    )  # fmt: skip


def _noise(n: int, steps: np.ndarray, rng: np.random.Generator) -> pl.Series:
    """One framework noise line per entry, of a random kind."""
    kind = rng.integers(0, 4, n)
    gpu = ints(rng.integers(0, 8, n))
    mb = fixed(rng.uniform(18_000, 20_000, n), 1)
    ms = fixed(rng.uniform(10, 5000, n), 2)
    nccl = "r7i4n" + gpu + ":" + ints(rng.integers(10_000, 99_999, n)) + ":" + gpu
    nccl = nccl + " [" + gpu + "] NCCL INFO Channel " + ints(rng.integers(0, 32, n)).str.zfill(2)
    nccl = nccl + "/32 :    0   1   2   3   4   5   6   7"
    mem = "[Rank " + gpu + "] (after " + ints(steps) + " iterations) memory (MB) | allocated: "
    mem = mem + mb + " | max allocated: " + mb + " | reserved: 30812.0 | max reserved: 37120.0"
    timer = "time (ms) | forward-compute: " + ms + " | backward-compute: " + ms
    timer = timer + " | optimizer: " + ms + " | batch-generator: " + ms
    warn = pl.Series(["/opt/conda/lib/python3.8/site-packages/torch/utils/checkpoint.py:25: "
                      "UserWarning: None of the inputs have requires_grad=True."] * n)  # fmt: skip
    cols = pl.DataFrame({"k": kind, "a": nccl, "b": mem, "c": timer, "d": warn})
    pick = pl.when(pl.col("k") == 0).then("a").when(pl.col("k") == 1).then("b")
    return cols.select(pick.when(pl.col("k") == 2).then("c").otherwise("d")).to_series()


def _banner(resume: int | None, when_us: float) -> list[str]:
    stamp = timestamps(np.array([when_us])).item()
    lines = [
        "using world size: 64, data-parallel-size: 4, tensor-model-parallel size: 4, "
        "pipeline-model-parallel size: 4",
        "> building GPT2BPETokenizer tokenizer ...",
        "> initializing torch distributed ...",
        "r7i4n0:12345:12345 [0] NCCL INFO Bootstrap : Using ib0:10.148.0.1<0>",
    ]
    if resume is None:
        lines += [
            "WARNING: could not find the metadata file /ckpt/latest_checkpointed_iteration.txt ",
            "    will not load any checkpoints and will start from random",
        ]
    else:
        lines += [
            f" loading checkpoint from /ckpt at iteration {resume}",
            f"  successfully loaded checkpoint from /ckpt at iteration {resume}",
        ]
    return lines + [
        "time (ms) | load-checkpoint: 1234.56",
        f"[after dataloaders are built] datetime: {stamp} ",
        "done with setup ...",
        "training ...",
    ]


CRASH = [
    "Traceback (most recent call last):",
    '  File "pretrain_gpt.py", line 222, in <module>',
    "    pretrain(train_valid_test_datasets_provider, model_provider, forward_step,",
    "RuntimeError: CUDA error: uncorrectable ECC error encountered",
    "srun: error: r7i4n3: task 3: Exited with exit code 1",
]


def _blocks(p: Plan) -> pl.DataFrame:
    """Start-up banner, and crash + banner at each restart (a few, so a plain loop)."""
    rows: list[tuple[int, int, str]] = []
    first = _banner(None, p.time_us[0] - 60e6)
    rows += [(0, -100 + j, t) for j, t in enumerate(first)]
    for b, resume in zip(p.restart_at.tolist(), p.resume_from.tolist(), strict=True):
        text = CRASH + _banner(resume, p.time_us[b] - 60e6)
        rows += [(b, -100 + j, t) for j, t in enumerate(text)]
    return pl.DataFrame(rows, schema={"anchor": pl.Int64, "sub": pl.Int64, "text": pl.String},
                        orient="row")  # fmt: skip


def _periodic(p: Plan, c: dict[str, np.ndarray]) -> pl.DataFrame:
    """Checkpoint saves and validation blocks after the records at their intervals."""
    i = np.flatnonzero(p.steps % SAVE_INTERVAL == 0)
    st = ints(p.steps[i], 7)
    save = pl.DataFrame({"anchor": i, "sub": 2, "text": "saving checkpoint at iteration " + st})
    ok = "  successfully saved checkpoint at iteration " + st + " to /ckpt"
    save = save.with_columns(pl.col("text") + " to /ckpt")
    dash = "-" * 100
    val = " validation loss at iteration " + ints(p.steps[i]) + " | lm loss value: "
    val = val + sci(c["loss"][i] * 1.05, 6) + " | lm loss PPL: "
    val = val + sci(np.exp(np.minimum(c["loss"][i] * 1.05, 700)), 6) + " | "
    parts = [save, pl.DataFrame({"anchor": i, "sub": 3, "text": ok})]
    parts.append(
        pl.DataFrame({"anchor": i, "sub": 4, "text": "time (ms) | save-checkpoint: 57514.53"})
    )
    for sub, text in ((5, pl.Series([dash] * i.size)), (6, val), (7, pl.Series([dash] * i.size))):
        parts.append(pl.DataFrame({"anchor": i, "sub": sub, "text": text}))
    return pl.concat([f.with_columns(pl.col("sub").cast(pl.Int64)) for f in parts])


def lines(records: int, variant: str = "deepspeed", seed: int = 0, restarts: int = 4) -> pl.Series:
    """All lines of the log, in order."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r} (known: {', '.join(VARIANTS)})")
    rng = np.random.default_rng(seed)
    p = plan(records, restarts, rng)
    c = curves(p.steps, rng)
    idx = np.arange(records)
    noisy = np.flatnonzero(rng.random(records) < NOISE_RATE)
    frames = [
        pl.DataFrame({"anchor": idx, "sub": 0, "text": _record_text(p, c, variant)}),
        pl.DataFrame({"anchor": noisy, "sub": 1, "text": _noise(noisy.size, p.steps[noisy], rng)}),
        _periodic(p, c),
        _blocks(p),
    ]
    frames = [f.with_columns(pl.col("anchor", "sub").cast(pl.Int64)) for f in frames]
    text = pl.concat(frames).sort("anchor", "sub", maintain_order=True).get_column("text")
    return "[default0]:" + text if variant == "ranked" else text


def write(path: str | Path, text: pl.Series) -> Path:
    """Write lines with ``\\n`` endings, byte for byte as given."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    pl.DataFrame({"t": text}).write_csv(out, include_header=False, quote_style="never")
    return out


def generate(path: str | Path, records: int, variant: str = "deepspeed", seed: int = 0) -> Path:
    """Write a log of ``records`` training records to ``path``."""
    return write(path, lines(records, variant, seed))


def cli(description: str, variants: tuple[str, ...], default: str, make: Callable) -> None:
    """The command line of a log generator: ``--records --variant --seed -o OUT``."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--variant", choices=variants, default=default)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    print(make(a.out, a.records, a.variant, a.seed))


def main() -> None:
    cli(__doc__.splitlines()[0], VARIANTS, "deepspeed", generate)


if __name__ == "__main__":
    main()
