"""Epoch tables: a header of column names, then one row of values per epoch (or step)
under it, as fastai's fit tables, Chainer's ``PrintReport`` and nolearn print them::

    epoch     train_loss  valid_loss  accuracy  time
    0         2.723684    2.148748    0.571206  00:05

     Epoch  |  Train loss  |  Valid loss  |  Train / Val  |  Valid acc  |  Dur
    --------|--------------|--------------|---------------|-------------|-------
         1  |         nan  |         nan  |          nan  |     45.05%  |  0.7s

Every row is a record: its step is the step column's (``epoch``, ``iteration``,
``step``), its loss the training loss column's (the first ``loss`` column that names no
validation); the other columns keep their names (``valid_loss``, ``main_accuracy``), a
percentage in ``<name>_pct`` and a duration (``0.7s``, ``00:03``, ``1:02:57``) in
seconds. The rows of one table may stand apart (blank lines between them, a comment
after a row), and a table printed again for another fit (its epochs counted from the
first again) is another run's. Every other line is read by the tolerant reader for
events (crashes, resumes): a table excerpt is often a notebook's output with a
traceback under it.
"""

from __future__ import annotations

import re

import polars as pl

from logbook.parsed import Parsed
from logbook.schema import Source, Validation
from parsers.columns import with_core
from parsers.reader import Spec, aliases

NAME = "epoch-table"
DESCRIPTION = "a table of one row per epoch under a header (fastai, Chainer, nolearn)"
EXAMPLE = "epoch     train_loss  valid_loss  accuracy  time"
MAPS = (
    "the epoch/iteration/step column->step, the first training loss column->loss; other "
    "columns by their names (percentages -> <name>_pct, durations -> seconds)"
)
SNIFF_MAX = 45
TOLERANT = Spec()  # (the other lines: events, read by the tolerant reader)

STEP_NAMES = {"epoch", "epochs", "step", "steps", "iteration", "iter", "global_step"}
_VALIDATION = re.compile(r"(?i)valid|\bval|val_|test|eval")
_NAME = re.compile(r"^[A-Za-z][\w/ .()%-]*$")
_RULE = re.compile(r"^[\s|:+=-]*-{3,}[\s|:+=-]*$")
_COMMENT = re.compile(r"\s+#\s.*$")  # (``#na#`` is fastai's missing value)
_EPOCH = re.compile(r"\d{1,15}(?:/\d{1,15})?")  # ``7`` or ``7/55`` (epoch of total)
# a finished or cut progress bar after the cells: its position and length
_BAR = re.compile(r":?\s+\d{1,3}%\|[^|]*\|\s*(\d{1,15})/(\d{1,15})\b.*$")
_CLOCK = re.compile(r"^(?:(\d+):)?(\d{1,2}):(\d\d)$")
_NUMBER = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$|^(?i:[-+]?(?:nan|inf))$")
_MISSING = {"#na#", "-", "--", "none", "n/a"}
_MIN_ROWS = 3  # rows without a header above them that make a table, at least
_GAP = 3  # blank lines a table's rows may have between them, at most


def _header(line: str) -> tuple[list[str], str] | None:
    """The column names of a header line and how its rows split (``|``, tab or spaces),
    or None when the line is no header."""
    s = line.strip()
    if "|" in s:
        cells, split = [c.strip() for c in s.strip("|").split("|")], "|"
    elif "\t" in s:
        cells, split = [c.strip() for c in s.split("\t")], "\t"
    else:
        cells, split = re.split(r"\s{2,}", s), " "
    if len(cells) < 3 or not all(_NAME.match(c) for c in cells):
        return None
    names = [aliases.norm(c) for c in cells]
    if names[0] not in STEP_NAMES or _loss_column(cells) is None:
        return None
    return cells, split


def _train_loss(cell: str) -> bool:
    return "loss" in cell.lower() and not _VALIDATION.search(cell)


# YOLOv5 before v7 names its losses bare (``box obj cls total``); YOLOv5 counts its
# epochs from 0 (``0/299``), YOLOv8 from 1 (``1/100``, with a ``dfl_loss``)
_YOLO_BARE = {"box", "obj", "cls"}
_FROM_ZERO = {"obj", "obj_loss"}


def _loss_column(cells: list[str]) -> int | None:
    """The column of the training loss: the first ``loss`` column that names no
    validation, else YOLOv5's ``total`` (or its ``box``) loss."""
    for k, c in enumerate(cells[1:], 1):
        if _train_loss(c):
            return k
    names = [aliases.norm(c) for c in cells]
    if set(names) >= _YOLO_BARE:
        return names.index("total") if "total" in names else names.index("box")
    return None


def _starts(line: str) -> list[int]:
    """Where each cell of a space-aligned header begins (cells are two spaces apart)."""
    return [m.start() for m in re.finditer(r"\S+(?: \S+)*", line)]


def _placed(line: str, starts: list[int]) -> list[str] | None:
    """The cells of a space-aligned row with empty cells (Chainer's ``PrintReport``
    leaves a validation column blank between validations): each value under the header
    cell that begins at or before it (a long value pushes the rest a space or two to the
    right); None where two values fall under one cell or the first is not under the
    first."""
    cells = [""] * len(starts)
    for m in re.finditer(r"\S+", line):
        k = max((i for i, at in enumerate(starts) if at <= m.start() + 1), default=-1)
        if k < 0 or cells[k]:
            return None
        cells[k] = m.group()
    return cells if cells[0] else None


def _row(line: str, split: str, width: int, starts: list[int] | None = None) -> list[str] | None:
    """The cells of a row under a header of ``width`` columns (None: no such row); a
    progress bar glued after the last cell (YOLO's ``640: 100%|███| 787/787 [...]``)
    is cut off, its position and length kept as two more cells. ``starts``: where a
    space-aligned header's cells begin, to place the values of a row with empty cells."""
    s = _COMMENT.sub("", line.strip())
    bar = _BAR.search(s) if split != "|" else None
    if bar is not None:
        s = s[: bar.start()]
    cells = [c.strip() for c in s.strip("|").split("|")] if split == "|" else s.split()
    if split == " " and starts and 2 <= len(cells) < width and bar is None:
        cells = _placed(_COMMENT.sub("", line.rstrip()), starts) or cells
    if len(cells) != width or not _EPOCH.fullmatch(cells[0]):
        return None
    if not all(_value(c) is not None or c.lower() in _MISSING or not c for c in cells[1:]):
        return None
    return cells + ([bar.group(1), bar.group(2)] if bar else [])


def _value(cell: str) -> float | None:
    """A cell's number: plain, ``nan``, a percentage, a duration (``0.7s``, ``00:03``)."""
    c = cell.strip().rstrip("%")
    if c[-1:] in ("s", "G", "M") and _NUMBER.match(c[:-1]):  # (a duration, memory)
        c = c[:-1]
    if m := _CLOCK.match(c):
        h, mnt, sec = m.group(1), m.group(2), m.group(3)
        return (int(h) if h else 0) * 3600.0 + int(mnt) * 60.0 + int(sec)
    return float(c) if _NUMBER.match(c) else None


Table = tuple[list[str], list[tuple[int, list[str]]], int | None]


def _tables(texts: list[str]) -> list[Table]:
    """Every table: its header's cells, its rows (index in ``texts``, cells) and the
    index of its header line (None for rows shown without one)."""
    out: list[Table] = []
    i = 0
    while i < len(texts):
        head = _header(texts[i])
        if head is None:
            i += 1
            continue
        cells, split = head
        starts = _starts(texts[i]) if split == " " else None
        if starts is not None and len(starts) != len(cells):
            starts = None
        rows: list[tuple[int, list[str]]] = []
        j, blank = i + 1, 0
        while j < len(texts) and blank <= _GAP:
            t = texts[j]
            if not t.strip() or _RULE.match(t):
                blank += not t.strip()
                j += 1
                continue
            row = _row(t, split, len(cells), starts)
            if row is None:
                break
            rows.append((j, row))
            blank = 0
            j += 1
        if rows:
            out.append((cells, rows, i))
        i = max(j, i + 1) if rows else i + 1
    return out + _headless(texts, out)


def _headless(texts: list[str], tables: list[Table]) -> list[Table]:
    """Rows of the width of a table's header with no header above them (an excerpt
    that starts inside a table, the table printed again after the header scrolled off):
    runs of ``_MIN_ROWS`` rows or more, read with the first such header."""
    taken = {at for _, rows, _ in tables for at, _ in rows}
    heads = {}
    for cells, _, _ in tables:
        heads.setdefault(len(cells), cells)
    out = []
    run: list[tuple[int, list[str]]] = []
    blank = 0
    cells: list[str] = []
    for k, t in enumerate([*texts, "\0"]):  # (the sentinel ends the last run)
        if k < len(texts) and k not in taken and not t.strip() and run:
            blank += 1
            if blank <= _GAP:
                continue
        row, width = None, 0
        if k < len(texts) and k not in taken and t.strip():
            width, row = next(
                ((w, r) for w in heads if (r := _row(t, " ", w)) is not None), (0, None)
            )
            if row is not None and run and width != len(cells):
                row = None  # (another width: another run)
        if row is not None:
            run.append((k, row))
            cells, blank = heads[width], 0
            continue
        # (a row with its bar glued on is a table's row even alone: YOLO prints the
        # header again above every epoch)
        if len(run) >= _MIN_ROWS or (run and len(run[0][1]) > len(cells)):
            out.append((cells, run, None))
        run, blank = [], 0
    return out


def sniff(head: list[str]) -> int:
    """45 for a header with a step column and a training loss column, a row of values
    under it; else 0."""
    return SNIFF_MAX if _tables(head[:2000]) else 0  # (headless rows need a header too)


def _columns(cells: list[str]) -> list[str]:
    """The column each header cell fills."""
    out, taken = [], set()
    loss, counter = _loss_column(cells), _counter_column(cells)
    for k, c in enumerate(cells):
        if k == 0:
            name = "step" if counter is None else "epoch"
        elif k == counter:
            name = "step"
        elif k == loss:
            name = "loss"
        else:
            canon = aliases.canonical(c)  # (``time``: the epoch's, one step's here)
            keep = canon is not None and canon not in ("step", "loss", "epoch")
            name = canon if keep else aliases.column_of(c.replace("%", " pct"))
            if name in taken or name in ("step", "loss"):
                name = f"{name}_{k}"
        taken.add(name)
        out.append(name)
    return out


_COUNTERS = {"iteration", "iter", "step", "steps", "global_step"}


def _counter_column(cells: list[str]) -> int | None:
    """The column of a counter finer than the first column's epoch (Chainer's
    ``epoch  iteration  main/loss``): the step then, the epoch a column of its own."""
    if aliases.norm(cells[0]) not in ("epoch", "epochs"):
        return None
    return next((k for k, c in enumerate(cells[1:], 1) if aliases.norm(c) in _COUNTERS), None)


_VAL_HEAD = re.compile(r"^\s*Class\s+Images\s")  # YOLO's validation bar, then ``all ...``
_VAL_REACH = 3  # lines after a row its validation may come
_TOTAL_TIME = re.compile(r"^\s*Total time: [\d:]+\s*$")


def _validation(texts: list[str], at: int) -> tuple[int, int, dict[str, float | None]] | None:
    """YOLO's validation of the epoch whose row is at ``at``: its bar's line, the ``all``
    line, and the values by the bar's names (``Box(P R mAP50 mAP50-95)`` -> ``p``, ``r``,
    ``map50``, ``map50_95``)."""
    for k in range(at + 1, min(at + 1 + _VAL_REACH, len(texts))):
        if not _VAL_HEAD.match(texts[k]):
            continue
        head = re.sub(r":\s*$", "", _BAR.sub("", texts[k]).rstrip())
        names = [aliases.norm(n) for n in head.replace("(", " ").replace(")", " ").split()]
        # (``Box`` names the group of the columns after it, not a column of its own)
        names = [n for n in names[1:] if n not in ("box", "mask")]
        nxt = next((j for j in range(k + 1, len(texts)) if texts[j].strip()), None)
        cells = texts[nxt].split() if nxt is not None else []
        if not cells or cells[0] != "all" or len(cells) - 1 != len(names):
            return None
        return k, nxt, {n: _value(c) for n, c in zip(names, cells[1:], strict=True)}
    return None


def _step(row: list[str], width: int, first: int) -> int:
    """A row's step: its first cell; for an epoch of a total (``7/55``, the first epoch
    numbered ``first``) with a progress bar, the batches of the epochs before plus the
    bar's position."""
    epoch, _, _ = row[0].partition("/")
    if "/" in row[0] and len(row) > width:
        position, length = int(row[width]), int(row[width + 1])
        return (int(epoch) - first) * length + position
    return int(epoch)


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    """The rows of every epoch table as records; the other lines unrecognized (for the
    tolerant reader and the crash scan behind every format)."""
    texts = lines.get_column("text").to_list()
    numbers = lines.get_column("line").to_list()
    records: list[dict] = []
    events: list[Validation] = []
    used: set[int] = set()
    spanned: set[int] = set()
    for cells, rows, head in _tables(texts):
        cols = _columns(cells)
        first_epoch = 0 if _FROM_ZERO & {aliases.norm(c) for c in cells} else 1
        first = rows[0][0] if head is None else head
        end = rows[-1][0] + 1
        if end < len(texts) and _TOTAL_TIME.match(texts[end]):
            end += 1  # (fastai 1's ``Total time: 02:13`` under its table)
        spanned.update(range(first, end))
        counter = _counter_column(cells)
        for at, row in rows:
            whole = counter is not None and row[counter].isdigit()
            step = int(row[counter]) if whole else _step(row, len(cells), first_epoch)
            rec: dict = {"line": numbers[at], "step": step}
            for col, cell in zip(cols, row[: len(cells)], strict=True):
                if col == "step":
                    continue
                pct = cell.strip().endswith("%") and not col.endswith("pct")
                rec[f"{col}_pct" if pct else col] = _value(cell)
            records.append(rec)
            used.add(at)
            if (val := _validation(texts, at)) is not None:
                bar, line, values = val
                spanned.add(bar)
                used.add(line)
                src = Source(file=name, line=numbers[line])
                text = texts[line].strip()[:300]
                events.append(
                    Validation(step=step, split="val", values=values, source=src, text=text)
                )
    # headers, rules, validation bars and blank lines are ignored; the rest is left
    ignored = {k for k in spanned if k not in used}
    ignored |= {k for k, t in enumerate(texts) if not t.strip() and k not in used}
    left = [numbers[k] for k in range(len(texts)) if k not in used and k not in ignored]
    metrics = pl.DataFrame(records, infer_schema_length=None) if records else pl.DataFrame()
    if metrics.height:
        metrics = metrics.with_columns(pl.col("step").cast(pl.Int64)).sort("line")
        floats = [c for c in metrics.columns if c not in ("line", "step")]
        metrics = metrics.with_columns(pl.col(c).cast(pl.Float64) for c in floats)
    caveats = ["an epoch table: a row per epoch (the step column's number is the step)"]
    return Parsed(
        metrics=with_core(metrics),
        events=events,
        meta={"caveats": caveats} if records else {},
        unrecognized=pl.Series("line", left, dtype=pl.Int64),
        ignored=len(ignored),
    )
