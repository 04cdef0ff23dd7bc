"""Remedies for the critical spikes and divergences: where to rewind, which batches to
skip, how much to cut the learning rate, and how to test that on the small model first.

Rewind: the last checkpoint saved before the earliest precursor (or the onset, without
one) on the finding's own line of training, where the loss scale was still >= 1 and the
activation norm was not rising (not inside an ``activation_norm_drift``) — the OPT-175B
team's rule. Skip: PaLM rewound about 100 steps before a spike and skipped 200-500
batches; here the skipped steps start after the checkpoint (or ``SKIP_BEFORE`` steps
before the onset when the checkpoint is further back) and cover the spike, at least
``MIN_SKIP`` and at most ``MAX_SKIP`` batches. LR: the peak learning rate times
``LR_CUT``. The flags each framework takes are in ``_flags``.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field

import polars as pl

from logbook.report._flags import framework_commands, replay_command
from logbook.report._lines import Lines
from logbook.report.incidents import TARGETS, Incident, incidents, onset
from logbook.run import Run
from logbook.schema import CheckpointSave, Finding, Restart

MIN_SKIP = 200
MAX_SKIP = 500
SKIP_BEFORE = 100
REWIND_STEPS = 100  # without checkpoint saves: rewind this far before the earliest sign
LR_CUT = 0.5
MAX_CANDIDATES = 20  # checkpoints examined (latest first) before giving up on the log's saves
DRIFT_KIND = "activation_norm_drift"
LINE_COLUMNS = ("loss_scale", "samples", "batch_size", "lr")


@dataclass
class Remedy:
    """What to do about one critical finding."""

    finding: Finding  # the main finding of the incident
    others: list[Finding] = field(default_factory=list)  # other critical findings in it
    onset: int = 0
    end: int = 0
    earliest: int = 0  # earliest precursor onset, or the finding's onset
    precursors: list[Finding] = field(default_factory=list)
    checkpoint_step: int | None = None
    checkpoint_path: str | None = None
    rewind_step: int = 0  # the checkpoint's step, or a step to look for one at or before
    rejected: list[tuple[int, str]] = field(default_factory=list)  # checkpoints passed over
    skip_start: int = 0
    skip_end: int = 0
    samples: tuple[int, int] | None = None  # [first, end) sample indices of the skip
    samples_estimated: bool = False
    peak_lr: float | None = None
    new_lr: float | None = None
    commands: dict[str, list[str]] = field(default_factory=dict)
    replay: str = ""


def remedies(
    run: Run, findings: list[Finding], found: list[Incident] | None = None
) -> list[Remedy]:
    """One remedy per incident with a critical loss spike or divergence, in step order."""
    found = incidents(findings) if found is None else found
    todo = [inc for inc in found if inc.has_target]
    if not todo:
        return []
    saves = sorted(
        (
            e
            for e in run.events_of("checkpoint_save")
            if isinstance(e, CheckpointSave) and e.step is not None
        ),
        key=lambda e: (e.step, e.segment),
    )
    ctx = _Context(
        lines=Lines(run.metrics, LINE_COLUMNS),
        saves=saves,
        save_steps=[e.step for e in saves],
        resumes=_resumes(run),
        drifts=[f for f in findings if f.kind == DRIFT_KIND],
        fmt=run.meta.format,
        sources=list(run.meta.sources),
    )
    return [_remedy(ctx, inc) for inc in todo]


@dataclass
class _Context:
    lines: Lines
    saves: list[CheckpointSave]  # by step, then segment
    save_steps: list[int]
    resumes: dict[int, int]
    drifts: list[Finding]
    fmt: str | None
    sources: list[str]


def _resumes(run: Run) -> dict[int, int]:
    """Segment -> the step its launch resumed after (a later launch discards the saves
    of earlier ones beyond this step)."""
    first = (
        run.metrics.filter(pl.col("step").is_not_null())
        .group_by("segment")
        .agg(pl.col("step").min())
        .sort("segment")
    )
    out = {int(s): int(v) - 1 for s, v in first.iter_rows() if s is not None}
    for e in run.events_of("restart"):
        if isinstance(e, Restart) and e.resume_step is not None:
            out[e.segment] = e.resume_step
    return out


def _ancestor(save: CheckpointSave, segment: int, resumes: dict[int, int]) -> bool:
    """Whether ``save`` is a state of the training line that ``segment`` continues."""
    if save.step is None or save.segment > segment:
        return False
    later = [r for s, r in resumes.items() if save.segment < s <= segment]
    return all(save.step <= r for r in later)


def _remedy(ctx: _Context, inc: Incident) -> Remedy:
    f = inc.main
    r = Remedy(
        finding=f,
        others=inc.findings[1:],
        onset=min(onset(t) for t in inc.findings if t.kind in TARGETS),
        end=inc.end,
        earliest=inc.start,
        precursors=inc.precursors,
    )
    _choose_checkpoint(r, ctx)
    _skip(r, ctx.lines)
    _lr(r, ctx.lines)
    r.commands = framework_commands(ctx.fmt, r)
    r.replay = replay_command(r, LR_CUT, ctx.sources)
    return r


def _candidates(r: Remedy, ctx: _Context) -> Iterator[CheckpointSave]:
    """Saves on the finding's line before its earliest sign, latest first (at most
    ``MAX_CANDIDATES``)."""
    seg = r.finding.segment
    i = bisect.bisect_left(ctx.save_steps, r.earliest) - 1
    seen = 0
    while i >= 0 and seen < MAX_CANDIDATES:
        s = ctx.saves[i]
        i -= 1
        if _ancestor(s, seg, ctx.resumes):
            seen += 1
            yield s


def _choose_checkpoint(r: Remedy, ctx: _Context) -> None:
    seg = r.finding.segment
    for s in _candidates(r, ctx):
        why = _unhealthy(s.step, seg, ctx)
        if why is None:
            r.checkpoint_step, r.checkpoint_path, r.rewind_step = s.step, s.path, s.step
            return
        if all(step != s.step for step, _ in r.rejected):
            r.rejected.append((s.step, why))
    r.rewind_step = max(0, r.earliest - REWIND_STEPS)
    if r.rejected:
        r.rewind_step = max(0, min(r.rewind_step, min(step for step, _ in r.rejected) - 1))


def _unhealthy(step: int, segment: int, ctx: _Context) -> str | None:
    """Why the state at a checkpoint should not be resumed from, or None."""
    scale = ctx.lines.value_at(segment, "loss_scale", step)
    if scale is not None and scale < 1:
        return f"loss scale {scale:g} < 1"
    for d in ctx.drifts:
        lo = onset(d)
        hi = d.end_step if d.end_step is not None else lo
        if lo <= step <= hi:
            return f"activation norm rising ({d.id or d.kind})"
    return None


def _skip(r: Remedy, lines: Lines) -> None:
    start = r.rewind_step + 1
    if r.onset - start > MAX_SKIP - MIN_SKIP:
        start = max(start, r.onset - SKIP_BEFORE)
    r.skip_start = start
    r.skip_end = min(max(r.end, start + MIN_SKIP - 1), start + MAX_SKIP - 1)
    seg, a, b = r.finding.segment, r.skip_start - 1, r.skip_end
    before = lines.value_at(seg, "samples", a)
    last = lines.value_at(seg, "samples", b)
    if (
        before is not None
        and last is not None
        and lines.has_step(seg, a)
        and lines.has_step(seg, b)
    ):
        r.samples = (int(before), int(last))
        return
    batch = lines.value_at(seg, "batch_size", r.skip_start) or lines.median(seg, "batch_size")
    if not batch:
        return
    base = (a * batch) if before is None else before + batch * (a - lines.last_step(seg, a))
    r.samples = (int(base), int(base + batch * (b - a)))
    r.samples_estimated = True


def _lr(r: Remedy, lines: Lines) -> None:
    seg = r.finding.segment
    peak = lines.max_until(seg, "lr", max(r.rewind_step, 1))
    if peak is None or peak <= 0:
        peak = lines.max_until(seg, "lr", r.onset)
    if peak is not None and peak > 0:
        r.peak_lr = peak
        r.new_lr = float(f"{peak * LR_CUT:.3g}")
