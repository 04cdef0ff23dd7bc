"""Several runs in one input: where a file holds more than one run, and its blocks.

A step that goes back (or repeats, with other values) is a relaunch of the same run
only when the log says so: a launch or checkpoint-load line before it (the parsers'
``restart`` markers), or a resume at a step past the run's start (a rewind to a
checkpoint). A step printed again after an fp16 overflow skipped it, or with another
loss scale, is that step retried. A file whose steps go back to where its run began, with no launch
evidence, holds another run appended (two jobs writing one ``metrics.json``, two
pastes in one excerpt); so does one whose clock goes back, and one whose script said
it finished training before its steps went back. Such a file is cut into
blocks, one per run; nothing is invented as a restart.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from logbook.parsed import Parsed
from logbook.run import ParseStats
from parsers.accounting import Counts, count_lines

_LAUNCH = ("restart",)


def launch_lines(events: list, kinds: tuple[str, ...]) -> np.ndarray:
    """The sorted lines of the events of those kinds (launches, crashes)."""
    lines = [e.source.line for e in events if e.kind in kinds and e.source and e.source.line]
    return np.sort(np.array(lines, dtype=np.int64))


def run_starts(part: Parsed) -> list[int]:
    """Line numbers at which a new run begins inside ``part`` (none: one run)."""
    m = part.metrics
    if m.height < 2 or "step" not in m.columns:
        return []
    steps = m.get_column("step").to_numpy(allow_copy=True)
    lines = m.get_column("line").to_numpy(allow_copy=True)
    if np.isnan(steps.astype(float)).all():
        return []
    marks = launch_lines(part.events, _LAUNCH)
    skips = launch_lines(part.events, ("overflow_skip",))
    ends = np.array(part.meta.get("ends") or [], dtype=np.int64)  # clean ends of training
    scale = m.get_column("loss_scale").cast(pl.Float64).to_numpy() if "loss_scale" in m else None
    times = _seconds(m)
    epochs = m.get_column("epoch").cast(pl.Float64).to_numpy() if "epoch" in m.columns else None
    loss = m.get_column("loss").cast(pl.Float64).to_numpy() if "loss" in m.columns else None
    steps = steps.astype(float)
    start = 0  # the index of the run's first record
    down = np.flatnonzero(steps[1:] <= steps[:-1]) + 1  # candidates only: the rest advance
    out: list[int] = []
    first = steps[0]  # the first step of the run the records belong to
    for i in down:
        a, b = steps[i - 1], steps[i]
        clock_back = times is not None and times[i] < times[i - 1]
        evidence = np.searchsorted(marks, lines[i]) > np.searchsorted(marks, lines[i - 1])
        # a repeated first step too (a second job's first record): another run
        # a counter that restarts with the next epoch is the same run going on
        next_epoch = epochs is not None and epochs[i] > epochs[i - 1]
        # a step printed again after an overflow skipped it (the step is retried)
        retried = b == a and (
            np.searchsorted(skips, lines[i]) > np.searchsorted(skips, lines[i - 1])
            or (scale is not None and scale[i] != scale[i - 1])
        )
        # a step that goes back after the script said it finished: another run
        ended = np.searchsorted(ends, lines[i]) > np.searchsorted(ends, lines[i - 1])
        # a counter that starts over while the loss goes on from where a run that had
        # learned left it: that run resumed with its step lost, not another from scratch
        goes_on = loss is not None and _goes_on(loss[start], loss[i - 1], loss[i])
        if (
            (not b > first and not evidence and not next_epoch and not retried and not goes_on)
            or (b < a and clock_back)
            or (ended and not evidence)
        ):
            out.append(int(lines[i]))
            first, start = b, i
    return out


LEARNT = 0.6  # a run's loss this far below its first one has learnt
GOES_ON = 0.25  # a loss within this (relative) of the one before goes on from it


def _goes_on(first: float, before: float, after: float) -> bool:
    if not (np.isfinite(first) and np.isfinite(before) and np.isfinite(after)) or first <= 0:
        return False
    learnt = 0 < before < LEARNT * first
    return learnt and abs(after - before) <= GOES_ON * before


def fresh_start(group: list[tuple[Parsed, ParseStats]], part: Parsed) -> bool:
    """Whether ``part``, the next writer of a directory of runs (a TensorBoard writer
    root), starts another run: it comes from another root, begins back at the run's
    first step, and no launch line says it resumed."""
    prev = group[-1][0].meta.get("run_dir")
    mine = part.meta.get("run_dir")
    if prev is None or mine is None or prev == mine or part.metrics.height == 0:
        return False
    if any(e.kind == "restart" for e in part.events):
        return False
    first = [g[0].metrics.get_column("step").drop_nulls() for g in group]
    start = min((s.min() for s in first if s.len()), default=None)
    mine_first = part.metrics.get_column("step").drop_nulls()
    return start is not None and mine_first.len() > 0 and mine_first.min() <= start


def _seconds(m: pl.DataFrame) -> np.ndarray | None:
    if "time" not in m.columns or m.get_column("time").null_count() == m.height:
        return None
    t = m.get_column("time").dt.epoch("us").cast(pl.Float64).fill_null(strategy="forward")
    return t.fill_null(-np.inf).to_numpy()


def split_part(
    part: Parsed, stats: ParseStats, starts: list[int]
) -> list[tuple[Parsed, ParseStats]]:
    """``part`` cut before each line in ``starts``: one (part, stats) per block."""
    bounds = [0, *starts, stats.lines + 1 if stats.lines else 2**62]
    out = []
    left = part.ignored  # the file's ignored lines, given to the blocks in order
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        m = part.metrics.filter((pl.col("line") >= lo) & (pl.col("line") < hi))
        evs = [e for e in part.events if e.source and lo <= (e.source.line or 0) < hi]
        unrec = part.unrecognized.filter((part.unrecognized >= lo) & (part.unrecognized < hi))
        block = Parsed(metrics=m, events=evs, meta=dict(part.meta), unrecognized=unrec)
        first = max(lo, 1)
        room = count_lines(block, stats.lines, first, hi - 1, ignored=0)["continuation_lines"]
        block.ignored = min(left, room)
        left -= block.ignored
        counts = count_lines(block, stats.lines, first, hi - 1)
        span = (min(hi, stats.lines + 1) - first) if stats.lines else 0
        st = stats.model_copy(
            update={
                "records": m.height,
                "first_unrecognized": unrec.head(5).to_list(),
                "lines": span,
                "first_line": first,
                **counts,
            }
        )
        out.append((block, st))
    if left and out:  # more ignored lines than the blocks had room for: counted twice
        st = out[-1][1]
        out[-1] = (out[-1][0], st.model_copy(update={"overcounted": st.overcounted + left}))
    return out


def by_run_column(part: Parsed, stats: ParseStats) -> list[tuple[Parsed, ParseStats]]:
    """A part whose records name their run (``_run``: a W&B export of several runs), one
    part per run in the order they come; the line accounting stays with the first."""
    if "_run" not in part.metrics.columns:
        return [(part, stats)]
    names = list(dict.fromkeys(part.metrics.get_column("_run").to_list()))
    if not names:  # a header and no rows: one empty run, its lines still counted
        part.metrics = part.metrics.drop("_run")
        return [(part, stats)]
    out = []
    for k, name in enumerate(names):
        m = part.metrics.filter(pl.col("_run") == name).drop("_run")
        evs = [e for e in part.events if e.run == name]
        meta = {**part.meta, "run": name}
        block = Parsed(
            metrics=m,
            events=evs,
            meta=meta,
            unrecognized=part.unrecognized if k == 0 else part.unrecognized.clear(),
            ignored=part.ignored if k == 0 else 0,
        )
        update: dict = {"records": m.height}
        if k:  # the lines were counted with the first run
            update.update(dict.fromkeys(Counts.__annotations__, 0), lines=0, first_unrecognized=[])
        st = stats.model_copy(update=update)
        out.append((block, st))
    return out


def several_runs(part: Parsed) -> list[str]:
    """The runs a part's records name (``_run``), if more than one."""
    if "_run" not in part.metrics.columns:
        return []
    names = list(dict.fromkeys(part.metrics.get_column("_run").to_list()))
    return names if len(names) > 1 else []
