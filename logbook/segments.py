"""Stitch parsed files into one run: order the files, assign segments, build restarts.

A new segment opens where a step does not advance (a rewind, or a fresh launch that
starts over) or where a parser saw launch evidence (a checkpoint load, a start-up
banner) between two records. Each boundary gets one ``restart`` event with the resume
step, the last step before it, the recomputed steps, the wall-clock gap and the cause
(crash evidence seen since the previous record).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from logbook.parsed import Parsed
from logbook.schema import (
    EventBase,
    HardwareFailure,
    LossScaleChange,
    Nonfinite,
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


def stitch(parts: list[Parsed], files: list[str]) -> tuple[pl.DataFrame, list[EventBase]]:
    """Concatenate ordered parts (``files`` names them) into one metrics frame and one
    event list."""
    frames = [
        p.metrics.with_columns(pl.lit(i, dtype=pl.Int32).alias("source"))
        for i, p in enumerate(parts)
    ]
    if not frames or all(f.height == 0 for f in frames):
        return pl.DataFrame(), [e for p in parts for e in p.events]
    metrics = pl.concat(frames, how="diagonal_relaxed")
    events: list[tuple[int, EventBase]] = []
    for i, p in enumerate(parts):
        for e in p.events:
            events.append((_pos(i, e.source.line if e.source else None), e))
    events.sort(key=lambda pe: pe[0])
    metrics = metrics.with_columns(
        ((pl.col("source").cast(pl.Int64) * (1 << _LINE_BITS)) + pl.col("line").fill_null(0)).alias(
            "_pos"
        )
    ).sort("_pos", maintain_order=True)
    metrics, placed = _segment(metrics, events)
    placed += _derived_events(metrics, [e for _, e in placed], files)
    placed.sort(key=lambda pe: pe[0])
    return metrics.drop("_pos"), [e for _, e in placed]


def _segment(
    metrics: pl.DataFrame, events: list[tuple[int, EventBase]]
) -> tuple[pl.DataFrame, list[tuple[int, EventBase]]]:
    pos = metrics.get_column("_pos").to_numpy()
    steps = metrics.get_column("step")
    step_np = steps.fill_null(-1).to_numpy()
    has_step = steps.is_not_null().to_numpy()
    markers = [(p, e) for p, e in events if isinstance(e, Restart)]
    mpos = np.array([p for p, _ in markers], dtype=np.int64)
    n_before = np.searchsorted(mpos, pos, side="left")  # markers before each record
    back = np.zeros(len(pos), dtype=bool)
    prev_step = _previous_valid(step_np, has_step)
    back[1:] = has_step[1:] & (prev_step[1:] >= 0) & (step_np[1:] <= prev_step[1:])
    marked = np.zeros(len(pos), dtype=bool)
    marked[1:] = n_before[1:] > n_before[:-1]
    boundary = back | marked
    segment = np.cumsum(boundary).astype(np.int32)
    metrics = metrics.with_columns(pl.Series("segment", segment, dtype=pl.Int32))

    interval = _log_interval(step_np[has_step])
    times = metrics.get_column("time") if "time" in metrics.columns else None
    used: set[int] = set()
    out: list[tuple[int, EventBase]] = []
    bpos: list[int] = []  # where each boundary takes effect, for event segments
    for i in np.flatnonzero(boundary):
        between = [k for k in range(n_before[i - 1], n_before[i])]
        marker = markers[between[-1]][1] if between else None
        start_pos = markers[between[0]][0] if between else int(pos[i])
        bpos.append(start_pos)
        used.update(between)
        new_step = int(step_np[i]) if has_step[i] else None
        last = int(prev_step[i]) if prev_step[i] >= 0 else None
        r = _restart(marker, new_step, last, interval)
        r.segment = int(segment[i])
        r.gap_s = _gap(times, i)
        r.cause = _cause(events, int(pos[i - 1]), int(pos[i]))
        if marker is None:
            r.text = f"step went from {last} back to {new_step}"
            r.source = None
        out.append((markers[between[-1]][0] if between else int(pos[i]), r))
        for k in between[:-1]:  # launches that produced no record (aborted attempts)
            markers[k][1].segment = int(segment[i])
            markers[k][1].step = new_step
            out.append(markers[k])
    for k, (p, e) in enumerate(markers):
        if k in used:
            continue
        seg_here = int(np.searchsorted(np.array(bpos, dtype=np.int64), p, side="right"))
        e.segment = seg_here
        if e.step is None:
            nxt = np.searchsorted(pos, p)
            e.step = int(step_np[nxt]) if nxt < len(pos) and has_step[nxt] else None
        if (
            p < pos[0]
            and e.resume_step is None
            and k == len([m for m in markers if m[0] < pos[0]]) - 1
        ):
            continue  # the run's own first launch from scratch is not a restart
        out.append((p, e))
    bpos_np = np.array(bpos, dtype=np.int64)
    for p, e in events:
        if isinstance(e, Restart):
            continue
        e.segment = int(np.searchsorted(bpos_np, p, side="right"))
        if e.step is None:
            before = np.searchsorted(pos, p, side="right") - 1
            if before >= 0 and has_step[before]:
                e.step = int(step_np[before])
        out.append((p, e))
    out.sort(key=lambda pe: pe[0])
    return metrics, out


def _previous_valid(step_np: np.ndarray, has_step: np.ndarray) -> np.ndarray:
    """For each record, the step of the closest earlier record that has one (-1: none)."""
    idx = np.where(has_step, np.arange(len(step_np)), -1)
    idx = np.maximum.accumulate(idx)
    prev = np.full(len(step_np), -1, dtype=np.int64)
    prev[1:] = np.where(idx[:-1] >= 0, step_np[np.maximum(idx[:-1], 0)], -1)
    return prev


def _log_interval(steps: np.ndarray) -> int:
    d = np.diff(steps)
    d = d[d > 0]
    return int(np.median(d)) if d.size else 1


def _restart(marker: Restart | None, new_step: int | None, last: int | None, interval: int):
    r = marker if marker is not None else Restart()
    r.step = new_step
    r.last_step_before = last
    if r.resume_step is None and new_step is not None:
        fresh = new_step <= max(FRESH_START_MAX_STEP, interval)
        r.resume_step = 0 if fresh else new_step - 1
    if r.resume_step is not None and last is not None:
        r.lost_steps = max(0, last - r.resume_step)
    return r


def _gap(times: pl.Series | None, i: int) -> float | None:
    if times is None:
        return None
    a, b = times[i - 1], times[i]
    if a is None or b is None:
        return None
    return (b - a).total_seconds()


def _cause(events: list[tuple[int, EventBase]], lo: int, hi: int) -> str | None:
    causes = [e.cause for p, e in events if lo < p < hi and isinstance(e, HardwareFailure)]
    return ", ".join(dict.fromkeys(causes)) if causes else None


def _derived_events(
    metrics: pl.DataFrame, have: list[EventBase], files: list[str]
) -> list[tuple[int, EventBase]]:
    """Loss-scale changes and non-finite values read off the metric columns, unless a
    parser already reported the same event."""
    seen = {(e.kind, e.step, getattr(e, "metric", None)) for e in have}
    out: list[tuple[int, EventBase]] = []
    if "loss_scale" in metrics.columns:
        ls = (
            metrics.filter(pl.col("loss_scale").is_not_null())
            .select(
                "_pos",
                "step",
                "segment",
                "source",
                "line",
                "loss_scale",
                pl.col("loss_scale").shift(1).alias("old"),
            )
            .filter(pl.col("old").is_not_null() & (pl.col("old") != pl.col("loss_scale")))
        )
        for p, step, seg, src, line, new, old in ls.iter_rows():
            if ("loss_scale_change", step, None) in seen:
                continue
            out.append(
                (
                    p,
                    LossScaleChange(
                        step=step,
                        segment=seg,
                        old=old,
                        new=new,
                        source=Source(file=files[src], line=line),
                    ),
                )
            )
    for col in _NONFINITE_COLUMNS:
        if col not in metrics.columns:
            continue
        bad = metrics.filter(~pl.col(col).is_finite()).select(
            "_pos", "step", "segment", "source", "line", col
        )
        for p, step, seg, src, line, v in bad.iter_rows():
            if ("nonfinite", step, col) in seen:
                continue
            value = "nan" if v != v else ("inf" if v > 0 else "-inf")
            out.append(
                (
                    p,
                    Nonfinite(
                        step=step,
                        segment=seg,
                        metric=col,
                        value=value,
                        source=Source(file=files[src], line=line),
                    ),
                )
            )
    return out
