"""The reader's passes over a file: shapes and templates, records, events, and the
account of every line."""

from __future__ import annotations

import re

import numpy as np
import polars as pl

from logbook.blocks import LineBlocks
from logbook.parsed import Parsed
from logbook.schema import EventBase, HardwareFailure, OverflowSkip, Source, Validation
from parsers.reader import Spec, events
from parsers.reader.dumps import read_dumps
from parsers.reader.numbers import NUMBER_RE
from parsers.reader.passes import two_passes
from parsers.reader.records import (
    dedupe,
    finished,
    in_epochs,
    logging_steps,
    numbered,
    template_records,
)
from parsers.reader.shapes import prepared, templates_of, with_kinds
from parsers.reader.templates import Template
from parsers.settings import change_events

# collector comments, elisions, a paste's markdown fences
COMMENT = r"^#(?:\s|$|-{3,})|^\[\.\.\.\]$|^\(\.\.\.\)$|^\.\.\.$|^(?:```|~~~)[\w+.-]*$"
# a banner between stars: the Trainer's ``***** Running training *****``
BANNER = r"(?:^|\s)\*{3,} [^*]+ \*{3,}\s*$"
_EVAL_PREFIXES = ("eval_", "val_", "valid_", "validation_", "test_")


def read_frame(lines: pl.DataFrame | LineBlocks, name: str, spec: Spec) -> Parsed:
    """The records, events and line account of a file (its frame of lines, or its
    blocks: see :mod:`.passes`)."""
    if isinstance(lines, LineBlocks):
        df, temps, frames, stated = two_passes(lines, spec)
    else:
        df = prepared(lines, spec)
        temps = templates_of(df, spec)
        df = with_kinds(df, temps)
        frames, stated = template_records(df, temps, spec), None
    records, continued = finished(frames, df, temps)
    records, epoch_lines = in_epochs(records, df)
    epoch_len = None
    if "_epoch_len" in records.columns:
        epoch_len = records.get_column("_epoch_len")[0]
        records = records.drop("_epoch_len")
    continued = pl.concat([continued, epoch_lines])
    found = records.get_column("line")
    # lines that may hold an event (launches, crashes, saves...): read once records are known
    # (a traceback's source line under its ``File "..."`` frame is code, not an event:
    # ``self.train(resume_from_checkpoint=resume_from_checkpoint)``)
    code = pl.col("indented") & pl.col("body").shift(1).str.starts_with('File "').fill_null(False)
    maybe = df.filter(
        (pl.col("kind") != "record").fill_null(True)
        & pl.col("body").str.contains(events.ANY)
        & ~code
    ).get_column("line")
    records, copies = dedupe(records, maybe)
    meta: dict = {"rank_copies": copies, "continued_lines": continued.len()}
    caveats = [f"{copies} per-rank copies or redraws of records dropped"] if copies else []
    if epoch_len is not None:
        how = "as the log states it" if epoch_len < 0 else "the largest step printed in one"
        caveats.append(
            f"the step counts within each epoch: counted over the epochs with"
            f" {abs(epoch_len)} steps an epoch ({how})"
        )
    if caveats:
        meta["caveats"] = caveats
    if records.height and records.get_column("step").null_count() == records.height:
        stated = stated if isinstance(lines, LineBlocks) else logging_steps(df)
        records, twins = numbered(records, stated, meta, _resumes(df, maybe))
        copies += twins
    # the lines copies stood on are ignored, unless a kept record shares one (records
    # glued onto one line)
    kept = records.get_column("line").implode()
    freed = int(found.unique().is_in(kept).not_().sum()) if copies else 0
    taken = pl.concat([found, continued])
    df = df.with_columns(pl.col("line").is_in(taken.implode()).alias("taken"))
    evs, event_lines = _events(df, temps, records, name, maybe)
    settings, echo = read_dumps(df)
    if echo:  # (a settings echo is no event: ``Training/evaluation parameters ...(``)
        spanned = set(echo)
        evs = [e for e in evs if not (e.source and e.source.line in spanned)]
        event_lines = event_lines.filter(~event_lines.is_in(pl.Series(echo).implode()))
    if settings:
        meta.update(settings)
        changed = _setting_changes(settings, records, name)
        evs = sorted([*evs, *changed], key=lambda e: e.source.line if e.source else 0)
        cited = pl.Series("line", [e.source.line for e in changed if e.source], pl.Int64)
        event_lines = pl.concat([event_lines.cast(pl.Int64), cited])
    # a line is used when one of its drawn states is; else unrecognized when one is
    free = df.filter(~pl.col("taken") & ~pl.col("line").is_in(event_lines.implode()))
    echoed = pl.col("line").is_in(pl.Series(echo, dtype=pl.Int64).implode())
    free = free.with_columns((_ignored() | echoed).alias("ign"))
    free = free.group_by("line", maintain_order=True).agg(pl.col("ign").all())
    n_ignored = int(free.get_column("ign").sum())
    unrec = free.filter(~pl.col("ign")).get_column("line")
    if "_total" in records.columns:
        total = records.get_column("_total").max()
        if total is not None:
            meta["train_iters"] = int(total)
        records = records.drop("_total")
    meta["columns_from"] = _columns_from(temps)
    ends = df.filter(~pl.col("taken") & pl.col("body").str.contains(events.END))
    if ends.height:
        meta["ends"] = ends.get_column("line").unique().sort().to_list()
    metrics = spec.convert(records) if spec.convert and records.height else records
    return Parsed(
        metrics=metrics, events=evs, meta=meta, unrecognized=unrec, ignored=n_ignored + freed
    )


def _resumes(df: pl.DataFrame, maybe: pl.Series) -> list[tuple[int, int]]:
    """(line, step) of each resume that states the step it goes on from."""
    said = pl.col("body").str.contains(events.RESUME)
    cand = df.filter(pl.col("line").is_in(maybe.implode()) & said)
    out = []
    for line, s in cand.select("line", "body").iter_rows():
        ev = events.read_event(s, line, "")
        if ev is not None and ev.kind == "restart" and ev.resume_step is not None:
            out.append((line, ev.resume_step))
    return out


def _setting_changes(settings: dict, records: pl.DataFrame, name: str) -> list[EventBase]:
    """Events of the settings a relaunch's echo changed (see :mod:`parsers.settings`)."""
    changes = settings.get("argument_changes") or []
    if not changes or not records.height:
        return []
    rec_lines = records.get_column("line").to_numpy()
    rec_steps = records.get_column("step").cast(pl.Float64).to_numpy()
    out = change_events(changes, rec_lines, rec_steps, name, "training arguments of a relaunch")
    for e in out:  # (the launch's first record gives the step and segment when stitched)
        e.step = None
    return out


def _events(
    df: pl.DataFrame,
    temps: dict[str, Template],
    records: pl.DataFrame,
    name: str,
    maybe: pl.Series,
) -> tuple[list[EventBase], pl.Series]:
    """Validation lines (by their template) and event lines (by pattern)."""
    out: list[EventBase] = []
    lines: list[int] = []
    rec_lines = records.get_column("line").to_numpy() if records.height else np.array([])
    rec_steps = (
        records.get_column("step").cast(pl.Float64).to_numpy() if records.height else np.array([])
    )
    free = df.filter(~pl.col("taken"))
    val = free.filter(pl.col("kind") == "validation")
    for line, s, shape in val.select("line", "body", pl.col("shape").cast(pl.String)).iter_rows():
        ev = _validation(s, temps[shape], line, name, rec_lines, rec_steps)
        if ev is not None:
            out.append(ev)
            lines.append(line)
    cand = free.filter(
        (pl.col("kind") != "validation").fill_null(True)
        & pl.col("line").is_in(maybe.implode())
        & ~pl.col("body").str.contains(COMMENT)  # (a note above a paste quoting an error)
    )
    found: list[EventBase] = []
    for line, s in cand.select("line", "body").iter_rows():
        ev = events.read_event(s, line, name)
        if ev is None:
            continue
        if ev.step is None and ev.kind in ("checkpoint_save", "lr_change"):
            ev.step = _step_before(line, rec_lines, rec_steps)
        elif ev.step is None and ev.kind == "nonfinite":  # said before the step's print
            i = int(np.searchsorted(rec_lines, line))
            if i < len(rec_steps) and np.isfinite(rec_steps[i]):
                ev.step, ev.step_source = int(rec_steps[i]), "record"
        lines.append(line)
        found.append(ev)
    found += _cut_tracebacks(free, found, lines, name, df)
    found += _glued_crashes(df, name, rec_lines, rec_steps)
    overflows = [e for e in found if e.kind == "overflow_skip"]
    if overflows:
        printed = _engine_steps(df)
        printed.update(zip(rec_lines.tolist(), rec_steps.tolist(), strict=True))
        _skipped_steps(overflows, rec_lines, rec_steps, printed)
    found.sort(key=lambda e: e.source.line if e.source else 0)
    for ev in found:
        if ev.kind == "overflow_skip" and out and _same_overflow(out[-1], ev):
            continue  # every rank says it: one event
        if ev.kind == "checkpoint_save" and _same_save(out, ev, rec_lines):
            continue  # ``Saving checkpoint at .../10`` then its ``Saving weights: 100%`` bar
        if ev.kind == "restart" and _same_resume(out, ev, rec_lines):
            continue  # one resume printed twice (two handlers on one logger)
        out.append(ev)
    out.sort(key=lambda e: e.source.line if e.source else 0)
    return out, pl.Series("line", lines, pl.Int64)


def _same_save(out: list[EventBase], ev: EventBase, rec_lines: np.ndarray) -> bool:
    """Whether a save line tells of the save before it: the same step (or none), no
    record between them."""
    prev = next((e for e in reversed(out) if e.kind == "checkpoint_save"), None)
    if prev is None or prev.source is None or ev.source is None:
        return False
    if prev.step is not None and ev.step is not None and prev.step != ev.step:
        return False
    lo, hi = prev.source.line or 0, ev.source.line or 0
    between = int(np.searchsorted(rec_lines, hi)) - int(np.searchsorted(rec_lines, lo, "right"))
    return between == 0


def _same_resume(out: list[EventBase], ev: EventBase, rec_lines: np.ndarray) -> bool:
    """Whether a resume line repeats the one just before it: the same step and words, no
    record between them."""
    prev = out[-1] if out else None
    if prev is None or prev.kind != "restart" or prev.source is None or ev.source is None:
        return False
    if getattr(prev, "resume_step", None) != getattr(ev, "resume_step", None):
        return False
    if (prev.text or "").strip() != (ev.text or "").strip():
        return False
    lo, hi = prev.source.line or 0, ev.source.line or 0
    between = int(np.searchsorted(rec_lines, hi)) - int(np.searchsorted(rec_lines, lo, "right"))
    return between == 0


def _glued_crashes(
    df: pl.DataFrame, name: str, rec_lines: np.ndarray, rec_steps: np.ndarray
) -> list[EventBase]:
    """Crash evidence glued onto a record line (a callback's message printed onto a
    progress bar: Keras' ``... - loss: 44.41Batch 3: Invalid loss, terminating
    training``): an event at that record's step. So is DeepSpeed's overflow message
    glued onto a bar (``... 16/6000 [...][<time>] [INFO] ... OVERFLOW! Rank 0 Skipping
    step``: the step the bar is on). The line stays a record line."""
    hit = df.filter(
        (pl.col("kind") == "record").fill_null(False)
        & (
            pl.col("body").str.contains(events.CRASH_ANY)
            | pl.col("body").str.contains(events.GLUED_OVERFLOW, literal=True)
        )
    )
    out: list[EventBase] = []
    for line, s in hit.select("line", "body").unique("line", maintain_order=True).iter_rows():
        ev = events.read_event(s, line, name)
        if isinstance(ev, OverflowSkip) and ev.step is not None:
            out.append(ev)
            continue
        if not isinstance(ev, HardwareFailure):
            continue
        at = np.flatnonzero(rec_lines == line)
        if ev.step is None and at.size and np.isfinite(rec_steps[at[0]]):
            ev.step, ev.step_source = int(rec_steps[at[0]]), "record"
        out.append(ev)
    return out


def _cut_tracebacks(
    free: pl.DataFrame, found: list[EventBase], lines: list[int], name: str, df: pl.DataFrame
) -> list[EventBase]:
    """Tracebacks cut before their exception (see ``events.cut_tracebacks``), also one
    begun on a record line (glued onto a progress bar's last redraw); ``lines`` gets
    the line numbers of those on lines of their own."""
    starts = free.filter(pl.col("body").str.contains(events.TRACEBACK_START))
    glued = df.filter(
        (pl.col("kind") == "record").fill_null(False)
        & pl.col("body").str.contains(events.TRACEBACK_GLUED)
    ).unique("line", maintain_order=True)
    on_records = set(glued.get_column("line").to_list())
    starts = pl.concat([starts.select("line", "body"), glued.select("line", "body")]).sort("line")
    if starts.height == 0:
        return []
    crash = sorted(e.source.line for e in found if e.kind == "hardware_failure" and e.source)
    out = events.cut_tracebacks(list(starts.iter_rows()), crash, name)
    lines += [e.source.line for e in out if e.source and e.source.line not in on_records]
    return [*out]


ENGINE_STEP = re.compile(r"\bstep=(\d{1,18}), skipped=\d")


def _engine_steps(df: pl.DataFrame) -> dict[int, float]:
    """{line: step} of DeepSpeed's engine prints (``step=N, skipped=K``) that are not
    records (beside a script's own records)."""
    hits = df.filter(pl.col("body").str.contains(ENGINE_STEP.pattern)).select("line", "body")
    out: dict[int, float] = {}
    for line, body in hits.iter_rows():
        m = ENGINE_STEP.search(body or "")
        if m:
            out[int(line)] = float(m.group(1))
    return out


def _engine(ev: EventBase) -> bool:
    """Whether an overflow line is DeepSpeed's engine's (``OVERFLOW! ... Skipping step``)."""
    return ev.source is not None and "OVERFLOW!" in (ev.text or "")


def _skipped_steps(
    overflows: list[EventBase],
    rec_lines: np.ndarray,
    rec_steps: np.ndarray,
    printed: dict[int, float] | None = None,
) -> None:
    """The steps that overflow lines without one skipped. Each overflow skips the
    iteration after the last one printed (an engine prints it as it skips: DeepSpeed's
    ``OVERFLOW! Rank 0 Skipping step``), so those between two records skipped the steps
    after the first, one each, up to the second; before the first record, the steps up
    to it. Lines of one loss scale (every rank says it) are one overflow. A DeepSpeed
    overflow on the line just before a print of step N (a record, or the engine's
    ``step=N, skipped=K``; ``printed``: {line: step}) is step N's own: its engine prints
    a step as it ends, skipped or not. (Another scaler's message, apex's ``Gradient
    overflow.  Skipping step``, says nothing of where in the interval it fell.)"""
    groups: dict[int, list[EventBase]] = {}
    for ev in overflows:
        if ev.step is None and ev.source is not None and ev.source.line is not None:
            groups.setdefault(int(np.searchsorted(rec_lines, ev.source.line)), []).append(ev)
    for i, evs in groups.items():
        prev = rec_steps[i - 1] if i > 0 and np.isfinite(rec_steps[i - 1]) else None
        nxt = rec_steps[i] if i < len(rec_steps) and np.isfinite(rec_steps[i]) else None
        order, n, last = [], -1, None
        for ev in evs:  # the position of each distinct overflow in the group
            scale = getattr(ev, "attempted_scale", None)
            key = (scale, getattr(ev, "new_scale", None)) if scale is not None else ev.text
            n += key != last
            order.append(n)
            last = key
        k = n + 1
        owns: dict[int, int] = {}  # (every rank's line of one overflow gets its step)
        for ev, n in zip(evs, order, strict=True):
            own = (printed or {}).get(ev.source.line + 1) if _engine(ev) else None
            if own is not None and np.isfinite(own) and (prev is None or own > prev):
                owns[n] = int(own)
        for ev, n in zip(evs, order, strict=True):
            if n in owns:
                ev.step = owns[n]
            elif prev is not None:
                step = prev + 1 + n
                ev.step = int(min(step, nxt) if nxt is not None and nxt > prev else step)
            elif nxt is not None:
                ev.step = int(nxt - (k - 1 - n))
            if ev.step is not None and abs(ev.step) > 2**62:
                ev.step = None


def _same_overflow(a: EventBase, b: EventBase) -> bool:
    """One overflow that several ranks print: one step, and one new scale where both say
    it (a step retried after an overflow that overflows again backs off further)."""
    if a.kind != "overflow_skip" or a.step != b.step or a.step is None:
        return False
    old, new = getattr(a, "new_scale", None), getattr(b, "new_scale", None)
    return old is None or new is None or old == new


def _step_before(line: int, rec_lines: np.ndarray, rec_steps: np.ndarray) -> int | None:
    """The step of the last record before ``line``."""
    i = int(np.searchsorted(rec_lines, line)) - 1
    if i < 0 or not np.isfinite(rec_steps[i]):
        return None
    return int(rec_steps[i])


def _validation(s, t: Template, line, name, rec_lines, rec_steps) -> Validation | None:
    nums = NUMBER_RE.findall(s)
    values: dict[str, float | None] = {}
    step = None
    for f in t.fields:
        if f.index >= len(nums):
            continue
        try:
            v = float(nums[f.index].replace(",", "")) * f.scale
        except ValueError:
            continue
        if f.role == "step":
            step = int(v) if abs(v) < 9e18 and v == v else None
        elif f.column and f.role in ("value", "mean"):
            col = f.column
            for prefix in _EVAL_PREFIXES:
                col = col.removeprefix(prefix)
            values[col] = v
    if not values:
        return None
    if step is None:
        step = _step_before(line, rec_lines, rec_steps) if len(rec_lines) else None
    low = s.lower()
    split = "val" if "val" in low or " cv " in low else "eval" if "eval" in low else "test"
    src = Source(file=name, line=line)
    return Validation(step=step, split=split, values=values, source=src, text=s[:300])


def _ignored() -> pl.Expr:
    """Lines that carry nothing: blank, collector comments, summaries, traceback bodies."""
    s = pl.col("body")
    body = pl.col("indented") | s.str.contains(events.TRACEBACK_BODY)
    mask = (s == "") | s.str.contains(COMMENT) | (pl.col("kind") == "summary").fill_null(False)
    mask = mask | s.str.contains(BANNER)
    mask = mask | (body & pl.col("kind").is_null())
    return mask


def _columns_from(temps: dict[str, Template]) -> dict[str, str]:
    """Which printed key became which column, over the record templates."""
    out: dict[str, str] = {}
    for t in temps.values():
        if t.kind not in ("record", "pair"):
            continue
        for f in t.fields:
            if f.column and f.key and f.column not in out:
                out[f.column] = f.key
    return out
