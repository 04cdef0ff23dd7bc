"""Deterministic generator of a large metaseq training log, for the parse benchmark.

    python -m bench.gen_metaseq --records 1000000 [--variant plain|procid] -o OUT.log

Records are ``train_inner`` lines whose JSON payload holds every value as a string
(``"loss": "12.291"`` in bits, ``"lr": "4.45726e-06"``, ``"num_updates": "85"``),
formatted like metaseq's ``{:g}``. The ``procid`` variant puts the short-lived
``slurm_procid 0 : `` prefix of metaseq's logging format before every logged line.
Restarts (a crash traceback, then a start-up with ``Loaded checkpoint ... (epoch 1
@ N updates)``, after which ``num_updates`` goes back to N + 1), overflow notes with
a halved loss scale, checkpoint saves, validation lines and framework noise (NCCL,
warnings, barriers) are interleaved. Built from numpy arrays as polars strings,
like ``gen_megatron``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from bench.gen_megatron import (
    NOISE_RATE,
    SAVE_INTERVAL,
    Plan,
    cli,
    curves,
    general,
    ints,
    plan,
    timestamps,
    write,
)

VARIANTS = ("plain", "procid")
LN2 = float(np.log(2.0))
STEP_MS = 1500.0


def _g3(values: np.ndarray) -> pl.Series:
    """A meter's value: rounded to 3 decimals, then ``{:g}``."""
    return general(np.round(values, 3))


def _record_text(p: Plan, c: dict[str, np.ndarray], rng: np.random.Generator) -> pl.Series:
    n = p.steps.size
    bits = c["loss"] / LN2
    wps = 1_048_576 / (p.step_ms / 1000.0)
    fields = [
        ("actv_norm", _g3(rng.lognormal(np.log(0.45), 0.1, n))),
        ("pos_norm", _g3(np.full(n, 0.191))),
        ("tok_norm", _g3(np.full(n, 0.272))),
        ("emb_norm", _g3(np.full(n, 0.034))),
        ("docsperex", _g3(rng.uniform(2.5, 3.0, n))),
        ("loss", _g3(bits)),
        ("ppl", _g3(np.exp2(np.minimum(bits, 60)))),
        ("wps", _g3(np.rint(wps))),
        ("ups", _g3(1000.0 / p.step_ms)),
        ("wpb", general(np.full(n, 1_048_576.0))),
        ("bsz", ints(np.full(n, 512))),
        ("num_updates", ints(p.steps)),
        ("lr", general(c["lr"])),
        ("gnorm", _g3(c["grad_norm"])),
        ("clip", _g3(np.where(c["grad_norm"] > 1.0, 100.0, 0.0))),
        ("loss_scale", _g3(c["loss_scale"] / 1024.0)),
        ("train_wall", _g3(np.rint(p.step_ms / 1000.0))),
        ("cuda_gb_allocated", _g3(rng.uniform(22.0, 23.0, n))),
        ("cuda_gb_reserved", _g3(np.full(n, 74.6))),
        ("cuda_gb_free", _g3(rng.uniform(56.0, 57.0, n))),
        ("wall", ints((p.time_us - p.time_us[0]) // 1_000_000)),
    ]
    text = pl.Series([""] * n)
    for key, value in fields:
        text = text + f', "{key}": "' + value + '"'
    return timestamps(p.time_us) + ' | INFO | train_inner | {"epoch": 1' + text + "}"


def _noise(n: int, us: np.ndarray, rng: np.random.Generator) -> pl.Series:
    """One framework noise line per entry, of a random kind."""
    kind = rng.integers(0, 3, n)
    ts = timestamps(us)
    gpu = ints(rng.integers(0, 8, n))
    nccl = "node-12:" + ints(rng.integers(10_000, 99_999, n)) + ":" + gpu + " [" + gpu + "]"
    nccl = nccl + " NCCL INFO Channel " + ints(rng.integers(0, 32, n)).str.zfill(2) + "/32 :    0"
    warn = ts + " | WARNING | py.warnings | /opt/conda/lib/python3.8/site-packages/torch/"
    warn = warn + "distributed/fsdp/flatten_params_wrapper.py:423: UserWarning: Positional "
    warn = warn + "args are being deprecated, use kwargs instead."
    barrier = (
        ts + " | INFO | torch.distributed.distributed_c10d | Rank " + ints(rng.integers(0, 992, n))
    )
    barrier = barrier + ": Completed store-based barrier for key:store_based_barrier_key:2 "
    barrier = barrier + "with 992 nodes."
    cols = pl.DataFrame({"k": kind, "a": nccl, "b": warn, "c": barrier})
    pick = pl.when(pl.col("k") == 0).then("a").when(pl.col("k") == 1).then("b").otherwise("c")
    return cols.select(pick).to_series()


def _startup(resume: int | None, us: float) -> list[str]:
    ts = timestamps(np.array([us])).item()
    lines = [
        f"{ts} | INFO | metaseq.distributed.utils | distributed init (rank 0): env://",
        f"{ts} | INFO | metaseq_cli.train | training on 992 devices (GPUs/TPUs)",
    ]
    if resume is None:
        lines.append(f"{ts} | INFO | metaseq.checkpoint_utils | No existing checkpoint found "
                     "/ckpt/checkpoint_last.pt")  # fmt: skip
    else:
        lines += [
            f"{ts} | INFO | metaseq.checkpoint_utils | attempting to load checkpoint from: "
            "/ckpt/checkpoint_last.pt",
            f"{ts} | INFO | metaseq.trainer | Loaded checkpoint /ckpt/checkpoint_last.pt "
            f"(epoch 1 @ {resume} updates)",
        ]
    return lines + [
        f"{ts} | INFO | metaseq.optim.dynamic_loss_scaler | *** SCALE_WINDOW: 256, "
        "loss scale: 4 ***",
        f"{ts} | INFO | metaseq.trainer | begin training epoch 1",
        f"{ts} | INFO | metaseq_cli.train | Start iterating over samples",
    ]


CRASH = [
    "Traceback (most recent call last):",
    '  File "/shared/home/metaseq/metaseq_cli/train.py", line 650, in cli_main',
    "    distributed_utils.call_main(cfg, main)",
    "RuntimeError: NCCL communicator was aborted on rank 7.",
    "srun: error: node-12: task 7: Exited with exit code 1",
]


def _blocks(p: Plan) -> pl.DataFrame:
    """Start-up lines, and crash + start-up at each restart (a few: a plain loop)."""
    rows = [(0, -100 + j, t) for j, t in enumerate(_startup(None, p.time_us[0] - 60e6))]
    for b, resume in zip(p.restart_at.tolist(), p.resume_from.tolist(), strict=True):
        text = CRASH + _startup(resume, p.time_us[b] - 60e6)
        rows += [(b, -100 + j, t) for j, t in enumerate(text)]
    schema = {"anchor": pl.Int64, "sub": pl.Int64, "text": pl.String}
    return pl.DataFrame(rows, schema=schema, orient="row")


def _periodic(p: Plan, c: dict[str, np.ndarray]) -> pl.DataFrame:
    """Overflow notes before their records; saves and validation after theirs."""
    o = np.flatnonzero(c["overflow"])
    note = timestamps(p.time_us[o]) + " | INFO | metaseq.trainer | NOTE: gradient overflow "
    note = note + "detected, ignoring gradient, setting loss scale to: "
    note = note + general(c["loss_scale"][o] / 1024.0)
    i = np.flatnonzero(p.steps % SAVE_INTERVAL == 0)
    ts, st = timestamps(p.time_us[i] + 1e6), ints(p.steps[i])
    save = ts + " | INFO | metaseq.checkpoint_utils | Saved checkpoint /ckpt/checkpoint_" + st
    save = save + ".pt (epoch 1 @ " + st + " updates, score None) (writing took 12.3 seconds)"
    begin = ts + ' | INFO | metaseq_cli.train | begin validation on "valid" subset'
    valid = ts + ' | INFO | valid | {"epoch": 1, "valid_loss": "' + _g3(c["loss"][i] / LN2)
    valid = valid + '", "valid_wps": "712727", "valid_num_updates": "' + st + '"}'
    parts = [(o, -1, note), (i, 1, save), (i, 2, begin), (i, 3, valid)]
    return pl.concat(
        pl.DataFrame({"anchor": a, "sub": np.full(a.size, sub), "text": t}) for a, sub, t in parts
    )


def lines(records: int, variant: str = "plain", seed: int = 0, restarts: int = 4) -> pl.Series:
    """All lines of the log, in order."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r} (known: {', '.join(VARIANTS)})")
    rng = np.random.default_rng(seed)
    p = plan(records, restarts, rng, STEP_MS)
    c = curves(p.steps, rng)
    noisy = np.flatnonzero(rng.random(records) < NOISE_RATE)
    frames = [
        pl.DataFrame({"anchor": np.arange(records), "sub": 0, "text": _record_text(p, c, rng)}),
        pl.DataFrame(
            {"anchor": noisy, "sub": 4, "text": _noise(noisy.size, p.time_us[noisy], rng)}
        ),
        _periodic(p, c),
        _blocks(p),
    ]
    frames = [f.with_columns(pl.col("anchor", "sub").cast(pl.Int64)) for f in frames]
    text = pl.concat(frames).sort("anchor", "sub", maintain_order=True).get_column("text")
    if variant == "plain":
        return text
    logged = text.str.contains(r"^\d{4}-\d\d-\d\d ")  # the prefix is in the logging format
    return pl.select(pl.when(logged).then("slurm_procid 0 : " + text).otherwise(text)).to_series()


def generate(path: str | Path, records: int, variant: str = "plain", seed: int = 0) -> Path:
    """Write a log of ``records`` train_inner records to ``path``."""
    return write(path, lines(records, variant, seed))


def main() -> None:
    cli(__doc__.splitlines()[0], VARIANTS, "plain", generate)


if __name__ == "__main__":
    main()
