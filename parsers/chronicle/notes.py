"""Put a team's logbook next to the metrics: chronicle events on the run's step axis.

``attach_notes`` parses chronicle files and merges their events into a run read from
its metric logs. An event that states its step keeps it (``step_source: "text"``); an
event with only a time gets the step of the last metric record at or before that time
(``step_source: "time"``, a polars ``join_asof`` on the metrics' ``time`` column) and
that record's segment (a restart: the segment of the first record after it). Events
before the first timed record, or more than ``AFTER_END`` after the last one, are left
without a step: the log does not cover them.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import polars as pl

from logbook.parsed import Parsed
from logbook.run import ParseStats, Run, RunMeta, empty_metrics
from logbook.schema import EventBase
from logbook.textio import read_lines
from parsers.accounting import count_lines
from parsers.chronicle import parse_chronicle

# a note written this long after the last record (the crash, the requeue) is still placed
AFTER_END = timedelta(hours=6)


def parse_notes(
    path: str | Path, tz: str = "UTC", excerpts: bool = True
) -> tuple[Parsed, ParseStats]:
    """Parse one chronicle file, reading times written without a zone in ``tz``."""
    lines, text = read_lines(path)
    parsed = parse_chronicle(lines, str(path), tz, excerpts=excerpts)
    stats = ParseStats(
        file=str(path),
        format="chronicle",
        lines=text.lines,
        records=parsed.metrics.height,
        first_unrecognized=parsed.unrecognized.head(5).to_list(),
        invalid_utf8_lines=len(text.invalid_utf8_lines),
        crlf=text.crlf,
        gzip=text.gzip,
        events=len(parsed.events),
        **count_lines(parsed, text.lines),
    )
    return parsed, stats


def read_notes(paths: list[str | Path], tz: str = "UTC") -> Run:
    """Chronicle files as a run of their own (``logbook parse CHRONICLE.md --tz ET``).

    Not stitched like job logs: a chronicle's restarts are what the team wrote down
    (the first launch included), and records quoted from logs stay in file order,
    segment 0."""
    results = [parse_notes(p, tz) for p in paths]
    frames = [
        p.metrics.with_columns(pl.lit(i, dtype=pl.Int32).alias("source"))
        for i, (p, _) in enumerate(results)
        if p.metrics.height
    ]
    metrics = pl.concat(frames, how="diagonal_relaxed") if frames else empty_metrics()
    metrics = metrics.with_columns(pl.lit(0, dtype=pl.Int32).alias("segment"))
    events = [e for p, _ in results for e in p.events]
    meta = RunMeta(format="chronicle", sources=[s.file for _, s in results])
    _merge_meta(meta, [p for p, _ in results], [s for _, s in results])
    return Run(metrics=metrics, events=events, meta=meta)


def attach_notes(run: Run, notes_paths: list[Path], tz: str = "UTC") -> Run:
    """The run with the events of its chronicles added and placed on its steps.

    Log lines quoted in a chronicle are read as text (their records would duplicate the
    metric log's); facts in them (an ECC error, a script edit) still become events.
    """
    if not notes_paths:
        return run
    results = [parse_notes(p, tz, excerpts=False) for p in notes_paths]
    events = [e for parsed, _ in results for e in parsed.events]
    unplaced = align(events, run.metrics, run.trajectory())
    meta = run.meta.model_copy(deep=True)
    meta.sources += [s.file for _, s in results]
    _merge_meta(meta, [p for p, _ in results], [s for _, s in results])
    if unplaced:
        meta.caveats.append(
            f"{unplaced} chronicle event(s) fall outside the metric log's time span: no step"
        )
    kept, apart, repeated = _on_the_log(events, run)
    if apart:
        lo, hi = _step_range(run)
        meta.unplaced_notes = [e.model_dump(mode="json", exclude_none=True) for e in apart]
        meta.caveats.append(
            f"{len(apart)} chronicle event(s) not on the log's steps {lo}..{hi} (no step, or "
            "outside them): listed apart, not on the timeline"
        )
    if repeated:
        meta.caveats.append(f"{repeated} chronicle restart(s) told twice: kept once")
    return Run(metrics=run.metrics, events=[*run.events, *kept], meta=meta)


def _step_range(run: Run) -> tuple[int | None, int | None]:
    steps = run.metrics.get_column("step").drop_nulls() if run.metrics.height else None
    if steps is None or steps.len() == 0:
        return None, None
    return int(steps.min()), int(steps.max())  # type: ignore[arg-type]


def _on_the_log(events: list[EventBase], run: Run) -> tuple[list[EventBase], list, int]:
    """The chronicle's events on the log's steps; those without a step or outside the
    log's steps (a chronicle tells the whole run, the log may hold a piece of it); and
    how many restarts were told again (the same step and resume step, by the log or the
    notes)."""
    lo, hi = _step_range(run)
    if lo is None or hi is None:
        return events, [], 0

    def said(e: EventBase) -> tuple | None:
        resume = getattr(e, "resume_step", None)
        return (e.step, resume) if e.kind == "restart" and resume is not None else None

    told = {said(e) for e in run.events} - {None}
    kept: list[EventBase] = []
    apart: list[EventBase] = []
    repeated = 0
    for e in events:
        if e.step is None or not lo <= e.step <= hi:
            apart.append(e)
        elif said(e) is not None and said(e) in told:
            repeated += 1  # the same restart (step and resume step) told again
        else:
            kept.append(e)
            told.add(said(e))
    return kept, apart, repeated


def _merge_meta(meta: RunMeta, parts: list[Parsed], stats: list[ParseStats]) -> None:
    lineage = dict(getattr(meta, "lineage", None) or {})
    for p in parts:
        lineage.update(p.meta.get("lineage", {}))
        meta.caveats += [c for c in p.meta.get("caveats", []) if c not in meta.caveats]
    meta.parse += stats
    if lineage:
        meta.lineage = dict(sorted(lineage.items()))


def align(events: list[EventBase], metrics: pl.DataFrame, trajectory: pl.DataFrame) -> int:
    """Give events their step and segment from the metrics (in place). Returns how many
    timed events without a stated step could not be placed."""
    timed = [i for i, e in enumerate(events) if e.time is not None]
    placed: set[int] = set()
    records = _timed_records(metrics)
    if timed and records.height:
        last = records.get_column("time").max() + AFTER_END
        frame = pl.DataFrame(
            {"i": timed, "time": [events[i].time for i in timed]},
            schema={"i": pl.Int64, "time": pl.Datetime("us", "UTC")},
        ).sort("time")
        joined = frame.join_asof(records, on="time", strategy="backward")
        ahead = frame.join_asof(records, on="time", strategy="forward")
        later = dict(zip(ahead.get_column("i"), ahead.get_column("segment"), strict=True))
        for i, when, step, segment in joined.iter_rows():
            if step is None or when > last:
                continue
            e = events[i]
            # a restart opens the segment of the first record after it
            restart = e.kind == "restart" and later.get(i) is not None
            e.segment = later[i] if restart else segment
            if e.step is None:
                e.step, e.step_source = step, "time"
            placed.add(i)
    _segments_from_steps([e for i, e in enumerate(events) if i not in placed], trajectory)
    return sum(1 for i in timed if i not in placed and events[i].step is None)


def _timed_records(metrics: pl.DataFrame) -> pl.DataFrame:
    if "time" not in metrics.columns or metrics.height == 0:
        return pl.DataFrame(
            schema={"time": pl.Datetime("us", "UTC"), "step": pl.Int64, "segment": pl.Int32}
        )
    return (
        metrics.select("time", "step", "segment")
        .filter(pl.col("time").is_not_null() & pl.col("step").is_not_null())
        .sort("time")
    )


def _segments_from_steps(events: list[EventBase], trajectory: pl.DataFrame) -> None:
    """An event with a stated step but no usable time: the segment that reached that
    step and survived (the trajectory's)."""
    stepped = [e for e in events if e.step is not None]
    if not stepped or trajectory.height == 0:
        return
    frame = pl.DataFrame({"k": range(len(stepped)), "step": [e.step for e in stepped]}).sort("step")
    traj = trajectory.select("step", "segment").sort("step")
    for k, _, segment in frame.join_asof(traj, on="step", strategy="backward").iter_rows():
        if segment is not None:
            stepped[k].segment = segment
