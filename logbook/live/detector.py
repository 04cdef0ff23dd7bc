"""The detectors on a run that is still going: each finding reported once, when it is in.

:class:`LiveDetector` runs the same detectors as ``logbook detect`` on the run so far,
cut to a trailing window of :attr:`LiveDetector.window` records (enough for every
detector's baseline; the first call, a catch-up on what was already written, sees the
whole run), and returns the findings it has not returned before:

- a **precursor** (a grad-norm spike or drift, an activation-norm, attention-logit or
  logz drift, a loss-scale drop or collapse) as soon as it fires: its lead over the spike
  it may announce is what it is for (a spike of the grad norm waits for the record after
  its top: until then its size and whether it recovers are not known);
- any other finding once it is **complete**: the run has logged past its last step (a
  spike back to its baseline, a restart with records after it), or it has stayed open
  over ``confirm`` more records (a divergence that goes on; :data:`CONFIRM_RECORDS` by
  default), or the caller says the run is over (:meth:`LiveDetector.update` with
  ``final``, :meth:`LiveDetector.flush`).

A finding overlapping one of the same kind already returned (by a few log intervals) is
that one again, seen from more records: it is not returned twice. Findings too small to
report alone (``precursor_only``) are dropped, as ``detect`` drops them when nothing
followed.

``feed``/``feed_frame`` take records one by one (a trainer callback's logged metrics,
under the names any generic JSONL log may use); ``update`` takes a whole run (``logbook
watch``, which parses the files itself).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from logbook.detectors._precursors import CANDIDATES
from logbook.run import Run
from logbook.schema import Finding

WINDOW_RECORDS = 2048  # the trailing records the detectors see after the catch-up
CONFIRM_RECORDS = 20  # an open finding seen over this many records is reported
SEVERITIES = ("info", "warning", "critical")
PRECURSOR_KINDS = CANDIDATES  # the kinds precursor linking takes as precursors
MAY_FOLLOW = "a spike may follow"


@dataclass
class _Seen:
    kind: str
    lineage: tuple
    lo: int
    hi: int
    since: int  # records read when first seen open
    reported: bool


class LiveDetector:
    """Incremental detection (see the module docstring).

    ``config``: detector configs as ``logbook.detectors.detect`` takes them;
    ``min_severity``: findings below it are not returned; ``window``: trailing records
    the detectors see; ``check_every``: ``feed`` runs the detectors every this many
    records; ``confirm``: an open finding (a spike that has not come back, a divergence)
    is reported once it has been seen over this many more records.
    """

    def __init__(
        self,
        config: dict | None = None,
        min_severity: str = "warning",
        window: int = WINDOW_RECORDS,
        check_every: int = 1,
        confirm: int = CONFIRM_RECORDS,
    ) -> None:
        if min_severity not in SEVERITIES:
            raise ValueError(f"min_severity {min_severity!r}: use {', '.join(SEVERITIES)}")
        if window < 64:
            raise ValueError("window must be at least 64 records")
        self.config = config
        self.min_rank = SEVERITIES.index(min_severity)
        self.window = window
        self.check_every = max(1, check_every)
        self.confirm = max(1, confirm)
        self.findings: list[Finding] = []  # every finding returned so far, in order
        self.records = 0  # records of the run seen so far
        self._seen: list[_Seen] = []
        self._caught_up = False
        self._fed: LiveFeed | None = None
        self._unchecked = 0

    def update(self, run: Run, final: bool = False, records: int | None = None) -> list[Finding]:
        """The findings of ``run`` (the run so far, or its last records: ``records``
        says how many it had in all) not returned before."""
        self.records = max(self.records, run.metrics.height if records is None else records)
        if run.metrics.height == 0:
            return []
        view, trimmed_at = self._window(run)
        found = _detect(view, self.config)
        steps = view.metrics.get_column("step").drop_nulls()
        last = int(steps.max()) if steps.len() else None
        gap = _gap(steps)
        new: list[Finding] = []
        for f in found:
            if f.evidence.get("precursor_only") or SEVERITIES.index(f.severity) < self.min_rank:
                continue
            lo, hi = _span(f)
            if lo is None or hi is None:
                continue
            if trimmed_at is not None and hi < trimmed_at:
                continue  # the window's first records: seen whole before
            seen = self._match(f, lo, hi, gap)
            if seen is None:
                seen = _Seen(f.kind, _lineage(f), lo, hi, self.records, False)
                self._seen.append(seen)
            seen.lo, seen.hi = min(seen.lo, lo), max(seen.hi, hi)
            if seen.reported:
                continue
            ready = self._ready(f, hi, last, seen, final)
            if ready:
                seen.reported = True
                new.append(_marked(f, ready))
        self._caught_up = True
        self.findings += new
        return new

    def feed(self, record: Mapping[str, Any]) -> list[Finding]:
        """Take one logged record (``step``, ``loss``, ``lr``/``learning_rate``,
        ``grad_norm``, ... as a generic JSONL line names them); the new findings."""
        if self._fed is None:
            self._fed = LiveFeed()
        self._fed.add(record)
        self._unchecked += 1
        if self._unchecked < self.check_every:
            return []
        return self._check()

    def feed_frame(self, frame: pl.DataFrame | Any) -> list[Finding]:
        """Take many records at once (a polars or pandas frame, one row per record)."""
        if not isinstance(frame, pl.DataFrame):
            frame = pl.from_pandas(frame)
        if self._fed is None:
            self._fed = LiveFeed()
        for row in frame.iter_rows(named=True):
            self._fed.add(row)
        return self._check()

    def flush(self) -> list[Finding]:
        """The run is over: every finding still open, complete as it stands."""
        if self._fed is None:
            return []
        return self._check(final=True)

    def _check(self, final: bool = False) -> list[Finding]:
        assert self._fed is not None
        self._unchecked = 0
        run = self._fed.run()
        return self.update(run, final=final, records=self._fed.parser.records)

    def _window(self, run: Run) -> tuple[Run, int | None]:
        m = run.metrics
        if not self._caught_up or m.height <= self.window:
            return run, None
        tail = m.tail(self.window)
        steps = tail.get_column("step").drop_nulls()
        if steps.len() == 0:
            return run, None
        first = int(steps.min())
        mid = int(steps[steps.len() // 2])
        events = [e for e in run.events if e.step is None or e.step >= first]
        return Run(metrics=tail, events=events, meta=run.meta), mid

    def _match(self, f: Finding, lo: int, hi: int, gap: int) -> _Seen | None:
        lineage = _lineage(f)
        for s in self._seen:
            if s.kind == f.kind and s.lineage == lineage and lo <= s.hi + gap and s.lo <= hi + gap:
                return s
        return None

    def _ready(self, f: Finding, hi: int, last: int | None, seen: _Seen, final: bool) -> str:
        """Why ``f`` is to be reported now ("" while it is still coming in). A spike
        "not recovered" at the last record is only the latest record high: what it is
        (its size, whether it recovers) waits for the next records."""
        edge = last is None or hi >= last
        provisional = edge and f.evidence.get("recovered") is False
        if f.kind in PRECURSOR_KINDS:
            if not provisional or final or self.records - seen.since >= self.confirm:
                return "precursor"
            return ""
        if not edge:
            return "complete"
        if final:
            return "at end"
        if self.records - seen.since >= self.confirm:
            return "ongoing"
        return ""


class LiveFeed:
    """Records given one by one, read as a generic JSONL log of them would be."""

    def __init__(self) -> None:
        from logbook.live.stream import LiveParser

        self.parser = LiveParser("<records>", "jsonl")
        self._lines: list[str] = []
        self._line = 0

    def add(self, record: Mapping[str, Any]) -> None:
        self._lines.append(json.dumps({str(k): _plain(v) for k, v in record.items()}))

    def run(self) -> Run:
        from logbook.live.stream import live_run

        if self._lines:
            n = len(self._lines)
            lines = pl.DataFrame(
                {
                    "line": pl.int_range(self._line + 1, self._line + n + 1, eager=True),
                    "text": self._lines,
                }
            )
            self._line += n
            self._lines = []
            self.parser.take(lines)
            self.parser.trim(4 * WINDOW_RECORDS)
        return live_run([self.parser])


def _plain(v: Any) -> Any:
    """A value as JSON holds it: tensors and numpy scalars as numbers, NaN/inf as the
    strings a JSONL log would print them as."""
    if hasattr(v, "item") and callable(v.item):
        try:
            v = v.item()
        except (ValueError, RuntimeError):
            return str(v)
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, bool | int | float | str) or v is None:
        return v
    return str(v)


def _detect(run: Run, config: dict | None) -> list[Finding]:
    from logbook.detectors import detect

    return detect(run, config, threads=1)  # checked often: the least CPU time


def _span(f: Finding) -> tuple[int | None, int | None]:
    lo = f.start_step if f.start_step is not None else f.step
    hi = f.end_step if f.end_step is not None else (f.step if f.step is not None else lo)
    return lo, hi


def _lineage(f: Finding) -> tuple:
    return (True, f.segment) if f.evidence.get("superseded") else (False, None)


def _gap(steps: pl.Series) -> int:
    """A few log intervals: findings this close are one."""
    if steps.len() < 2:
        return 1
    d = steps.tail(256).diff().drop_nulls()
    d = d.filter(d > 0)
    return max(1, 3 * int(d.median() or 1)) if d.len() else 1


def _marked(f: Finding, why: str) -> Finding:
    """``f`` with how it was reported (``evidence.live``) and, for a precursor, what it
    may announce."""
    f = f.model_copy(deep=True)
    f.evidence["live"] = why
    if why == "precursor":
        f.message += f"; {MAY_FOLLOW}"
    elif why == "ongoing":
        f.message += "; still going on"
    return f
