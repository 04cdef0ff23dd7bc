"""Write the small runs of fixtures/detect/ (logbook JSONL) and their expected findings.

    python -m bench.detect_fixtures fixtures/detect

Each run is a few hundred records built from numpy's legacy ``RandomState`` stream
(frozen across numpy versions), through ``segments.stitch`` like a parsed log:

- ``healthy``: fp16 warm-up and cosine decay, heavy-tailed noise, one crash and a
  rewind: only the restart is reported;
- ``spike_precursor``: the gradient norm ramps up 6x over 60 steps, then the loss
  jumps 3x at step 700 and recovers: a loss spike with its grad-norm precursors;
- ``collapse_nan``: the fp16 loss scale halves down to 1, the loss turns NaN, and the
  team rewinds to a checkpoint and cuts the learning rate.

The ``.expected.jsonl`` files are ``logbook detect --json`` of each run; they were read
and checked against the construction above before being committed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import polars as pl

from logbook.atomic import atomic_open
from logbook.parsed import Parsed
from logbook.run import Run, RunMeta
from logbook.schema import Restart, Source
from logbook.segments import stitch

T0 = 1_704_067_200.0


def _attempt(steps, loss, grad, lr, scale=None, t0=T0, resume=None) -> Parsed:
    n = len(steps)
    cols = {
        "step": np.asarray(steps, dtype=np.int64),
        "loss": loss,
        "grad_norm": grad,
        "lr": lr,
        "time": ((t0 + 2.0 * np.arange(1, n + 1)) * 1e6).astype(np.int64),
        "line": np.arange(2, n + 2, dtype=np.int64),
    }
    if scale is not None:
        cols["loss_scale"] = scale
    df = pl.DataFrame(cols).with_columns(pl.col("time").cast(pl.Datetime("us", "UTC")))
    events = []
    if resume is not None:
        events.append(Restart(resume_step=resume, source=Source(file="attempt.log", line=1)))
    return Parsed(metrics=df, events=events)


def _curves(rs: np.random.RandomState, steps: np.ndarray, noise: float = 0.01):
    s = steps.astype(float)
    loss = (2.0 + 9.0 * (1 + s / 50) ** -0.7) * np.exp(noise * rs.standard_t(4, s.size) / 1.4)
    grad = (0.3 + 2 * np.exp(-s / 80)) * np.exp(0.1 * rs.standard_t(4, s.size) / 1.4)
    lr = np.where(s <= 100, 3e-4 * s / 100, 3e-4 * (0.55 + 0.45 * np.cos(np.pi * s / 2000)))
    return loss, grad, lr


def _run(name: str, parts: list[Parsed]) -> Run:
    files = [f"{name}.attempt{i}.log" for i in range(len(parts))]
    metrics, events = stitch(parts, files)
    return Run(metrics=metrics, events=events, meta=RunMeta(name=name, format="synthetic"))


def healthy() -> Run:
    rs = np.random.RandomState(11)
    a = np.arange(1, 601)
    la, ga, lra = _curves(rs, a)
    b = np.arange(501, 1001)
    lb, gb, lrb = _curves(rs, b)
    scale_a = np.full(a.size, 65536.0)
    scale_a[300:] = 32768.0
    scale_b = np.full(b.size, 32768.0)
    return _run(
        "healthy",
        [
            _attempt(a, la, ga, lra, scale_a),
            _attempt(b, lb, gb, lrb, scale_b, t0=T0 + 3600, resume=500),
        ],
    )


def spike_precursor() -> Run:
    rs = np.random.RandomState(12)
    s = np.arange(1, 1001)
    loss, grad, lr = _curves(rs, s)
    grad = grad * np.exp(
        np.log(6.0) * np.clip((s - 640) / 60, 0, 1) * np.exp(-np.clip(s - 705, 0, None) / 5)
    )
    bump = np.zeros(s.size)
    bump[699:710] = [1.0, 2.0, 1.6, 1.2, 0.8, 0.5, 0.3, 0.15, 0.08, 0.04, 0.02]
    return _run("spike_precursor", [_attempt(s, loss * (1 + bump), grad, lr)])


def collapse_nan() -> Run:
    rs = np.random.RandomState(13)
    a = np.arange(1, 801)
    la, ga, lra = _curves(rs, a)
    scale_a = np.full(a.size, 65536.0)
    for k, at in enumerate(range(700, 732, 2)):  # 16 halvings: 65536 -> 1
        scale_a[at - 1 :] = 65536.0 / 2 ** (k + 1)
    la[759:] = np.nan
    ga[759:] = np.nan
    b = np.arange(601, 1201)
    lb, gb, lrb = _curves(rs, b)
    scale_b = np.full(b.size, 65536.0)
    return _run(
        "collapse_nan",
        [
            _attempt(a, la, ga, lra, scale_a),
            _attempt(b, lb, gb, lrb * 0.5, scale_b, t0=T0 + 7200, resume=600),
        ],
    )


RUNS = {"healthy": healthy, "spike_precursor": spike_precursor, "collapse_nan": collapse_nan}


def main(argv: list[str] | None = None) -> None:
    import json

    from logbook.cli_findings import finding_json
    from logbook.detectors import detect

    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0] if args else "fixtures/detect")
    out.mkdir(parents=True, exist_ok=True)
    for name, make in RUNS.items():
        run = make()
        run.write(out / f"{name}.jsonl")
        lines = [json.dumps(finding_json(f)) for f in detect(run)]
        with atomic_open(out / f"{name}.expected.jsonl", "w") as fh:
            fh.write("".join(x + "\n" for x in lines))
        print(f"{name}: {run.metrics.height} records, {len(lines)} findings")


if __name__ == "__main__":
    main()
