"""Team logbooks and chronicles (prose) as events.

Two shapes, often mixed: entry-line logbooks (``2021-11-30 10:10am PT [Susan]: 12.36
restart from 37k``), and markdown chronicles (dates in headings, ``**Posted on:**``
lines and sentences; run names in headings; bullets and paragraphs; fenced blocks of
pasted log lines). Every entry, paragraph and list item becomes events: ``restart``,
``lr_change``, ``config_change``, ``hardware_failure``, ``data_skip``, or a ``note``
when nothing more specific is written; each keeps its text and line. Fenced (or
pasted) log lines go to the metric parser that recognizes them, and their records and
events join the chronicle's run. Times are UTC; a time written without a zone is read
in ``tz`` and marked ``assumed_tz``.
"""

from __future__ import annotations

import re
from datetime import date, datetime

import polars as pl

from logbook.errors import LogbookError
from logbook.parsed import Parsed
from logbook.schema import METRIC_COLUMNS
from parsers.chronicle import runs
from parsers.chronicle.blocks import Block, blocks, classify
from parsers.chronicle.events import Draft, extract, place_step, to_events
from parsers.chronicle.extract import stated_step
from parsers.chronicle.time import (
    TIME_RE,
    ZONE_RE,
    find_dates,
    find_stamp,
    parse_clock,
    to_utc,
    zone,
)

NAME = "chronicle"
DESCRIPTION = "team logbook or markdown chronicle (prose) -> restart/lr/config/hardware/note events"
EXAMPLE = "2021-11-30 10:10am PT: 12.36 restart from 37k, SGD mimicking"
MAPS = "dated entries, headings and paragraphs -> events (time in UTC, run name, step when written)"

_HEADER = re.compile(
    rf"^\s*(?:[-*+]\s+)?(?:\*\*)?(?P<date>\d{{4}}-\d{{1,2}}-\d{{1,2}})"
    rf"(?:[ T_]+(?P<time>{TIME_RE}))?(?:\s*\(?(?P<zone>{ZONE_RE})\)?)?(?:\*\*)?\s*"
    rf"(?P<who>\[[^\]]*\])?(?:\*\*)?\s*[:\-–—]?\s*(?:\*\*)?\s*",
    re.IGNORECASE,
)
_ASIDE = re.compile(r"\[(?:WARNING|WARN|NOTE|UPDATE|EDIT|TODO|FYI|SEE)\b[^\]]*\]", re.IGNORECASE)
_HEADING = re.compile(r"^\s*(#{1,6})\s+(.*?)\s*#*\s*$")
_SKIP_FORMATS = ("chronicle", "logbook")
# a quoted block goes to a metric parser only when it is clearly that format's output
MIN_SNIFF = 20


SNIFF_MAX = 30  # the highest score sniff gives


def sniff(head: list[str]) -> int:
    """10-30 for dated logbook entries or a markdown chronicle with dates; 0 otherwise
    (and for anything that is mostly log records)."""
    if not head:
        return 0
    df = classify(pl.DataFrame({"line": range(1, len(head) + 1), "text": head}))
    counts = dict(df.group_by("cls").len().iter_rows())
    entries, logs = counts.get("entry", 0), counts.get("log", 0)
    prose = counts.get("text", 0) + entries + counts.get("heading", 0)
    if logs * 2 > prose:
        return 0
    if entries >= 2 and _records(head) * 2 >= entries:
        return 0  # dated lines that are a logger's records (``2023-06-29,15:44:40 | INFO | ...``)
    if entries >= 2 or (entries == 1 and prose <= 20):
        return 20 + min(entries, 10)
    if not counts.get("heading"):
        return 0
    titles = df.filter(pl.col("cls").is_in(["heading", "meta"])).get_column("text").to_list()
    if any(find_dates(t, None) for t in titles):
        return 20
    # otherwise dates written in sentences, in a file that is mostly sentences
    text = df.filter(pl.col("cls") == "text").get_column("text")
    sentences = text.filter(text.str.count_matches(r"\b[A-Za-z]{2,}\b") >= 8).to_list()
    if len(sentences) * 3 >= text.len() and any(find_dates(t, date(2000, 1, 1)) for t in sentences):
        return 15
    return 0


def _records(head: list[str]) -> int:
    from parsers.reader import sniff_records

    return sniff_records(head)


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    return parse_chronicle(lines, name, "UTC")


def parse_chronicle(
    lines: pl.DataFrame, name: str, tz: str = "UTC", excerpts: bool = True
) -> Parsed:
    """Parse a chronicle, reading times written without a zone in ``tz``. With
    ``excerpts`` off, pasted log lines are read as text, not handed to metric parsers."""
    zone(tz)
    df = classify(lines)
    reader = _Reader(name, tz, excerpts)
    for block in blocks(df):
        reader.read(block)
    ignored = df.filter(pl.col("cls").is_in(["blank", "collector", "markup"])).height
    return reader.result(ignored + reader.ignored)


class _Reader:
    """Walks the blocks in file order, keeping the section's date and run."""

    def __init__(self, name: str, tz: str, excerpts: bool) -> None:
        self.name, self.tz, self.excerpts = name, tz, excerpts
        self.sections: list[tuple[int, date | None, str | None, str | None]] = []
        self.run: str | None = None
        self.last: tuple = (None, None)  # time and assumed zone of the text just read
        self.drafts: list[Draft] = []
        # an entry's drafts, the run it opens with, that name's line, and the other
        # reading of a clock time written without am/pm
        self.entries: list[tuple[list[Draft], str, int, datetime | None]] = []
        self.caveats: list[str] = []
        self.stated: dict[str, str] = {}
        self.document: dict[str, str] = {}
        self.records: list[pl.DataFrame] = []
        self.sub_events: list = []
        self.unrecognized: list[int] = []
        self.ignored = 0
        # an excerpt pasted again (the same lines, spaced the same) is read once
        self.read_before: dict[tuple, tuple[Parsed | None, int]] = {}

    # ---- context -------------------------------------------------------------------

    def _context(self, block: Block) -> date | None:
        dates = find_dates(block.context, None) if block.context else []
        return dates[0][0] if dates else None

    def _section(self) -> tuple[date | None, str | None]:
        day = next((d for _, d, _, _ in reversed(self.sections) if d), None)
        family = next((f for _, _, _, f in reversed(self.sections) if f), None)
        return day, family

    def read(self, block: Block) -> None:
        handler = {
            "heading": self._heading,
            "meta": self._meta,
            "entry": self._entry,
            "code": self._code,
            "log": self._code,
        }.get(block.kind, self._prose)
        handler(block)

    def _heading(self, block: Block) -> None:
        m = _HEADING.match(block.texts[0])
        level, title = (len(m.group(1)), m.group(2)) if m else (1, block.texts[0])
        dates = find_dates(title, self._context(block))
        run, family = runs.heading_run(title)
        self.sections = [s for s in self.sections if s[0] < level]
        self.sections.append((level, dates[0][0] if dates else None, run, family))
        self.run = run or next((r for _, _, r, _ in reversed(self.sections) if r), None)
        day = self._section()[0]
        self.last = to_utc(day, None, None, self.tz) if day else (None, None)

    def _meta(self, block: Block) -> None:
        key, _, value = block.texts[0].replace("*", "").partition(":")
        self.document[key.strip()] = value.strip()

    # ---- entries and prose ---------------------------------------------------------

    def _entry(self, block: Block) -> None:
        text = block.text
        m = _HEADER.match(text)
        try:
            day = date.fromisoformat("-".join(f"{int(x):02d}" for x in m.group("date").split("-")))
        except ValueError:  # a typo'd date (2023-13-14): the entry keeps its text, not a time
            self.caveats.append(f"line {block.line_at(0)}: no such date {m.group('date')!r}")
            self._prose(block)
            return
        clock = parse_clock(m.group("time") or "")
        utc, assumed = to_utc(day, clock, m.group("zone"), self.tz)
        alt = None
        if clock and 1 <= clock.hour <= 11 and not re.search(r"[ap]\.?m", m.group("time"), re.I):
            alt = to_utc(day, clock.replace(hour=clock.hour + 12), m.group("zone"), self.tz)[0]
        body = " " * m.end() + text[m.end() :]
        body = _ASIDE.sub(lambda a: " " * len(a.group(0)), body)
        family = self._section()[1]
        subject = runs.subject(body[m.end() :], family)
        mentioned = runs.mentions(body, family, entry=True)
        run = subject or (mentioned[0][0] if mentioned else None)
        self._note_parent(run, text, family)
        made = self._drafts(block, body, "entry", run, utc, assumed, None)
        self.run, self.last = run, (utc, assumed)
        if subject:
            offset = m.end() + len(body[m.end() :]) - len(body[m.end() :].lstrip())
            self.entries.append((made, subject, block.line_at(offset), alt))

    def _prose(self, block: Block) -> None:
        day, family = self._section()
        text = block.text
        stamp = find_stamp(text, self._context(block) or day, self.tz, day)
        if stamp:
            utc, assumed = stamp.utc, stamp.assumed_tz
        elif day:
            utc, assumed = to_utc(day, None, None, self.tz)
        else:
            utc, assumed = None, None
        _, span = runs.parent(text, family)
        mentioned = [
            (r, at) for r, at in runs.mentions(text, family) if not span[0] <= at < span[1]
        ]
        self._note_parent(mentioned[0][0] if mentioned else self.run, text, family)
        self._drafts(block, text, "prose", None, utc, assumed, mentioned)
        self.last = (utc, assumed)
        if mentioned and not self._section_run():
            self.run = mentioned[-1][0]

    def _section_run(self) -> str | None:
        return next((r for _, _, r, _ in reversed(self.sections) if r), None)

    def _note_parent(self, run: str | None, text: str, family: str | None) -> tuple[int, int]:
        parent, span = runs.parent(text, family)
        if run and parent and parent != run:
            self.stated.setdefault(run, parent)
        return span

    def _drafts(self, block, text, mode, run, utc, assumed, mentioned) -> list[Draft]:
        found = extract(text, mode) or []
        stated = stated_step(text) if mode != "code" else None
        made = []
        for f in found or [None]:
            pos = f.pos if f else 0
            who = run if mentioned is None else runs.run_at(mentioned, text, pos, self.run)
            d = Draft(
                kind=f.kind if f else "note",
                line=block.line_at(pos),
                fields=dict(f.fields) if f else {},
                time=utc,
                assumed_tz=assumed,
                run=who,
                text=block.text,
            )
            place_step(d, stated)
            made.append(d)
        self.drafts += made
        return made

    # ---- pasted logs ---------------------------------------------------------------

    def _code(self, block: Block) -> None:
        fenced = block.kind == "code"
        keep = [
            i for i, t in enumerate(block.texts) if not (fenced and re.match(r"^\s*(```|~~~)", t))
        ]
        body = pl.DataFrame(
            {"line": [block.lines[i] for i in keep], "text": [block.texts[i] for i in keep]},
            schema={"line": pl.Int64, "text": pl.String},
        )
        parsed = None
        if body.height and self.excerpts:
            nums = body.get_column("line").to_list()
            key = (tuple(body.get_column("text").to_list()), tuple(n - nums[0] for n in nums))
            if key in self.read_before:
                before, at = self.read_before[key]
                parsed = None if before is None else _shifted(before, nums[0] - at)
            else:
                parsed = _metric_parse(body, self.name, self.caveats)
                self.read_before[key] = (parsed, nums[0])
        if parsed is None:
            self._drafts(block, block.text, "code", self.run, *self.last, None)
            return
        self.ignored += len(block.lines) - body.height + parsed.ignored
        self.records.append(parsed.metrics)
        self.unrecognized += parsed.unrecognized.to_list()
        for e in parsed.events:
            e.run = e.run or self.run
        self.sub_events += parsed.events

    # ---- result --------------------------------------------------------------------

    def _clocks(self) -> None:
        """A clock time without am/pm (``11:39 ET``) is read as the half of the day that
        keeps the entries' run numbers in time order; as written (24-hour) on a tie."""
        known = [(runs.order_key(s), made[0].time) for made, s, _, alt in self.entries if not alt]
        known = [(k, t) for k, t in known if k is not None]
        for made, subject, _, alt in self.entries:
            key = runs.order_key(subject)
            if alt is None or key is None:
                continue

            def inversions(t: datetime, key: tuple = key) -> int:
                return sum(
                    (k < key) != (u < t) for k, u in known if k != key and len(k) == len(key)
                )

            if inversions(alt) < inversions(made[0].time):
                for d in made:
                    d.time = alt
                self.caveats.append(
                    f"{self.name}:{made[0].line}: clock time without am/pm read as pm "
                    "(fits the order of the runs)"
                )

    def _launches(self) -> None:
        """The first entry (in time) that opens with a run's name is that run's launch."""
        first: dict[str, tuple[list[Draft], int]] = {}
        for made, subject, line, _ in sorted(
            self.entries, key=lambda e: (e[0][0].time is None, e[0][0].time, e[0][0].line)
        ):
            first.setdefault(subject, (made, line))
        added: dict[int, Draft] = {}
        for made, line in first.values():
            head = made[0]
            if any(d.kind == "restart" for d in made):
                continue
            if head.kind == "note":
                head.kind, head.line = "restart", line
            else:
                added[id(head)] = Draft(
                    "restart", line, {}, head.time, head.assumed_tz, head.run, head.text
                )
        if added:
            self.drafts = [x for d in self.drafts for x in (added.get(id(d)), d) if x is not None]

    def result(self, ignored: int) -> Parsed:
        self._clocks()
        self._launches()
        named = [d for d in self.drafts if d.run]
        if named and all(d.time for d in named):
            named = sorted(named, key=lambda d: (d.time, d.line))
        ordered = [d.run for d in named]
        lineage = runs.lineage(list(dict.fromkeys(ordered)), self.stated)
        events = to_events(self.drafts, self.name, lineage) + self.sub_events
        assumed = sum(1 for d in self.drafts if d.assumed_tz and d.time)
        caveats = list(self.caveats)
        if assumed:
            caveats.append(
                f"{self.name}: {assumed} event time(s) written without a zone, "
                f"read as {self.tz} (set --tz)"
            )
        if self.records:
            caveats.append(f"{self.name}: metric records come from log excerpts in the text")
        meta = {"lineage": lineage, "caveats": caveats, "document": self.document}
        return Parsed(
            metrics=_frame(self.records),
            events=events,
            meta=meta,
            unrecognized=pl.Series("line", sorted(self.unrecognized), pl.Int64),
            ignored=ignored,
        )


def _frame(records: list[pl.DataFrame]) -> pl.DataFrame:
    frames = [r for r in records if r.height]
    if not frames:
        cols = ("step", "time", "line")
        return pl.DataFrame(schema={c: METRIC_COLUMNS[c] for c in cols})
    return pl.concat(frames, how="diagonal_relaxed")


def _shifted(parsed: Parsed, by: int) -> Parsed:
    """``parsed`` (of an excerpt read before) as read ``by`` lines further down."""
    metrics = parsed.metrics
    if "line" in metrics.columns:
        metrics = metrics.with_columns(pl.col("line") + by)
    events = []
    for e in parsed.events:
        e = e.model_copy(deep=True)
        if e.source is not None and e.source.line is not None:
            e.source.line += by
        events.append(e)
    return Parsed(
        metrics=metrics,
        events=events,
        meta=parsed.meta,
        unrecognized=parsed.unrecognized + by,
        ignored=parsed.ignored,
    )


def _metric_parse(body: pl.DataFrame, name: str, caveats: list[str]) -> Parsed | None:
    """Hand pasted log lines to the metric format that recognizes them best."""
    from parsers import FORMATS

    head = body.get_column("text").to_list()
    scores = {k: mod.sniff(head) for k, mod in FORMATS.items() if k not in _SKIP_FORMATS}
    best = max(scores, key=lambda k: scores[k], default=None)
    if best is None or scores[best] < MIN_SNIFF:
        return None
    try:
        parsed = FORMATS[best].parse(body, name)
    except LogbookError:
        return None
    except Exception as exc:  # a parser's failure on a quoted excerpt must not lose the text
        first = body.get_column("line")[0]
        caveats.append(
            f"{name}:{first}: the {best} parser failed on this excerpt ({exc!r}); kept as text"
        )
        return None
    if parsed.metrics.height == 0 and not parsed.events:
        return None
    return parsed
