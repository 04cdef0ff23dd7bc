"""Parsing a log as it grows: only the lines appended, with what the start told.

A :class:`LiveParser` takes a log's lines in the pieces they arrive in and keeps the
records and events read so far, as the format's parser would have read the whole file:
each piece is parsed after those of the file's first :data:`HEAD_LINES` lines that are
not records (the banner, the arguments, a CSV header: what tells a format its layout
and units) and keeps only what lies in the piece (a log of up to :data:`WHOLE_LINES`
lines is parsed again whole, as ``logbook parse`` would). Records a format numbers in
order (a Trainer's printed dicts) are numbered on from the records before. The format
is sniffed from the first lines once they hold a record (and again while the log is
short: its first lines may have looked like another format).

A :class:`LiveSource` is a :class:`~logbook.live.follow.Follower` feeding one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from logbook.errors import InputError, UsageError
from logbook.live.follow import Follower
from logbook.parsed import Parsed
from logbook.run import ParseStats, Run
from logbook.schema import EventBase

HEAD_LINES = 200  # a file's first lines, parsed again (less its records) before every piece
SNIFF_WAIT_LINES = 5000  # lines without a record after which a format is given up on
WHOLE_LINES = 500  # a log this short is parsed again whole at each read
RESNIFF_LINES = 300  # a sniffed format is sniffed again until the log is this long
REWRITE_LINES = 20  # a file replaced by one starting with these lines again: rewritten
# formats that are not a text log written line by line as training goes
WHOLE_FILE = {
    "logbook": "a logbook file is a finished run (read it with detect)",
    "chronicle": "a team logbook is prose (give it to detect or report with --notes)",
    "tensorboard": "TensorBoard event files are read whole (use detect)",
    "hf-trainer": "trainer_state.json is rewritten whole at each save (use the callback)",
    "wandb": "a W&B export is written once (use detect)",
}


class LiveParser:
    """The records and events of one log, read piece by piece (see the module doc)."""

    def __init__(self, name: str, fmt: str | None = None) -> None:
        self.name = name
        self.fmt = fmt
        if fmt is not None:
            _check_format(fmt, name)
        self.head = _no_lines()
        self.context = _no_lines()
        self._context_done = False
        self._head_records: list[int] = []
        self.waiting = _no_lines()
        self.metrics = pl.DataFrame()
        self.events: list[EventBase] = []
        self.meta: dict = {}
        self.records = 0  # records read so far (trimmed ones included)
        self.lines = 0  # lines taken so far
        self.unrecognized = 0
        self.first_unrecognized: list[int] = []
        self._whole: pl.DataFrame | None = _no_lines()  # all lines, while the log is short
        self._sniffed = False  # the format was sniffed (not given)

    def take(self, frame: pl.DataFrame) -> int:
        """Parse lines ``frame`` (``line``, ``text``), the next piece; the new records."""
        if frame.height == 0:
            return 0
        self.lines = int(frame.get_column("line").max() or self.lines)
        if self.head.height < HEAD_LINES:
            self.head = pl.concat([self.head, frame.head(HEAD_LINES - self.head.height)])
        if self.fmt is None:
            self.waiting = pl.concat([self.waiting, frame])
            fmt = self._sniff()
            if fmt is None:
                return 0
            self.fmt, frame, self.waiting = fmt, self.waiting, _no_lines()
            self._sniffed = True
        if self._whole is not None:
            self._whole = pl.concat([self._whole, frame])
            if self._whole.height <= WHOLE_LINES:
                return self._reparse()
            self._whole = None  # long enough: from here on, piece by piece
        return self._parse(frame)

    def _reparse(self) -> int:
        """A short log read again whole, as ``parse`` reads it: a record cut across two
        pieces, a bar beside its record, a rank's copy are all seen together."""
        assert self._whole is not None and self.fmt is not None
        had = self.records
        self.metrics, self.events, self.meta = pl.DataFrame(), [], {}
        self.records = self.unrecognized = 0
        self.first_unrecognized = []
        self._head_records = []
        whole, self._whole = self._whole, None
        if self._sniffed and whole.height <= RESNIFF_LINES:
            # the first lines may have looked like another format: ask again
            from parsers import sniff_head

            again = sniff_head(whole.get_column("text").to_list())
            if again is not None and again not in WHOLE_FILE:
                self.fmt = again
        try:
            self._parse(whole)
        finally:
            self._whole = whole
        return max(0, self.records - had)

    def reset(self) -> None:
        """Forget everything read (the file was written again from its start)."""
        self.__init__(self.name, self.fmt)

    def trim(self, keep: int) -> None:
        """Keep only the last ``keep`` records (and the events from the first of them)."""
        if self.metrics.height <= keep:
            return
        self.metrics = self.metrics.tail(keep)
        first = int(self.metrics.get_column("line").min() or 0)
        self.events = [e for e in self.events if _line(e) is None or _line(e) >= first]

    def part(self) -> Parsed:
        """What was read so far, as a parser's output (a rank's copy of a record read
        in an earlier piece left out)."""
        from parsers.reader.copies import drop_rank_copies

        part = Parsed(metrics=self.metrics, events=list(self.events), meta=dict(self.meta))
        return drop_rank_copies(part) if self._whole is None else part

    def stats(self) -> ParseStats:
        return ParseStats(
            file=self.name,
            format=self.fmt or "unknown",
            lines=self.lines,
            records=self.records,
            unrecognized=self.unrecognized,
            first_unrecognized=self.first_unrecognized,
        )

    def _sniff(self) -> str | None:
        from parsers import sniff_head

        texts = self.waiting.get_column("text").head(SNIFF_WAIT_LINES).to_list()
        fmt = sniff_head(texts)
        if fmt is not None:
            _check_format(fmt, self.name)
            if self._parsed(fmt, self.waiting).metrics.height:
                return fmt
        if self.waiting.height >= SNIFF_WAIT_LINES:
            raise InputError(
                f"{self.name}: no training record in its first {SNIFF_WAIT_LINES} lines "
                "(give --format; `logbook formats` lists them)"
            )
        return None

    def _parsed(self, fmt: str, lines: pl.DataFrame) -> Parsed:
        """``lines`` parsed; parsers number a file's lines 1..n, so they get them so
        numbered, and what they return is numbered back to the file's lines."""
        from parsers import FORMATS
        from parsers.reader.copies import drop_rank_copies
        from parsers.reader.fallback import with_fallback

        true = lines.get_column("line").to_numpy()
        if true.size and (true[0] != 1 or true[-1] != true.size):
            lines = lines.with_columns(pl.int_range(1, lines.height + 1).alias("line"))
        else:
            true = None
        parsed = drop_rank_copies(with_fallback(FORMATS[fmt], lines, self.name))
        if true is not None:
            _renumber(parsed, true)
        return parsed

    def _parse(self, frame: pl.DataFrame) -> int:
        first = int(frame.get_column("line").min() or 1)
        context = self.context.filter(pl.col("line") < first)
        assert self.fmt is not None
        parsed = self._parsed(self.fmt, pl.concat([context, frame]) if context.height else frame)
        m = parsed.metrics
        if "line" not in m.columns:
            raise InputError(f"{self.name}: the {self.fmt} format cannot be followed as it grows")
        before = m.filter(pl.col("line") < first).height
        new = m.filter(pl.col("line") >= first)
        if not self._context_done:
            self._context(m)
        if parsed.meta.get("steps_numbered") and new.height and m.get_column("step").len():
            every = int(m.get_column("step").drop_nulls().first() or 1)
            new = new.with_columns(pl.col("step") + (self.records - before) * every)
        new = _times(new)
        self.events += [e for e in parsed.events if (_line(e) or 0) >= first]
        unrec = parsed.unrecognized.filter(parsed.unrecognized >= first)
        self.unrecognized += unrec.len()
        room = 5 - len(self.first_unrecognized)
        self.first_unrecognized += unrec.head(max(0, room)).to_list()
        self._merge_meta(parsed.meta)
        if new.height:
            self.metrics = (
                pl.concat([self.metrics, new], how="diagonal_relaxed")
                if self.metrics.height
                else new
            )
            self.records += new.height
        return new.height

    def _context(self, m: pl.DataFrame) -> None:
        """The head's lines that are not records (the banner, the arguments, a header):
        what later pieces are parsed after. Records of the head are left out: they
        tell a later piece nothing and cost a parse each time."""
        lines = m.get_column("line")
        self._head_records += lines.filter(lines <= HEAD_LINES).to_list()
        taken = pl.Series(self._head_records, dtype=pl.Int64)
        self.context = self.head.filter(~pl.col("line").is_in(taken.implode()))
        self._context_done = self.head.height >= HEAD_LINES

    def _merge_meta(self, meta: dict) -> None:
        if not self.meta:
            self.meta = dict(meta)
            return
        self.meta.setdefault("units", {}).update(meta.get("units", {}))
        caveats = self.meta.setdefault("caveats", [])
        caveats += [c for c in meta.get("caveats", []) if c not in caveats]
        for k, v in meta.items():
            self.meta.setdefault(k, v)


class LiveSource:
    """A followed file and the parser of what it appends."""

    def __init__(self, path: Path, fmt: str | None = None) -> None:
        self.path = path
        self.follower = Follower(path)
        self.parser = LiveParser(str(path), fmt)
        self._rotations = 0

    def poll(self) -> int:
        """Read what was appended; the new records."""
        frame = self.follower.read()
        if self.follower.rotations != self._rotations:
            self._rotations = self.follower.rotations
            if frame is not None and self._rewritten(frame):
                frame = self._renumbered(frame)
        return 0 if frame is None else self.parser.take(frame)

    def finish(self) -> int:
        """The writer is done: its last line counts even without a line break."""
        frame = self.follower.flush()
        return 0 if frame is None else self.parser.take(frame)

    def caught_up(self) -> bool:
        return self.follower.at_end()

    def _rewritten(self, frame: pl.DataFrame) -> bool:
        """Whether the file after a truncation or a replacement is the same log written
        again from the start (a CSV logger saving all its rows) rather than the next
        lines of a rotated log: its first lines are the first lines read before."""
        n = min(self.parser.head.height, frame.height, REWRITE_LINES)
        if n < 3:
            return False
        old = self.parser.head.get_column("text").head(n).to_list()
        return frame.get_column("text").head(n).to_list() == old

    def _renumbered(self, frame: pl.DataFrame) -> pl.DataFrame:
        """A log written again is read again: from line 1, what was read before forgotten."""
        start = int(frame.get_column("line").min() or 1)
        self.parser.reset()
        self.follower.lines -= start - 1
        return frame.with_columns(pl.col("line") - (start - 1))


def live_run(parsers: list[LiveParser]) -> Run:
    """The run so far of the logs' parsers (one per launch file), stitched in launch
    order as :func:`parsers.read_log` stitches whole files."""
    from logbook.run import RunMeta
    from logbook.segments import order_parts, stitch
    from parsers import run_meta

    ready = [p for p in parsers if p.fmt is not None and p.metrics.height]
    if not ready:
        from logbook.run import empty_metrics

        return Run(metrics=empty_metrics(), events=[], meta=RunMeta())
    parts = [p.part() for p in ready]
    order = order_parts(parts)
    ranked = sorted(range(len(parts)), key=lambda i: order.index(parts[i]))
    parts = [parts[i] for i in ranked]
    stats = [ready[i].stats() for i in ranked]
    metrics, events = stitch(parts, [s.file for s in stats])
    return Run(metrics=metrics, events=events, meta=run_meta(parts, stats))


def _renumber(parsed: Parsed, true: np.ndarray) -> None:
    """Line ``i`` of what was parsed is line ``true[i - 1]`` of the file."""
    lookup = pl.Series(true, dtype=pl.Int64)

    def back(col: pl.Series) -> pl.Series:
        idx = col.cast(pl.Int64, strict=False) - 1
        ok = (idx >= 0) & (idx < lookup.len())
        return (
            lookup.gather(idx.filter(ok.fill_null(False))) if not ok.all() else lookup.gather(idx)
        )

    m = parsed.metrics
    if "line" in m.columns and m.height:
        col = m.get_column("line").cast(pl.Int64)
        if col.null_count() == 0 and bool(((col >= 1) & (col <= lookup.len())).all()):
            parsed.metrics = m.with_columns(lookup.gather(col - 1).alias("line"))
    if parsed.unrecognized.len():
        parsed.unrecognized = back(parsed.unrecognized).alias("line")
    for e in parsed.events:
        if e.source is not None and e.source.line and 1 <= e.source.line <= true.size:
            e.source.line = int(true[e.source.line - 1])


def _check_format(fmt: str, name: str) -> None:
    from parsers import FORMATS

    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
    if fmt in WHOLE_FILE:
        raise InputError(f"{name}: cannot be followed as it grows: {WHOLE_FILE[fmt]}")


def _times(m: pl.DataFrame) -> pl.DataFrame:
    from parsers.columns import python_time

    if "time" not in m.columns or not m.schema["time"].is_temporal() or m.height == 0:
        return m
    return m.with_columns(python_time())


def _line(e: EventBase) -> int | None:
    return e.source.line if e.source else None


def _no_lines() -> pl.DataFrame:
    return pl.DataFrame(schema={"line": pl.Int64, "text": pl.String})
