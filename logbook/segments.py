"""Stitch parsed files into one run: order the files, assign segments, build restarts.

A new segment opens where the step does not advance (a rewind, or a fresh launch that
starts over), where the next file (the next job attempt) begins, or where a parser saw
a launch between two records (a ``restart`` marker: a checkpoint load, a start-up
banner; parsers give one marker per launch). Each launch becomes one ``restart``
event with the resume step (stated by the marker, else guessed), the last step before
it, the recomputed steps, the wall-clock gap and the cause (crash evidence seen since
the previous record or launch). Launches that produced no record (an attempt that
crashed during start-up) are restarts too. The run's first launch is not a restart,
unless it resumed from a checkpoint.

Loss-scale changes (consecutive records that differ, within a launch or across a
resume, not across a fresh start) and NaN/Inf values of float metrics are derived
here from the columns, unless the parser already reported them.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np
import polars as pl

from logbook.parsed import Parsed
from logbook.schema import (
    ConfigChange,
    EventBase,
    HardwareFailure,
    LossScaleChange,
    LrChange,
    Nonfinite,
    OverflowSkip,
    Restart,
    Source,
)

# A launch whose first record is at most this step (or one log interval) started
# from scratch rather than from a checkpoint.
FRESH_START_MAX_STEP = 10
_LINE_BITS = 40
_NONFINITE_COLUMNS = ("loss", "grad_norm", "lr", "loss_scale", "act_norm", "param_norm")


def order_parts(parts: list[Parsed]) -> list[Parsed]:
    """Files of one run in launch order: by first timestamp when all have one, else
    by first step; ties keep the order given."""

    def first(p: Parsed, col: str):
        if col not in p.metrics.columns or p.metrics.height == 0:
            return None
        return p.metrics.get_column(col).drop_nulls().first()

    if len(parts) < 2:
        return parts
    times = [first(p, "time") for p in parts]
    if all(t is not None for t in times):
        keys = times
    else:
        keys = [first(p, "step") for p in parts]
        keys = [k if k is not None else -1 for k in keys]
    order = sorted(range(len(parts)), key=lambda i: keys[i])
    return [parts[i] for i in order]


def _pos(source: int, line: int | None) -> int:
    return (source << _LINE_BITS) + (line or 0)


@dataclass
class _Records:
    """The records' positions, steps, files, times and segments as arrays."""

    pos: np.ndarray
    step: np.ndarray  # -1 where the record has no step
    has_step: np.ndarray
    source: np.ndarray
    times: pl.Series | None
    interval: int
    prev: np.ndarray  # step of the closest earlier record that has one (-1: none)
    # the loss scale changed since the record before (an fp16 overflow backed it off)
    backed_off: np.ndarray | None = None

    def prev_step(self, i: int) -> int | None:
        """Step of the closest record before index ``i`` that has one."""
        if i >= len(self.step):
            last = np.flatnonzero(self.has_step)
            return int(self.step[last[-1]]) if last.size else None
        return int(self.prev[i]) if self.prev[i] >= 0 else None


def stitch(parts: list[Parsed], files: list[str]) -> tuple[pl.DataFrame, list[EventBase]]:
    """Concatenate ordered parts (``files`` names them) into one metrics frame and one
    event list."""
    events: list[tuple[int, EventBase]] = []
    for i, p in enumerate(parts):
        events += [(_pos(i, e.source.line if e.source else None), e) for e in p.events]
    events.sort(key=lambda pe: pe[0])
    frames = [
        p.metrics.with_columns(pl.lit(i, dtype=pl.Int32).alias("source"))
        for i, p in enumerate(parts)
        if p.metrics.height
    ]
    if not frames:
        empty = pl.DataFrame({"_pos": [], "step": []}, schema={"_pos": pl.Int64, "step": pl.Int64})
        placed, _, _ = _place(_records(empty), events, files)
        return pl.DataFrame(), [e for _, e in placed]
    # one chunk per column: parsers hand over columns cut in pieces, and every query
    # below would otherwise align the pieces of the columns it reads again
    metrics = pl.concat(frames, how="diagonal_relaxed").rechunk()
    pos = (pl.col("source").cast(pl.Int64) * (1 << _LINE_BITS)) + pl.col("line").fill_null(0)
    metrics = metrics.with_columns(pos.alias("_pos"))
    if not metrics.get_column("_pos").is_sorted():
        metrics = metrics.sort("_pos", maintain_order=True)
    recs = _records(metrics)
    placed, segment, fresh = _place(recs, events, files)
    metrics = metrics.with_columns(
        pl.Series("segment", segment, dtype=pl.Int32),
        pl.Series("_epoch", np.cumsum(fresh), dtype=pl.Int64),
    )
    placed += _derived_events(metrics, [e for _, e in placed], files)
    placed.sort(key=lambda pe: pe[0])
    metrics.drop_in_place("_pos")
    metrics.drop_in_place("_epoch")
    return metrics, [e for _, e in placed]


def _records(metrics: pl.DataFrame) -> _Records:
    steps = metrics.get_column("step").cast(pl.Int64)
    step_np = steps.fill_null(-1).to_numpy()
    has_step = steps.is_not_null().to_numpy()
    source = (
        metrics.get_column("source").to_numpy()
        if "source" in metrics.columns
        else np.zeros(metrics.height, dtype=np.int32)
    )
    times = metrics.get_column("time") if "time" in metrics.columns else None
    return _Records(
        pos=metrics.get_column("_pos").cast(pl.Int64).to_numpy(),
        step=step_np,
        has_step=has_step,
        source=source,
        times=times,
        interval=_log_interval(step_np[has_step]),
        prev=_previous_valid(step_np, has_step),
        backed_off=_backed_off(metrics),
    )


def _backed_off(metrics: pl.DataFrame) -> np.ndarray | None:
    """Where the loss scale differs from the record before's (None: no loss scale)."""
    if "loss_scale" not in metrics.columns:
        return None
    scale = metrics.get_column("loss_scale").cast(pl.Float64)
    return (scale != scale.shift(1)).fill_null(False).to_numpy()


def _boundaries(
    recs: _Records, mpos: np.ndarray, opos: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(markers before each record, whether each record opens a segment). ``opos``: the
    positions of overflow skips; a step printed again after one, or with another loss
    scale, is that step retried (NVIDIA's BERT pretraining logs the skipped step again),
    not a rewind."""
    n = len(recs.pos)
    n_before = np.searchsorted(mpos, recs.pos, side="left")
    prev = recs.prev
    boundary = np.zeros(n, dtype=bool)
    if n > 1:
        back = recs.has_step[1:] & (prev[1:] >= 0) & (recs.step[1:] <= prev[1:])
        o_before = np.searchsorted(opos, recs.pos, side="left")
        skipped = o_before[1:] > o_before[:-1]
        if recs.backed_off is not None:  # (a scale printed with each record says it too)
            skipped = skipped | recs.backed_off[1:]
        retried = (recs.step[1:] == prev[1:]) & skipped
        back &= ~retried
        marked = n_before[1:] > n_before[:-1]
        new_file = recs.source[1:] != recs.source[:-1]
        boundary[1:] = back | marked | new_file
    return n_before, boundary


def _place(
    recs: _Records, events: list[tuple[int, EventBase]], files: list[str]
) -> tuple[list[tuple[int, EventBase]], np.ndarray, np.ndarray]:
    """Turn launch markers into restarts (or drop the first launch), give every event
    its segment, and the step of the record before it where it has none. Also returns
    each record's segment and whether it opens a fresh start (resume step 0)."""
    markers = [(p, e) for p, e in events if isinstance(e, Restart)]
    crashes = [(p, e) for p, e in events if isinstance(e, HardwareFailure)]
    mpos = np.array([p for p, _ in markers], dtype=np.int64)
    opos = np.array([p for p, e in events if isinstance(e, OverflowSkip)], dtype=np.int64)
    n = len(recs.pos)
    n_before, boundary = _boundaries(recs, mpos, np.sort(opos))
    segment = np.cumsum(boundary)
    fresh = np.zeros(n, dtype=bool)
    out: list[tuple[int, EventBase]] = []
    starts: list[int] = []  # position where each segment after the first begins
    # before the first record: the run's first launch, and attempts that failed
    head = markers[: int(n_before[0])] if n else markers
    first_step = int(recs.step[0]) if n and recs.has_step[0] else None
    for k, (p, e) in enumerate(head):
        last = k == len(head) - 1
        if k == 0 and not (e.resume_step or 0) > 0:
            continue  # a launch from scratch with nothing before it
        _fill(e, 0, first_step if last and n else None, None, _cause(crashes, -1, p))
        out.append((p, e))
    for i in np.flatnonzero(boundary):
        gap = markers[int(n_before[i - 1]) : int(n_before[i])]
        starts.append(gap[0][0] if gap else int(recs.pos[i]))
        made = _boundary_restarts(recs, int(i), gap, int(segment[i]), crashes, files)
        fresh[i] = made[-1][1].resume_step == 0
        out += made
    if n:
        last_seg, last_step = int(segment[-1]), recs.prev_step(n)
        lo = int(recs.pos[-1])
        for k, (p, e) in enumerate(markers[int(n_before[-1]) :]):
            starts.append(p)
            _fill(e, last_seg + k + 1, None, last_step, _cause(crashes, lo, p))
            out.append((p, e))
            lo = p
    others = [(p, e) for p, e in events if not isinstance(e, Restart)]
    where = np.array([p for p, _ in others], dtype=np.int64)
    segs = np.searchsorted(np.array(starts, dtype=np.int64), where, side="right").tolist()
    befores = (np.searchsorted(recs.pos, where, side="right") - 1).tolist()
    for (p, e), seg, before in zip(others, segs, befores, strict=True):
        e.segment = seg
        after = before + 1
        if e.step is None and _setting(e) and after < n and recs.has_step[after]:
            # a setting echoed at start-up holds from the launch's first record on
            e.step = int(recs.step[after])
            e.segment = int(segment[after])
            e.step_source = e.step_source or "record"
        elif e.step is None and before >= 0 and recs.has_step[before]:
            e.step = int(recs.step[before])
            e.step_source = e.step_source or "record"
        out.append((p, e))
    out.sort(key=lambda pe: pe[0])
    _previous_settings([e for _, e in out])
    return out, segment, fresh


def _setting(e: EventBase) -> bool:
    """A setting a launch states (``Overriding: learning_rate = 0.06``): an LR or
    config change without a step of its own."""
    return isinstance(e, ConfigChange) or (isinstance(e, LrChange) and e.manual)


def _previous_settings(events: list[EventBase]) -> None:
    """A setting stated again at a later launch gets the value the earlier one stated
    as its ``old`` (where its line did not say)."""
    seen: dict[str, float | str | None] = {}
    for e in events:
        if isinstance(e, LrChange) and e.manual:
            if e.old is None and "lr" in seen:
                e.old = seen["lr"]  # type: ignore[assignment]
            seen["lr"] = e.new
        elif isinstance(e, ConfigChange):
            if e.old is None and e.key in seen:
                e.old = seen[e.key]
            seen[e.key] = e.new


def _boundary_restarts(
    recs: _Records,
    i: int,
    gap: list[tuple[int, EventBase]],
    seg: int,
    crashes: list[tuple[int, EventBase]],
    files: list[str],
) -> list[tuple[int, EventBase]]:
    """The restarts between record ``i - 1`` and record ``i``: launches that produced
    no record, then the launch of record ``i``."""
    last = recs.prev_step(i)
    new_step = int(recs.step[i]) if recs.has_step[i] else None
    lo = int(recs.pos[i - 1])
    out: list[tuple[int, EventBase]] = []
    for p, e in gap[:-1]:
        _fill(e, seg, None, last, _cause(crashes, lo, p))
        out.append((p, e))
        lo = p
    if gap:
        p, r = gap[-1]
    else:
        p, r = int(recs.pos[i]), Restart(text=_why(recs, i, last, new_step, files))
        r.source = Source(file=files[int(recs.source[i])], line=p & ((1 << _LINE_BITS) - 1))
    _fill(r, seg, new_step, last, _cause(crashes, lo, p))
    if r.resume_step is None and new_step is not None:
        r.resume_step = _guess_resume(new_step, last, recs.interval)
    if r.resume_step is not None and last is not None:
        r.lost_steps = max(0, last - r.resume_step)
    r.gap_s = _gap(recs.times, i)
    out.append((p, r))
    return out


def _guess_resume(new_step: int, last: int | None, interval: int) -> int:
    """Resume step of a launch that does not state it: a step that went back to at most
    ``max(10, log interval)`` is a fresh start (0); otherwise the launch resumed right
    before its first record (a step that went on past the last one is always that)."""
    went_back = last is not None and new_step <= last
    fresh = went_back and new_step <= max(FRESH_START_MAX_STEP, interval)
    return 0 if fresh else new_step - 1


def _why(recs: _Records, i: int, last: int | None, new: int | None, files: list[str]) -> str:
    if recs.source[i] != recs.source[i - 1]:
        return f"next log file: {files[int(recs.source[i])]}"
    return f"step went from {last} back to {new}"


def _fill(e: EventBase, seg: int, step: int | None, last: int | None, cause: str | None):
    e.segment = seg
    e.step = step
    if isinstance(e, Restart):
        e.last_step_before = last
        if e.resume_step is not None and last is not None:
            e.lost_steps = max(0, last - e.resume_step)
        e.cause = e.cause or cause


def _previous_valid(step_np: np.ndarray, has_step: np.ndarray) -> np.ndarray:
    """For each record, the step of the closest earlier record that has one (-1: none)."""
    idx = np.where(has_step, np.arange(len(step_np)), -1)
    idx = np.maximum.accumulate(idx) if len(idx) else idx
    prev = np.full(len(step_np), -1, dtype=np.int64)
    prev[1:] = np.where(idx[:-1] >= 0, step_np[np.maximum(idx[:-1], 0)], -1)
    return prev


def _log_interval(steps: np.ndarray) -> int:
    d = np.diff(steps)
    d = d[d > 0]
    return int(np.median(d)) if d.size else 1


def _gap(times: pl.Series | None, i: int) -> float | None:
    if times is None:
        return None
    a, b = times[i - 1], times[i]
    if a is None or b is None:
        return None
    return (b - a).total_seconds()


def _cause(crashes: list[tuple[int, EventBase]], lo: int, hi: int) -> str | None:
    """The causes of the crashes between positions ``lo`` and ``hi`` (``crashes`` is
    sorted by position)."""
    a = bisect.bisect_right(crashes, lo, key=lambda pe: pe[0])
    b = bisect.bisect_left(crashes, hi, key=lambda pe: pe[0])
    causes = [e.cause for _, e in crashes[a:b] if isinstance(e, HardwareFailure)]
    return ", ".join(dict.fromkeys(causes)) if causes else None


def _derived_events(
    metrics: pl.DataFrame, have: list[EventBase], files: list[str]
) -> list[tuple[int, EventBase]]:
    """Loss-scale changes and non-finite values read off the metric columns, unless a
    parser already reported the same event."""
    seen = {(e.kind, e.step, getattr(e, "metric", None)) for e in have}
    out: list[tuple[int, EventBase]] = []
    if "loss_scale" in metrics.columns:
        for p, step, seg, src, line, new, old in _scale_changes(metrics).iter_rows():
            if ("loss_scale_change", step, None) in seen:
                continue
            src_ = Source(file=files[src], line=line)
            out.append((p, LossScaleChange(step=step, segment=seg, old=old, new=new, source=src_)))
    cols = [c for c in _NONFINITE_COLUMNS if c in metrics.columns and metrics.schema[c].is_float()]
    if not cols:
        return out
    # one pass over the rows picks those with any non-finite value; then column by column
    bad = metrics.select(*_WHERE, *cols).filter(
        pl.any_horizontal(~pl.col(c).is_finite() for c in cols)
    )
    for col in cols:
        rows = bad.select(*_WHERE, col).filter(~pl.col(col).is_finite())
        for p, step, seg, src, line, v in rows.iter_rows():
            if ("nonfinite", step, col) in seen:
                continue
            value = "nan" if v != v else ("inf" if v > 0 else "-inf")
            src_ = Source(file=files[src], line=line)
            out.append((p, Nonfinite(step=step, segment=seg, metric=col, value=value, source=src_)))
    return out


_WHERE = ["_pos", "step", "segment", "source", "line"]


def _scale_changes(metrics: pl.DataFrame) -> pl.DataFrame:
    """Records whose loss scale differs from the previous record that has one, within
    one epoch (``_epoch``: launches since the last fresh start; its rows are
    consecutive, so the previous row's epoch tells whether it is the same one)."""
    scale, epoch = pl.col("loss_scale"), pl.col("_epoch")
    old = pl.when(epoch.shift(1) == epoch).then(scale.shift(1))
    return (
        metrics.lazy()
        .select(*_WHERE, "loss_scale", "_epoch")
        .filter(scale.is_not_null())
        .with_columns(old.alias("_old"))
        .filter(pl.col("_old").is_not_null() & (pl.col("_old") != scale))
        .select(*_WHERE, "loss_scale", "_old")
        .collect()
    )
