"""Labelled synthetic runs for the detection benchmark.

Each run is built the way a real one reaches ``logbook detect``: one file per job
attempt (a ``Parsed`` with records, launch and crash evidence), stitched by
``logbook.segments.stitch`` into segments and restart events. Per-step series
(``_gen_series``) are aggregated into records every ``interval`` steps the way Megatron
prints them (loss averaged over the interval's non-skipped iterations, the other
metrics as of the last step; no loss when every iteration was skipped).

Injected and labelled: loss spikes with and without precursors (grad-norm ramp,
activation-norm drift, attention-logit growth, loss-scale halvings), loss-scale
collapses, activation-norm drifts, restarts (with recomputed steps, crash evidence and
sometimes a manual LR cut), non-finite stretches and divergences followed by a rewind,
slowdowns, and long healthy stretches; fp16 and bf16; several noise levels and log
intervals. Labels are dicts with ``kind``, ``start``, ``peak``, ``end`` (steps) and, for
spikes, ``precursor`` (kind) and ``ramp`` (steps).

``python -m bench.gen_detect OUTDIR`` writes each run as logbook JSONL with its labels.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench._gen_build import build_run
from bench._gen_series import SLOT
from logbook.atomic import atomic_open
from logbook.run import Run


@dataclass(frozen=True, kw_only=True)
class Spec:
    """One synthetic run."""

    name: str
    seed: int
    steps: int = 30_000
    interval: int = 1
    fp16: bool = True
    noise: float = 0.015
    grad_noise: float = 0.12
    logs_act: bool = True
    spikes: int = 3
    collapses: int = 1
    drifts: int = 1
    restarts: int = 1
    lr_cuts: int = 0
    nans: int = 0
    divergences: int = 0
    slowdowns: int = 0


def suite(seed: int = 0) -> list[Spec]:
    """The benchmark's runs: incident runs over noise levels x precision x interval,
    plus long healthy runs."""
    specs = []
    k = 0
    for noise in (0.005, 0.015, 0.03):
        for fp16 in (True, False):
            for interval in (1, 1, 5, 10):
                k += 1
                specs.append(
                    Spec(
                        name=f"r{k:02d}_{'fp16' if fp16 else 'bf16'}_n{noise}_i{interval}",
                        seed=seed * 1000 + k,
                        steps=30_000 if interval == 1 else 60_000,
                        interval=interval,
                        fp16=fp16,
                        noise=noise,
                        logs_act=k % 2 == 0,
                        collapses=1 if fp16 else 0,
                        drifts=1 if k % 2 == 0 else 0,
                        restarts=2,
                        lr_cuts=1 if k % 3 == 0 else 0,
                        nans=1 if k % 4 == 1 else 0,
                        divergences=1 if k % 4 == 2 else 0,
                        slowdowns=1 if k % 5 == 0 else 0,
                    )
                )
    for j, (noise, fp16, interval) in enumerate(
        [(0.005, True, 1), (0.015, False, 1), (0.03, True, 1), (0.015, True, 5), (0.03, False, 10)]
    ):
        k += 1
        specs.append(
            Spec(
                name=f"h{j}_{'fp16' if fp16 else 'bf16'}_n{noise}_i{interval}",
                seed=seed * 1000 + k,
                steps=60_000 if interval == 1 else 150_000,
                interval=interval,
                fp16=fp16,
                noise=noise,
                spikes=0,
                collapses=0,
                drifts=0,
                restarts=1,
            )
        )
    return specs


def plan(spec: Spec, rng: np.random.Generator) -> list[tuple[str, int]]:
    """Incidents and their slot starts, in step order, each in its own slot."""
    kinds = (
        ["spike"] * spec.spikes
        + ["collapse"] * spec.collapses
        + ["drift"] * spec.drifts
        + ["restart"] * spec.restarts
        + ["nan"] * spec.nans
        + ["divergence"] * spec.divergences
        + ["slowdown"] * spec.slowdowns
    )
    n_slots = (spec.steps - 3000) // SLOT
    if len(kinds) > n_slots:
        raise ValueError(f"{spec.name}: {len(kinds)} incidents do not fit in {n_slots} slots")
    slots = np.sort(rng.choice(n_slots, size=len(kinds), replace=False))
    order = rng.permutation(len(kinds))
    return sorted((kinds[o], 2000 + int(s) * SLOT) for o, s in zip(order, slots, strict=True))


def generate(spec: Spec) -> tuple[Run, list[dict]]:
    """The run and its labels."""
    rng = np.random.default_rng(spec.seed)
    return build_run(spec, plan(spec, rng), rng)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0] if args else "gen_detect_out")
    out.mkdir(parents=True, exist_ok=True)
    for spec in suite():
        run, labels = generate(spec)
        run.write(out / f"{spec.name}.jsonl")
        with atomic_open(out / f"{spec.name}.labels.json", "w") as fh:
            fh.write(json.dumps(labels, indent=1) + "\n")
        print(f"{spec.name}: {run.metrics.height} records, {len(labels)} labels")


if __name__ == "__main__":
    main()
