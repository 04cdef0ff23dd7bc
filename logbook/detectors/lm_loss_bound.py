"""``lm_loss_bound``: a language model's loss far above what a uniform guess scores.

A language model that gives every token of its vocabulary the same probability scores
ln(V) nats of cross-entropy: 10.8 for GPT-2's 50,257 tokens, 12.5 for 262,144, about the
largest vocabularies in use. Training starts near that value and falls from it; a loss of
``max_nats`` (25, twice the bound of the largest vocabularies) or more means confident
wrong predictions: the weights have already blown up. An excerpt that starts there gives
the other spike rules nothing to judge by: its first record is its baseline.

Fires on the records at the start of a run whose loss is at least ``max_nats``, the
first of them after step ``min_step`` (10: before it, the loss is the initialization's,
and an untrained model of too wide an init scores 60 nats at step 2), in logs
of trainers of language models whose losses are in nats (Megatron-LM and its forks,
nanoGPT and its descendants, torchtitan, llama2.c, OLMo, mlx-lm). The finding (kind
``loss_spike``) spans those records, up to the last one before the loss is back under
the bound (or the end: "not recovered"). Severity: critical.

Stays quiet on: other trainers' losses (a sum of loss terms, a loss in bits, a
regression or detection loss have no such bound), a first record under the bound or at
a step up to ``min_step``, and a rise above it later in a run (``loss_spike`` judges
that against its baseline).
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from logbook.detectors._base import Detector, DetectorConfig, finding, fmt
from logbook.detectors._frame import Context
from logbook.schema import Finding

NAME = "lm_loss_bound"
# formats whose loss is a language model's token cross-entropy in nats
LM_FORMATS = frozenset(
    {
        "megatron",
        "megatron-golden",
        "nanogpt",
        "nanogpt-logtxt",
        "modded-nanogpt",
        "torchtitan",
        "llama2c",
        "olmo",
        "mlx-lm",
    }
)


class Config(DetectorConfig):
    """The bound a language model's loss stays under."""

    max_nats: float = Field(
        25.0, gt=0, description="Loss (nats) from which a run's first records are a blow-up."
    )
    min_step: int = Field(
        10, ge=0, description="Steps of training after which the first record is judged."
    )


def detect(ctx: Context, cfg: Config) -> list[Finding]:
    formats = set((ctx.run.meta.format or "").split("+"))
    if not ctx.has("loss") or not formats & LM_FORMATS:
        return []
    d = ctx.select(["lineage", "step", "segment", "loss"])
    d = d.filter(d.get_column("lineage") == 0)
    loss = d.get_column("loss").cast(float).fill_null(np.nan).to_numpy()
    known = np.flatnonzero(np.isfinite(loss))
    if known.size == 0 or loss[known[0]] < cfg.max_nats:
        return []
    first = int(known[0])
    steps = d.get_column("step").to_list()
    if steps[first] is None or steps[first] <= cfg.min_step:
        return []
    under = np.flatnonzero(np.isfinite(loss[first:]) & (loss[first:] < cfg.max_nats))
    last = first + int(under[0]) - 1 if under.size else int(known[-1])
    recovered = under.size > 0
    peak = first + int(np.nanargmax(loss[first : last + 1]))
    msg = f"loss {fmt(float(loss[first]))} at the first record (step {steps[first]})"
    if peak != first:
        msg += f", {fmt(float(loss[peak]))} at step {steps[peak]}"
    msg += (
        f": above {fmt(cfg.max_nats)} nats, twice what a uniform guess over the largest "
        "vocabularies scores"
    )
    msg += (
        f"; under it from step {steps[first + int(under[0])]}"
        if recovered
        else "; not recovered by the last record"
    )
    return [
        finding(
            "loss_spike",
            NAME,
            "critical",
            step=steps[peak],
            start_step=steps[first],
            end_step=steps[last],
            score=float(loss[peak]) / cfg.max_nats,
            message=msg,
            segment=int(d.get_column("segment")[first]),
            evidence={
                "bound_nats": cfg.max_nats,
                "peak": float(loss[peak]),
                "peak_step": steps[peak],
                "recovered": recovered,
            },
        )
    ]


DETECTOR = Detector(name=NAME, config=Config, fn=detect, kinds=("loss_spike",), doc=__doc__ or "")
