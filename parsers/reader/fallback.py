"""The tolerant reader behind a framework's own layout reader.

A framework with a fast layout reader (Megatron, metaseq, fairseq, nanoGPT,
torchtitan) names a ``TOLERANT`` spec; the lines its layout reader leaves unrecognized
are read again by :mod:`parsers.reader` (``TOLERANT_ALONE`` instead, when the layout
reader read no record at all), and the records with a loss found there (a
field more or less, another prefix, ``lm loss: NAN``, another number style) join the
metrics, with a caveat that counts them. Crash evidence among the lines left becomes
``hardware_failure`` events for every format. Nothing else changes: lines the layout
reader used keep their meaning.
"""

from __future__ import annotations

import math
from types import ModuleType

import numpy as np
import polars as pl

from logbook.parsed import Parsed
from logbook.schema import EventBase, HardwareFailure
from parsers import reader
from parsers.reader import events

LN2 = math.log(2.0)
CONTEXT = 2000  # lines from the start of the file read with the lines left, for their shapes


def with_fallback(module: ModuleType, lines: pl.DataFrame, name: str) -> Parsed:
    """``module.parse`` of the lines, with the tolerant reader on what it left."""
    parsed = crash_evidence(module.parse(lines, name), lines, name)
    spec = getattr(module, "TOLERANT", None)
    if parsed.metrics.height == 0:  # nothing read by the layout: its own fallback, if any
        spec = getattr(module, "TOLERANT_ALONE", spec)
    alone = parsed.metrics.height == 0
    if spec is None or (parsed.unrecognized.len() == 0 and not alone):
        return parsed
    # the lines left (all but the events', where the layout read no record: it may have
    # taken records of an older layout for noise), read beside a sample of the file,
    # whose whole records teach the reader the shapes that a cut or glued line begins
    told = {e.source.line for e in parsed.events if e.source and e.source.line}
    pool = lines.get_column("line")
    pool = pool.filter(~pool.is_in(list(told))) if alone else parsed.unrecognized
    left_lines = pool.implode()
    rest = lines.filter(pl.col("line").is_in(left_lines) | (pl.col("line") <= CONTEXT))
    extra = reader.read(rest, name, spec)
    found = extra.metrics.filter(pl.col("line").is_in(left_lines))
    mine = set(pool.to_list())
    extra.events = [e for e in extra.events if e.source and e.source.line in mine]
    if "loss" not in found.columns or found.height == 0 or extra.meta.get("steps_numbered"):
        return parsed
    found = found.filter(pl.col("step").is_not_null() & pl.col("loss").is_not_null())
    if found.height == 0:
        return parsed
    used = set(found.get_column("line").to_list())
    used |= {e.source.line for e in extra.events if e.source and e.source.line}
    left = parsed.unrecognized.filter(~parsed.unrecognized.is_in(list(used)))
    # lines the layout counted as ignored that the reader used
    quiet = len(used - set(parsed.unrecognized.to_list()))
    metrics = _merged(parsed.metrics, found)
    caveat = f"{found.height} records read by the tolerant reader (not in the {module.NAME} layout)"
    meta = dict(parsed.meta)
    meta["caveats"] = [*meta.get("caveats", []), caveat]
    meta["continued_lines"] = meta.get("continued_lines", 0) + extra.meta.get("continued_lines", 0)
    events = sorted([*parsed.events, *extra.events], key=lambda e: e.source.line if e.source else 0)
    return Parsed(
        metrics=metrics,
        events=events,
        meta=meta,
        unrecognized=left,
        ignored=parsed.ignored - quiet - extra.meta.get("continued_lines", 0) * alone,
    )


_CLEAN = r"^\s*(?:\[[^\]]{1,80}\]:?\s*|\(\w+ pid=\d+[^)]*\)\s*|>\s+)*"  # rank/logger tags


def crash_evidence(parsed: Parsed, lines: pl.DataFrame, name: str) -> Parsed:
    """Crash evidence among the lines a format's reader left unrecognized (a CUDA error,
    an out-of-memory abort, a time-limit kill, a traceback cut before its exception):
    ``hardware_failure`` events, their lines taken off the unrecognized ones."""
    unrec = parsed.unrecognized
    if unrec.len() == 0:
        return parsed
    body = pl.col("text").str.replace(_CLEAN, "").str.strip_chars().alias("body")
    left = lines.filter(pl.col("line").is_in(unrec.implode())).select("line", body)
    # (a comment above a pasted excerpt that quotes the error is not the error)
    crash = pl.col("body").str.contains(events.CRASH_ANY) & ~pl.col("body").str.starts_with("# ")
    hit = left.filter(crash | pl.col("body").str.contains(events.TRACEBACK_START))
    if hit.height == 0:
        return parsed
    read = [events.read_event(b, line, name) for line, b in hit.filter(crash).iter_rows()]
    found: list[EventBase] = [e for e in read if isinstance(e, HardwareFailure)]
    told = sorted(
        e.source.line
        for e in [*parsed.events, *found]
        if e.kind == "hardware_failure" and e.source and e.source.line
    )
    starts = hit.filter(~crash & pl.col("body").str.contains(events.TRACEBACK_START))
    found += events.cut_tracebacks(list(starts.iter_rows()), told, name)
    if not found:
        return parsed
    used = [e.source.line for e in found if e.source]
    events_all = sorted([*parsed.events, *found], key=lambda e: e.source.line if e.source else 0)
    return Parsed(
        metrics=parsed.metrics,
        events=events_all,
        meta=parsed.meta,
        unrecognized=unrec.filter(~unrec.is_in(used)),
        ignored=parsed.ignored,
    )


def _merged(base: pl.DataFrame, found: pl.DataFrame) -> pl.DataFrame:
    """``found`` rows in ``base``'s column types, the two in line order."""
    found = found.select(
        pl.col(c).cast(base.schema[c], strict=False) if c in base.columns else pl.col(c)
        for c in found.columns
    )
    return pl.concat([base, found], how="diagonal_relaxed").sort("line", maintain_order=True)


def bits_to_nats(metrics: pl.DataFrame) -> pl.DataFrame:
    """fairseq/metaseq losses are logged in bits: stored in nats."""
    fix = [pl.col(c) * LN2 for c in ("loss", "nll_loss") if c in metrics.columns]
    return metrics.with_columns(fix) if fix else metrics


# Python prints ``Exception ignored in: <function X.__del__>`` (or ``while calling
# deallocator``) for an exception it swallowed: in a destructor, at interpreter shutdown,
# after the run ended. The traceback after it stopped nothing.
_SWALLOWED = r"Exception ignored (?:in|while|on)\b"
SWALLOWED_REACH = 60  # lines after it its traceback may run


def swallowed_exceptions(parsed: Parsed, lines: pl.DataFrame) -> Parsed:
    """``parsed`` without the crash evidence of tracebacks Python swallowed (see
    ``_SWALLOWED``): their lines are ignored lines."""
    fails = [
        e
        for e in parsed.events
        if isinstance(e, HardwareFailure) and e.cause == "exception" and e.source
    ]
    if not fails:
        return parsed
    at = lines.filter(pl.col("text").str.contains(_SWALLOWED)).get_column("line").to_numpy()
    if not at.size:
        return parsed
    rec = np.sort(parsed.metrics.get_column("line").to_numpy()) if parsed.metrics.height else None

    def swallowed(e: HardwareFailure) -> bool:
        line = e.source.line if e.source and e.source.line else 0
        k = int(np.searchsorted(at, line)) - 1  # the last such line before it
        if k < 0 or line - at[k] > SWALLOWED_REACH:
            return False
        between = rec is not None and np.searchsorted(rec, line, "right") > np.searchsorted(
            rec, at[k], "right"
        )
        return not between

    gone = [e for e in fails if swallowed(e)]
    if not gone:
        return parsed
    kept = [e for e in parsed.events if not any(e is g for g in gone)]
    still = {e.source.line for e in kept if e.source}
    freed = len({e.source.line for e in gone if e.source} - still)
    return Parsed(
        metrics=parsed.metrics,
        events=kept,
        meta=parsed.meta,
        unrecognized=parsed.unrecognized,
        ignored=parsed.ignored + freed,
    )
