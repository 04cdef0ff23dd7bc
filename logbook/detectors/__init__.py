"""Detectors: what went wrong in a run, when, and what warned of it first.

``DETECTORS`` is a plain-dict registry, name -> :class:`Detector`; each detector is one
module with a documented ``Config`` (thresholds with their meaning and default) and a
docstring saying when it fires and when it stays quiet. :func:`detect` runs them all on
a run and links precursors to the spikes and divergences they announce.

Severity policy: ``critical`` = the run is damaged: non-finite values, a divergence, a
run that ends in crash evidence with no restart after it, a loss spike of 2x or more or
one that did not recover, a grad-norm spike of 20x or more or one that did not recover, a
loss scale at its minimum. ``warning`` = worth a look:
smaller spikes, a collapse of the loss scale, a drift of 2x or more, an unexplained LR
jump inside a segment, a stall, a slowdown, a restart after crash evidence. ``info`` =
context: restarts without crash evidence, LR changes at a relaunch, overflow skips,
missing losses of iterations the fp16 scaler skipped, and precursors too small to report
on their own (kept only when they precede a spike or a divergence).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from logbook.detectors import (
    crash,
    divergence,
    drift,
    grad_norm_spike,
    lm_loss_bound,
    loss_scale,
    loss_spike,
    lr_change,
    nonfinite,
    restarts,
    short_spike,
    stall,
    throughput,
    zero_loss,
)
from logbook.detectors._base import SEVERITY_RANK, Detector, DetectorConfig
from logbook.detectors._frame import Context, build_context
from logbook.detectors._precursors import PrecursorConfig, link
from logbook.detectors._window import annotate, scaled, window_steps
from logbook.run import Run
from logbook.schema import Finding

DETECTORS: dict[str, Detector] = {
    "loss_spike": loss_spike.DETECTOR,
    "grad_norm_spike": grad_norm_spike.DETECTOR,
    "nonfinite": nonfinite.DETECTOR,
    "loss_scale_collapse": loss_scale.DETECTOR,
    **drift.DETECTORS,
    "lr_change": lr_change.DETECTOR,
    "divergence": divergence.DETECTOR,
    "stall": stall.DETECTOR,
    "throughput_drop": throughput.DETECTOR,
    "restarts": restarts.DETECTOR,
    "crash": crash.DETECTOR,
    "short_spike": short_spike.DETECTOR,
    "zero_loss": zero_loss.DETECTOR,
    "lm_loss_bound": lm_loss_bound.DETECTOR,
}

PRECURSORS = "precursors"  # the config section of precursor linking
DETECT_THREADS = 2  # detectors run side by side on this many threads
SMALL_RUN = 20_000  # records: a shorter run is checked on one thread (a pool costs more)
# the detectors that take longest on a long run start first, so that the threads
# finish together (results are still gathered in registry order)
START_FIRST = ("throughput_drop", "grad_norm_spike", "loss_spike", "lr_change", "stall")

__all__ = [
    "DETECTORS",
    "PRECURSORS",
    "Context",
    "Detector",
    "DetectorConfig",
    "PrecursorConfig",
    "SEVERITY_RANK",
    "build_context",
    "default_config",
    "detect",
]


def default_config() -> dict[str, DetectorConfig]:
    """Every detector's config with its defaults, plus the precursor section."""
    out: dict[str, DetectorConfig] = {n: d.make_config() for n, d in DETECTORS.items()}
    out[PRECURSORS] = PrecursorConfig()
    return out


def detect(
    run: Run,
    config: dict[str, DetectorConfig] | None = None,
    progress: Callable[[str], None] | None = None,
    threads: int = DETECT_THREADS,
) -> list[Finding]:
    """All findings of all enabled detectors on ``run``, precursors linked, in step order.

    ``config`` maps detector names (and ``"precursors"``) to configs; missing entries
    take the defaults. ``progress`` is called with each detector's name before it runs.
    ``threads``: detectors run side by side on this many threads (1: one after the
    other, in this thread: the least CPU time, for short runs checked often; runs of
    fewer than ``SMALL_RUN`` records are always checked so).
    """
    cfg = default_config() | (config or {})
    k = window_steps(run)
    if k is not None:
        cfg["loss_spike"] = scaled(cfg["loss_spike"], k)
    ctx = build_context(run)
    found: list[Finding] = []
    # detectors are pure functions of the shared context; polars and numpy release the
    # GIL, so two threads use both cores. Results are gathered in registry order.
    if threads <= 1 or ctx.core.height < SMALL_RUN:
        for name in DETECTORS:
            if progress is not None:
                progress(name)
            found += DETECTORS[name](ctx, cfg[name])
        return _finish(found, cfg, k, ctx)
    order = sorted(DETECTORS, key=lambda n: START_FIRST.index(n) if n in START_FIRST else 99)
    with ThreadPoolExecutor(max_workers=threads) as pool:
        jobs = {}
        for name in order:
            if progress is not None:
                progress(name)
            jobs[name] = pool.submit(DETECTORS[name], ctx, cfg[name])
        for name in DETECTORS:
            found += jobs[name].result()
    return _finish(found, cfg, k, ctx)


def _finish(found: list[Finding], cfg: dict, k: int | None, ctx: Context) -> list[Finding]:
    """One spike each, window notes, ids, precursors linked, in step order."""
    found = _one_spike_each(found)
    if k is not None:
        annotate(found, k)
    _assign_ids(found)
    pre = cfg[PRECURSORS]
    assert isinstance(pre, PrecursorConfig)
    found = link(found, pre, ctx.interval)
    return sorted(found, key=_order)


def _one_spike_each(found: list[Finding]) -> list[Finding]:
    """A short excerpt's spike that ``loss_spike`` found too is reported once (by it)."""
    spans = [
        (f.start_step, f.end_step)
        for f in found
        if f.detector == "loss_spike" and f.start_step is not None and f.end_step is not None
    ]

    def seen(f: Finding) -> bool:
        lo, hi = f.start_step, f.end_step
        return lo is not None and hi is not None and any(a <= hi and lo <= b for a, b in spans)

    return [f for f in found if not (f.detector == "short_spike" and seen(f))]


def _order(f: Finding) -> tuple:
    at = f.start_step if f.start_step is not None else (f.step if f.step is not None else -1)
    return (at, f.step if f.step is not None else -1, f.kind, f.id or "")


def _assign_ids(found: list[Finding]) -> None:
    seen: dict[str, int] = {}
    for f in sorted(found, key=_order):
        at = f.start_step if f.start_step is not None else f.step
        base = f"{f.kind}@{at}"
        if f.evidence.get("superseded"):
            base += f"/seg{f.segment}"
        seen[base] = seen.get(base, 0) + 1
        f.id = base if seen[base] == 1 else f"{base}#{seen[base]}"
